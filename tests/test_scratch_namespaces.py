"""Scratch shared across PID namespaces (issue 15.4): processes that share one TMPDIR but not
their pids (a container mounting the host's /tmp, a Dask worker under `bwrap --unshare-pid`)
never remove each other's live scratch; each removes its own namespace's dead processes', and
another namespace's only when nothing in it has changed for a day."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from git_hermit.supervise import scratch

DAY = 24 * 3600
DEAD_PID = "4194305"        # above the kernel's largest pid: no such process, ever

# A git-hermit process's scratch in use (a rollout directory in it), then on request (a line on
# stdin) this process's own clean-up; it prints its directory and, after cleaning, "cleaned".
HOLDER = """
import sys
from git_hermit.supervise import scratch
path = scratch.process_dir()
(path / "rollout-x" / "home").mkdir(parents=True)
(path / "rollout-x" / "home" / "login.json").write_text("a live run's")
print(path, flush=True)
sys.stdin.readline()
scratch.clean_stale()
print("cleaned", flush=True)
sys.stdin.readline()
"""


def _bwrap_pid_namespace_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc", "true"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch):
    """This process's TMPDIR is ``tmp_path`` (as the other namespace's will be)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return tmp_path


def _own_namespace() -> str:
    return str(os.stat("/proc/self/ns/pid").st_ino)


def _backdate(path: Path, seconds: float) -> None:
    """Make ``path`` and its immediate entries look untouched for ``seconds``."""
    then = time.time() - seconds
    for entry in [*path.iterdir(), path]:
        os.utime(entry, (then, then), follow_symlinks=False)


@pytest.mark.parametrize("proc", ["its own /proc", "the host's /proc"])
def test_processes_in_different_pid_namespaces_keep_each_others_live_scratch(tmpdir_env, proc):
    """A git-hermit process in another PID namespace (bubblewrap `--unshare-pid`, like a
    container sharing the host's /tmp) holds a rollout's scratch. This process's clean-up keeps
    it, and that process's clean-up keeps this one's. Before, each took the other's pid for a
    dead process's and removed its workspaces and login copies mid-rollout."""
    if not _bwrap_pid_namespace_works():
        pytest.skip("bubblewrap (bwrap) is not installed or cannot unshare the PID namespace here")
    mine = scratch.process_dir()
    (mine / "rollout-mine").mkdir()
    view = ["--proc", "/proc"] if proc == "its own /proc" else []
    holder = subprocess.Popen(["bwrap", "--unshare-pid", "--dev-bind", "/", "/", *view, "--die-with-parent",
                               "--", sys.executable, "-c", HOLDER],
                              env={**os.environ, "TMPDIR": str(tmpdir_env)}, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        theirs = Path(holder.stdout.readline().strip())
        assert theirs.is_dir(), theirs
        scratch.clean_stale()                   # here: theirs belongs to a live process
        assert (theirs / "rollout-x" / "home" / "login.json").read_text() == "a live run's"
        holder.stdin.write("clean\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "cleaned"
        assert (mine / "rollout-mine").is_dir()     # there: so does mine
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_process_of_this_namespace_has_its_scratch_removed(tmpdir_env):
    live = scratch.process_dir()
    dead = live.parent / f"{DEAD_PID}-1"
    (dead / "rollout-x").mkdir(parents=True)
    assert dead in scratch.clean_stale()
    assert not dead.exists() and live.is_dir()


def test_another_namespaces_scratch_is_kept_while_anything_in_it_changed_within_a_day(tmpdir_env):
    """A namespace this process cannot see into: its pids say nothing here, only time does."""
    root = scratch.scratch_root()
    other = root / "pid-ns-1" / f"{DEAD_PID}-1"
    (other / "rollout-x").mkdir(parents=True)
    (other / "adapter-y").mkdir()
    _backdate(other, 2 * DAY)
    os.utime(other / "rollout-x")               # a rollout made or removed something in it just now
    assert scratch.clean_stale() == []
    assert other.is_dir()


def test_another_namespaces_scratch_untouched_for_a_day_is_removed(tmpdir_env):
    """A crashed container's scratch does not stay forever; its empty namespace directory goes
    too once old, this process's own never."""
    root = scratch.scratch_root()
    live = scratch.process_dir()
    other = root / "pid-ns-1" / f"{DEAD_PID}-1"
    (other / "rollout-x" / "home").mkdir(parents=True)
    _backdate(other, 2 * DAY)
    assert other in scratch.clean_stale()
    assert not other.exists()
    _backdate(root / "pid-ns-1", 2 * DAY)
    scratch.clean_stale()
    assert not (root / "pid-ns-1").exists()
    assert live.is_dir() and live.parent.is_dir()


def test_scratch_in_the_old_format_keeps_the_old_rule(tmpdir_env):
    """``<pid>-<start>`` directly under the root (an older git-hermit's): removed when that pid
    is gone or now another process's, kept while it is this very process."""
    root = scratch.scratch_root()
    stat = Path("/proc/self/stat").read_bytes()
    start = stat[stat.rfind(b")") + 2:].split()[19].decode()
    live = root / f"{os.getpid()}-{start}"
    reused = root / f"{os.getpid()}-{int(start) + 1}"
    dead = root / f"{DEAD_PID}-1"
    for path in (live, reused, dead):
        (path / "rollout-x").mkdir(parents=True)
    removed = scratch.clean_stale()
    assert sorted(removed) == sorted([reused, dead])
    assert live.is_dir()


def test_a_directory_this_process_lost_is_made_again_at_its_next_use(tmpdir_env, monkeypatch):
    """Another namespace removes an idle process's scratch after a day untouched; at its next
    use the process makes it again (and a busy one touches it, so it never looks idle)."""
    path = scratch.process_dir()
    assert path.parent.name == f"pid-ns-{_own_namespace()}"
    _backdate(path, 2 * DAY)
    monkeypatch.setattr(scratch, "_touched", time.monotonic() - 2 * scratch.TOUCH_EVERY)
    assert scratch.process_dir() == path
    assert path.stat().st_mtime > time.time() - 60       # touched: it looks alive to others
    shutil.rmtree(path)
    monkeypatch.setattr(scratch, "_touched", time.monotonic() - 2 * scratch.TOUCH_EVERY)
    assert scratch.process_dir().is_dir()
