"""The per-run lock: ``<git common dir>/hermit/<run>.lock``, so two commands never interleave on one run.

The lock file is created atomically and says who holds it (pid, the pid's start time from
/proc, host, start, command); its holder also keeps an flock on it while it lives. A lock left by
a dead process on this host is taken over: a pid that is gone, a zombie, or a pid now belonging to
another process (its start time differs); an empty or unreadable one (a crash, or a full disk,
between create and write) when no process holds its flock. A live holder gets a clear refusal. A
lock that cannot be written (a full disk) is removed at once and said so (exit 19). Living in the
common dir, the lock is shared by every linked worktree of the repository. ``check_ref_locks`` finds git's own leftover ref locks.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from pathlib import Path

from ..errors import NO_SPACE_ERRNOS, InputError, LockHeld, disk_full
from .repo import Repo, ref_lock_error

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: stale takeover is then unguarded
    fcntl = None  # type: ignore[assignment]

# git's own wait for packed-refs.lock is 1 s; a gc on a loaded machine can hold it longer
LEFTOVER_LOCK_WAIT_S = 3.0
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a pid from /proc; None when there is no such
    process or no /proc to ask (the start time tells a reused pid from the process that took the lock)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()   # after "pid (comm) ": field 3 onwards
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _has_proc() -> bool:
    return Path("/proc/self/stat").is_file()


def _holder_alive(pid: int, start: object) -> bool:
    """Is the process that wrote the lock still running (not gone, not a zombie, not a reused pid)?"""
    if not _has_proc():
        return _pid_alive(pid)
    stat = _proc_stat(pid)
    if stat is None:
        return False
    state, ticks = stat
    if state in ("Z", "X"):   # exited, not yet reaped: it will never release the lock
        return False
    if isinstance(start, int) and not isinstance(start, bool) and start != ticks:
        return False          # the pid now names another process
    return True               # a record without a start time (older git-hermit): the pid decides


class RunLock:
    """Context manager holding one run's lock; ``recovered_stale`` tells if a dead holder's lock was taken over."""

    def __init__(self, repo: Repo, run: str, command: str = "", *, wait: bool = False,
                 on_wait: "Callable[[str], None] | None" = None, poll_s: float = 0.5):
        if not _RUN_NAME.fullmatch(run) or ".." in run or run.endswith(".lock"):
            raise InputError(f"invalid run name '{run}'", hint="use letters, digits, '.', '_' and '-'")
        self.run = run
        self.command = command
        self.path = repo.common_dir / "hermit" / f"{run}.lock"
        self.recovered_stale = False
        self.wait = wait              # --wait: poll until the holder releases instead of refusing
        self.on_wait = on_wait        # told once who holds the lock, when we start waiting
        self.poll_s = poll_s
        self._token: str | None = None
        self._fd: int | None = None      # the lock file, flocked while held

    # ----------------------------------------------------------------------------- acquire / release
    def acquire(self) -> "RunLock":
        told = False
        while True:
            try:
                return self._acquire_once()
            except LockHeld as held:
                if not self.wait:
                    raise
                if not told and self.on_wait is not None:
                    self.on_wait(f"waiting for the run lock: {held.message}")
                told = True
                time.sleep(self.poll_s)

    def _acquire_once(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._try_create():
            return self
        holder = self._read_holder()
        if self._is_stale(holder):
            with self._takeover_guard():
                # Re-check under the guard: another process may have taken over already.
                if self._is_stale(self._read_holder()):
                    with contextlib.suppress(FileNotFoundError):
                        self.path.unlink()
                    if self._try_create():
                        self.recovered_stale = True
                        return self
            holder = self._read_holder()
        raise self._held_error(holder)

    def release(self) -> None:
        """Remove the lock file if it is still ours (never someone else's)."""
        if self._token is None:
            return
        holder = self._read_holder()
        if holder is not None and holder.get("token") == self._token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self._token = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # ----------------------------------------------------------------------------- internals
    def _try_create(self) -> bool:
        token = secrets.token_hex(8)
        own = _proc_stat(os.getpid()) if _has_proc() else None
        record = {
            "pid": os.getpid(),
            "pid_start": own[1] if own else None,
            "host": socket.gethostname(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": self.command,
            "token": token,
        }
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno in NO_SPACE_ERRNOS:
                raise disk_full(self.path.parent, f"the run lock {self.path.name}") from None
            raise
        ours = os.fstat(fd).st_ino
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)      # held while we live: an empty lock of ours is no debris
            try:
                taken = os.stat(self.path).st_ino != ours
            except FileNotFoundError:
                taken = True
            if taken:                               # removed as debris before we flocked it: not ours
                os.close(fd)
                return False
            os.write(fd, json.dumps(record).encode())
            os.fsync(fd)
        except BaseException as exc:
            # nothing half-written stays behind (at 0 bytes free the record cannot be written)
            os.close(fd)
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == ours:
                    self.path.unlink()
            if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
                raise disk_full(self.path.parent, f"the run lock {self.path.name}") from None
            raise
        self._token, self._fd = token, fd
        return True

    def _flocked(self) -> bool:
        """Whether a live process holds the lock file's flock (no fcntl: assume it does)."""
        if fcntl is None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _read_holder(self) -> dict[str, Any] | None:
        """The lock's record; {} if the file exists but is empty/unparsable; None if there is no file."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            record = json.loads(text)
        except ValueError:
            return {}
        return record if isinstance(record, dict) else {}

    def _is_stale(self, holder: dict[str, Any] | None) -> bool:
        if holder is None:
            return True  # released meanwhile: free to take
        if not holder:      # empty or unreadable: a holder setting it up right now holds its flock
            return not self._flocked()
        if holder.get("host") != socket.gethostname():
            return False  # cannot check a pid on another machine
        pid = holder.get("pid")
        return not isinstance(pid, int) or isinstance(pid, bool) or not _holder_alive(pid, holder.get("pid_start"))

    @contextlib.contextmanager
    def _takeover_guard(self) -> Iterator[None]:
        """Serialise stale takeovers, so two processes cannot both remove a dead lock and each believe they hold it."""
        if fcntl is None:
            yield
            return
        fd = os.open(self.path.with_suffix(".lock.guard"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _held_error(self, holder: dict[str, Any] | None) -> LockHeld:
        hint = (f"run the command again with --wait to wait for it, or stop that process; "
                f"the lock file is {self.path}")
        if not holder:
            return LockHeld(f"run '{self.run}' is being locked by another process", hint=hint)
        where = "" if holder.get("host") == socket.gethostname() else f" on host {holder.get('host')}"
        command = holder.get("command") or "git hermit"
        if where:
            hint = f"if that host's process is gone, delete the lock file {self.path}"
        return LockHeld(
            f"run '{self.run}' is locked by pid {holder.get('pid')}{where} ({command}, since {holder.get('started')})",
            hint=hint,
        )


def check_ref_locks(repo: Repo, prefixes: list[str], wait_seconds: float = LEFTOVER_LOCK_WAIT_S) -> None:
    """Refuse (GitLockFile) when a git lock file blocks a ref under ``prefixes`` or packed-refs,
    so a command finds out before it spends anything, not at its final ref transaction.

    A lock a running git holds for a moment (a concurrent ``git gc`` packing refs) is waited for,
    as git's own ``core.packedRefsTimeout`` does; only one still there after ``wait_seconds`` is
    refused as a leftover."""
    deadline = time.monotonic() + wait_seconds
    while True:
        found = _ref_lock_files(repo, prefixes)
        if not found:
            return
        if time.monotonic() >= deadline:
            raise ref_lock_error(found[0])
        time.sleep(0.05)


def _ref_lock_files(repo: Repo, prefixes: list[str]) -> list[Path]:
    root = repo.common_dir
    found = [root / "packed-refs.lock"] if (root / "packed-refs.lock").exists() else []
    for prefix in prefixes:
        directory = root / prefix.rstrip("/")
        if directory.is_dir():
            found += sorted(path for path in directory.rglob("*.lock") if path.is_file())
        elif Path(f"{directory}.lock").is_file():
            found.append(Path(f"{directory}.lock"))
    return found
