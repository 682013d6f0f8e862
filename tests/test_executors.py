"""Executors: Dask on a LocalCluster scores like local threads, and gets adapters by bundle.

The Dask path may not read the driver's repository: its workers receive a git bundle of
the commit and fetch it into a per-machine cache repository, which these tests inspect.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
import yaml

from cli_helpers import hermit
from conftest import git
from test_rollouts_e2e import ANSWER_IF_EVEN, make_project, result_files, scores_note

from git_hermit.gitio import Repo
from git_hermit.rollouts.executors import _bundle_bytes
from git_hermit.rollouts.tasks import Task
from git_hermit.rollouts.worker import RolloutJob, execute_rollout

pytest.importorskip("dask.distributed", reason="the dask extra is not installed")

CACHE = "git-hermit-worker-cache"


def outcomes(note: dict) -> dict[str, list[str]]:
    return {task: [a["outcome"] for a in score["attempts"]] for task, score in note["tasks"].items()}


def test_dask_local_cluster_scores_like_local_threads_and_ships_a_bundle(repo, tmp_path):
    make_project(repo, ANSWER_IF_EVEN, n_tasks=4, k=2)
    commit = git(repo, "rev-parse", "hermit/ahe/step-0000").strip()
    local_tmp, dask_tmp = tmp_path / "tmp-local", tmp_path / "tmp-dask"
    local_tmp.mkdir()
    dask_tmp.mkdir()

    r = hermit(repo, "rollout", "--json", env={"TMPDIR": str(local_tmp)})
    assert r.code == 0, r.err
    local_note = scores_note(repo)
    assert not (local_tmp / CACHE).exists()          # threads read the repository directly

    shutil.rmtree(repo / ".hermit" / "runs" / "ahe" / "evals")
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["executor"] = {"kind": "dask", "address": "local"}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = hermit(repo, "rollout", "--json", env={"TMPDIR": str(dask_tmp)}, timeout=180)
    assert r.code == 0, r.err
    dask_note = scores_note(repo)
    assert json.loads(r.out)["reused"] == 0 and len(result_files(repo)) == 8
    assert outcomes(dask_note) == outcomes(local_note)
    assert outcomes(dask_note) == {"t0": ["pass", "pass"], "t1": ["fail", "fail"],
                                   "t2": ["pass", "pass"], "t3": ["fail", "fail"]}
    assert dask_note["pass_at_1"] == local_note["pass_at_1"] == 0.5
    # the workers' adapter came through the bundle: their cache holds the commit under its ref
    refs = git(dask_tmp / CACHE, "for-each-ref", "--format=%(refname) %(objectname)")
    assert f"refs/hermit-bundle/{commit} {commit}" in refs
    assert not list((dask_tmp / CACHE / ".git").glob("incoming-*.bundle"))
    # and the driver's repository keeps no bundle ref behind
    assert "hermit-bundle" not in git(repo, "for-each-ref")


def _bundle_job(repo: Path, commit: str, tmp_path: Path) -> RolloutJob:
    agent = tmp_path / "agent.py"
    agent.write_text("import pathlib, sys\n"
                     "print((pathlib.Path(sys.argv[1]) / '.hermit-adapter' / 'ADAPTER.md').is_file())\n")
    return RolloutJob(task=Task(id="t0", prompt="Is the adapter there?", expected="True"), attempt=1,
                      commit=commit, adapter_prefix="adapter", host="codex",
                      agent_cfg={"backend": "command", "command": [sys.executable, str(agent), "{workspace}"]},
                      judge_cfg={"kind": "answer", "mode": "exact"}, judge_base_dir=str(tmp_path),
                      timeout_s=30, repo_path=None)


def _run_with_tmpdir(tmpdir: str, job: RolloutJob, bundle: bytes) -> dict:
    import os
    import tempfile
    os.environ["TMPDIR"] = tmpdir
    tempfile.tempdir = None
    return execute_rollout(job, bundle).result


def _warm_up(_: int) -> None:
    import time
    import git_hermit.rollouts.worker  # noqa: F401  (imported before the timed part)
    time.sleep(0.2)


def test_worker_processes_sharing_a_cache_fetch_one_bundle_safely(repo, tmp_path):
    assert hermit(repo, "init").code == 0
    commit = git(repo, "rev-parse", "HEAD").strip()
    handle = Repo.discover(repo)
    try:
        bundle = _bundle_bytes(handle, commit)
    finally:
        handle.close()
    job = _bundle_job(repo, commit, tmp_path)
    shared_tmp = tmp_path / "worker-tmp"
    shared_tmp.mkdir()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=4, mp_context=context) as pool:
        list(pool.map(_warm_up, range(8)))   # all workers up, so the fetches start together
        results = list(pool.map(_run_with_tmpdir, [str(shared_tmp)] * 4, [job] * 4, [bundle] * 4))
    assert [r["outcome"] for r in results] == ["pass"] * 4, [r.get("error") for r in results]
    assert git(shared_tmp / CACHE, "rev-parse", f"refs/hermit-bundle/{commit}").strip() == commit


def test_worker_without_repository_or_bundle_is_a_setup_exception(repo, tmp_path, monkeypatch):
    assert hermit(repo, "init").code == 0
    commit = git(repo, "rev-parse", "HEAD").strip()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    result = execute_rollout(_bundle_job(repo, commit, tmp_path), None).result
    assert result["outcome"] == "exception" and result["exception_type"] == "WorkspaceSetupError"
    assert "no bundle" in result["error"]


# Answers like ANSWER_IF_EVEN, slowly enough that a worker can be killed while agents run.
SLOW_ANSWER = """
import time
time.sleep(0.5)
print(task_id[1:] if int(task_id[1:]) % 2 == 0 else "no idea")
"""


def _start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rfind(b")") + 2:].split()[19].decode()


def _worker_scratch(root: Path, besides: set[str]) -> Path | None:
    """A worker process's scratch under ``root`` with a rollout directory in it (agents running)."""
    for entry in root.iterdir() if root.is_dir() else ():
        if entry.name not in besides and any(p.name.startswith("rollout-") for p in entry.iterdir()):
            return entry
    return None


def test_a_worker_removes_the_scratch_a_killed_worker_left_on_its_machine(repo, tmp_path):
    """A Dask worker on a machine that shares no disk with the driver (its own TMPDIR) is
    SIGKILLed mid-batch; the worker process its nanny starts in its place removes the dead one's
    scratch (workspaces, homes) at its first rollout. A live process's scratch is kept."""
    import os
    import signal
    import socket
    import subprocess
    import time

    from cli_helpers import GIT_HERMIT
    make_project(repo, SLOW_ANSWER, n_tasks=8, k=2)
    driver_tmp, worker_tmp = tmp_path / "driver-tmp", tmp_path / "worker-tmp"
    driver_tmp.mkdir()
    worker_tmp.mkdir()
    root = worker_tmp / f"git-hermit-{os.getuid()}"
    live = root / f"{os.getpid()}-{_start_time(os.getpid())}"       # this test's process: alive
    (live / "rollout-kept").mkdir(parents=True)
    (live / "rollout-kept" / "file").write_text("a live run's")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMIT_TEST")}
    logs = open(tmp_path / "dask.log", "w")
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=logs)]
    # two worker processes, each under a nanny (which starts another when it dies), on "another
    # machine": the driver's TMPDIR is not theirs, so the driver's own clean-up never sees it
    procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                                   "--nworkers", "2", "--nthreads", "2", "--no-dashboard", "--name", "far"],
                                  cwd=tmp_path, env={**env, "TMPDIR": str(worker_tmp)},
                                  stdout=subprocess.DEVNULL, stderr=logs))
    try:
        from dask.distributed import Client
        with Client(f"tcp://127.0.0.1:{port}", timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
        cfg["executor"] = {"kind": "dask", "address": f"tcp://127.0.0.1:{port}"}
        (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        driver = subprocess.Popen([*GIT_HERMIT, "rollout", "--json"], cwd=repo, text=True,
                                  env={**env, "TMPDIR": str(driver_tmp)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        killed = None
        while killed is None and time.monotonic() < deadline and driver.poll() is None:
            killed = _worker_scratch(root, {live.name})
            time.sleep(0.05)
        assert killed is not None, driver.communicate()[1] if driver.poll() is not None else "no rollout started"
        os.kill(int(killed.name.split("-")[0]), signal.SIGKILL)       # as the OOM killer would
        # (this batch's outcomes are not the point: the adapter's bundle may have died with it)
        driver.communicate(timeout=180)
        # the next batch, on the worker the nanny started in the killed one's place and the other
        shutil.rmtree(repo / ".hermit" / "runs" / "ahe" / "evals")
        with Client(f"tcp://127.0.0.1:{port}", timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        r = hermit(repo, "rollout", "--json", env={**env, "TMPDIR": str(driver_tmp)}, timeout=180, subprocess=True)
        assert r.code == 0, r.err
        assert outcomes(scores_note(repo)) == {f"t{i}": ["pass", "pass"] if i % 2 == 0 else ["fail", "fail"]
                                               for i in range(8)}
        assert not killed.exists(), f"the killed worker's scratch is left: {sorted(killed.rglob('*'))[:5]}"
        assert (live / "rollout-kept" / "file").read_text() == "a live run's"
        left = {entry.name for entry in root.iterdir()}
        assert len(left) >= 3, left         # the planted one, the surviving and the restarted worker's
        for name in left:                   # each a live process's, untouched
            pid, start = name.split("-")
            assert Path(f"/proc/{pid}").exists() and _start_time(int(pid)) == start, name
        assert not list(driver_tmp.glob(f"git-hermit-{os.getuid()}/*/rollout-*"))   # nothing ran there
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
