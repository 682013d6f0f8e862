"""Scratch directories for rollouts and learner sessions (workspaces, private homes, logins).

Each git-hermit process keeps its scratch under
``$TMPDIR/git-hermit-<uid>/pid-ns-<ns>/<pid>-<start>/`` (mode 0700: copied login files are the
owner's alone; ``<ns>`` names the PID namespace its pid means something in). A directory is
removed when its work ends; one left by a killed process of this namespace (its pid gone, or now
another process's) is removed by ``clean_stale`` at the next start (a driver's command, or a Dask
worker process's first rollout: on a machine that shares no disk with the driver nobody else
would); another namespace's (a container sharing the host's /tmp) only once nothing in it has
changed for a day — a live run's directory is never touched. Rollouts take their directory from a
per-process pool (``rollout_slot``) and leave it for the next rollout, which resets it: on ext4
without a journal each file made costs a scan of every inode freed in the last minutes, so
making and removing ~40 a rollout cost more than the rest of hermit.

A batch's free rollout directories are not removed at its end (or at the process's) but parked
in ``git-hermit-<uid>/parked/``, tidied first by the caller's ``tidy`` (the workspace back to its
adapter's deployment alone: nothing of the task or of the agent's work stays), and the next
batch, this command's or the next command's, takes them back (a rename: of two processes only
one gets each). Removing them made the next batch's ~640 new files a scan each of the ~640 just
freed (bench/scheduling.py: 6.6-9.6 ms a rollout before, 5.1-5.8 ms parked). Parked
directories unused for a day go in ``clean_stale``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import time
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
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileNotFoundError:       # its namespace's directory was removed meanwhile (left empty)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user")
    path.chmod(0o700)
    return path


def _namespace() -> str | None:
    """This process's PID namespace (the inode of its ``/proc/self/ns/pid``): pids and start
    times in names are only comparable within one; None without /proc."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def _self_name() -> str:
    """``<pid>-<start>`` as this machine's /proc shows this process (under ``bwrap --unshare-pid``
    without its own /proc, ``os.getpid()`` is the inner pid, /proc the outer namespace's: the name
    must be what ``clean_stale`` reads back from /proc)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return f"{os.getpid()}-0"
    return f"{int(stat.split()[0])}-{stat[stat.rfind(b')') + 2:].split()[19].decode()}"


NAMESPACE_PREFIX = "pid-ns-"    # old git-hermits skip a name that does not start with digits
FOREIGN_STALE_AFTER = 24 * 3600     # another namespace's scratch untouched this long is a dead one's
TOUCH_EVERY = 3600          # a process in use touches its directory (another namespace's clean-up
                            # sees nothing else of it), and makes it again if it was removed

_made: dict[tuple[int, Path], Path] = {}
_touched = 0.0              # time.monotonic() of the last touch


def process_dir() -> Path:
    """This process's scratch directory (created and checked on first use: every rollout asks,
    and the check is ~10 system calls on a directory all of this user's runs share)."""
    global _touched
    pid, root = os.getpid(), scratch_root()
    made = _made.get((pid, root))
    if made is None:
        namespace = root / f"{NAMESPACE_PREFIX}{_namespace() or 0}"
        made = _made[(pid, root)] = _private_dir(namespace / _self_name())
        _touched = time.monotonic()
    elif time.monotonic() - _touched > TOUCH_EVERY:
        _touched = time.monotonic()
        try:
            os.utime(made)
        except FileNotFoundError:   # idle for a day: another namespace took it for a dead one's
            _private_dir(made)
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
MAX_PARKED = 64         # parked for this user's next batches
PARKED = "parked"
PARKED_MAX_AGE_S = 24 * 3600
_slots_lock = threading.Lock()
_free_slots: list[Path] = []
_all_slots: set[Path] = set()
_tidiers: dict[Path, Callable[[Path], None]] = {}   # free slot -> what makes it fit to park
_slots_pid = os.getpid()


def _slot_state() -> tuple[list[Path], set[Path]]:
    """This process's pools (a forked child starts with none: the parent's are the parent's)."""
    global _slots_pid
    if _slots_pid != os.getpid():
        _slots_pid = os.getpid()
        _free_slots.clear()
        _all_slots.clear()
        _tidiers.clear()
    return _free_slots, _all_slots


@contextlib.contextmanager
def rollout_slot(prefix: str, release: Callable[[Path], None],
                 tidy: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """A private directory for one rollout, possibly a previous rollout's, this process's or a
    parked one (the caller resets what it needs). ``release`` empties what must not outlive the
    rollout (copied logins) before the directory goes back to the pool; ``tidy`` what must not
    outlive the batch before it is parked (without one it is removed instead). A rollout that
    raised has its directory removed."""
    process_dir()           # (a reused directory: to touch this process's once in a while)
    with _slots_lock:
        free, every = _slot_state()
        path = free.pop() if free else None
        if path is not None:
            _tidiers.pop(path, None)
    if path is None or not path.is_dir():
        path = _take_parked() or scratch_dir(prefix)
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
            if tidy is not None:
                _tidiers[path] = tidy
            return
    _remove_slot(path)


def _remove_slot(path: Path) -> None:
    with _slots_lock:
        _slot_state()[1].discard(path)
    shutil.rmtree(path, ignore_errors=True)


def _parked_dir() -> Path:
    return _private_dir(scratch_root() / PARKED)


def _take_parked() -> Path | None:
    """A parked rollout directory, moved into this process's scratch; None if none is left. The
    rename is the claim: of two processes renaming one entry, the second gets ENOENT."""
    try:
        parked = _parked_dir()
        names = os.listdir(parked)
    except OSError:
        return None
    for name in names:
        target = process_dir() / name
        try:
            os.rename(parked / name, target)
        except OSError:          # taken by another process meanwhile, or the name is taken here
            continue
        if target.is_dir() and not target.is_symlink():
            return target
        shutil.rmtree(target, ignore_errors=True)
    return None


def _park(path: Path, tidy: Callable[[Path], None] | None) -> None:
    """Leave the free rollout directory ``path`` for a later batch, tidied; remove it when it
    cannot be tidied or enough are parked already."""
    try:
        if tidy is None:
            raise OSError("nothing to tidy it with")
        parked = _parked_dir()
        if len(os.listdir(parked)) >= MAX_PARKED:
            raise OSError("enough are parked")
        tidy(path)
        os.utime(path)           # parked now: clean_stale ages it from here
        os.rename(path, parked / path.name)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def drop_slots() -> None:
    """Park this process's free rollout directories (the end of a batch; slots in use are
    removed when their rollout raises, or at exit)."""
    with _slots_lock:
        free, every = _slot_state()
        dropped = [(path, _tidiers.pop(path, None)) for path in free]
        free.clear()
        every.difference_update(path for path, _ in dropped)
    for path, tidy in dropped:
        _park(path, tidy)


_kept = 0      # open ``slots_kept`` blocks: while any is, a batch's end keeps its directories


@contextlib.contextmanager
def slots_kept() -> Iterator[None]:
    """Inside this block rollout directories outlive each batch (``end_batch`` keeps them, tidied),
    so a command that runs several batches (``train``'s steps, ``eval``'s candidate and baseline)
    takes them once; they are parked when the outermost block ends."""
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
    """A batch of rollouts ended: its free directories are parked; inside ``slots_kept`` they stay
    in this process for its next batch, tidied all the same (``train``'s learners run meanwhile:
    nothing of the last task need wait beside them), and keep their ``tidy`` for their parking
    when the block ends. One that cannot be tidied is removed."""
    with _slots_lock:
        kept = [(path, _tidiers.get(path)) for path in _slot_state()[0]] if _kept else None
    if kept is None:
        drop_slots()
        return
    for path, tidy in kept:
        try:
            if tidy is None:
                raise OSError("nothing to tidy it with")
            tidy(path)
        except OSError:
            with _slots_lock:
                if path in _free_slots:
                    _free_slots.remove(path)
                _tidiers.pop(path, None)
            _remove_slot(path)


@atexit.register
def _drop_all_slots() -> None:
    drop_slots()
    with _slots_lock:
        free, every = _slot_state()
        busy = list(every)       # a rollout still running at exit: what it left is unknown
        every.clear()
    for path in busy:
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
    """Remove the scratch of git-hermit processes that are gone, and parked rollout directories
    unused for ``PARKED_MAX_AGE_S``; the paths removed. In this
    process's PID namespace a directory's process is looked up; another namespace's pids mean
    nothing here (a container sharing /tmp, a worker under ``bwrap --unshare-pid``), so its
    directories go only when nothing in them has changed for ``FOREIGN_STALE_AFTER``."""
    root = scratch_root()
    _cleaned.add((os.getpid(), root))
    if not root.is_dir():
        return []
    namespace = _namespace()
    own = f"{NAMESPACE_PREFIX}{namespace}" if namespace is not None else None
    removed = []
    for entry in root.iterdir():
        if entry.name.startswith(NAMESPACE_PREFIX):
            if entry.name == own:
                removed += [path for path in _entries(entry) if _gone(path.name) and _remove(path)]
            else:
                removed += [path for path in _entries(entry) if _untouched(path) and _remove(path)]
                if _untouched(entry):
                    with contextlib.suppress(OSError):
                        entry.rmdir()       # only when empty: nobody of that namespace made one since
        elif entry.name == PARKED:
            oldest = time.time() - PARKED_MAX_AGE_S
            for path in _entries(entry):
                with contextlib.suppress(OSError):       # taken by another process meanwhile
                    if path.lstat().st_mtime < oldest and _remove(path):
                        removed.append(path)
        elif _gone(entry.name):             # ``<pid>-<start>``: an older git-hermit's, today's rule
            _remove(entry)
            removed.append(entry)
    return removed


def _entries(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []


def _gone(name: str) -> bool:
    """``<pid>-<start>`` names a process of this namespace that is no more."""
    pid, _, start = name.partition("-")
    return pid.isdigit() and _start_time(int(pid)) != start


def _untouched(path: Path) -> bool:
    """Nothing made, removed or touched in ``path`` or its entries for ``FOREIGN_STALE_AFTER``."""
    limit = time.time() - FOREIGN_STALE_AFTER
    try:
        if path.lstat().st_mtime > limit:
            return False
        return all(entry.lstat().st_mtime <= limit for entry in path.iterdir())
    except OSError:
        return False


def _remove(path: Path) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return True
