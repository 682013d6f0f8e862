"""Helpers of tests/test_rollout_reuse.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

from pathlib import Path as _Path

TESTS = _Path(__file__).resolve().parents[1]

import gc
import json
import os
import sys
import tracemalloc
from pathlib import Path
import yaml
from git_hermit.rollouts.executors import PREPARE_AHEAD
from git_hermit.rollouts.scratch import drop_slots
from git_hermit.rollouts.tasks import Task
from git_hermit.rollouts.worker import RolloutJob, execute_rollout
from cli_helpers import hermit
from conftest import git
from support.rollouts_e2e_helpers import commit_candidate, make_project, result_files

def rows_of_k(repo: Path, k: int) -> None:
    """8 tasks x ``k`` rows in the training split, k in the config, committed (a new commit)."""
    rows = [f"t{i}#{a}" for i in range(8) for a in range(1, k + 1)]
    (repo / "rows" / "train.txt").write_text("\n".join(rows) + "\n")
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["evolver"]["params"]["k"] = k
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    git(repo, "commit", "-q", "--allow-empty", "-am", f"k={k}")

