"""Statistics over rollouts: task labels, pass@1 / pass@k (Chen), and paired comparisons.

Follows spec/ahe.md §1.2-1.3: a task is pass only if all its rollouts pass, exception only
if all are exceptions, else fail; pass@1 is the per-task c/n macro-averaged over tasks with
exceptions and timeouts counted as failures. Comparisons of two commits use a seeded paired
bootstrap over tasks.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from git_hermit.model.rollout import RolloutResult


def task_label(outcomes: Sequence[str]) -> str:
    """spec §1.2: all pass → pass; all exception → exception; anything else → fail."""
    if not outcomes:
        raise ValueError("a task with no rollouts has no label")
    if all(outcome == "pass" for outcome in outcomes):
        return "pass"
    if all(outcome == "exception" for outcome in outcomes):
        return "exception"
    return "fail"


def task_labels(results_by_task: Mapping[str, Sequence[RolloutResult]]) -> dict[str, str]:
    """The label of every task that has rollouts."""
    return {task: task_label([result.outcome for result in results])
            for task, results in results_by_task.items() if results}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased estimate 1 - C(n-c, k)/C(n, k) (spec §1.3); NaN if k > n, k < 0 or n = 0."""
    if n <= 0 or k < 0 or k > n:
        return math.nan
    if not 0 <= c <= n:
        raise ValueError(f"c must be in [0, n={n}], got {c}")
    if n - c < k:
        return 1.0 if c > 0 else 0.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _counts(results_by_task: Mapping[str, Sequence[RolloutResult]]) -> dict[str, tuple[int, int]]:
    return {task: (len(results), sum(result.outcome == "pass" for result in results))
            for task, results in results_by_task.items() if results}


def per_task_pass_at_1(results_by_task: Mapping[str, Sequence[RolloutResult]]) -> dict[str, float]:
    """c/n of every task with rollouts (the input of ``paired_bootstrap``)."""
    return {task: c / n for task, (n, c) in _counts(results_by_task).items()}


def pass_at_1(results_by_task: Mapping[str, Sequence[RolloutResult]]) -> float:
    """Mean over tasks of c/n (0.0 when there are no rollouts, as upstream)."""
    per_task = per_task_pass_at_1(results_by_task)
    return sum(per_task.values()) / len(per_task) if per_task else 0.0


def exact_pass_at_1(counts: Mapping[str, tuple[int, int]]) -> Fraction:
    """pass@1 as an exact fraction from each task's (attempts, passes): what best-ever compares,
    so two evaluations that tie (1/3 and 1/3) are never told apart by float or note rounding."""
    per_task = [Fraction(c, n) for n, c in counts.values() if n]
    return sum(per_task, Fraction(0)) / len(per_task) if per_task else Fraction(0)


def exact_pass_at_1_of(results_by_task: Mapping[str, Sequence[RolloutResult]]) -> Fraction:
    return exact_pass_at_1(_counts(results_by_task))


def pass_at(results_by_task: Mapping[str, Sequence[RolloutResult]], ks: Iterable[int]) -> dict[int, float]:
    """pass@k for each k: the mean estimate over tasks with n ≥ k (0.0 if none), spec §1.3."""
    counts = _counts(results_by_task)
    rates: dict[int, float] = {}
    for k in ks:
        estimates = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
        rates[k] = sum(estimates) / len(estimates) if estimates else 0.0
    return rates


@dataclass(frozen=True)
class PairedComparison:
    """Candidate minus baseline pass@1 over their shared tasks, with a bootstrap CI.

    ``flips_up`` are tasks that were not all-pass (pass@1 < 1) and became all-pass;
    ``flips_down`` the reverse (upstream's ``flipped`` / ``regressed`` for k ≥ 1).
    """

    delta: float
    low: float
    high: float
    n_tasks: int
    flips_up: tuple[str, ...] = ()
    flips_down: tuple[str, ...] = ()
    confidence: float = 0.95

    def __str__(self) -> str:
        return f"{self.delta * 100:+.1f} points [{self.low * 100:+.1f}, {self.high * 100:+.1f}]"

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.low > 0 or self.high < 0


def paired_bootstrap(a: Mapping[str, float], b: Mapping[str, float], *, n_resamples: int = 10_000,
                     seed: int = 0, confidence: float = 0.95) -> PairedComparison:
    """Percentile bootstrap of mean(b - a) resampling the shared tasks with replacement.

    Deterministic for a given seed (tasks are taken in sorted order). 500 tasks × 10k
    resamples take well under a second in pure Python.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError("the two evaluations have no task in common")
    diffs = [b[task] - a[task] for task in shared]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(n_resamples))
    tail = (1 - confidence) / 2
    return PairedComparison(
        delta=sum(diffs) / n, low=_quantile(means, tail), high=_quantile(means, 1 - tail), n_tasks=n,
        flips_up=tuple(task for task in shared if a[task] < 1.0 <= b[task]),
        flips_down=tuple(task for task in shared if b[task] < 1.0 <= a[task]),
        confidence=confidence)


@dataclass(frozen=True)
class Interval:
    """A mean over tasks with its percentile-bootstrap confidence interval."""

    mean: float
    low: float
    high: float
    n_tasks: int
    confidence: float = 0.95

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_interval(per_task: Mapping[str, float], *, n_resamples: int = 10_000, seed: int = 0,
                       confidence: float = 0.95) -> Interval:
    """pass@1 of one evaluation with its bootstrap CI over tasks (the paired bootstrap against zero)."""
    zero = paired_bootstrap({task: 0.0 for task in per_task}, per_task, n_resamples=n_resamples, seed=seed,
                            confidence=confidence)
    return Interval(zero.delta, zero.low, zero.high, zero.n_tasks, confidence)


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def compare(baseline: Mapping[str, Sequence[RolloutResult]], candidate: Mapping[str, Sequence[RolloutResult]],
            *, n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95) -> PairedComparison:
    """``paired_bootstrap`` of two evaluations' per-task pass@1."""
    return paired_bootstrap(per_task_pass_at_1(baseline), per_task_pass_at_1(candidate),
                            n_resamples=n_resamples, seed=seed, confidence=confidence)
