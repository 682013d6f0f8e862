"""Locks and git's own failures (issue 10, item 11), through `git hermit step` on real repositories:
the run lock survives pid reuse and zombies, a leftover git ref ``.lock`` file is one clear
error before the step spends anything, and ``git gc --prune=now`` while the step publishes
cannot prune the step's unpublished objects."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, calls, change, env_for, make_run, memory_lines, plan, refs

ANSWERS = {"t1": "4", "t2": "7"}
STEP1 = f"refs/heads/hermit/{RUN}/step-0001"
GIT_LOCK_EXIT = 13

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")


def _run(repo: Path) -> Path:
    control = make_run(repo, ANSWERS, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines(ANSWERS)},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1", "t2"])])
    return control


def _start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: the process's start time in clock ticks since boot."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2:].split()[19])


def _write_run_lock(repo: Path, pid: int, start_ticks: int) -> Path:
    path = repo / ".git" / "hermit" / f"{RUN}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "pid_start": start_ticks, "host": socket.gethostname(),
                                "started": "2026-01-01T00:00:00+00:00", "command": "git hermit step",
                                "token": "old"}))
    return path


# --- the run lock ------------------------------------------------------------------------------
@needs_proc
def test_run_lock_whose_pid_now_belongs_to_another_process_is_stale(repo):
    control = _run(repo)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # the lock's holder had this pid, but started at another time: the pid was reused
        path = _write_run_lock(repo, other.pid, _start_ticks(other.pid) + 4242)
        r = hermit(repo, "step", env=env_for(control))
        assert r.code == 0, r.out + r.err
        assert git(repo, "rev-parse", "--verify", "-q", STEP1).strip()
        assert not path.exists()
    finally:
        other.kill()
        other.wait()


@needs_proc
def test_run_lock_of_a_zombie_holder_is_stale(repo):
    control = _run(repo)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])   # exits; not reaped until the end
    try:
        start = _start_ticks(zombie.pid)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.02)
        _write_run_lock(repo, zombie.pid, start)
        r = hermit(repo, "step", env=env_for(control))
        assert r.code == 0, r.out + r.err
        assert git(repo, "rev-parse", "--verify", "-q", STEP1).strip()
    finally:
        zombie.wait()


@needs_proc
def test_run_lock_of_a_live_holder_is_still_refused(repo):
    control = _run(repo)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = _write_run_lock(repo, holder.pid, _start_ticks(holder.pid))
        before = path.read_text()
        r = hermit(repo, "step", env=env_for(control))
        assert r.code == 6, r.out + r.err
        assert path.read_text() == before and calls(control, "agent") == []
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_records_its_holders_start_time(repo):
    """A step in progress (held in the Evolve Agent) writes its own start time into the lock."""
    control = _run(repo)
    (control / "hold-evolve").write_text("")
    from support.step_support import kill_group, start_step, wait_for
    proc = start_step(repo, control)
    try:
        wait_for(lambda: (control / "held-evolve").exists(), "the evolve session", proc)
        record = json.loads((repo / ".git" / "hermit" / f"{RUN}.lock").read_text())
        assert record["pid"] == proc.pid
        if Path("/proc/self/stat").is_file():
            assert record["pid_start"] == _start_ticks(proc.pid)
    finally:
        kill_group(proc)


# --- leftover git lock files ---------------------------------------------------------------------
@pytest.mark.parametrize("lock", [f"refs/heads/hermit/{RUN}/step-0001.lock", "packed-refs.lock",
                                  "refs/notes/hermit/scores.lock", f"refs/tags/hermit/{RUN}/best.lock"])
def test_leftover_git_lock_file_is_one_error_before_the_step_spends_anything(repo, lock):
    control = _run(repo)
    path = repo / ".git" / lock
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    before = refs(repo)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == GIT_LOCK_EXIT, (r.code, r.out, r.err)
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0], r.err
    assert any(line.startswith("hint:") and str(path) in line for line in r.err.splitlines()), r.err
    assert "Traceback" not in r.err
    assert calls(control, "agent") == [] and calls(control, "debugger") == [] and calls(control, "evolve") == []
    assert refs(repo) == before
    path.unlink()
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err


def test_a_git_lock_file_a_running_git_holds_briefly_is_waited_for_not_refused(repo):
    """A concurrent `git gc` holds packed-refs.lock for a moment: the step waits for it (as git's
    own core.packedRefsTimeout does) instead of refusing a lock that is about to go away."""
    import threading
    control = _run(repo)
    path = repo / ".git" / "packed-refs.lock"
    path.write_text("")
    releaser = threading.Timer(1.0, path.unlink)
    releaser.start()
    try:
        r = hermit(repo, "step", env=env_for(control))
    finally:
        releaser.join()
    assert r.code == 0, r.out + r.err
    assert STEP1 in refs(repo)


# --- gc during the step ------------------------------------------------------------------------------
GC_HOOK = """#!/bin/sh
# While the step's publishing transaction is prepared (refs locked, not yet moved), run
# `git gc --prune=now` from a second process: whatever only the transaction would make
# reachable is unreachable at this moment.
[ "$1" = prepared ] || exit 0
input=$(cat)
case "$input" in *refs/heads/hermit/{run}/step-*) ;; *) exit 0 ;; esac
unset GIT_DIR GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_QUARANTINE_PATH
cd "{repo}"
git -c gc.packRefs=false -c gc.reflogExpire=never -c gc.reflogExpireUnreachable=never \\
    gc --quiet --prune=now >"{control}/gc.out" 2>&1
echo $? > "{control}/gc.rc"
exit 0
"""


def test_gc_prune_now_during_the_step_cannot_prune_its_objects(repo):
    control = _run(repo)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(GC_HOOK.format(run=RUN, repo=repo, control=control))
    hook.chmod(0o755)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    # gc ran, or found the step holding gc off (gc.pid) while it published: either way nothing is pruned
    said = (control / "gc.out").read_text()
    assert (control / "gc.rc").read_text().strip() == "0" or "gc is already running" in said, said
    hook.unlink()
    fsck = subprocess.run(["git", "fsck", "--full", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    tip = git(repo, "rev-parse", STEP1).strip()
    assert "remember answers" in git(repo, "log", "-1", "--format=%B", tip)
    assert json.loads(git(repo, "notes", "--ref=hermit/manifest", "show", tip))["changes"][0]["id"] == "chg-1"
    assert json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip))["step"] == 1
    assert not git(repo, "for-each-ref", "refs/hermit-tmp/")        # the keep-alive refs went with it
    r = hermit(repo, "log")
    assert r.code == 0, r.err
