"""How git processes are started: the one subprocess wrapper and the persistent batch reader.

Every git process git-hermit starts goes through ``run_git`` (one-shot) or ``BatchReader``
(a long-lived ``git cat-file --batch``), so ``--debug`` timing and error mapping live here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import IO
from pathlib import Path

from ..errors import DamagedRecord, GitStateError

# Paths in git output stay raw UTF-8 instead of C-quoted; every command gets these.
GLOBAL_OPTIONS = ("-c", "core.quotepath=off")

_debug = False
# The batch reader answers requests in chunks whose request text stays far below the
# smallest common pipe buffer, so writing a chunk can never block while git waits on us.
_BATCH_CHUNK_BYTES = 4096


def set_debug(enabled: bool) -> None:
    """When on, every git process prints ``git <args>  (12.3 ms)`` to stderr."""
    global _debug
    _debug = bool(enabled)


def debug_enabled() -> bool:
    return _debug


def _debug_line(args: Iterable[str], elapsed_s: float, what: str = "") -> None:
    print(f"git {' '.join(args)}  ({what}{elapsed_s * 1000:.1f} ms)", file=sys.stderr, flush=True)


def run_git(
    args: tuple[str, ...] | list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run one git process to completion and return it (bytes in, bytes out, never raises on exit code)."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            ["git", *GLOBAL_OPTIONS, *args],
            cwd=cwd,
            env=dict(env),
            input=input,
            capture_output=True,
        )
    except FileNotFoundError as exc:  # no git binary at all
        raise GitStateError("git is not installed or not on PATH", hint="install git 2.31 or newer") from exc
    if _debug:
        _debug_line(args, time.perf_counter() - started)
    return proc


def start_git(args: list[str], *, cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """A long-lived git process with stdin, stdout and stderr as pipes (the caller talks to it and
    closes stdin when done), e.g. ``mktree --batch``."""
    try:
        return subprocess.Popen(["git", *GLOBAL_OPTIONS, *args], cwd=cwd, env=dict(env), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as exc:
        raise GitStateError("git is not installed or not on PATH", hint="install git 2.31 or newer") from exc


def first_error_line(stderr: bytes) -> str:
    """git's most telling stderr line (its fatal/error line if any), decoded."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[0] if lines else "(no message)"


class _ReaderDied(EOFError):
    """git cat-file --batch exited while answering for ``name``."""

    def __init__(self, name: str) -> None:
        super().__init__(f"git cat-file --batch exited at {name}")
        self.name = name


class BatchReader:
    """A persistent ``git cat-file --batch`` shared by all reads of one Repo (thread-safe).

    Started lazily; restarted after a fork (the child must not share the parent's pipes) or if
    git died. ``read_many`` pipelines requests in small chunks so thousands of objects cost
    one process and a few dozen pipe round trips.
    """

    def __init__(self, cwd: Path, env: Mapping[str, str]):
        self._cwd = cwd
        self._env = dict(env)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner_pid = 0

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._owner_pid == os.getpid() and self._proc.poll() is None:
            return self._proc
        if self._proc is not None and self._owner_pid == os.getpid():
            self._stop()
        started = time.perf_counter()
        try:
            self._proc = subprocess.Popen(
                ["git", *GLOBAL_OPTIONS, "cat-file", "--batch"],
                cwd=self._cwd,
                env=self._env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise GitStateError("git is not installed or not on PATH", hint="install git 2.31 or newer") from exc
        self._owner_pid = os.getpid()
        if _debug:
            _debug_line(["cat-file", "--batch"], time.perf_counter() - started, "persistent reader, started in ")
        return self._proc

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        """(sha, type, content) of one object name (any rev expression), or None if missing."""
        return self.read_many([name])[0]

    def read_many(self, names: list[str]) -> list[tuple[str, str, bytes] | None]:
        """Answers in request order; None where git says missing or ambiguous."""
        for name in names:
            if "\n" in name or not name:
                raise GitStateError(f"invalid object name {name!r}")
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._read_many_locked(names)
                except (BrokenPipeError, EOFError) as exc:
                    # git died (killed, repository replaced): one fresh process, one more try; twice
                    # at the same place, git cannot read that object (a truncated or corrupt file)
                    self._stop()
                    if attempt == 2:
                        where = f"{exc.name}: the object, or one its name leads through," if isinstance(
                            exc, _ReaderDied) else "an object:"
                        raise DamagedRecord(f"git cannot read {where} is damaged (git cat-file stopped there)",
                                            hint="`git fsck` names the damaged objects; restore them from another "
                                                 "clone (`git hermit fetch`) or remove what refers to them") from None
                except BaseException:
                    # Interrupted mid-answer (e.g. Ctrl-C): the pipe holds half an object, so the
                    # next request would read garbage. Drop this process; the next read starts anew.
                    self._stop()
                    raise
        raise AssertionError("unreachable")

    def _read_many_locked(self, names: list[str]) -> list[tuple[str, str, bytes] | None]:
        proc = self._ensure_started()
        assert proc.stdin is not None and proc.stdout is not None
        results: list[tuple[str, str, bytes] | None] = []
        index = 0
        while index < len(names):
            chunk: list[bytes] = []
            size = 0
            while index < len(names):
                request = names[index].encode() + b"\n"
                if chunk and size + len(request) > _BATCH_CHUNK_BYTES:
                    break
                chunk.append(request)
                size += len(request)
                index += 1
            proc.stdin.write(b"".join(chunk))
            proc.stdin.flush()
            for request in chunk:
                try:
                    results.append(self._read_answer(proc.stdout))
                except EOFError:
                    raise _ReaderDied(request[:-1].decode("utf-8", "replace")) from None
        return results

    @staticmethod
    def _read_answer(stdout: IO[bytes]) -> tuple[str, str, bytes] | None:
        header = stdout.readline()
        if not header:
            raise EOFError("git cat-file --batch exited")
        fields = header.rstrip(b"\n").split(b" ")
        if fields[-1] in (b"missing", b"ambiguous") or len(fields) != 3:
            return None
        sha, kind, size = fields[0].decode(), fields[1].decode(), int(fields[2])
        content = stdout.read(size)
        stdout.read(1)  # the newline git writes after each object
        if len(content) != size:
            raise EOFError("git cat-file --batch exited mid-object")
        return sha, kind, content

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self._owner_pid != os.getpid():
            return  # a forked child leaves the parent's process alone
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout:
                proc.stdout.close()

    def close(self) -> None:
        with self._lock:
            self._stop()
