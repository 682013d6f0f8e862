"""Scratch directories for rollouts and learner sessions (workspaces, private homes, logins).

Each git-hermit process keeps its scratch under ``$TMPDIR/git-hermit-<uid>/<pid>-<start>/``
(mode 0700: copied login files are the owner's alone). A directory is removed when its work
ends; one left by a killed process (its pid gone, or now another process's) is removed by
``clean_stale`` at the next start — a live run's directory is never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def scratch_root() -> Path:
    return Path(tempfile.gettempdir()) / f"git-hermit-{os.getuid()}"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[19].decode()


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user")
    path.chmod(0o700)
    return path


_made: dict[tuple[int, Path], Path] = {}


def process_dir() -> Path:
    """This process's scratch directory (created and checked on first use: every rollout asks,
    and the check is ~10 system calls on a directory all of this user's runs share)."""
    pid, root = os.getpid(), scratch_root()
    made = _made.get((pid, root))
    if made is None:
        made = _made[(pid, root)] = _private_dir(root / f"{pid}-{_start_time(pid) or 0}")
    return made


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A fresh private directory, removed (with whatever it holds) when the block ends."""
    try:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=process_dir()))
    except FileNotFoundError:       # the process directory was removed meanwhile: make it again
        _made.clear()
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=process_dir()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def clean_stale() -> list[Path]:
    """Remove the scratch of git-hermit processes that are gone; the paths removed."""
    root = scratch_root()
    if not root.is_dir():
        return []
    removed = []
    for entry in root.iterdir():
        pid, _, start = entry.name.partition("-")
        if not pid.isdigit():
            continue
        if _start_time(int(pid)) == start:
            continue        # its process is alive
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
