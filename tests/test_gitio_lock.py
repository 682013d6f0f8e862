"""RunLock: atomic per-run lock in the git common dir, stale takeover, clear refusal when held."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from git_hermit.errors import InputError, LockHeld
from git_hermit.gitio import Repo, RunLock
from tests.conftest import git


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lock(path, pid, host=None, command="git hermit step"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                "started": "2026-01-01T00:00:00+00:00", "command": command, "token": "x"}))


def test_lock_is_exclusive_and_released(repo):
    with Repo.discover(repo) as r:
        with RunLock(r, "r1", "git hermit step") as lock:
            assert lock.path == r.common_dir / "hermit" / "r1.lock"
            record = json.loads(lock.path.read_text())
            assert record["pid"] == os.getpid() and record["command"] == "git hermit step"
            with pytest.raises(LockHeld) as info:
                RunLock(r, "r1").acquire()
            assert f"locked by pid {os.getpid()}" in info.value.message and str(lock.path) in info.value.hint
            with RunLock(r, "r2"):  # another run is independent
                pass
        assert not lock.path.exists()
        with RunLock(r, "r1") as again:
            assert not again.recovered_stale


def test_live_lock_is_refused(repo):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Repo.discover(repo) as r:
            path = r.common_dir / "hermit" / "run.lock"
            write_lock(path, holder.pid, command="git hermit step --run run")
            before = path.read_text()
            with pytest.raises(LockHeld) as info:
                with RunLock(r, "run"):
                    pass
            assert info.value.message == (f"run 'run' is locked by pid {holder.pid} "
                                          "(git hermit step --run run, since 2026-01-01T00:00:00+00:00)")
            assert info.value.hint.startswith("run the command again with --wait to wait for it, or stop that process")
            assert path.read_text() == before  # a refused lock is left alone
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_dead_process_is_recovered(repo):
    with Repo.discover(repo) as r:
        path = r.common_dir / "hermit" / "run.lock"
        write_lock(path, dead_pid())
        with RunLock(r, "run", "resume") as lock:
            assert lock.recovered_stale
            assert json.loads(path.read_text())["pid"] == os.getpid()
        assert not path.exists()


def test_lock_of_another_host_is_not_taken_over(repo):
    with Repo.discover(repo) as r:
        path = r.common_dir / "hermit" / "run.lock"
        write_lock(path, dead_pid(), host="some-other-host")
        with pytest.raises(LockHeld) as info:
            RunLock(r, "run").acquire()
        assert "on host some-other-host" in info.value.message


def test_empty_lock_file_is_stale_unless_its_writer_is_alive(repo):
    """A run lock without a live holder is stale, empty or not (a crash or a full disk between create
    and write leaves it empty); one being written right now is held by the flock its writer keeps."""
    import fcntl
    with Repo.discover(repo) as r:
        path = r.common_dir / "hermit" / "run.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")                       # fresh, and nobody holds it
        with RunLock(r, "run") as lock:
            assert lock.recovered_stale
        path.write_text("")
        writer = os.open(path, os.O_RDWR)
        fcntl.flock(writer, fcntl.LOCK_EX)        # its writer is alive, between create and write
        try:
            with pytest.raises(LockHeld):
                RunLock(r, "run").acquire()
        finally:
            os.close(writer)
        with RunLock(r, "run") as lock:
            assert lock.recovered_stale


def test_release_never_removes_someone_elses_lock(repo):
    with Repo.discover(repo) as r:
        lock = RunLock(r, "run").acquire()
        write_lock(lock.path, os.getpid() + 100000)  # replaced behind our back
        lock.release()
        assert lock.path.exists()


def test_lock_is_shared_by_linked_worktrees(repo_with_history, tmp_path):
    linked = tmp_path / "linked"
    git(repo_with_history, "worktree", "add", "-q", "-b", "w", str(linked))
    with Repo.discover(repo_with_history) as main, Repo.discover(linked) as other:
        with RunLock(main, "run"):
            with pytest.raises(LockHeld):
                RunLock(other, "run").acquire()


def test_bad_run_name(repo):
    with Repo.discover(repo) as r:
        for name in ("../x", "a/b", "", ".hidden"):
            with pytest.raises(InputError):
                RunLock(r, name)
