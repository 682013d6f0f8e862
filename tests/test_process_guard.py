"""The guard server: every child's guard is forked by one server per git-hermit process (no
Python start per child), and a child gets the default SIGPIPE, as subprocess gives."""

from __future__ import annotations

import os
from pathlib import Path

from git_hermit.rollouts.process import run_capture

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
    assert first_guard != second_guard                    # a guard per child tree
    assert first_server == second_server                  # forked by one long-lived server
    assert int(first_server) != os.getpid()               # which is not git-hermit itself
    assert not ignored & (1 << (13 - 1)), "SIGPIPE is ignored in the child"


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

    from git_hermit.rollouts.process import in_batch, kill_running
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
