"""Ctrl-C ends every agent at once (they run in their own sessions), publishes nothing, and
the same command resumes: finished rollouts are reused, the interrupted ones run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from support.cli_helpers import GIT_HERMIT, hermit
from conftest import git
from support.rollouts_e2e_helpers import make_project

SLOW_UNLESS_FLAG = """
log(f"start {os.getpid()}")
if task_id != "t0" and not os.path.exists(os.path.join(os.path.dirname(LOG), "fast")):
    time.sleep(60)
log("end")
print(task_id[1:])
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_kills_agents_and_the_rerun_resumes(repo):
    log = make_project(repo, SLOW_UNLESS_FLAG, n_tasks=3, k=1)
    refs_before = git(repo, "for-each-ref")
    proc = subprocess.Popen([*GIT_HERMIT, "rollout"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=os.environ.copy())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:   # t0 finished, t1 and t2 are sleeping
        lines = log.read_text().splitlines() if log.exists() else []
        if sum(" start " in line for line in lines) >= 3 and any(line.startswith("t0#1 end") for line in lines):
            break
        time.sleep(0.1)
    time.sleep(0.5)   # let the driver store t0's result
    interrupted_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - interrupted_at < 10          # did not wait for the 60 s agents
    pids = [int(line.split()[2]) for line in log.read_text().splitlines() if " start " in line]
    time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)             # every agent is gone
    assert "Traceback" not in err
    assert git(repo, "for-each-ref") == refs_before         # no scores note was published
    (log.parent / "fast").write_text("")
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["reused"] == 1                 # t0 was finished: reused, not re-run
    starts = [line.split()[0] for line in log.read_text().splitlines() if " start " in line]
    assert starts.count("t0#1") == 1 and starts.count("t1#1") == 2 and starts.count("t2#1") == 2


VERIFIER = """import os, subprocess, sys, time
pids = {pids!r}
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(os.path.join(pids, ".tmp-%d" % os.getpid()), "w") as handle:   # renamed whole: the test
    handle.write(str(child.pid))                                           # never reads it half-written
os.rename(handle.name, os.path.join(pids, str(os.getpid())))
time.sleep(60)
"""


def test_ctrl_c_kills_a_running_verifier_and_its_children(repo, tmp_path):
    # issue 14.2: verifiers go through the one process runner, so Ctrl-C ends them as it ends agents
    pids = tmp_path / "verifier-pids"
    pids.mkdir()
    verifier = tmp_path / "verifier.py"
    verifier.write_text(VERIFIER.format(pids=str(pids)))
    make_project(repo, 'print(task_id[1:])\n', n_tasks=2, k=1,
                 judge={"kind": "command", "command": [sys.executable, str(verifier)], "timeout_s": 120})
    proc = subprocess.Popen([*GIT_HERMIT, "rollout"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=os.environ.copy())
    deadline = time.monotonic() + 60
    done = lambda: [p for p in pids.iterdir() if not p.name.startswith(".")]
    while time.monotonic() < deadline and len(done()) < 2:   # both verifiers running
        time.sleep(0.1)
    running = [(int(p.name), int(p.read_text() or 0)) for p in done()]
    assert len(running) == 2 and all(child for _, child in running), running
    interrupted_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - interrupted_at < 10          # did not wait for the 60 s verifiers
    time.sleep(0.2)
    alive = [pid for pair in running for pid in pair if _alive(pid)]
    assert alive == [], f"still running after Ctrl-C: {alive}"
