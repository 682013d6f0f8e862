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
