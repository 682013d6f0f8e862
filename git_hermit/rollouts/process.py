"""Run one child process in its own process group with a wall-clock limit.

On timeout the whole group gets SIGTERM, then SIGKILL after a grace period, so an agent's
shell children die with it. Output goes to files (an agent's stream can be large).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

KILL_GRACE_S = 2.0


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int | None      # None when killed for the timeout
    timed_out: bool
    duration_s: float


def kill_group(pgid: int, grace_s: float = KILL_GRACE_S, process: subprocess.Popen | None = None) -> None:
    """SIGTERM the group, wait up to ``grace_s`` for the leader, then SIGKILL the group."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM and process is not None:
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
    # children that ignored SIGTERM are gone after SIGKILL; nothing else to wait for


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


def run_process(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
                stdout_path: Path, stderr_path: Path, stdin_text: str | None = None) -> ProcessOutcome:
    """Run ``argv``; stdout/stderr stream to files; the group is killed at ``timeout_s``."""
    start = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        process = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=out, stderr=err,
                                   stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                                   start_new_session=True)
        if stdin_text is not None:
            try:
                process.stdin.write(stdin_text.encode())
                process.stdin.close()
            except BrokenPipeError:
                pass
        returncode = wait_exit(process, timeout_s)
        if returncode is not None:
            # the leader exited; its background children must not outlive the rollout
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return ProcessOutcome(returncode, False, time.monotonic() - start)
        kill_group(process.pid, process=process)
        try:
            process.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
        return ProcessOutcome(None, True, time.monotonic() - start)
