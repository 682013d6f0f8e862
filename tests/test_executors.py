"""Executors: Dask on a LocalCluster scores like local threads, and gets adapters by bundle.

The Dask path may not read the driver's repository: its workers receive a git bundle of
the commit and fetch it into a per-machine cache repository, which these tests inspect.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import GIT_HERMIT, hermit
from conftest import git, stop_processes
from support.rollouts_e2e_helpers import ANSWER_IF_EVEN, make_project, result_files, scores_note

from git_hermit.gitio import Repo
from git_hermit.rollouts.executors import _bundle_bytes
from git_hermit.rollouts.tasks import Task
from git_hermit.rollouts.worker import RolloutJob, execute_rollout
from git_hermit.supervise.scratch import PARKED

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


def _bundle_of(repo: Path, commit: str) -> bytes:
    """The git bundle a Dask driver ships for ``commit``."""
    with Repo.discover(repo) as handle:
        return _bundle_bytes(handle, commit)


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
    bundle = _bundle_of(repo, commit)
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


def test_a_worker_process_removes_dead_processes_scratch_at_its_first_rollout_only(repo, tmp_path, monkeypatch):
    """A worker process (here this one, as a Dask worker runs rollouts) removes the scratch of
    dead processes under its TMPDIR at its first rollout, and lists that directory no more: a
    process that dies later is the next worker process's to clean."""
    from git_hermit.supervise.scratch import drop_slots
    assert hermit(repo, "init").code == 0
    commit = git(repo, "rev-parse", "HEAD").strip()
    bundle = _bundle_of(repo, commit)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    root = tmp_path / f"git-hermit-{os.getuid()}"
    dead = root / "4194305-1"           # above the kernel's largest pid: no such process, ever
    (dead / "rollout-x" / "home").mkdir(parents=True)
    try:
        assert execute_rollout(_bundle_job(repo, commit, tmp_path), bundle).result["outcome"] == "pass"
        assert not dead.exists()
        later = root / "4194306-1"
        later.mkdir()
        assert execute_rollout(_bundle_job(repo, commit, tmp_path), bundle).result["outcome"] == "pass"
        assert later.is_dir()
    finally:
        drop_slots()


# Answers like ANSWER_IF_EVEN, slowly enough that a worker can be killed while agents run.
SLOW_ANSWER = """
import time
time.sleep(0.5)
print(task_id[1:] if int(task_id[1:]) % 2 == 0 else "no idea")
"""


def _start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rfind(b")") + 2:].split()[19].decode()


def _process_dirs(root: Path) -> list[Path]:
    """The processes' scratch directories under ``root``: ``pid-ns-<ns>/<pid>-<start>``, and
    ``<pid>-<start>`` (an older git-hermit's); not the parked rollout directories."""
    if not root.is_dir():
        return []
    return [entry for entry in [*root.iterdir(), *root.glob("pid-ns-*/*")]
            if not entry.name.startswith("pid-ns-") and entry.name != PARKED]


def _worker_scratch(root: Path, besides: set[str]) -> Path | None:
    """A worker process's scratch under ``root`` with a rollout directory in it (agents running)."""
    for entry in _process_dirs(root):
        if entry.name not in besides and any(p.name.startswith("rollout-") for p in entry.iterdir()):
            return entry
    return None


@contextlib.contextmanager
def _far_cluster(tmp_path: Path, workers: int, worker_tmp: Path):
    """A `dask scheduler` on 127.0.0.1 and ``workers`` worker processes, each under a nanny (which
    starts another when it dies), on "another machine": their TMPDIR is ``worker_tmp``, not the
    driver's, so the driver's own clean-up never sees their scratch. Yields the address."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMIT_TEST")}
    logs = open(tmp_path / "dask.log", "w")
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=logs)]
    procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                   "--nworkers", str(workers), "--nthreads", "2", "--no-dashboard", "--name", "far"],
                                  cwd=tmp_path, env={**env, "TMPDIR": str(worker_tmp)},
                                  stdout=subprocess.DEVNULL, stderr=logs))
    try:
        _wait_for_workers(address, workers)
        yield address
    finally:
        stop_processes(procs)
        logs.close()


def _wait_for_workers(address: str, count: int) -> None:
    from dask.distributed import Client
    with Client(address, timeout=60) as client:
        client.wait_for_workers(count, timeout=120)


def _use_cluster(repo: Path, address: str) -> None:
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["executor"] = {"kind": "dask", "address": address}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def _kill_a_worker_mid_batch(repo: Path, root: Path, driver_env: dict, besides: set[str]) -> tuple[Path, str]:
    """Start `git hermit rollout --json`, SIGKILL (as the OOM killer would) the first worker
    process seen running rollouts (its scratch under ``root`` names its pid), let the batch end.
    The killed process's scratch directory and the command's stderr."""
    driver = subprocess.Popen([*GIT_HERMIT, "rollout", "--json"], cwd=repo, text=True, env=driver_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    killed = None
    while killed is None and time.monotonic() < deadline and driver.poll() is None:
        killed = _worker_scratch(root, besides)
        time.sleep(0.05)
    assert killed is not None, driver.communicate()[1] if driver.poll() is not None else "no rollout started"
    os.kill(int(killed.name.split("-")[0]), signal.SIGKILL)
    _, err = driver.communicate(timeout=180)
    assert driver.returncode == 0, err
    return killed, err


def test_a_worker_removes_the_scratch_a_killed_worker_left_on_its_machine(repo, tmp_path):
    """A Dask worker on a machine that shares no disk with the driver (its own TMPDIR) is
    SIGKILLed mid-batch; the worker process its nanny starts in its place removes the dead one's
    scratch (workspaces, homes) at its first rollout. A live process's scratch is kept."""
    make_project(repo, SLOW_ANSWER, n_tasks=8, k=2)
    driver_tmp, worker_tmp = tmp_path / "driver-tmp", tmp_path / "worker-tmp"
    driver_tmp.mkdir()
    worker_tmp.mkdir()
    root = worker_tmp / f"git-hermit-{os.getuid()}"
    live = root / f"{os.getpid()}-{_start_time(os.getpid())}"       # this test's process: alive
    (live / "rollout-kept").mkdir(parents=True)
    (live / "rollout-kept" / "file").write_text("a live run's")
    driver_env = {**os.environ, "TMPDIR": str(driver_tmp)}
    with _far_cluster(tmp_path, 2, worker_tmp) as address:
        _use_cluster(repo, address)
        # (this batch's outcomes are not the point)
        killed, _ = _kill_a_worker_mid_batch(repo, root, driver_env, {live.name})
        # the next batch, on the worker the nanny started in the killed one's place and the other
        shutil.rmtree(repo / ".hermit" / "runs" / "ahe" / "evals")
        _wait_for_workers(address, 2)
        r = hermit(repo, "rollout", "--json", env={"TMPDIR": str(driver_tmp)}, timeout=180, subprocess=True)
        assert r.code == 0, r.err
        assert outcomes(scores_note(repo)) == {f"t{i}": ["pass", "pass"] if i % 2 == 0 else ["fail", "fail"]
                                               for i in range(8)}
        assert not killed.exists(), f"the killed worker's scratch is left: {sorted(killed.rglob('*'))[:5]}"
        assert (live / "rollout-kept" / "file").read_text() == "a live run's"
        left = {entry.name for entry in _process_dirs(root)}
        assert len(left) >= 3, left         # the planted one, the surviving and the restarted worker's
        for name in left:                   # each a live process's, untouched
            pid, start = name.split("-")
            assert Path(f"/proc/{pid}").exists() and _start_time(int(pid)) == start, name
        assert not [d for d in _process_dirs(driver_tmp / f"git-hermit-{os.getuid()}")
                    if list(d.glob("rollout-*"))]                               # nothing ran there


def test_a_batch_outlives_the_death_of_the_only_worker_holding_the_adapters_bundle(repo, tmp_path):
    """One worker process, SIGKILLed mid-batch, takes the adapter's bundle (scattered to it) with
    it. The rest of the batch runs on the worker its nanny starts, with the bundle shipped again,
    and so do the rollouts it was running: a worker's death is not the task's failure. Before,
    every rollout submitted after the loss was cancelled too, and those in flight were stored as
    exceptions (``KilledWorker``, ``CancelledError``) that a re-run reused as finished."""
    make_project(repo, SLOW_ANSWER, n_tasks=8, k=2)
    worker_tmp = tmp_path / "worker-tmp"
    worker_tmp.mkdir()
    with _far_cluster(tmp_path, 1, worker_tmp) as address:
        _use_cluster(repo, address)
        _kill_a_worker_mid_batch(repo, worker_tmp / f"git-hermit-{os.getuid()}", dict(os.environ), set())
    attempts = [a for score in scores_note(repo)["tasks"].values() for a in score["attempts"]]
    assert len(attempts) == 16
    lost = [a for a in attempts if a["outcome"] == "exception"]
    assert not lost, f"{len(lost)} of 16 rollouts stored as the worker's death: {lost}"
    # the agent answers even-numbered tasks right: every rollout ran to its judge's verdict
    assert sorted(a["outcome"] for a in attempts) == ["fail"] * 8 + ["pass"] * 8


def test_a_row_whose_worker_breaks_runs_again_and_is_stored_as_that_only_after_its_reruns(repo, tmp_path, monkeypatch):
    """The executor's failure is not the task's: a rollout whose worker raised (as a lost Dask
    worker's future does) goes back to the queue; a row whose worker breaks every time is stored
    as the exception after ``WORKER_LOST_RERUNS`` reruns, and the batch still finishes."""
    from git_hermit.core.evaluate import load_benchmark, make_jobs
    from git_hermit.core.runs import open_run
    from git_hermit.rollouts import runner
    from git_hermit.rollouts.executors import open_executor

    make_project(repo, ANSWER_IF_EVEN, n_tasks=3, k=2)
    calls: dict[str, int] = {}
    real = runner.execute_rollout

    def breaking(job, *extra):
        calls[job.key] = calls.get(job.key, 0) + 1
        if job.key == "t2#2" or (job.key == "t0#1" and calls[job.key] == 1):
            raise RuntimeError("worker lost")
        return real(job, *extra)

    monkeypatch.setattr(runner, "execute_rollout", breaking)
    with Repo.discover(repo) as opened:
        ctx = open_run(opened)
        jobs = make_jobs(ctx.config, load_benchmark(ctx.config, "train"), ctx.tip[1])
        with open_executor(opened, ctx.config.executor, 2) as handle:
            results = runner.run_jobs(jobs, tmp_path / "out", handle)
    outcomes = {f"{r.task}#{r.attempt}": (r.outcome, r.exception_type) for rs in results.values() for r in rs}
    assert calls["t0#1"] == 2 and outcomes["t0#1"] == ("pass", None)
    assert calls["t2#2"] == 1 + runner.WORKER_LOST_RERUNS
    assert outcomes["t2#2"] == ("exception", "RuntimeError")
    assert {k: v for k, v in outcomes.items() if k not in ("t0#1", "t2#2")} == {
        "t0#2": ("pass", None), "t1#1": ("fail", None), "t1#2": ("fail", None), "t2#1": ("pass", None)}
