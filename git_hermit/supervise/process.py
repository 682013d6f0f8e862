"""The one runner for every child git-hermit starts: agents, learner sessions, judges, verifiers.

Each child runs under a guard (``_guard.py``): a process in its own session that is a child
subreaper and holds the read end of a pipe whose write end only git-hermit holds. When
git-hermit dies in any way (SIGKILL of its group or of its main pid alone) the kernel closes
that end, the guard reads EOF and SIGKILLs every descendant, even ones that left the process
group or the session (a subreaper inherits orphans, so a double fork cannot escape). Why not
the alternatives: PR_SET_PDEATHSIG fires when the *thread* that forked exits (we start
children from worker threads) and reaches only the direct child; a process group misses
children that call setsid (Codex's PTY commands do); a cgroup needs a delegated cgroup v2
tree, which a user's shell rarely has. The guards come from one small guard server per
git-hermit process (started on first use, no site or imports beyond the stdlib), which keeps
them warm: a guard serves one child at a time and then the next, so a child costs its guard a
posix_spawn, not a fork of Python (~2.3 ms of CPU) nor a Python start (15-20 ms).

Timeouts: SIGTERM to the whole tree, SIGKILL after ``KILL_GRACE_S``. When the child exits,
its leftover background children are killed too. Ctrl-C (``kill_all``) kills every tree now
and refuses new starts. Output goes to files (an agent's stream can be large) or is captured.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

KILL_GRACE_S = 2.0
MAX_IDLE_GUARDS = 32      # warm guards kept between children; more are told to exit
GUARD = Path(__file__).with_name("_guard.py")
_live: set[int] = set()               # the write ends of the running guards' control pipes
_live_lock = threading.Lock()
_interrupted = threading.Event()
# the rollout batch this thread's processes belong to, and the batches a Ctrl-C ended (a Dask
# worker outlives the driver's Ctrl-C and serves the next run: it refuses that batch only)
_batch: contextvars.ContextVar[str] = contextvars.ContextVar("hermit_batch", default="")
_cancelled_batches: set[str] = set()


def kill_all() -> int:
    """SIGKILL every process tree the runner started that is still running, and refuse to
    start new ones from now on (queued work must not begin after Ctrl-C); how many."""
    _interrupted.set()
    with _live_lock:        # held while writing: a closed fd number must not be reused meanwhile
        for fd in _live:
            _send(fd, b"K")
        return len(_live)


def kill_running(batch: str = "") -> int:
    """SIGKILL every running process tree, yet keep starting new ones (a Dask worker serves
    the next run after the driver's Ctrl-C); how many. With ``batch``, the rollouts of that
    batch start no process from now on: one still preparing its workspace when the Ctrl-C came
    would otherwise start its agent after this kill."""
    with _live_lock:
        if batch:
            _cancelled_batches.add(batch)
        for fd in _live:
            _send(fd, b"K")
        return len(_live)


@contextlib.contextmanager
def in_batch(batch: str) -> Iterator[None]:
    """The processes this thread starts inside the block belong to ``batch`` (see kill_running)."""
    token = _batch.set(batch)
    try:
        yield
    finally:
        _batch.reset(token)


def _refused() -> bool:
    """No new process: after Ctrl-C (kill_all), or in a batch kill_running ended (under _live_lock)."""
    return _interrupted.is_set() or (_batch.get() in _cancelled_batches)


def _send(fd: int, command: bytes) -> None:
    try:
        os.write(fd, command)
    except OSError:      # the guard is gone already
        pass


class _GuardServer:
    """This process's guard server; a forked process (a Dask worker) starts its own."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(GUARD), str(theirs.fileno()), str(MAX_IDLE_GUARDS)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        self.socket = ours
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        atexit.register(self.stop)

    def stop(self) -> None:
        """Close the socket and reap the server (it exits at EOF), so its CPU is accounted."""
        if self.owner != os.getpid():
            return
        self.socket.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def request(self, payload: bytes, fds: list[int]) -> None:
        message = struct.pack("!Q", len(payload)) + payload
        with self.lock:   # one request at a time on the stream: header (with the fds), then body
            sent = socket.send_fds(self.socket, [message], fds)
            if sent < len(message):
                self.socket.sendall(message[sent:])


_server: _GuardServer | None = None
_server_lock = threading.Lock()


def _guard_server() -> _GuardServer:
    global _server
    with _server_lock:
        if _server is None or not _server.usable():
            _server = _GuardServer()
        return _server


def guard_server_pid() -> int | None:
    """The pid of this process's guard server, if started (benchmarks read its CPU time)."""
    return _server.process.pid if _server is not None and _server.usable() else None


def guard_cpu_seconds() -> float:
    """CPU seconds of the guard server, its live (warm) guards and every process either reaped:
    utime + stime + cutime + cstime of each (0 before the server starts). The server's own
    figures miss the guards still running and the children they reaped, hence the sum."""
    server = guard_server_pid()
    if server is None:
        return 0.0
    total = 0
    try:
        with open(f"/proc/{server}/task/{server}/children", "rb") as handle:
            guards = handle.read().split()
    except OSError:
        guards = []
    # the server last: a guard reaped meanwhile is counted twice rather than missed
    for pid in [*guards, str(server).encode()]:
        try:
            with open(b"/proc/%s/stat" % pid, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int | None      # None when killed for the timeout
    timed_out: bool
    duration_s: float
    stdout: str = ""            # captured output (run_capture only)
    stderr: str = ""


@dataclass
class Guarded:
    """A started child: the control pipe that ends its tree and the pipe its status comes on."""

    control: int
    status: int
    argv0: str
    started: float
    returncode: int | None = None

    def wait(self, timeout_s: float | None) -> int | None:
        """The child's exit code (-N for signal N), or None at the timeout; raises OSError
        when the program could not start."""
        if self.returncode is not None:
            return self.returncode
        poller = select.poll()
        poller.register(self.status, select.POLLIN | select.POLLHUP)
        if not poller.poll(-1 if timeout_s is None else max(0, int(timeout_s * 1000))):
            return None
        text = b""
        while chunk := os.read(self.status, 256):
            text += chunk
        word, _, value = text.decode().partition(" ")
        if word == "exec-error":
            errno = int(value.split()[0])
            self.returncode = -1
            raise OSError(errno, os.strerror(errno), self.argv0)
        # no status at all: the guard itself was killed, and its tree with it
        self.returncode = os.waitstatus_to_exitcode(int(value)) if word == "exit" else -9
        return self.returncode

    def terminate(self) -> None:
        """SIGTERM the tree, SIGKILL it after the grace period (done by the guard)."""
        self._command(b"T")

    def kill(self) -> None:
        self._command(b"K")

    def _command(self, command: bytes) -> None:
        with _live_lock:
            if self.control in _live:
                _send(self.control, command)

    def close(self) -> None:
        with _live_lock:
            if self.control not in _live:
                return
            _live.discard(self.control)
            os.close(self.control)   # a guard still running reads EOF and kills its tree
        os.close(self.status)


_programs: dict[tuple[str, str], str] = {}     # (name, PATH) -> absolute path, this process's
_programs_lock = threading.Lock()


def _program(name: str, env: Mapping[str, str]) -> str | None:
    """The absolute path ``name`` runs as under ``env``'s PATH, searched once per process: a
    child started by name would otherwise fail an exec in every PATH directory before its own
    (~10 a rollout). None (the guard searches, as before) for a path, a relative PATH entry
    (it depends on the child's cwd), no PATH, or a name not found."""
    search = env.get("PATH")
    if "/" in name or not search or not all(os.path.isabs(entry) for entry in search.split(":")):
        return None
    key = (name, search)
    with _programs_lock:
        found = _programs.get(key)
    # one access() a start keeps a program removed mid-run from being exec'd by a stale path
    if found is not None and os.access(found, os.X_OK):
        return found
    found = shutil.which(name, path=search)
    if found is None:
        return None
    with _programs_lock:
        _programs[key] = found
    return found


def start(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin: int | None = None,
          stdout: int | None = None, stderr: int | None = None, grace_s: float = KILL_GRACE_S) -> Guarded:
    """Start ``argv`` under a guard (see the module docstring). ``stdin``/``stdout``/``stderr``
    are file descriptors (None: /dev/null); raises OSError if it cannot run."""
    if _refused():
        raise InterruptedError("interrupted: no new child process starts after Ctrl-C")
    argv = [str(a) for a in argv]
    if not argv:
        raise OSError(2, "empty command")
    server = _guard_server()
    request: dict[str, object] = {"argv": argv, "cwd": str(cwd), "env": dict(env), "grace": grace_s}
    program = _program(argv[0], env)
    if program is not None:
        request["program"] = program
    payload = json.dumps(request).encode()
    control_read, control = os.pipe()        # both close-on-exec: no other child inherits them
    status, status_write = os.pipe()
    try:
        null = server.devnull
        server.request(payload, [null if stdin is None else stdin, null if stdout is None else stdout,
                                 null if stderr is None else stderr, control_read, status_write])
    except BaseException:
        os.close(control)
        os.close(status)
        raise
    finally:
        os.close(control_read)
        os.close(status_write)
    with _live_lock:
        _live.add(control)
        if _refused():       # a kill came between the check above and now: this one ends too
            _send(control, b"K")
    child = Guarded(control, status, argv[0], time.monotonic())
    try:
        child.wait(0)          # a program that cannot start says so at once, most of the time
    except OSError:
        child.close()
        raise
    return child


def _feed(fd: int, data: bytes) -> None:
    """Write ``data`` to a pipe and close it; off the caller's thread when it may not fit."""
    def write() -> None:
        try:
            os.write(fd, data) if len(data) <= 65536 else _write_all(fd, data)
        except OSError:          # the child closed its stdin (BrokenPipe) or is gone
            pass
        finally:
            os.close(fd)
    if len(data) <= 65536:       # fits in an empty pipe's buffer: never blocks
        write()
    else:
        threading.Thread(target=write, daemon=True).start()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _stdin_pipe(stdin_text: str | None) -> tuple[int | None, int | None]:
    if stdin_text is None:
        return None, None
    return os.pipe()


def _wait_or_kill(child: Guarded, timeout_s: float) -> int | None:
    """Wait for the child; at the timeout end its tree (SIGTERM, SIGKILL after the grace): None."""
    returncode = child.wait(timeout_s)
    if returncode is None:
        child.terminate()
        if child.wait(KILL_GRACE_S + 2) is None:
            child.kill()
            child.wait(5)
    return returncode


def run_process(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
                stdout_path: Path, stderr_path: Path, stdin_text: str | None = None) -> ProcessOutcome:
    """Run ``argv``; stdout/stderr stream to files; the tree is killed at ``timeout_s``."""
    stdin_read, stdin_write = _stdin_pipe(stdin_text)
    try:
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            child = start(argv, cwd=cwd, env=env, stdin=stdin_read, stdout=out.fileno(), stderr=err.fileno())
    except BaseException:
        if stdin_write is not None:
            os.close(stdin_write)
        raise
    finally:
        if stdin_read is not None:
            os.close(stdin_read)
    try:
        if stdin_write is not None and stdin_text is not None:    # one is set exactly when the other is
            _feed(stdin_write, stdin_text.encode())
        returncode = _wait_or_kill(child, timeout_s)
    finally:
        child.close()
    return ProcessOutcome(returncode, returncode is None, time.monotonic() - child.started)


def run_capture(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
                merge_stderr: bool = False, stdin_text: str | None = None) -> ProcessOutcome:
    """Run ``argv`` and capture its output as text (stderr into stdout with ``merge_stderr``)."""
    stdin_read, stdin_write = _stdin_pipe(stdin_text)
    out_read, out_write = os.pipe()
    err_read, err_write = (None, None) if merge_stderr else os.pipe()
    try:
        child = start(argv, cwd=cwd, env=env, stdin=stdin_read, stdout=out_write,
                      stderr=out_write if merge_stderr else err_write)
    except BaseException:
        for fd in (stdin_write, out_read, err_read):
            if fd is not None:
                os.close(fd)
        raise
    finally:
        for fd in (stdin_read, out_write, err_write):
            if fd is not None:
                os.close(fd)
    chunks: dict[int, list[bytes]] = {out_read: []}
    if err_read is not None:
        chunks[err_read] = []
    timed_out = False
    try:
        if stdin_write is not None and stdin_text is not None:    # one is set exactly when the other is
            _feed(stdin_write, stdin_text.encode())
        poller = select.poll()
        for fd in chunks:
            poller.register(fd, select.POLLIN | select.POLLHUP)
        open_fds = set(chunks)
        deadline = time.monotonic() + timeout_s
        while open_fds:
            left = deadline - time.monotonic()
            events = poller.poll(max(0, int(left * 1000))) if left > 0 else []
            if not events and time.monotonic() >= deadline:
                if timed_out:       # the tree outlived SIGTERM, the grace and SIGKILL: stop reading
                    child.kill()
                    break
                timed_out = True
                child.terminate()
                deadline = time.monotonic() + KILL_GRACE_S + 2
                continue
            for fd, _ in events:
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:
                    poller.unregister(fd)
                    open_fds.discard(fd)
        returncode = child.wait(None if not timed_out else 5)
    finally:
        for fd in chunks:
            os.close(fd)
        child.close()
    out = b"".join(chunks[out_read]).decode("utf-8", errors="replace")
    err = b"".join(chunks[err_read]).decode("utf-8", errors="replace") if err_read is not None else ""
    return ProcessOutcome(None if timed_out else returncode, timed_out,
                          time.monotonic() - child.started, out, err)
