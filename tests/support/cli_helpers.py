"""Run `git hermit` in a repository and capture its result.

``hermit`` calls ``git_hermit.cli.main`` in this process by default: the same entry point the
executable reaches (argument parsing, error mapping, exit codes, ``--debug``), without a Python
start-up and the imports per call. ``subprocess=True`` (or the launcher's fast paths) runs the
real executable, for tests where the process boundary is the point (signals, kill, locks held
by another process, installs). ``HERMIT_TEST_SUBPROCESS=1`` makes every call a subprocess, to
check that both ways give the same results.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import shutil
import signal
import subprocess as _subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

GIT_HERMIT = [sys.executable, "-m", "git_hermit"]
ALWAYS_SUBPROCESS = os.environ.get("HERMIT_TEST_SUBPROCESS", "") not in ("", "0")
COMPLETE_VAR = "_GIT_HERMIT_COMPLETE"     # the launcher answers these without cli.main


@dataclass
class Result:
    code: int
    out: str
    err: str

    # subprocess.CompletedProcess's names, so helpers written against subprocess.run swap over
    returncode = property(lambda self: self.code)
    stdout = property(lambda self: self.out)
    stderr = property(lambda self: self.err)


def hermit(cwd: Path, *args: str, env: dict | None = None, timeout: float = 120,
           subprocess: bool = False) -> Result:
    """``git hermit *args`` in ``cwd`` with ``env`` added to the environment."""
    env = env or {}
    if subprocess or ALWAYS_SUBPROCESS or COMPLETE_VAR in env or list(args) in (["--version"], ["-V"]):
        proc = _subprocess.run([*GIT_HERMIT, *args], cwd=cwd, capture_output=True, text=True,
                               env={**os.environ, **env}, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr)
    return run_cli(cwd, *args, env=env, timeout=timeout)


def run_cli(cwd: Path, *args: str, env: dict | None = None, timeout: float = 120) -> Result:
    """``cli.main(args)`` in this process, as if it were a fresh ``git hermit`` process: in
    ``cwd``, with ``env`` in ``os.environ`` (and its ``PYTHONPATH`` on ``sys.path``), stdin
    empty and stdout/stderr captured as pipes; everything it changed is put back afterwards."""
    from git_hermit.cli import main
    out, err = _Pipe(), _Pipe()
    code = 0
    with _process_state(Path(cwd), env or {}, out, err), _deadline(timeout):
        try:
            main(list(args))
        except SystemExit as exc:
            code = _exit_code(exc.code, err)
        except _TimedOut:
            raise _subprocess.TimeoutExpired(["git", "hermit", *args], timeout, out.text(), err.text()) from None
        except BaseException:     # what the interpreter does with an uncaught exception (e.g. --debug)
            traceback.print_exc(file=err)
            code = 1
    return Result(code, out.text(), err.text())


class _TimedOut(BaseException):
    """Raised in the main thread at the deadline; a BaseException, so the CLI's own handlers
    (``except Exception``) do not turn it into an ordinary exit."""


@contextlib.contextmanager
def _deadline(seconds: float):
    """subprocess.run's ``timeout`` for an in-process call: this test fails with TimeoutExpired."""
    def expire(signum, frame):
        raise _TimedOut()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Pipe(io.TextIOWrapper):
    """A captured stream that looks like a pipe: not a tty, UTF-8, read back as subprocess's
    ``text=True`` does (universal newlines)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)

    def text(self) -> str:
        self.flush()
        raw = self.buffer.getvalue().decode("utf-8", "replace")   # type: ignore[attr-defined]
        return raw.replace("\r\n", "\n").replace("\r", "\n")


def _exit_code(code, err: io.TextIOBase) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=err)      # sys.exit("message"): printed, exit status 1
    return 1


def _pipe_terminal_size(fallback=(80, 24)) -> os.terminal_size:
    """``shutil.get_terminal_size`` of a process whose stdout is a pipe: $COLUMNS/$LINES or 80×24."""
    columns = int(os.environ.get("COLUMNS", 0) or 0) or fallback[0]
    lines = int(os.environ.get("LINES", 0) or 0) or fallback[1]
    return os.terminal_size((columns, lines))


@contextlib.contextmanager
def _process_state(cwd: Path, env: dict, out: _Pipe, err: _Pipe):
    """Set up a process-like environment for one in-process call and restore everything after."""
    saved_environ = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_path = list(sys.path)
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_argv = sys.argv
    saved_sigint = signal.getsignal(signal.SIGINT)
    saved_terminal_size = shutil.get_terminal_size
    saved_gc = gc.isenabled()    # read commands turn the collector off for the rest of their process
    _reset_process_caches()      # the test itself may have used them (e.g. sandbox.probe())
    try:
        os.environ.update(env)
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [p for p in extra if p not in sys.path]
        os.chdir(cwd)
        sys.argv = [str(Path(sys.modules["git_hermit"].__file__).with_name("__main__.py"))]
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        shutil.get_terminal_size = _pipe_terminal_size
        yield
    finally:
        if saved_gc:
            gc.enable()
        shutil.get_terminal_size = saved_terminal_size
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        signal.signal(signal.SIGINT, saved_sigint)
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        os.environ.clear()
        os.environ.update(saved_environ)
        _reset_process_caches()


def _reset_process_caches() -> None:
    """Forget what a git-hermit process keeps for its lifetime (debug flag, the values registered
    for redaction, the bwrap probe, a Ctrl-C's refusal to start processes, the rollout worker's
    open repositories, materialised adapters and deploy plans), so the next call starts as a new
    process would. Kept: the guard server and the compiled-hook cache (keyed by content), which
    no result depends on. Imported, not looked up, so a module that moves fails here loudly."""
    from git_hermit import redact
    from git_hermit.gitio import set_debug
    from git_hermit.rollouts import deploy_cache, worker
    from git_hermit.supervise import process, sandbox
    set_debug(False)
    redact._registered.clear()
    redact._env_secrets.cache_clear()
    sandbox._probe = None
    process._interrupted.clear()
    with worker._repos_lock:
        repos = list(worker._repos.values())
        worker._repos.clear()
        adapters = list(worker._adapters.values())
        worker._adapters.clear()
        worker._adapter_locks.clear()
        worker._gates.clear()
        worker._host_pauses.clear()
    for repo in repos:
        repo.close()
    for path in adapters:
        shutil.rmtree(path, ignore_errors=True)
    deploy_cache.forget()


class Waiter:
    """A `git hermit … --wait` process whose stderr is read as it comes: ``until(text)`` blocks
    until a line holding ``text`` has been written (so a test releases a lock only once the
    process is really waiting for it, however slowly a loaded machine starts it)."""

    def __init__(self, args: list[str], cwd: Path, env: dict | None = None):
        import threading
        self.proc = _subprocess.Popen([*GIT_HERMIT, *args], cwd=cwd, text=True,
                                      env={**os.environ, **(env or {})},
                                      stdout=_subprocess.PIPE, stderr=_subprocess.PIPE)
        self._lines: list[str] = []
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._seen:
                self._lines.append(line)
                self._seen.notify_all()
        with self._seen:
            self._lines.append("")      # EOF: wake a waiter, which then sees the text never came
            self._seen.notify_all()

    def until(self, text: str, timeout: float = 120) -> None:
        with self._seen:
            found = self._seen.wait_for(lambda: any(text in line for line in self._lines)
                                        or (self._lines and self._lines[-1] == ""), timeout)
            assert found and any(text in line for line in self._lines), \
                f"{text!r} never came on stderr: {''.join(self._lines)!r}"

    def finish(self, timeout: float = 120) -> Result:
        out = self.proc.stdout.read() if self.proc.stdout else ""
        self.proc.wait(timeout)
        self._reader.join(timeout)
        return Result(self.proc.returncode, out, "".join(self._lines))
