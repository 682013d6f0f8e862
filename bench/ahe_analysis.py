"""Benchmark: the ahe evolver's per-step analysis on 500 tasks x k=2 with a 10-change manifest.

Times classify (both steps), diff, attribution, Debugger jobs + fallback, overview and detail
rendering and the evolution query, against the 1 s target, and against a reference: a bare
loop that only reads every RolloutResult once. Run: python bench/ahe_analysis.py
"""

from __future__ import annotations

import random
import time
from pathlib import PurePosixPath

from git_hermit.evolvers.ahe.analysis import classify, diff, stability
from git_hermit.evolvers.ahe.attribution import evaluate_changes
from git_hermit.evolvers.ahe.debugger import build_jobs, finish
from git_hermit.evolvers.ahe.overview import overview_body, render_detail, render_overview
from git_hermit.evolvers.ahe.queries import build_evolution_query
from git_hermit.evolvers.ahe.records import update_task_history
from git_hermit.model.rollout import RolloutResult, Usage

N_TASKS, K, N_CHANGES, REPEATS, TARGET_S = 500, 2, 10, 5, 1.0
VERIFIER = "\n".join(f"tests/test_mod.py::test_{i} PASSED" for i in range(150)) + \
    "\nFAILED tests/test_mod.py::test_last - AssertionError: expected 3, got 2\n"


def make_step(rng: random.Random) -> dict[str, list[RolloutResult]]:
    step = {}
    for t in range(N_TASKS):
        task = f"task-{t:04d}"
        trials = []
        for attempt in range(1, K + 1):
            roll = rng.random()
            if roll < 0.55:
                r = RolloutResult(task, attempt, "pass", reward=1.0)
            elif roll < 0.90:
                r = RolloutResult(task, attempt, "fail", reward=0.0, verifier_output=VERIFIER)
            elif roll < 0.95:
                r = RolloutResult(task, attempt, "exception", exception_type="AgentTimeoutError")
            else:
                r = RolloutResult(task, attempt, "exception", exception_type="ConnectionError")
            trials.append(r.with_(trajectory="trajectory.jsonl", hook_log="hook-calls.jsonl",
                                  usage=Usage(input_tokens=rng.randint(10_000, 90_000), output_tokens=2_000)))
        step[task] = trials
    return step


def analyse(prev_step, cur_step, changes, history):
    prev = classify(prev_step, k=K)
    cur = classify(cur_step, k=K)
    d = diff(prev, cur)
    evaluation = evaluate_changes(changes, d, evaluating_iteration=1)
    jobs = build_jobs(cur, cur_step, rollouts_root=PurePosixPath("/runs/r/step-0002/rollouts"))
    responses = {j.task: f"1. ROOT CAUSE: cause of {j.task}\n\n2. PASS vs FAIL: x" for j in jobs[::2]}
    reports = finish(jobs, responses)
    overview = render_overview(2, reports, detail_dir="state/analysis/step_0002/detail/")
    details = [render_detail(r) for r in reports]
    history = update_task_history(history, 2, cur)
    query = build_evolution_query(2, cur, d, overview_body=overview_body(overview),
                                  stability=stability(history, 3), evaluation=evaluation)
    return len(query) + sum(map(len, details))


def bare_loop(prev_step, cur_step):
    # the floor: touch every result once, no analysis
    n = 0
    for step in (prev_step, cur_step):
        for trials in step.values():
            for r in trials:
                n += r.outcome == "pass"
    return n


def best_of(fn, *args):
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = random.Random(7)
    prev_step, cur_step = make_step(rng), make_step(rng)
    tasks = sorted(cur_step)
    changes = [{"id": f"chg-{i}", "description": f"change {i}", "files": ["AGENTS.md"],
                "predicted_fixes": rng.sample(tasks, 20), "risk_tasks": rng.sample(tasks, 10)}
               for i in range(1, N_CHANGES + 1)]
    history = update_task_history({}, 1, classify(prev_step, k=K))
    seconds = best_of(analyse, prev_step, cur_step, changes, history)
    reference = best_of(bare_loop, prev_step, cur_step)
    print(f"ahe analysis, {N_TASKS} tasks x k={K}, {N_CHANGES} changes (best of {REPEATS}):")
    print(f"  analysis            {seconds:.4f} s   target {TARGET_S:.1f} s   "
          f"({seconds / TARGET_S:.1%} of target)")
    print(f"  reference bare loop {reference:.6f} s   ratio analysis/reference {seconds / reference:,.0f}x")


if __name__ == "__main__":
    main()
