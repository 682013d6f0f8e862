"""Issue 10 item 3: every kind of secret, planted everywhere a step takes text from, reaches
no git object under hermit refs, no file under .hermit/ and no learner prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.project import build_project
from git_hermit.redact import MARK, findings, redact

SUPPORT = Path(__file__).parent / "support"
from support.secret_plants import as_text, fake_secrets, needles

AGENT = '''#!{python}
import json, os, sys
from pathlib import Path
control = Path({control!r})
plants = json.loads((control / "plants.json").read_text())
prompt_file, workspace = sys.argv[1:3]
prompt = Path(prompt_file).read_text()
(control / "agent-seen.json").write_text(json.dumps({{"prompt": prompt, "env": dict(os.environ)}}))
for kind, text in plants.items():
    print(kind + ": " + text)
    print(kind + ": " + text, file=sys.stderr)
print("my environment: " + json.dumps(dict(os.environ)))
print(prompt, file=sys.stderr)
# play a host: fire the deployed hooks with every secret in the payloads
from git_hermit.adapter.deploy import read_record
from git_hermit.adapter.hookcall import fire, installed_commands
record = read_record(Path(workspace))
commands = installed_commands(Path(workspace), record) if record is not None and record.hooks else {{}}
everything = "\\n".join(plants.values())
common = {{"session_id": "s1", "cwd": workspace, "model": "m", "turn_id": "t1"}}
fired = 0
for event, payload in (("UserPromptSubmit", {{"prompt": everything}}),
                       ("PreToolUse", {{"tool_name": "Bash", "tool_input": {{"command": "echo " + everything}},
                                       "tool_use_id": "c1"}}),
                       ("PostToolUse", {{"tool_name": "Bash", "tool_input": {{"command": "env"}}, "tool_use_id": "c1",
                                        "tool_response": everything}}),
                       ("Stop", {{"stop_hook_active": False, "last_assistant_message": everything}})):
    fired += len(fire(commands, event, {{**common, **payload}}, cwd=Path(workspace), env=os.environ, timeout_s=30))
(control / "hooks-fired").write_text(str(fired))
print("4")
'''

VERIFIER = '''#!{python}
import json, os
from pathlib import Path
plants = json.loads(Path({control!r}, "plants.json").read_text())
Path({control!r}, "judge-env.json").write_text(json.dumps(dict(os.environ)))
print("verifier environment: " + json.dumps(dict(os.environ)))
for kind, text in plants.items():
    print("verifier saw " + kind + ": " + text)
print(json.dumps({{"reward": 0.0}}))
'''


def hermit_objects(repo: Path) -> list[tuple[str, bytes]]:
    """(name, content) of every object reachable from hermit's refs (commits, trees, blobs,
    tags), read as git stores them; plus every ref name."""
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/hermit/", "refs/tags/hermit/",
               "refs/notes/hermit/").split()
    assert refs
    listing = subprocess.run(["git", "rev-list", "--objects", *refs], cwd=repo, capture_output=True,
                             check=True).stdout.decode()
    shas = [line.split()[0] for line in listing.splitlines() if line.strip()]
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input="".join(s + "\n" for s in shas).encode(),
                           capture_output=True, check=True).stdout
    objects, pos = [], 0
    while pos < len(batch):
        header_end = batch.index(b"\n", pos)
        sha, _type, size = batch[pos:header_end].decode().split()
        start = header_end + 1
        objects.append((f"object {sha}", batch[start:start + int(size)]))
        pos = start + int(size) + 1
    assert len(objects) == len(shas)
    return objects + [(f"ref {r}", r.encode()) for r in refs]


def test_every_secret_kind_stays_out_of_git_hermit_files_and_learners(repo, tmp_path):
    secrets = fake_secrets()
    plants = {kind: as_text(kind, value) for kind, value in secrets.items()}
    control = tmp_path / "control"
    control.mkdir()
    (control / "plants.json").write_text(json.dumps(plants))
    everything = "\n".join(plants.values())
    agent, verifier = control / "agent.py", control / "verifier.py"
    build_project(repo, init_args=("--run", "r"), tasks=[{"id": "t1", "prompt": "What is 2+2?\n" + everything,
                                                          "answer": "4"}],
                  rows={"train": ["t1#1", "t1#2"]},
                  scripts={agent: AGENT.format(python=sys.executable, control=str(control)),
                           verifier: VERIFIER.format(python=sys.executable, control=str(control))},
                  config={"agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{prompt_file}", "{workspace}"]},
                          "judge": {"kind": "command", "command": [str(verifier)]},
                          "tasks": {"path": "tasks.jsonl"},
                          "evolver": {"name": "ahe", "base": "scripted",
                                      "scripted": {"debugger": "redaction_learners:debugger",
                                                   "evolve": "redaction_learners:evolve"},
                                      "params": {"k": 2}}})
    prompts = tmp_path / "prompts.log"
    # every kind in git-hermit's environment under names with no secret word (the judge gets it
    # all), and a proxy URL with a password in the agent's environment
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(SUPPORT), os.environ.get("PYTHONPATH", "")) if p),
           "HERMIT_TEST_PROMPT_LOG": str(prompts),
           "https_proxy": f"http://proxyuser:{secrets['url-password']}@proxy.internal:3128",
           **{f"ACME_{i}": value for i, value in enumerate(secrets.values())}}
    r = hermit(repo, "step", env=env, timeout=300)
    assert r.code == 0, r.err

    # the plants were live: the agent got the task and the proxy, the hooks ran, the judge saw the env
    seen = json.loads((control / "agent-seen.json").read_text())
    for kind, value in secrets.items():
        assert all(n in seen["prompt"] for n in needles(kind, value)), kind
    assert secrets["url-password"] in seen["env"]["https_proxy"]
    assert int((control / "hooks-fired").read_text()) >= 4
    judge_env = json.loads((control / "judge-env.json").read_text())
    assert all(v in judge_env.values() for v in secrets.values())
    assert "my environment" in prompts.read_text()   # the agent's output reached the learners

    places: list[tuple[str, bytes]] = hermit_objects(repo)
    files = [p for p in (repo / ".hermit").rglob("*") if p.is_file() and not p.is_symlink()]
    places += [(str(p), p.read_bytes()) for p in files]
    places.append(("learner prompts", prompts.read_bytes()))
    leaks = []
    for where, data in places:
        text = data.decode("utf-8", "replace")
        unescaped = text.replace("\\n", "\n").replace('\\"', '"')
        for kind, value in secrets.items():
            for needle in needles(kind, value):
                if needle in text or needle in unescaped or needle.replace("/", "\\/") in text:
                    leaks.append((kind, where))
    assert not leaks, leaks
    assert any(MARK.encode() in data for _, data in places)
    # the counts for the closing note (pytest -s shows them)
    planted = len(secrets) * 6 + 1   # task, git-hermit/judge env, stdout, stderr, hooks, verifier; proxy
    print(f"\nsecret scan: {len(secrets)} kinds planted in 6 places each (task, git-hermit's and the "
          f"judge's environment, agent stdout, agent stderr, hook payloads, verifier output) plus a URL "
          f"password in the agent's environment = {planted} plants; read {len(places)} objects and files "
          f"({sum(1 for w, _ in places if w.startswith('object'))} git objects, "
          f"{sum(1 for w, _ in places if w.startswith('ref'))} refs, {len(files)} files under .hermit/, "
          f"the learner prompt log); occurrences found: {len(leaks)}")


@pytest.mark.parametrize("kind", sorted(fake_secrets()))
def test_each_kind_is_redacted_in_prose_assignments_and_json(kind, monkeypatch):
    value = fake_secrets()[kind]
    if kind == "provider-key":   # no shape: caught as an environment value, whatever its name
        monkeypatch.setenv("ACME_LLM", value)
    text = as_text(kind, value)
    for context in ("the value is {} ok", "export X={}\n", '{{"k": {}}}'):
        shown = json.dumps(text) if context.startswith("{{") or context.startswith('{"') else text
        cleaned = redact(context.format(shown))
        for needle in needles(kind, value):
            assert needle not in cleaned and json.dumps(needle)[1:-1] not in cleaned, (kind, context, cleaned)


def test_ordinary_text_is_left_alone():
    """Sample Codex trajectories, git SHAs, UUIDs and digests: no finding at all."""
    import hashlib
    import uuid

    fixtures = Path(__file__).parent / "fixtures" / "trajectories"
    texts = [p.read_text() for p in sorted((fixtures / "shapes").glob("*.jsonl"))]
    texts.append("\n".join(f"commit {hashlib.sha1(str(i).encode()).hexdigest()} {uuid.uuid4()} "
                           f"{hashlib.sha256(str(i).encode()).hexdigest()} /usr/lib/python3.11/site-packages "
                           f"input_tokens: 12345 task-{i}-long-identifier-of-a-row "
                           f"AbstractSingletonProxyFactoryBean{i}Impl ThisIsAVeryLongClassName{i}WithNumbers"
                           for i in range(300)))
    for text in texts:
        assert findings(text) == [] and redact(text) == text
