"""File primitives every evolver's scratch uses: atomic text and JSON writes (temp file +
rename), so a killed step never leaves half a record behind (DESIGN §3); read-only trees (ahe's
``before/`` copies) made and removed; where a rollout's files live under a step's rollouts root.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path, PurePath
from typing import Any

from git_hermit.atomic import write_atomic


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def make_read_only(root: Path) -> None:
    """Every file and directory under ``root`` (and itself) loses its write bits; symlinks are left."""
    for path in [*sorted(root.rglob("*"), reverse=True), root]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def remove_tree(root: Path) -> None:
    """``shutil.rmtree`` that also removes trees ``make_read_only`` left (a directory needs its
    write bit for its entries to go)."""
    for directory, dirs, _ in os.walk(root):
        for name in [directory, *(os.path.join(directory, d) for d in dirs)]:
            if not os.path.islink(name):
                os.chmod(name, os.stat(name).st_mode | stat.S_IRWXU)
    shutil.rmtree(root)


def rollout_dir(root: PurePath, task: str, attempt: int) -> PurePath:
    """Where a rollout's files live under a step's rollouts root (``<task>/<attempt>/``),
    with the task id made filesystem-safe exactly as the rollout runner does."""
    from git_hermit.rollouts.runner import task_dirname
    return root / task_dirname(task) / str(attempt)
