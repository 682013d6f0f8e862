"""Benchmark: a simulated step of 500 tasks x k=4 with an instant ``command`` agent.

Runs ``git hermit rollout`` (the CLI, as a user would) on the train split twice: at the full
size and at a quarter of it, and prints hermit's own wall time, CPU per rollout and peak RSS
beside the references (30 s, 10 ms a rollout, 300 MB) as ratios, plus the peak RSS of the small
run: memory flat in the number of rollouts means the two peaks are about equal (the RSS added
per extra rollout is printed too).
Usage: python bench/step_500x4.py [--tasks N] [--k K] [--concurrency C]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from notes_read import isolated_env
from scheduling import make_project, scratch_note

WALL_REF_S, CPU_REF_MS, RSS_REF_MB = 30.0, 10.0, 300.0


def run_rollout(path: Path, concurrency: int) -> tuple[float, float, float, dict]:
    """(wall s, CPU s of the CLI and every process it waited for, peak RSS MB of the largest, its JSON)."""
    cfg = yaml.safe_load((path / "hermit.yaml").read_text())
    cfg["agent"]["command"] = ["echo", "1"]          # instant: what is left is hermit's overhead
    cfg["trainer"]["concurrency"] = concurrency
    (path / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "git_hermit", "rollout", "--json"], cwd=path,
                          capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"rollout failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # ru_maxrss of children is the largest single process so far (KiB); each size runs in its
    # own fresh interpreter of this script, so the figure is this run's
    return wall, cpu, after.ru_maxrss / 1024, json.loads(done.stdout)


def one_size(tasks: int, k: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hermit-bench-") as temp:
        isolated_env(Path(temp))
        path = Path(temp) / "repo"
        make_project(path, tasks, k, concurrency)
        wall, cpu, rss, summary = run_rollout(path, concurrency)
        print(json.dumps({"rollouts": tasks * k, "wall": wall, "cpu": cpu, "rss": rss,
                          "summary": {key: summary.get(key) for key in ("reused", "pass_at_1")}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one_size(args.tasks, args.k, args.concurrency)
        return
    figures = []
    for tasks in (max(1, args.tasks // 4), args.tasks):
        done = subprocess.run([sys.executable, __file__, "--one", "--tasks", str(tasks), "--k", str(args.k),
                               "--concurrency", str(args.concurrency)], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=7200)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        figures.append(json.loads(done.stdout.strip().splitlines()[-1]))
    small, full = figures
    n = full["rollouts"]
    per = full["cpu"] / n * 1000
    print(f"step: {args.tasks} tasks x k={args.k} = {n} rollouts of an instant command agent "
          f"(echo), concurrency {args.concurrency}, via `git hermit rollout` on {os.cpu_count()} cores")
    print(f"  {scratch_note()}")
    print(f"  wall           {full['wall']:7.2f} s    ref {WALL_REF_S:.0f} s    ratio {full['wall'] / WALL_REF_S:5.2f}x")
    print(f"  CPU a rollout  {per:7.2f} ms   ref {CPU_REF_MS:.0f} ms   ratio {per / CPU_REF_MS:5.2f}x"
          f"   (all processes: CLI, git, guards, the echo agent)")
    print(f"  peak RSS       {full['rss']:7.1f} MB   ref {RSS_REF_MB:.0f} MB   ratio {full['rss'] / RSS_REF_MB:5.2f}x")
    extra = max(1, n - small["rollouts"])
    per_kb = (full["rss"] - small["rss"]) * 1024 / extra
    print(f"  memory flat    {small['rollouts']} rollouts: {small['rss']:.1f} MB; {n}: {full['rss']:.1f} MB"
          f"   ratio {full['rss'] / small['rss']:5.2f}x (flat: ~1.0x); {per_kb:.1f} KB a rollout"
          f" (its result record, job, ledger entry and score, and its share of the --json output)")


if __name__ == "__main__":
    main()
