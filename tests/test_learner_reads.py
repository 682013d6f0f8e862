"""Learners in the sandbox read what their prompts name (issue 24, requirement 3).

With seed 000's own sandbox block, the Agent Debugger's and the Evolve Agent's sessions run in
bubblewrap, and the traces their prompts name (each rollout's trajectory, its one-file-per-step
copy and its hook audit, under the repository's `.hermit/`) must be readable there, read-only;
the held-out split's rollouts stay out of reach. The learner is a stand-in for the Codex CLI
(`evolver.model.bin`) that follows every path its prompt names (and, for the Evolve Agent, the
Debugger reports in its workspace) and reports what it could read. Skipped without bwrap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from support.step_support import RUN, env_for, make_run, step_dir

from git_hermit.supervise import sandbox

SEED_000 = {"enabled": True, "network": "restricted", "allow": ["chatgpt.com", "auth.openai.com"]}

# `codex exec --json … PROMPT`: the prompt is the last argument (or a file it names, when long)
READER = r'''#!{python}
import json, os, re, sys
from pathlib import Path
prompt = sys.argv[-1]
named = re.search(r"in the file (\S+) in the current directory", prompt)
if named:
    prompt = Path(named.group(1)).read_text()
texts = [prompt]
for report in sorted(Path("state").glob("analysis/*/detail/*.md")) if Path("state").is_dir() else []:
    texts.append(report.read_text())         # the Debugger's reports the Evolve Agent is pointed to
paths = sorted({{p.rstrip("/") for text in texts for p in re.findall(r"`(/[^`]+)`", text)}})
seen = {{}}
for path in paths:
    try:
        if os.path.isdir(path):
            seen[path] = "dir:" + ",".join(sorted(os.listdir(path)))
        else:
            seen[path] = "file:%d" % len(open(path, "rb").read())
    except OSError as exc:
        seen[path] = "error:" + exc.strerror
    try:
        open(os.path.join(path, "x") if os.path.isdir(path) else path, "ab").close()
        seen[path] += ":WRITABLE"
    except OSError:
        pass
probe = {probe!r}
try:
    open(probe).read()
    seen["held-out"] = "readable"
except OSError as exc:
    seen["held-out"] = "error:" + exc.strerror
Path("reads.json").write_text(json.dumps(seen, indent=1))
print(json.dumps({{"type": "item.completed", "item": {{"id": "i", "type": "agent_message", "text": "read what I was shown"}}}}))
'''


def require_bwrap() -> None:
    ok, detail = sandbox.probe()
    if not ok:
        pytest.skip(f"the sandbox cannot run here: {detail}")


def _step_with_the_reader(repo: Path, control: Path, probe: Path, sandbox_block: dict | None):
    """One `step` whose learners are the reader (as `evolver.model.bin`) and whose acting agent is
    the demo's scripted one, which runs the adapter's hooks (so each rollout has a hook audit)."""
    reader = control / "codex"
    reader.write_text(READER.format(python=sys.executable, probe=str(probe)))
    reader.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"] = {"backend": "scripted", "timeout_s": 60,
                       "scripted": {"policy": "git_hermit.demo.acting:run_scripted_agent"}}
    config["evolver"]["base"] = "codex"
    config["evolver"]["model"] = {"name": "scripted-model", "bin": str(reader),
                                  "provider": {"base_url": "http://127.0.0.1:59999/v1"}}
    if sandbox_block is not None:
        config["sandbox"] = sandbox_block
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = hermit(repo, "step", env=env_for(control), timeout=300)
    assert r.code in (0, 8), r.out + r.err           # the reader writes no manifest: its step may be refused
    return r


def test_sandboxed_learners_read_every_trace_and_hook_audit_their_prompts_name(repo):
    require_bwrap()
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    # a held-out rollout the learners must not read: its trajectory lies beside the training ones
    probe = repo / ".hermit" / "runs" / RUN / "evals" / "0123456789ab-test" / "rollouts" / "t1" / "1"
    probe.mkdir(parents=True)
    (probe / "trajectory.jsonl").write_text("the held-out answers\n")
    r = _step_with_the_reader(repo, control, probe / "trajectory.jsonl", SEED_000)
    here = step_dir(repo, 1)
    debugger = sorted((here / "debugger" / "sessions").glob("*/reads.json"))
    evolve = here / "evolve" / "workspace" / "reads.json"
    assert debugger and evolve.is_file(), (r.out, r.err)
    for report in [*debugger, evolve]:
        seen = json.loads(report.read_text())
        traces = {path: how for path, how in seen.items() if path != "held-out"}
        kinds = {Path(path).name for path in traces}
        assert {"trajectory.jsonl", "hook-calls.jsonl", "steps"} <= kinds, (report, seen)
        unreadable = {path: how for path, how in traces.items() if how.startswith("error:")}
        assert not unreadable, (report, unreadable)
        assert not any(how.endswith(":WRITABLE") for how in traces.values()), (report, traces)
        assert seen["held-out"].startswith("error:"), (report, seen)


def test_without_the_sandbox_the_same_reader_reads_them_too(repo):
    """The stand-in reads the same paths unsandboxed (so the test above measures the sandbox)."""
    control = make_run(repo, {"t1": "4"}, k=1)
    _step_with_the_reader(repo, control, Path("/nonexistent"), None)
    [report] = sorted((step_dir(repo, 1) / "debugger" / "sessions").glob("*/reads.json"))
    seen = json.loads(report.read_text())
    assert any(Path(p).name == "trajectory.jsonl" and how.startswith("file:") for p, how in seen.items()), seen
