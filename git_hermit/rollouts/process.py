"""The one runner for every child git-hermit starts: agents, learner sessions, judges, verifiers.

Each child runs under a guard (``_guard.py``), a small process in its own session that is a
child subreaper and holds the read end of a pipe whose write end only git-hermit holds. When
git-hermit dies in any way (SIGKILL of its group or of its main pid alone) the kernel closes
that end, the guard reads EOF and SIGKILLs every descendant, even ones that left the process
group or the session (a subreaper inherits orphans, so a double fork cannot escape). Why not
the alternatives: PR_SET_PDEATHSIG fires when the *thread* that forked exits (we start
children from worker threads) and reaches only the direct child; a process group misses
children that call setsid (Codex's PTY commands do); a cgroup needs a delegated cgroup v2
tree, which a user's shell rarely has. The guard costs one small Python start per child.

Timeouts: SIGTERM to the whole tree, SIGKILL after ``KILL_GRACE_S``. When the child exits,
its leftover background children are killed too. Ctrl-C (``kill_all``) kills every tree now
and refuses new starts. Output goes to files (an agent's stream can be large) or is captured.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

KILL_GRACE_S = 2.0
GUARD = Path(__file__).with_name("_guard.py")
_EXEC_FAILED = 255
_live: dict[int, int] = {}            # guard pid -> write end of its control pipe
_live_lock = threading.Lock()
_interrupted = threading.Event()


def kill_all() -> int:
    """SIGKILL every process tree the runner started that is still running, and refuse to
    start new ones from now on (queued work must not begin after Ctrl-C); how many."""
    _interrupted.set()
    with _live_lock:        # held while writing: a closed fd number must not be reused meanwhile
        for fd in _live.values():
            _send(fd, b"K")
        return len(_live)


def _send(fd: int, command: bytes) -> None:
    try:
        os.write(fd, command)
    except OSError:      # the guard is gone already
        pass


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int | None      # None when killed for the timeout
    timed_out: bool
    duration_s: float
    stdout: str = ""            # captured output (run_capture only)
    stderr: str = ""


@dataclass
class Guarded:
    """A started child: its guard's Popen and the control pipe that ends its tree."""

    process: subprocess.Popen
    control: int
    started: float

    def terminate(self) -> None:
        """SIGTERM the tree, SIGKILL it after the grace period (done by the guard)."""
        with _live_lock:
            if self.process.pid in _live:
                _send(self.control, b"T")

    def close(self) -> None:
        with _live_lock:
            if _live.pop(self.process.pid, None) is None:
                return
            os.close(self.control)   # a guard still running reads EOF and kills its tree


def start(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin=subprocess.DEVNULL,
          stdout=None, stderr=None, grace_s: float = KILL_GRACE_S) -> Guarded:
    """Start ``argv`` under a guard (see the module docstring); raises OSError if it cannot run."""
    if _interrupted.is_set():
        raise InterruptedError("interrupted: no new child process starts after Ctrl-C")
    argv = list(argv)
    if not argv:
        raise OSError(2, "empty command")
    read_end, write_end = os.pipe()           # both close-on-exec: no other child inherits them
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(GUARD), str(read_end), f"{grace_s:g}", "--", *argv],
            cwd=cwd, env=dict(env), stdin=stdin, stdout=stdout, stderr=stderr,
            pass_fds=(read_end,), start_new_session=True)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    with _live_lock:
        _live[process.pid] = write_end
    return Guarded(process, write_end, time.monotonic())


def wait_exit(process: subprocess.Popen, timeout_s: float) -> int | None:
    """The exit status, or None at the timeout. A pidfd wakes us the moment the child exits;
    ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms, which adds ~25 ms to every rollout."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):   # not Linux 5.3+: fall back to Popen's polling wait
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0, int(timeout_s * 1000))):
            return None
    finally:
        os.close(pidfd)
    return process.wait()


def _exec_error(stderr_text: str, argv0: str) -> OSError | None:
    for line in stderr_text.splitlines()[-3:]:
        if line.startswith("exec-error "):
            errno = int(line.split()[1])
            return OSError(errno, os.strerror(errno), argv0)
    return None


def run_process(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
                stdout_path: Path, stderr_path: Path, stdin_text: str | None = None) -> ProcessOutcome:
    """Run ``argv``; stdout/stderr stream to files; the tree is killed at ``timeout_s``."""
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        child = start(argv, cwd=cwd, env=env, stdout=out, stderr=err,
                      stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL)
    try:
        if stdin_text is not None:
            try:
                child.process.stdin.write(stdin_text.encode())
                child.process.stdin.close()
            except BrokenPipeError:
                pass
        returncode = wait_exit(child.process, timeout_s)
        if returncode is None:
            child.terminate()
            if wait_exit(child.process, KILL_GRACE_S + 2) is None:
                child.process.kill()
                child.process.wait()
            return ProcessOutcome(None, True, time.monotonic() - child.started)
    finally:
        child.close()
    if returncode == _EXEC_FAILED:
        error = _exec_error(Path(stderr_path).read_text(errors="replace"), str(argv[0]))
        if error is not None:
            raise error
    return ProcessOutcome(returncode, False, time.monotonic() - child.started)


def run_capture(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
                merge_stderr: bool = False, stdin_text: str | None = None) -> ProcessOutcome:
    """Run ``argv`` and capture its output as text (stderr into stdout with ``merge_stderr``)."""
    child = start(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                  stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                  stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL)
    timed_out = False
    try:
        try:
            raw_out, raw_err = child.process.communicate(
                stdin_text.encode() if stdin_text is not None else None, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            child.terminate()
            try:
                raw_out, raw_err = child.process.communicate(timeout=KILL_GRACE_S + 2)
            except subprocess.TimeoutExpired:
                child.process.kill()
                raw_out, raw_err = child.process.communicate()
    finally:
        child.close()
    out = (raw_out or b"").decode("utf-8", errors="replace")
    err = (raw_err or b"").decode("utf-8", errors="replace")
    if not timed_out and child.process.returncode == _EXEC_FAILED:
        error = _exec_error(out if merge_stderr else err, str(argv[0]))
        if error is not None:
            raise error
    return ProcessOutcome(None if timed_out else child.process.returncode, timed_out,
                          time.monotonic() - child.started, out, err)
