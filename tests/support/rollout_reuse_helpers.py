"""Helpers of tests/test_rollout_reuse.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

from pathlib import Path
import yaml
from conftest import git

def rows_of_k(repo: Path, k: int) -> None:
    """8 tasks x ``k`` rows in the training split, k in the config, committed (a new commit)."""
    rows = [f"t{i}#{a}" for i in range(8) for a in range(1, k + 1)]
    (repo / "rows" / "train.txt").write_text("\n".join(rows) + "\n")
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["evolver"]["params"]["k"] = k
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    git(repo, "commit", "-q", "--allow-empty", "-am", f"k={k}")

