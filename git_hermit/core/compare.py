"""`git hermit compare RUN_A RUN_B`: two runs on one seed side by side, from refs and notes.

Each run's final commit (its final tag, else its best tag, else its tip) is scored on a common
split from its scores note (``splits.<name>`` for held-out splits); the difference carries a
paired bootstrap CI over the tasks both evaluated. Steps, kept and rolled-back changes and the
ledger (tokens and cost of every step, "unknown" cost where a price is missing) come from notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from git_hermit.accounting import stats
from git_hermit.core.history import load_history
from git_hermit.core.runs import open_run
from git_hermit.errors import GitStateError, InputError
from git_hermit.gitio import Repo


@dataclass(frozen=True)
class RunSummary:
    run: str
    evolver: str
    commit: str
    chosen_by: str                  # "final tag" | "best tag" | "tip"
    steps: int
    pass_at_1: float
    k: int
    tasks: int
    changes: int
    rolled_back: int
    tokens: int
    cost_usd: float | None          # None: some usage has no price
    partial: dict[str, int] | None = None   # the budget stopped its evaluation: {"rollouts", "expected"}
    warnings: tuple[str, ...] = ()          # its history's damaged notes and tags (each left out)


@dataclass(frozen=True)
class CompareReport:
    split: str
    a: RunSummary
    b: RunSummary
    comparison: stats.PairedComparison    # b minus a, over the shared tasks


def _rates(tasks: dict[str, Any]) -> dict[str, float]:
    rates = {}
    for task, data in tasks.items():
        attempts = data.get("attempts") if isinstance(data, dict) else None
        if attempts:
            rates[task] = sum(a.get("outcome") == "pass" for a in attempts) / len(attempts)
    return rates


def _summary(repo: Repo, name: str, split: str) -> tuple[RunSummary, dict[str, float]]:
    ctx = open_run(repo, name, with_refs=True)     # reads only: refs listed with the steps
    history = load_history(ctx)
    commit, chosen = ((history.final, "final tag") if history.final else
                      (history.best, "best tag") if history.best else (ctx.tip[1], "tip"))
    view_scores = {v.commit: v.scores for v in history.steps}
    from git_hermit.core.evaluate import read_scores
    scores = view_scores.get(commit) or read_scores(repo, commit)
    data = None
    if scores is not None:
        data = scores.to_dict() if scores.split == split else (scores.splits or {}).get(split)
    if not data or not isinstance(data.get("tasks"), dict):
        raise GitStateError(f"run {name!r} has no {split} scores on its {chosen} {commit[:12]}",
                            hint=f"measure it: git hermit eval {commit[:12]} --split {split} --run {name}")
    changes = [c for v in history.steps for c in v.changes]
    tokens, costs = 0, []
    for view in history.steps:
        ledger = (view.analysis.body.get("ledger") or {}) if view.analysis else {}
        for usage in ledger.values():
            tokens += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
            costs.append(usage.get("cost_usd"))
    rates = _rates(data["tasks"])
    return RunSummary(
        run=name, evolver=ctx.config.evolver_name, commit=commit, chosen_by=chosen, steps=ctx.tip[0],
        pass_at_1=float(data["pass_at_1"]), k=int(data.get("k") or 0), tasks=len(rates), changes=len(changes),
        rolled_back=sum(1 for c in changes if c.verdict and c.verdict.rollback_commit), tokens=tokens,
        cost_usd=sum(costs) if costs and all(c is not None for c in costs) else None,
        partial=data.get("partial"), warnings=tuple(w for v in history.steps for w in v.bad_notes)), rates


def compare_runs(repo: Repo, run_a: str, run_b: str, split: str = "test") -> CompareReport:
    if run_a == run_b:
        raise InputError("compare needs two different runs", hint="git hermit compare RUN_A RUN_B")
    for name in (run_a, run_b):    # an unknown run is named before either run's scores are looked at
        open_run(repo, name)
    a, rates_a = _summary(repo, run_a, split)
    b, rates_b = _summary(repo, run_b, split)
    if not set(rates_a) & set(rates_b):
        raise InputError(f"runs {run_a!r} and {run_b!r} share no {split} task",
                         hint="compare on a split both evaluated (--split)")
    return CompareReport(split, a, b, stats.paired_bootstrap(rates_a, rates_b))
