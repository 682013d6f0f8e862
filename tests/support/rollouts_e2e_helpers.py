"""Helpers of tests/test_rollouts_e2e.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from conftest import git
from support.project import build_project

AGENT_PRELUDE = '''\
import os, pathlib, subprocess, sys, time
prompt_file, workspace, task_id, attempt = sys.argv[1:5]
LOG = pathlib.Path({log!r})
def log(event):
    with open(LOG, "a") as handle:
        handle.write(f"{{task_id}}#{{attempt}} {{event}} {{time.time():.6f}}\\n")
'''


def make_project(repo: Path, agent_body: str, *, n_tasks: int = 4, k: int = 2,
                 rows: dict[str, list[str]] | None = None, **config: object) -> Path:
    """`git hermit init`, then tasks t0…t{n-1} (answer = index), rows, a command agent, committed.

    ``agent_body`` is Python run after AGENT_PRELUDE (``task_id``, ``attempt``, ``workspace``,
    ``log(event)``); it prints the answer as its last line. ``config`` keys replace hermit.yaml
    top-level keys; ``agent_*`` keys go into the agent block. Returns the agent's log file.
    """
    log = repo.parent / "agent-log.txt"
    rows = rows or {"train": [f"t{i}#{a}" for i in range(n_tasks) for a in range(1, k + 1)]}

    def edit(cfg: dict) -> None:
        cfg["agent"] = {"backend": "command", "timeout_s": 30,
                        "command": [sys.executable, str(repo / "agent.py"), "{prompt_file}", "{workspace}",
                                    "{task_id}", "{attempt}"]}
        cfg["data"] = {split: f"rows/{split}.txt" for split in rows}
        cfg["trainer"]["concurrency"] = 4
        cfg["evolver"]["params"]["k"] = k          # the train split's k comes from the evolver params
        for key, value in config.items():
            if key.startswith("agent_"):
                cfg["agent"][key[len("agent_"):]] = value
            else:
                cfg[key] = value

    build_project(repo, tasks=[{"id": f"t{i}", "prompt": f"What is {i}?", "answer": str(i)} for i in range(n_tasks)],
                  rows=rows, edit=edit, commit="benchmark files",
                  files={repo / "agent.py": AGENT_PRELUDE.format(log=str(log)) + textwrap.dedent(agent_body)})
    return log


def scores_note(repo: Path, rev: str = "hermit/ahe/step-0000") -> dict:
    return json.loads(git(repo, "notes", "--ref=refs/notes/hermit/scores", "show", rev))


def result_files(repo: Path) -> list[Path]:
    return sorted((repo / ".hermit" / "runs" / "ahe" / "evals").glob("*/rollouts/*/*/result.json"))


def starts(log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        row, event, _ = line.split()
        if event == "start":
            counts[row] = counts.get(row, 0) + 1
    return counts


ANSWER_IF_EVEN = """
log("start")
print("working on", task_id)
print(task_id[1:] if int(task_id[1:]) % 2 == 0 else "no idea")
"""


def commit_candidate(repo: Path, hint: str) -> str:
    """A candidate adapter (the step-0000 adapter plus ``HINT.md``) committed on HEAD; the
    baseline's commit, step 0's."""
    baseline = git(repo, "rev-parse", "hermit/ahe/step-0000").strip()
    (repo / "adapter" / "HINT.md").write_text(hint)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "candidate adapter")
    return baseline

