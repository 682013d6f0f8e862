"""Helpers of tests/test_continual_harness.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from support.cli_helpers import Result, hermit
from support.project import build_project, task_rows
from support.step_support import AGENT_SCRIPT

TESTS = Path(__file__).resolve().parents[1]   # tests/

SUPPORT = TESTS / "support"


TEMPLATE = "continual-harness@1.0"


# ---------------------------------------------------------------------------------- end to end
def _env(control: Path) -> dict[str, str]:
    path = os.pathsep.join([str(SUPPORT), str(TESTS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "HERMIT_TEST_CONTROL": str(control)}


def _hermit(repo: Path, control: Path, *args: str) -> Result:
    return hermit(repo, *args, env=_env(control))


def make_continual_run(repo: Path, tasks: int = 6, *, template: str = TEMPLATE,
                       params: dict[str, Any] | None = None) -> Path:
    """`git hermit init --template continual-harness` run ``r`` whose Refiner passes are scripted
    (tests/support/continual_learners.py), tasks t1…t<tasks> answered 42; returns the control dir."""
    control = repo.parent / "control"
    control.mkdir()
    ids = [f"t{i}" for i in range(1, tasks + 1)]
    agent = control / "agent.py"
    build_project(repo, init_args=("--run", "r", "--template", template),
                  tasks=task_rows({t: "42" for t in ids}, prompt="Task {id}?"),
                  rows={"train": [f"{t}#1" for t in ids]},
                  scripts={agent: AGENT_SCRIPT.format(python=sys.executable, control=str(control))},
                  config={"agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{prompt_file}", "{workspace}", "{task_id}", "{attempt}"]},
                          "evolver": {"name": "continual-harness", "base": "scripted",
                                      "scripted": {p: f"continual_learners:{p}"
                                                   for p in ("policy", "subagents", "skills", "memory")},
                                      "params": params or {"k": 1, "step_size": 3}},
                          "trainer": {"epochs": 10, "allow_early_stop": True, "concurrency": 3}})
    return control
