"""Dask workers that share nothing with the driver but the network.

A `dask scheduler` on 127.0.0.1 and `dask worker` processes under bubblewrap whose filesystem
view has neither the repository, nor the user's home, nor the driver's /tmp: the adapter
reaches them by commit (a git bundle, cached per worker), results and trajectories come back
over Dask, and the scores equal a local run of the same rows. Ctrl-C ends the remote agents.
A run whose every row is reused opens no cluster at all.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import GIT_HERMIT, hermit
from conftest import stop_processes
from support.rollouts_e2e_helpers import make_project, result_files, scores_note

pytest.importorskip("dask.distributed", reason="the dask extra is not installed")

# The acting agent, inline (the repository's agent.py is out of the workers' sight): it
# checks the deployed adapter is in its workspace, then answers even tasks right.
AGENT = """
import os, pathlib, sys, time
task_id, workspace, marker = sys.argv[1:4]
assert (pathlib.Path(workspace) / '.hermit-adapter' / 'AGENTS.md').is_file(), 'no adapter'
print('working on', task_id, 'in', os.getcwd())
if marker == 'slow':
    print('start', time.time(), flush=True)
    time.sleep(0.4)
    print('end', time.time(), flush=True)
if task_id == 't1' and os.environ.get('HERMIT_TEST_HOLD') == '1' or marker == 'hold':
    time.sleep(300)
print(task_id[1:] if int(task_id[1:]) % 2 == 0 else 'no idea')
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/tmp", "true"], capture_output=True)
    return probe.returncode == 0


def _hidden_view(hide: list[Path]) -> list[str]:
    """bwrap arguments: everything as is, except empty tmpfs over ``hide`` (and /tmp), with the
    Python installation bound back when it lives under a hidden directory."""
    args = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/tmp"]
    keep = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
            Path(__file__).resolve().parents[1]}                      # the interpreter, git_hermit
    for kept in sorted(keep):
        if str(kept).startswith("/tmp/"):                             # a venv or checkout under /tmp
            args += ["--ro-bind", str(kept), str(kept)]
    for path in hide:
        path = path.resolve()
        if str(path).startswith("/tmp/"):
            continue                                                  # under the fresh /tmp already
        args += ["--tmpfs", str(path)]
        for kept in sorted(keep):
            if path == kept or path in kept.parents:
                args += ["--ro-bind", str(kept), str(kept)]
    return args + ["--chdir", "/", "--die-with-parent", "--"]


@pytest.fixture
def isolated_cluster(tmp_path, repo):
    if not _bwrap_works():
        pytest.skip("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMIT_TEST")}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=open(logs / "scheduler.log", "w"))]
    # the repository, the test's HOME and the account's real home (the installed git-hermit and
    # Python are bound back in: a remote machine has its own installation)
    hidden = [repo, Path(os.environ["HOME"]), Path(os.path.expanduser("~" + os.environ.get("USER", "root")))]
    worker_env = {**env, "HOME": "/nonexistent-home", "TMPDIR": "/tmp"}
    for n in range(2):
        procs.append(subprocess.Popen(
            [*_hidden_view(hidden), sys.executable, "-m", "distributed.cli.dask_worker", address,
             "--nthreads", "2", "--no-nanny", "--no-dashboard", "--name", f"isolated-{n}"],
            env=worker_env, stdout=subprocess.DEVNULL, stderr=open(logs / f"worker-{n}.log", "w"),
            start_new_session=True))
    from dask.distributed import Client
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            # the proof: from the workers, the repository and the user's home are out of sight
            seen = client.run(lambda paths: [os.path.exists(p) for p in paths], [str(repo), env["HOME"]])
            assert all(flags == [False, False] for flags in seen.values()), seen
        yield address
    finally:
        stop_processes(procs)


def _project(repo: Path, marker: str = "run") -> None:
    make_project(repo, "print('unused')\n", n_tasks=4, k=2)
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["agent"]["command"] = [sys.executable, "-c", AGENT, "{task_id}", "{workspace}", marker]
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def _outcomes(note: dict) -> dict[str, list[str]]:
    return {task: [a["outcome"] for a in score["attempts"]] for task, score in note["tasks"].items()}


def _use_dask(repo: Path, address: str) -> None:
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["executor"] = {"kind": "dask", "address": address}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def test_isolated_workers_score_like_a_local_run(repo, isolated_cluster):
    _project(repo)
    r = hermit(repo, "rollout", "--json", timeout=180, subprocess=True)
    assert r.code == 0, r.err
    local = scores_note(repo)
    shutil.rmtree(repo / ".hermit" / "runs" / "ahe" / "evals")
    _use_dask(repo, isolated_cluster)
    r = hermit(repo, "rollout", "--json", timeout=300, subprocess=True)
    assert r.code == 0, r.err
    remote = scores_note(repo)
    assert json.loads(r.out)["reused"] == 0 and len(result_files(repo)) == 8
    assert _outcomes(remote) == _outcomes(local) == {"t0": ["pass", "pass"], "t1": ["fail", "fail"],
                                                     "t2": ["pass", "pass"], "t3": ["fail", "fail"]}
    assert remote["pass_at_1"] == local["pass_at_1"] == 0.5
    for path in result_files(repo):               # the trajectory came back, from another machine's view
        trajectory = (path.parent / "trajectory.txt").read_text()
        assert trajectory.startswith("working on") and "in /tmp/" in trajectory, trajectory
        assert str(repo) not in trajectory


def test_a_fully_reused_run_opens_no_cluster(repo):
    _project(repo)
    assert hermit(repo, "rollout", "--json", timeout=180, subprocess=True).code == 0
    _use_dask(repo, f"tcp://127.0.0.1:{_free_port()}")        # nothing listens there
    started = time.monotonic()
    r = hermit(repo, "rollout", "--json", timeout=120, subprocess=True)
    assert r.code == 0, r.err
    assert json.loads(r.out)["reused"] == 8
    assert time.monotonic() - started < 20


def test_host_slots_hold_across_isolated_workers(repo, isolated_cluster):
    _project(repo, marker="slow")
    _use_dask(repo, isolated_cluster)
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["executor"]["slots"] = {cfg.get("host", "codex"): 2}      # 2 agents at once, on 4 threads
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = hermit(repo, "rollout", "--json", timeout=300, subprocess=True)
    assert r.code == 0, r.err
    events = []
    for path in result_files(repo):
        lines = dict(line.split()[:2] for line in (path.parent / "trajectory.txt").read_text().splitlines()
                     if line.startswith(("start ", "end ")))
        events += [(float(lines["start"]), 1), (float(lines["end"]), -1)]
    running = peak = 0
    for _, change in sorted(events):
        running += change
        peak = max(peak, running)
    assert peak == 2, f"{peak} agents of one host ran at once across the workers (slots: 2)"


def _agents(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and b"-c" in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_ctrl_c_ends_the_remote_agents(repo, isolated_cluster):
    _project(repo, marker="hold")
    _use_dask(repo, isolated_cluster)
    proc = subprocess.Popen([*GIT_HERMIT, "rollout"], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(_agents("hold")) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert len(_agents("hold")) >= 2, proc.stderr.read() if proc.poll() is not None else "no agent started"
    proc.send_signal(signal.SIGINT)
    interrupted_at = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    while _agents("hold") and time.monotonic() - interrupted_at < 10:
        time.sleep(0.1)
    left = _agents("hold")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} remote agents still running after Ctrl-C"
