"""Runs the convert and card tests start from (not a test module): a copy of the session's demo,
a continual-harness run with scripted Refiner passes, a run the budget stopped, and the plugin
files a conversion wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from support.cli_helpers import hermit
from support.review_support import copy_demo
from support.step_support import AGENT_SCRIPT, make_run

TESTS_DIR = Path(__file__).resolve().parents[1]   # tests/


def demo_copy(demo_run: Path, tmp_path: Path) -> Path:
    """A copy of the session's demo (trained, finalized) to change."""
    return copy_demo(demo_run, tmp_path / "demo")


def edit_config(repo: Path, **keys) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    for key, value in keys.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def continual_env(control: Path) -> dict[str, str]:
    return {"PYTHONPATH": f"{TESTS_DIR / 'support'}:{TESTS_DIR}", "HERMIT_TEST_CONTROL": str(control)}


def make_continual_run(repo: Path, tasks: int = 3) -> Path:
    """`git hermit init --template continual-harness` run ``r`` whose Refiner passes are scripted
    (tests/support/continual_learners.py); returns the control directory."""
    control = repo.parent / "control"
    control.mkdir()
    assert hermit(repo, "init", "--run", "r", "--template", "continual-harness").code == 0
    ids = [f"t{i}" for i in range(1, tasks + 1)]
    (repo / "tasks.jsonl").write_text("".join(json.dumps({"id": t, "prompt": f"Task {t}?", "answer": "42"}) + "\n"
                                              for t in ids))
    (repo / "rows").mkdir(exist_ok=True)
    (repo / "rows" / "train.txt").write_text("".join(f"{t}#1\n" for t in ids))
    agent = control / "agent.py"
    agent.write_text(AGENT_SCRIPT.format(python=sys.executable, control=str(control)))
    agent.chmod(0o755)
    edit_config(repo, agent={"backend": "command", "timeout_s": 60,
                             "command": [str(agent), "{prompt_file}", "{workspace}", "{task_id}", "{attempt}"]},
                evolver={"name": "continual-harness", "base": "scripted",
                         "scripted": {p: f"continual_learners:{p}" for p in ("policy", "subagents", "skills", "memory")},
                         "params": {"k": 1, "step_size": tasks, "final": "last"}},
                trainer={"epochs": 10, "allow_early_stop": True, "concurrency": 3})
    return control


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
