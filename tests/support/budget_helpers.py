"""Helpers of tests/test_budget.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
from pathlib import Path
import pytest
import yaml
from support.budget_support import PRICE
from support.project import edit_config as _edit   # the one hermit.yaml editor of the tests
from support.cli_helpers import hermit
from conftest import git
from support.step_support import env_for, make_run, rollouts_dir

ANSWERS = {"t1": "4", "t2": "7", "t3": "9", "t4": "1"}     # 4 tasks × k=2: 8 rollouts a step


ROWS = 8


BUDGET_EXIT = 16


def _run(repo: Path, budget: dict | None, *, prices: dict | None = None) -> Path:
    # concurrency 1: at most two rollouts in flight (one running, one preparing)
    control = make_run(repo, ANSWERS, k=2, concurrency=1)
    _edit(repo, agent={"backend": "scripted", "model": "fake-model", "timeout_s": 60,
                       "scripted": {"policy": "support.budget_support:fixed_usage_agent"}},
          prices=prices if prices is not None else {"fake-model": PRICE, "scripted": {"input": 1.0, "output": 1.0}},
          budget=budget)
    return control


def _finished(repo: Path, step: int) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(rollouts_dir(repo, step).glob("*/*/result.json"))]


def _estimate(repo: Path, control: Path) -> dict:
    r = hermit(repo, "estimate", "--json", env=env_for(control))
    assert r.code == 0, r.out + r.err
    return json.loads(r.out)


def _add_test_split(repo: Path) -> None:
    """A held-out split of one rollout per task."""
    (repo / "rows" / "test.txt").write_text("".join(f"{t}#1\n" for t in ANSWERS))
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    _edit(repo, data={**config["data"], "test": "rows/test.txt"})


def _close(a, b) -> bool:
    """Equal but for the float rounding of sums added in another order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return a == b


def _scores_note(repo: Path, rev: str) -> dict:
    return json.loads(git(repo, "notes", "--ref", "refs/notes/hermit/scores", "show", rev))

