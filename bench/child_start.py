"""Benchmark: what starting one child under its guard costs (every agent, judge, verifier).

Runs ``true`` 200 times through ``process.run_capture`` (the guard server hands the request to a
warm guard, which starts the child and reports its exit) and through a bare ``subprocess.run``
(the reference: no guard), and prints the CPU (this process, the guard server, the guards and
the children) and the wall time of one child, as a ratio. The warm guards are still running
(not reaped), so the server's cutime/cstime miss them and the children they reaped: the CPU is
read with ``process.guard_cpu_seconds``, which adds every live guard's utime, stime, cutime and
cstime to the server's. Usage: python bench/child_start.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from pathlib import Path

from git_hermit.supervise import process

TARGET_MS = 10.0     # the whole per-rollout budget of hermit's own CPU (issue 15, item 2)


def own_cpu() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    n = args.runs
    process.run_capture(["true"], cwd=Path("."), env=os.environ, timeout_s=10)   # the server is up
    cpu, server, wall = own_cpu(), process.guard_cpu_seconds(), time.perf_counter()
    for _ in range(n):
        process.run_capture(["true"], cwd=Path("."), env=os.environ, timeout_s=10)
    wall = (time.perf_counter() - wall) / n * 1000
    guarded = ((own_cpu() - cpu) + (process.guard_cpu_seconds() - server)) / n * 1000
    cpu, bare_wall = own_cpu(), time.perf_counter()
    for _ in range(n):
        subprocess.run(["true"], capture_output=True)
    bare_wall = (time.perf_counter() - bare_wall) / n * 1000
    bare = (own_cpu() - cpu) / n * 1000
    print(f"child start: `true` x {n}, under the guard (run_capture) vs bare subprocess.run")
    print(f"  CPU a child   {guarded:6.2f} ms   bare {bare:5.2f} ms   ratio {guarded / bare:5.2f}x"
          f"   ({guarded / TARGET_MS:4.2f}x of the 10 ms rollout budget)")
    print(f"  wall a child  {wall:6.2f} ms   bare {bare_wall:5.2f} ms   ratio {wall / bare_wall:5.2f}x")


if __name__ == "__main__":
    main()
