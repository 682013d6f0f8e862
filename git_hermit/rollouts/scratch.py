"""Scratch directories for rollouts and learner sessions (workspaces, private homes, logins).

Each git-hermit process keeps its scratch under ``$TMPDIR/git-hermit-<uid>/<pid>-<start>/``
(mode 0700: copied login files are the owner's alone). A directory is removed when its work
ends; one left by a killed process (its pid gone, or now another process's) is removed by
``clean_stale`` at the next start (a driver's command, or a Dask worker process's first rollout:
on a machine that shares no disk with the driver nobody else would) — a live run's directory
is never touched. Rollouts take their directory from a per-process pool (``rollout_slot``) and
leave it for the next rollout, which resets it: on ext4 without a journal each file made costs
a scan of every inode freed in the last minutes, so making and removing ~40 a rollout cost more
than the rest of hermit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator


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


def scratch_dir(prefix: str) -> Path:
    """A fresh private directory under this process's scratch (the caller removes it)."""
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=process_dir()))
    except FileNotFoundError:       # the process directory was removed meanwhile: make it again
        _made.clear()
        return Path(tempfile.mkdtemp(prefix=prefix, dir=process_dir()))


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A fresh private directory, removed (with whatever it holds) when the block ends."""
    path = scratch_dir(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


MAX_FREE_SLOTS = 64     # kept for reuse per process (one per rollout running at once suffices)
_slots_lock = threading.Lock()
_free_slots: list[Path] = []
_all_slots: set[Path] = set()
_slots_pid = os.getpid()


def _slot_state() -> tuple[list[Path], set[Path]]:
    """This process's pools (a forked child starts with none: the parent's are the parent's)."""
    global _slots_pid
    if _slots_pid != os.getpid():
        _slots_pid = os.getpid()
        _free_slots.clear()
        _all_slots.clear()
    return _free_slots, _all_slots


@contextlib.contextmanager
def rollout_slot(prefix: str, release: Callable[[Path], None]) -> Iterator[Path]:
    """A private directory for one rollout, possibly a previous rollout's (the caller resets
    what it needs). ``release`` empties what must not outlive the rollout (copied logins) before
    the directory goes back to the pool; a rollout that raised has its directory removed."""
    with _slots_lock:
        free, every = _slot_state()
        path = free.pop() if free else None
    if path is None or not path.is_dir():
        path = scratch_dir(prefix)
        with _slots_lock:
            _slot_state()[1].add(path)
    try:
        yield path
    except BaseException:
        _remove_slot(path)
        raise
    try:
        release(path)
    except OSError:         # e.g. a directory the agent made unreadable: not reused
        _remove_slot(path)
        return
    with _slots_lock:
        free, every = _slot_state()
        if path in every and len(free) < MAX_FREE_SLOTS:
            free.append(path)
            return
    _remove_slot(path)


def _remove_slot(path: Path) -> None:
    with _slots_lock:
        _slot_state()[1].discard(path)
    shutil.rmtree(path, ignore_errors=True)


def drop_slots() -> None:
    """Remove this process's free rollout directories (the end of a batch; slots in use are
    removed when their rollout ends, or at exit)."""
    with _slots_lock:
        free, every = _slot_state()
        dropped = list(free)
        free.clear()
        every.difference_update(dropped)
    for path in dropped:
        shutil.rmtree(path, ignore_errors=True)


_kept = 0      # open ``slots_kept`` blocks: while any is, a batch's end keeps its directories


@contextlib.contextmanager
def slots_kept() -> Iterator[None]:
    """Inside this block rollout directories outlive each batch (``end_batch`` keeps them), so a
    command that runs several batches (``train``'s steps, ``eval``'s candidate and baseline)
    makes them once; they are removed when the outermost block ends."""
    global _kept
    with _slots_lock:
        _kept += 1
    try:
        yield
    finally:
        with _slots_lock:
            _kept -= 1
            last = _kept == 0
        if last:
            drop_slots()


def end_batch() -> None:
    """A batch of rollouts ended: its free directories are removed, unless ``slots_kept``."""
    with _slots_lock:
        if _kept:
            return
    drop_slots()


@atexit.register
def _drop_all_slots() -> None:
    with _slots_lock:
        free, every = _slot_state()
        paths = list(every)
        free.clear()
        every.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


_cleaned: set[tuple[int, Path]] = set()     # (process, scratch root) already cleaned


def clean_stale_once() -> None:
    """``clean_stale``, the first time this process asks (every rollout asks: a Dask worker
    killed by SIGKILL or the OOM killer leaves its scratch on its own machine, which only the
    next worker process there can see; listing the directory per rollout would cost too much)."""
    key = (os.getpid(), scratch_root())
    if key in _cleaned:
        return
    with _slots_lock:
        if key in _cleaned:
            return
        _cleaned.add(key)
    clean_stale()


def clean_stale() -> list[Path]:
    """Remove the scratch of git-hermit processes that are gone; the paths removed."""
    root = scratch_root()
    _cleaned.add((os.getpid(), root))
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
