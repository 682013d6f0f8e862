"""Helpers of tests/test_evo_harness.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conftest import git
from support.project import build_project, task_rows

TESTS = Path(__file__).resolve().parents[1]   # tests/

SUPPORT = TESTS / "support"


TEMPLATE = "evo-harness@1.0"


RUN = "r"


def skill(name: str, level: str | None, tasks: list[str] = (), body: str = "- Check the format.\n",
          description: str = "Use when the answer is a single value.") -> str:
    head = f"---\nname: {name}\ndescription: {description}\n"
    if level is not None:
        head += f"flashrsi:\n  algorithm: evo_harness\n  level: {level}\n  source_task_ids: {json.dumps(list(tasks))}\n"
    return head + "---\n\n" + body


# --- end to end ------------------------------------------------------------------------------
# The acting agent answers 42 to everything; it logs each task and the skills deployed to it.
AGENT = """#!{python}
import os, sys
task, workspace = sys.argv[1:3]
skills = sorted({{d for _, dirs, _ in os.walk(workspace) for d in dirs if d in ("short-answers", "cross")}})
open({log!r}, "a").write(task + "\\n")
open({seen!r}, "a").write(task + ":" + ",".join(skills) + "\\n")
print("42")
"""


def make_evo_run(repo: Path, answers: dict[str, str], params: dict) -> Path:
    """`git hermit init --template evo-harness` run ``r`` whose learners are scripted
    (tests/support/evo_learners.py), one task per answer; returns the control directory."""
    control = repo.parent / "control"
    control.mkdir()
    agent = control / "agent.py"
    build_project(repo, init_args=("--template", TEMPLATE, "--run", RUN),
                  tasks=task_rows(answers, prompt="Answer of {id}?"), rows={"train": [f"{t}#1" for t in answers]},
                  scripts={agent: AGENT.format(python=sys.executable, log=str(control / "agent.log"),
                                               seen=str(control / "seen.log"))},
                  config={"agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{task_id}", "{workspace}"]},
                          "evolver": {"name": "evo-harness", "base": "scripted", "params": {"k": 1, **params},
                                      "scripted": {role: f"evo_learners:{role}"
                                                   for role in ("reflect", "topic_curator", "general_curator")}}})
    return control


def env(control: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
            "HERMIT_TEST_CONTROL": str(control)}


def log(control: Path, name: str) -> list[str]:
    path = control / f"{name}.log"
    return path.read_text().split() if path.is_file() else []


def plan(control: Path, **entries: dict) -> None:
    (control / "plan.json").write_text(json.dumps({k.replace("_", "-", 1): v for k, v in entries.items()}))


def tip(repo: Path, n: int) -> str:
    """The commit at step n's branch."""
    return git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-{n:04d}").strip()
