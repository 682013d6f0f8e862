"""Helpers of tests/test_continual_harness.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
import yaml
from support.cli_helpers import Result, hermit
from git_hermit.evolvers.continual_harness import deltas
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


def _make_run(repo: Path, tasks: int = 6) -> Path:
    control = repo.parent / "control"
    control.mkdir()
    proc = hermit(repo, "init", "--run", "r", "--template", TEMPLATE)
    assert proc.returncode == 0, proc.stderr
    ids = [f"t{i}" for i in range(1, tasks + 1)]
    (repo / "tasks.jsonl").write_text("".join(json.dumps({"id": t, "prompt": f"Task {t}?", "answer": "42"}) + "\n"
                                              for t in ids))
    (repo / "rows").mkdir(exist_ok=True)
    (repo / "rows" / "train.txt").write_text("".join(f"{t}#1\n" for t in ids))
    agent = control / "agent.py"
    agent.write_text(AGENT_SCRIPT.format(python=sys.executable, control=str(control)))
    agent.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"] = {"backend": "command", "timeout_s": 60,
                       "command": [str(agent), "{prompt_file}", "{workspace}", "{task_id}", "{attempt}"]}
    config["evolver"] = {"name": "continual-harness", "base": "scripted",
                         "scripted": {p: f"continual_learners:{p}" for p in ("policy", "subagents", "skills", "memory")},
                         "params": {"k": 1, "step_size": 3}}
    config["trainer"] = {"epochs": 10, "allow_early_stop": True, "concurrency": 3}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return control

