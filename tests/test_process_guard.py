"""The guard server: every child's guard comes from one server per git-hermit process, which keeps
its guards warm (no Python start nor fork per child); a child gets the default SIGPIPE, as
subprocess gives, and nothing of the child the same guard served before it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from git_hermit.supervise import process
from git_hermit.supervise.process import run_capture, start

# prints: the guard's pid, the guard's parent (the server), and the SIGPIPE disposition
PROBE = ["sh", "-c", "awk '{print $4}' /proc/$PPID/stat; echo $PPID; grep SigIgn /proc/self/status"]


def _probe(tmp_path: Path) -> tuple[str, str, int]:
    out = run_capture(PROBE, cwd=tmp_path, env=os.environ, timeout_s=10)
    assert out.returncode == 0, out.stderr
    server, guard, ignored = out.stdout.split("\n")[:3]
    return server, guard, int(ignored.split()[1], 16)


def test_children_share_one_guard_server_and_get_default_sigpipe(tmp_path):
    first_server, first_guard, ignored = _probe(tmp_path)
    second_server, second_guard, _ = _probe(tmp_path)
    assert first_server == second_server                  # forked by one long-lived server
    assert int(first_server) != os.getpid()               # which is not git-hermit itself
    assert not ignored & (1 << (13 - 1)), "SIGPIPE is ignored in the child"


def test_children_started_one_after_another_reuse_a_warm_guard(tmp_path):
    # no fork of the Python guard per child: a guard serves one child, then waits for the next
    probes = [_probe(tmp_path) for _ in range(8)]
    assert len({server for server, _, _ in probes}) == 1
    assert len({guard for _, guard, _ in probes}) <= 2, "a guard was forked for each child"


# the child's parent (its guard), cwd, environment names, open fds, and whether a pid still lives
REPORT = ("import json, os, sys; print(json.dumps({'guard': os.getppid(), 'cwd': os.getcwd(),"
          " 'env': sorted(os.environ), 'fds': sorted(os.listdir('/proc/self/fd')),"
          " 'alive': os.path.exists('/proc/' + sys.argv[1])}))")


def test_a_warm_guards_next_child_inherits_nothing_of_the_last_one(tmp_path):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    path = os.environ.get("PATH", "/usr/bin:/bin")
    # the first child leaves a daemon behind (in a new session) and exits
    first = run_capture(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $! > daemon.pid; echo $PPID"],
                        cwd=first_dir, env={"PATH": path, "FIRST_ONLY": "1"}, timeout_s=10)
    assert first.returncode == 0, first.stderr
    daemon = (first_dir / "daemon.pid").read_text().strip()
    assert not Path(f"/proc/{daemon}").exists(), "the first child's daemon outlived it"
    command = [sys.executable, "-I", "-S", "-c", REPORT, daemon]
    second = run_capture(command, cwd=second_dir, env={"PATH": path, "SECOND_ONLY": "1"}, timeout_s=10)
    assert second.returncode == 0, second.stderr
    seen = json.loads(second.stdout)
    assert seen["guard"] == int(first.stdout), "the second child did not run under the warm guard"
    assert seen["cwd"] == str(second_dir)
    assert "FIRST_ONLY" not in seen["env"] and "SECOND_ONLY" in seen["env"]
    assert not seen["alive"]
    bare = subprocess.run(command, cwd=second_dir, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    # only stdin, stdout, stderr (and the fd listing /proc/self/fd): no pipe of the guard's
    assert seen["fds"] == json.loads(bare.stdout)["fds"]


def test_a_guard_killed_mid_request_ends_the_request_and_its_child(tmp_path):
    out = tmp_path / "out"
    with open(out, "wb") as handle:
        child = start(["sh", "-c", "echo $PPID; exec sleep 300"], cwd=tmp_path, env=os.environ,
                      stdout=handle.fileno())
    try:
        deadline = time.monotonic() + 10
        while not out.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.01)
        guard = int(out.read_text())
        sleeper = _children(guard)
        os.kill(guard, signal.SIGKILL)
        assert child.wait(5) == -9                  # git-hermit does not wait on a dead guard
        deadline = time.monotonic() + 2
        while any(Path(f"/proc/{pid}").exists() for pid in sleeper) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(Path(f"/proc/{pid}").exists() for pid in sleeper), "the child outlived its guard"
    finally:
        child.close()
    again = run_capture(["echo", "next"], cwd=tmp_path, env=os.environ, timeout_s=10)   # the pool recovers
    assert again.returncode == 0 and again.stdout == "next\n"


def test_a_program_that_cannot_start_leaves_its_warm_guard_serving(tmp_path):
    guard = run_capture(["sh", "-c", "echo $PPID"], cwd=tmp_path, env=os.environ, timeout_s=10).stdout
    for argv, cwd in ((["/nonexistent/program"], tmp_path), (["true"], tmp_path / "missing")):
        try:
            run_capture(argv, cwd=cwd, env=os.environ, timeout_s=10)
        except OSError as exc:
            assert exc.errno == 2
        else:
            raise AssertionError(f"{argv} in {cwd} started")
    again = run_capture(["sh", "-c", "echo $PPID; pwd"], cwd=tmp_path, env=os.environ, timeout_s=10)
    assert again.stdout == f"{guard}{tmp_path}\n"


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(p) for p in handle.read().split()]


def test_guards_are_pooled_within_a_bound_and_end_with_git_hermit(tmp_path):
    # many children at once: a guard each; afterwards at most MAX_IDLE_GUARDS stay warm, and
    # killing git-hermit (SIGKILL) ends the server and every guard
    script = tmp_path / "many.py"
    script.write_text(
        "import os, sys, threading\n"
        "from pathlib import Path\n"
        "from git_hermit.supervise import process\n"
        "def one():\n"
        "    process.run_capture(['sleep', '0.3'], cwd=Path('.'), env=os.environ, timeout_s=30)\n"
        "threads = [threading.Thread(target=one) for _ in range(int(sys.argv[1]))]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print(process.guard_server_pid(), flush=True)\n"
        "sys.stdin.read()\n")
    many = process.MAX_IDLE_GUARDS + 4
    proc = subprocess.Popen([sys.executable, str(script), str(many)], cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        server = int(proc.stdout.readline())
        deadline = time.monotonic() + 5
        while len(_children(server)) > process.MAX_IDLE_GUARDS and time.monotonic() < deadline:
            time.sleep(0.02)
        guards = _children(server)
        assert 1 <= len(guards) <= process.MAX_IDLE_GUARDS
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    deadline = time.monotonic() + 2
    alive = lambda: [pid for pid in [server, *guards] if _live(pid)]   # noqa: E731
    while alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(), "the guard server or a guard outlived git-hermit"


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tool(directory: Path, says: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tool = directory / "hermit-probe-tool"
    tool.write_text(f"#!/bin/sh\necho {says}\n")
    tool.chmod(0o755)


def test_a_command_given_by_name_is_searched_on_path_once_then_run_by_its_absolute_path(tmp_path):
    early, late = tmp_path / "early", tmp_path / "late"
    early.mkdir()
    _tool(late, "late")
    env = {**os.environ, "PATH": f"{early}:{late}:{os.environ.get('PATH', '')}"}
    first = run_capture(["hermit-probe-tool"], cwd=tmp_path, env=env, timeout_s=10)
    assert first.stdout.strip() == "late"
    # a tool of that name appearing earlier on PATH mid-run is not searched for again: the
    # run keeps the program it resolved (one PATH search per run, not ~10 failed execs a child)
    _tool(early, "early")
    second = run_capture(["hermit-probe-tool"], cwd=tmp_path, env=env, timeout_s=10)
    assert second.stdout.strip() == "late"
    # a different PATH is a different search
    other = run_capture(["hermit-probe-tool"], cwd=tmp_path, env={**env, "PATH": f"{early}:{late}"}, timeout_s=10)
    assert other.stdout.strip() == "early"


def test_a_resolved_program_that_disappears_is_searched_for_again(tmp_path):
    early, late = tmp_path / "early", tmp_path / "late"
    _tool(early, "early")
    _tool(late, "late")
    env = {**os.environ, "PATH": f"{early}:{late}"}
    assert run_capture(["hermit-probe-tool"], cwd=tmp_path, env=env, timeout_s=10).stdout.strip() == "early"
    (early / "hermit-probe-tool").unlink()
    again = run_capture(["hermit-probe-tool"], cwd=tmp_path, env=env, timeout_s=10)
    assert again.returncode == 0 and again.stdout.strip() == "late"


def test_a_batch_ended_by_ctrl_c_starts_no_process_while_other_batches_still_do(tmp_path):
    """A Dask worker outlives the driver's Ctrl-C: kill_running(batch) ends what runs and refuses
    a process to that batch's rollouts still preparing (which would start their agents after the
    kill), while the worker's next run (another batch) and work outside any batch still start."""
    import uuid

    import pytest

    from git_hermit.supervise.process import in_batch, kill_running
    ended, next_run = uuid.uuid4().hex, uuid.uuid4().hex
    with in_batch(ended):
        assert run_capture(["true"], cwd=tmp_path, env=os.environ, timeout_s=10).returncode == 0
    kill_running(ended)
    with in_batch(ended), pytest.raises(InterruptedError):
        run_capture(["touch", str(tmp_path / "late")], cwd=tmp_path, env=os.environ, timeout_s=10)
    assert not (tmp_path / "late").exists()
    with in_batch(next_run):
        assert run_capture(["true"], cwd=tmp_path, env=os.environ, timeout_s=10).returncode == 0
    assert run_capture(["true"], cwd=tmp_path, env=os.environ, timeout_s=10).returncode == 0
