"""`git hermit init` leaves a repository the README's next commands work in: the config's
$schema resolves in every clone, and `--example` writes a coherent starter benchmark."""

from __future__ import annotations

import json
import re
import sys

import yaml

from support.cli_helpers import hermit
from conftest import git, snapshot_state
from support.project import build_project

ANSWERS = '''import json, pathlib, sys
prompt = pathlib.Path(sys.argv[1]).read_text()
workspace = pathlib.Path(sys.argv[2])
rows = [line.split(",") for line in (workspace / "expenses.csv").read_text().split()[1:]] \\
    if (workspace / "expenses.csv").exists() else []
if "total of the amount" in prompt: print(round(sum(float(r[2]) for r in rows), 2))
elif "coffee" in prompt: print(sum(r[1] == "coffee" for r in rows))
elif "January" in prompt: print(round(sum(float(r[2]) for r in rows if r[0].startswith("2026-01")), 2))
elif "February" in prompt: print(round(sum(float(r[2]) for r in rows if r[0].startswith("2026-02")), 2))
elif "largest" in prompt: print(max(rows, key=lambda r: float(r[2]))[1])
else: print(30)
'''


def test_schema_line_resolves_in_a_clone(repo_with_history, tmp_path):
    assert hermit(repo_with_history, "init").code == 0
    line = (repo_with_history / "hermit.yaml").read_text().splitlines()[0]
    target = re.match(r"# yaml-language-server: \$schema=(\S+)$", line).group(1)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo_with_history), str(clone))
    schema = json.loads((clone / target).read_text())
    assert schema["title"].startswith("git-hermit run configuration")
    assert not git(repo_with_history, "status", "--porcelain").strip()     # committed, nothing left over


def test_example_is_a_benchmark_the_next_commands_run(repo_with_history):
    repo = repo_with_history
    done = hermit(repo, "init", "--example")
    assert done.code == 0, done.err
    assert "git hermit check" in done.out and "git hermit rollout" in done.out
    for path in ("tasks.jsonl", "data/expenses.csv", "rows/train.txt", "rows/test.txt"):
        assert path in git(repo, "ls-files"), path
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    assert config["data"] == {"train": "rows/train.txt", "test": "rows/test.txt"}
    assert hermit(repo, "check", "--static", "--no-preflight").code == 0
    # the preflight finds the benchmark coherent; what is left is the agent's and learners' login or key
    flight = hermit(repo, "check", "--static", "--json")
    problems = [p["where"] for p in json.loads(flight.out)["preflight"]]
    assert {"agent.login", "evolver.model.login"} <= set(problems), flight.out
    assert not [p for p in problems if p.startswith(("tasks", "data"))], flight.out
    assert flight.code == (5 if len(problems) == 2 else 12), flight.out   # 12: no codex on this machine
    agent = repo.parent / "agent.py"
    agent.write_text(ANSWERS)
    build_project(repo, initialised=True,
                  config={"agent": {"backend": "command",
                                    "command": [sys.executable, str(agent), "{prompt_file}", "{workspace}"]}})
    train = hermit(repo, "rollout")
    assert train.code == 0, train.err
    assert "pass@1 1.000" in train.out and "k=2" in train.out
    test = hermit(repo, "rollout", "--split", "test")
    assert test.code == 0 and "pass@1 1.000" in test.out, test.out + test.err


def test_example_never_overwrites_files(repo_with_history):
    (repo_with_history / "tasks.jsonl").write_text("mine\n")
    before = snapshot_state(repo_with_history)
    done = hermit(repo_with_history, "init", "--example")
    assert done.code == 7 and "tasks.jsonl" in done.err and "hint: " in done.err
    assert snapshot_state(repo_with_history) == before
    assert (repo_with_history / "tasks.jsonl").read_text() == "mine\n"
