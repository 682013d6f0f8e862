"""Benchmark: rollout scheduling overhead — 40 tasks x k=2 of a 0.5 s agent, concurrency 8.

Times only the rollout phase: ``run_jobs`` (ship the adapter, materialise + deploy each
workspace, run the agent, judge, write result.json) inside an executor that is already open,
on local threads and on a Dask LocalCluster (2 workers x 4 threads). Each figure is compared
with the ideal ceil(80 / 8) x 0.5 s. The local batch runs ``--runs`` times, each in a fresh
project, and the median is the figure; the projects are removed after the last run, not
between runs: on ext4 without a journal each file made costs a scan of the inodes freed
nearby in the last minutes, so removing one run's files would weigh on the next run's.
Usage: python bench/scheduling.py [--tasks N] [--k K] [--runs R] [--skip-dask]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from notes_read import isolated_env

from git_hermit.core.evaluate import load_benchmark, make_jobs
from git_hermit.core.runs import open_run
from git_hermit.gitio import Repo
from git_hermit.rollouts.executors import open_executor
from git_hermit.rollouts.runner import Progress, run_jobs
from git_hermit.supervise.process import guard_cpu_seconds

AGENT_SLEEP_S = 0.5
TARGETS = {"local": 1.05, "dask": 1.15}
CPU_TARGET_MS = 10.0      # hermit's own CPU a rollout (workspace, deploy, guard, judge, result)


def make_project(path: Path, tasks: int, k: int, concurrency: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run([sys.executable, "-m", "git_hermit", "init"], cwd=path, check=True, capture_output=True)
    with open(path / "tasks.jsonl", "w") as handle:
        for i in range(tasks):
            handle.write(json.dumps({"id": f"t{i}", "prompt": f"task {i}", "answer": "1"}) + "\n")
    (path / "rows").mkdir()
    (path / "rows" / "train.txt").write_text("".join(f"t{i}#{a}\n" for i in range(tasks) for a in range(1, k + 1)))
    cfg = yaml.safe_load((path / "hermit.yaml").read_text())
    cfg["agent"] = {"backend": "command", "timeout_s": 60, "command": ["sh", "-c", f"sleep {AGENT_SLEEP_S}; echo 1"]}
    cfg["evolver"]["params"]["k"] = k
    cfg["trainer"]["concurrency"] = concurrency
    (path / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def scratch_note() -> str:
    """Where rollouts' scratch lives and on what filesystem: on ext4 without a journal the kernel
    skips every inode freed in the last minutes when it makes a file, so a shared, busy $TMPDIR
    costs several times hermit's own CPU (see README: the benchmark table)."""
    temp = os.path.realpath(tempfile.gettempdir())
    best, kind = "", "?"
    with open("/proc/mounts") as handle:
        for line in handle:
            fields = line.split()
            mount = fields[1]
            if (temp == mount or temp.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, kind = mount, fields[2]
    return f"scratch (TMPDIR) {temp} on {kind}"


def cpu_seconds() -> float:
    """CPU time of this process, its waited-for children (git), and the guard server with its
    guards and the agents and judges they reaped (all still running, so getrusage does not
    count them): ``guard_cpu_seconds`` sums utime, stime, cutime and cstime of the server and
    of every live warm guard, whose children the server's own figures would miss."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + guard_cpu_seconds()


def agent_cpu_ms(runs: int = 20) -> float:
    """The CPU of the agent command alone (sh + sleep 0), started directly: not hermit's."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run(["sh", "-c", "sleep 0; echo 1"], stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) / runs * 1000


def time_rollouts(path: Path, executor_cfg: dict, concurrency: int, out: Path) -> tuple[float, float, int, float]:
    """(seconds for run_jobs, seconds to open the executor, rollouts passed, CPU seconds used here)."""
    with Repo.discover(path) as repo:
        ctx = open_run(repo)
        bench = load_benchmark(ctx.config, "train")
        jobs = make_jobs(ctx.config, bench, ctx.tip[1])
        opened = time.perf_counter()
        with open_executor(repo, executor_cfg, concurrency) as handle:
            handle.workers          # a Dask client connects on first use: not in the timed part
            started, cpu = time.perf_counter(), cpu_seconds()
            results = run_jobs(jobs, out, handle, progress=Progress(total=len(jobs)))
            elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        passed = sum(r.outcome == "pass" for attempts in results.values() for r in attempts)
        return elapsed, started - opened, passed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--dask-workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5, help="local batches, each in a fresh project (median reported)")
    parser.add_argument("--skip-dask", action="store_true")
    args = parser.parse_args()
    rollouts = args.tasks * args.k
    ideal = math.ceil(rollouts / args.concurrency) * AGENT_SLEEP_S
    print(f"scheduling: {args.tasks} tasks x k={args.k} = {rollouts} rollouts of a {AGENT_SLEEP_S} s agent, "
          f"concurrency {args.concurrency}; timed: run_jobs only (executor already open)")
    print(f"  {scratch_note()}")
    print(f"  reference (ideal): ceil({rollouts}/{args.concurrency}) x {AGENT_SLEEP_S} s = {ideal:.2f} s")
    with tempfile.TemporaryDirectory(prefix="hermit-bench-") as temp:
        isolated_env(Path(temp))
        walls, cpus = [], []
        for run in range(args.runs):
            path = Path(temp) / f"repo-{run}"
            make_project(path, args.tasks, args.k, args.concurrency)
            elapsed, open_s, passed, cpu = time_rollouts(path, {"kind": "local"}, args.concurrency, Path(temp) / f"out-{run}")
            assert passed == rollouts, f"local: only {passed}/{rollouts} rollouts passed"
            walls.append(elapsed)
            cpus.append(cpu)
        agent_ms = agent_cpu_ms()
        own = sorted(cpu / rollouts * 1000 - agent_ms for cpu in cpus)
        elapsed, per_rollout = statistics.median(walls), statistics.median(cpus) / rollouts
        ratio = elapsed / ideal
        verdict = "ok" if ratio <= TARGETS["local"] else "over target"
        print(f"  {'local threads':<24} {elapsed:6.2f} s   ratio {ratio:5.3f}x (target <= {TARGETS['local']:.2f}x, {verdict})"
              f"   [median of {args.runs} runs: {min(walls):.2f}-{max(walls):.2f} s]")
        # each thread runs its rollouts one after another, so its own setup CPU adds to every
        # 0.5 s sleep even with no contention at all
        chain = math.ceil(rollouts / args.concurrency) * (AGENT_SLEEP_S + per_rollout)
        print(f"    CPU used: {per_rollout * rollouts:.2f} s = {per_rollout * 1000:.1f} ms per rollout on {os.cpu_count()} cores;"
              f" floor with that CPU in series and no contention: {chain:.2f} s ({chain / ideal:.3f}x)")
        median_own = statistics.median(own)
        print(f"    hermit's own CPU a rollout (minus the agent's {agent_ms:.1f} ms): {median_own:.1f} ms"
              f"   ratio {median_own / CPU_TARGET_MS:5.2f}x (target <= {CPU_TARGET_MS:.0f} ms)"
              f"   [runs: {', '.join(f'{x:.1f}' for x in own)}]")
        if not args.skip_dask:   # Dask workers' CPU is spent in other processes, not counted here
            cfg = {"kind": "dask", "address": "local", "workers": args.dask_workers}
            elapsed, open_s, passed, _ = time_rollouts(Path(temp) / "repo-0", cfg, args.concurrency, Path(temp) / "out-dask")
            assert passed == rollouts, f"dask: only {passed}/{rollouts} rollouts passed"
            ratio = elapsed / ideal
            verdict = "ok" if ratio <= TARGETS["dask"] else "over target"
            label = f"dask LocalCluster {args.dask_workers}x{args.concurrency // args.dask_workers}"
            print(f"  {label:<24} {elapsed:6.2f} s   ratio {ratio:5.3f}x (target <= {TARGETS['dask']:.2f}x, {verdict})"
                  f"   [opening the executor: {open_s:.2f} s, not timed]")


if __name__ == "__main__":
    main()
