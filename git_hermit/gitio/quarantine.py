"""New objects wait in a quarantine until a ref transaction makes them reachable, and that
transaction runs while `git gc` is held off, so a concurrent ``git gc --prune=now`` never deletes
an object a step is about to publish.

Every object git-hermit writes (fast-import's blobs, write-tree's and merge-tree's trees,
commit-tree's commits) goes into a private object directory, ``<common dir>/hermit/objects/<pid>-…/``,
that borrows the repository's objects as its alternate; git-hermit's readers borrow it in turn. gc
never looks there. A ref transaction that makes them reachable (``update_refs``) first takes
``gc.pid`` — the file by which `git gc` tells another gc it is running — waiting for a running gc to
end; then the objects are linked into the database and the refs move; then ``gc.pid`` is released.
A gc started meanwhile says "gc is already running" and does nothing; one that starts after it sees
the new refs. (Plain git writes objects straight into the database, where ``--prune=now``, which
ignores every object's age, deletes them whenever it runs between a ``write-tree`` and the
``update-ref`` that needs it.) Not covered: ``git prune`` run by hand, which takes no ``gc.pid``.

One quarantine per repository per process, shared by its ``Repo`` objects (a second one opened in
the same process sees what the first wrote). An object that is never published goes with the
quarantine when the process ends; a killed process's quarantine is removed by a later one after a day.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

GC_WAIT_S = 120.0           # a running gc is waited for this long (a large repository's repack)
GC_PID_STALE_S = 12 * 3600  # git's own rule: an older gc.pid is a crashed gc's
STALE_AFTER_S = 24 * 3600
_PACK_ORDER = (".pack", ".rev", ".idx")      # git uses a pack once its .idx is there: that goes last


class Quarantine:
    """One process's quarantine for one object database (made on the first write)."""

    def __init__(self, common_dir: Path, objects_dir: Path):
        self.root = common_dir / "hermit" / "objects"
        self.objects_dir = objects_dir
        self.path: Path | None = None
        self._owner = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.path is not None and self._owner == os.getpid()

    def ensure(self) -> Path:
        """The quarantine directory (made now if needed; a forked child makes its own)."""
        import secrets   # here: a read command (`log`) writes no object, and secrets imports random
        with self._lock:
            if self.path is not None and self._owner == os.getpid():
                return self.path
            self.root.mkdir(parents=True, exist_ok=True)
            _remove_stale(self.root)
            path = self.root / f"{os.getpid()}-{secrets.token_hex(4)}"
            (path / "pack").mkdir(parents=True)
            (path / "info").mkdir()
            self.path, self._owner = path, os.getpid()
            return path

    def writer_env(self, alternates: str | None) -> dict[str, str]:
        """What makes a git process write its new objects here (reading the database too)."""
        path = self.ensure()
        borrowed = os.pathsep.join(p for p in (str(self.objects_dir), alternates) if p)
        return {"GIT_OBJECT_DIRECTORY": str(path), "GIT_ALTERNATE_OBJECT_DIRECTORIES": borrowed}

    def pending(self) -> bool:
        """Whether objects wait here (cheap: the directory's fan-outs and packs listed)."""
        if not self.active or self.path is None:
            return False
        with os.scandir(self.path) as entries:
            return any(e.name not in ("pack", "info") or (e.name == "pack" and any(os.scandir(e.path)))
                       for e in entries)

    def publish(self) -> int:
        """Link every quarantined object into the object database (call while gc is held off:
        ``gc_paused``); the count moved."""
        if not self.active:
            return 0
        assert self.path is not None
        with contextlib.suppress(OSError):
            os.utime(self.path)         # in use: not stale to another process
        moved = 0
        with os.scandir(self.path) as entries:
            fans = [e for e in entries if e.is_dir(follow_symlinks=False) and len(e.name) == 2]
        for fan in fans:
            with os.scandir(fan.path) as entries:
                names = [e.name for e in entries if e.is_file(follow_symlinks=False)]
            if names:
                (self.objects_dir / fan.name).mkdir(exist_ok=True)
            for name in names:
                if not name.startswith("tmp"):
                    _move(Path(fan.path, name), self.objects_dir / fan.name / name)
                    moved += 1
        packs = self.path / "pack"
        with os.scandir(packs) as entries:
            stems = sorted({e.name.rsplit(".", 1)[0] for e in entries if e.name.endswith(".idx")})
        if stems:
            (self.objects_dir / "pack").mkdir(exist_ok=True)
        for stem in stems:
            for suffix in _PACK_ORDER:
                source = packs / f"{stem}{suffix}"
                if source.exists():
                    _move(source, self.objects_dir / "pack" / source.name)
            moved += 1
        return moved

    def discard(self) -> None:
        """Remove the quarantine and whatever was never published from it."""
        if self.active and self.path is not None:
            import shutil
            shutil.rmtree(self.path, ignore_errors=True)
        self.path = None


def _move(source: Path, target: Path) -> None:
    """``source`` into the database at ``target``: a hard link, else a copy renamed into place (an
    object already there stays as it is: the same content)."""
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:             # no hard links here (another filesystem, a restrictive one): copy
        import shutil
        temp = target.with_name(f"tmp_hermit_{target.name}")
        shutil.copyfile(source, temp)
        os.chmod(temp, 0o444)
        os.replace(temp, target)
    with contextlib.suppress(OSError):
        source.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _remove_stale(root: Path) -> None:
    """Quarantines of processes that ended without removing theirs (killed): untouched for a day
    and their pid gone (a process that publishes touches its own)."""
    import shutil
    cutoff = time.time() - STALE_AFTER_S
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            pid = entry.name.split("-", 1)[0]
            with contextlib.suppress(OSError):
                if (entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff
                        and not (pid.isdigit() and _alive(int(pid)))):
                    shutil.rmtree(entry.path, ignore_errors=True)


def _gc_running(common_dir: Path) -> bool:
    """Whether ``gc.pid`` names a live `git gc` (git's own test: this host's live pid, or another
    host's, in a file younger than 12 hours)."""
    import socket
    path = common_dir / "gc.pid"
    try:
        text, age = path.read_text(), time.time() - path.stat().st_mtime
    except (OSError, UnicodeDecodeError):
        return False
    if age > GC_PID_STALE_S:
        return False
    pid, _, host = text.strip().partition(" ")
    if host != socket.gethostname():
        return bool(host)
    return pid.isdigit() and _alive(int(pid))


_gc_stuck: set[Path] = set()


@contextlib.contextmanager
def gc_paused(common_dir: Path, *, wait_s: float = GC_WAIT_S) -> Iterator[bool]:
    """Hold `git gc` off: wait for a running one to end, then take ``gc.pid`` as gc itself does
    (through ``gc.pid.lock``), so none starts until the block ends. Yields False when no pause could
    be had within ``wait_s`` (the block then runs unpaused, as plain git would)."""
    import socket
    lock, pidfile = common_dir / "gc.pid.lock", common_dir / "gc.pid"
    mine = f"{os.getpid()} {socket.gethostname()}"
    if common_dir in _gc_stuck:       # a gc.pid that outlasted a whole wait once is not waited on again
        wait_s = 0.0
    deadline = time.monotonic() + wait_s
    held = False
    while not held:
        if not _gc_running(common_dir):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:       # a gc is taking it right now
                fd = -1
            except OSError:               # no way to write it (read-only .git): unpaused
                break
            if fd >= 0:
                try:
                    os.write(fd, mine.encode())
                finally:
                    os.close(fd)
                os.replace(lock, pidfile)
                held = True
                break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if not held and wait_s > 0:
        _gc_stuck.add(common_dir)
    try:
        yield held
    finally:
        if held:
            with contextlib.suppress(OSError):
                if pidfile.read_text() == mine:
                    pidfile.unlink()


_shared: dict[tuple[str, str], Quarantine] = {}
_shared_lock = threading.Lock()


def shared(common_dir: Path, objects_dir: Path) -> Quarantine:
    """This process's quarantine for the repository (one for all its Repo objects)."""
    key = (str(common_dir), str(objects_dir))
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            found = _shared[key] = Quarantine(common_dir, objects_dir)
        return found


@atexit.register
def discard_unpublished() -> None:
    """Drop this process's quarantines with whatever was never published (at exit, and at the end
    of each command the tests run in one process)."""
    for quarantine in list(_shared.values()):
        with contextlib.suppress(Exception):
            quarantine.discard()
