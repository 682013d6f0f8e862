"""Runs the convert and card tests start from (not a test module): a copy of the session's demo,
a continual-harness run with scripted Refiner passes, a run the budget stopped, and the plugin
files a conversion wrote.
"""

from __future__ import annotations

from pathlib import Path

from support.continual_harness_helpers import make_continual_run as continual_run
from support.project import edit_config
from support.review_support import copy_demo
from support.step_support import make_run

TESTS_DIR = Path(__file__).resolve().parents[1]   # tests/


def demo_copy(demo_run: Path, tmp_path: Path) -> Path:
    """A copy of the session's demo (trained, finalized) to change."""
    return copy_demo(demo_run, tmp_path / "demo")


def continual_env(control: Path) -> dict[str, str]:
    return {"PYTHONPATH": f"{TESTS_DIR / 'support'}:{TESTS_DIR}", "HERMIT_TEST_CONTROL": str(control)}


def make_continual_run(repo: Path, tasks: int = 3) -> Path:
    """A continual-harness run ``r`` (tests/support/continual_harness_helpers.py's) of ``tasks`` tasks,
    one step over all of them, its final adapter the last step's; returns the control directory."""
    return continual_run(repo, tasks, template="continual-harness",
                         params={"k": 1, "step_size": tasks, "final": "last"})


def make_budget_run(repo: Path, max_usd: float) -> Path:
    """An ahe run whose scripted agent bills $0.02 a rollout (tests/support/budget_support.py), under a budget."""
    from support.budget_support import PRICE
    control = make_run(repo, {"t1": "4", "t2": "7", "t3": "9", "t4": "1"}, k=2, concurrency=1)
    edit_config(repo, agent={"backend": "scripted", "model": "fake-model", "timeout_s": 60,
                             "scripted": {"policy": "support.budget_support:fixed_usage_agent"}},
                prices={"fake-model": PRICE, "scripted": {"input": 1.0, "output": 1.0}},
                budget={"max_usd": max_usd})
    return control


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
