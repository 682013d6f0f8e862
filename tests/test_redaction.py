"""No secret from the environment reaches a commit, a note, a report or a learner prompt."""

from __future__ import annotations

import os
from pathlib import Path

from support.cli_helpers import hermit
from conftest import git
from support.project import build_project
from git_hermit.redact import MARK, redact

SECRET = "hermit-test-secret-7f3a9c1e5b"
SUPPORT = Path(__file__).parent / "support"


def test_redact_env_values_and_key_shapes(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    text = f"token={SECRET} and sk-{'a' * 32} and AKIA{'B' * 16}"
    cleaned = redact(text)
    assert SECRET not in cleaned and "sk-aaaa" not in cleaned and "AKIABBB" not in cleaned
    assert cleaned.count(MARK) == 3
    monkeypatch.setenv("HARMLESS_PATH", "/usr/local/lib/thing")   # not a secret-looking name
    assert redact("/usr/local/lib/thing") == "/usr/local/lib/thing"


def test_a_leaked_secret_stays_out_of_git_and_learners(repo, tmp_path):
    agent = tmp_path / "agent.sh"

    def command_agent_and_scripted_learners(config: dict) -> None:
        config["agent"].update(backend="command", command=[str(agent), "{prompt_file}", "{workspace}"])
        config["tasks"] = {"path": "tasks.jsonl"}
        config["evolver"].update(base="scripted", scripted={"debugger": "redaction_learners:debugger",
                                                            "evolve": "redaction_learners:evolve"})

    # the agent leaks the secret it finds in a file of its environment into its output
    build_project(repo, init_args=("--run", "r"), tasks=[{"id": "t1", "prompt": "2+2?", "answer": "4"}],
                  rows={"train": ["t1#1", "t1#2"]},
                  scripts={agent: f"#!/bin/sh\necho \"my key is {SECRET}\"\necho 5\n"},
                  edit=command_agent_and_scripted_learners)
    prompts = tmp_path / "prompts.log"
    env = {"PYTHONPATH": f"{SUPPORT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "HERMIT_TEST_PROMPT_LOG": str(prompts), "DEPLOY_API_TOKEN": SECRET}
    r = hermit(repo, "step", env=env)
    assert r.code == 0, r.err
    # the secret really was in the agent's output (so the test can fail) ...
    assert "my key is" in prompts.read_text()
    # ... yet no learner saw it, and nothing in git or the reports holds it
    assert SECRET not in prompts.read_text()
    assert SECRET not in git(repo, "log", "-p", "--all", "--notes=hermit/*")
    for ref in ("scores", "manifest", "verdicts", "analysis"):
        listing = git(repo, "notes", f"--ref=hermit/{ref}", "list", check=False)
        for line in listing.splitlines():
            assert SECRET not in git(repo, "cat-file", "-p", line.split()[0])
    for path in (repo / ".hermit").rglob("*"):
        if path.is_file() and path.suffix in (".md", ".json", ".jsonl", ".txt"):
            assert SECRET not in path.read_text(errors="replace"), path
