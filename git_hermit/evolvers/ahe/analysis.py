"""AHE step statistics: per-task labels of the k rollouts, pass@i, the step-to-step diff and
cross-step stability (spec/ahe.md §1, §2; upstream evolve.py:557-914 compute_stats,
compute_iteration_diff, compute_task_stability). Pure functions over RolloutResult; no I/O.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from git_hermit.model.rollout import RolloutResult

Label = Literal["pass", "fail", "exception"]

DIFF_CELLS: tuple[str, ...] = (
    "flipped", "regressed", "infra_recovered", "infra_lost", "stable_pass", "stable_fail",
    "exception_to_fail", "fail_to_exception", "exception_stable",
)
# (prev label, cur label) -> diff cell, spec §2.3
_TRANSITIONS: dict[tuple[str, str], str] = {
    ("fail", "pass"): "flipped",
    ("pass", "fail"): "regressed",
    ("exception", "pass"): "infra_recovered",
    ("pass", "exception"): "infra_lost",
    ("pass", "pass"): "stable_pass",
    ("fail", "fail"): "stable_fail",
    ("exception", "fail"): "exception_to_fail",
    ("fail", "exception"): "fail_to_exception",
    ("exception", "exception"): "exception_stable",
}
STABILITY_BUCKETS: tuple[str, ...] = (
    "unstable", "possibly_unstable", "stable_pass", "stable_fail", "infra_only")


@dataclass(frozen=True)
class TaskRollouts:
    """How a task's trials split (the k>1 task_history entry, spec §10.1)."""

    n_pass: int
    n_fail: int
    n_exception: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {"n_pass": self.n_pass, "n_fail": self.n_fail,
                "n_exception": self.n_exception, "total": self.total}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TaskRollouts":
        n_pass, n_fail = int(data.get("n_pass", 0)), int(data.get("n_fail", 0))
        n_exc = int(data.get("n_exception", 0))
        return cls(n_pass, n_fail, n_exc, int(data.get("total", n_pass + n_fail + n_exc)))


@dataclass(frozen=True)
class TrialStats:
    """Trial-level counts over every rollout of the step (spec §1.3 trial_stats)."""

    n_pass: int
    n_fail: int
    n_exception: int
    n_total: int

    @property
    def trial_pass_rate(self) -> float:
        return self.n_pass / self.n_total if self.n_total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n_pass": self.n_pass, "n_fail": self.n_fail, "n_exception": self.n_exception,
                "n_total": self.n_total, "trial_pass_rate": self.trial_pass_rate}


@dataclass(frozen=True)
class StepStats:
    """One step's classification (spec §1.3 compute_stats, keys kept).

    ``pass_rate`` is pass@1: n_pass/n_total over task labels when k == 1, else the Chen
    pass@1 macro-averaged over tasks. ``per_task_rollouts`` is filled only when k > 1, as
    upstream, so the diff's rollout sub-buckets need k > 1 on both sides (§2.4).
    """

    k: int
    task_results: Mapping[str, str]
    pass_rate: float
    exception_types: Mapping[str, int] = field(default_factory=dict)
    task_exception_types: Mapping[str, str] = field(default_factory=dict)  # first exception trial's
    timeout_tasks: frozenset[str] = frozenset()
    per_task_rollouts: Mapping[str, TaskRollouts] = field(default_factory=dict)
    pass_at: Mapping[int, float] = field(default_factory=dict)
    per_task_pass_at: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    eligible_counts: Mapping[int, int] = field(default_factory=dict)
    trial_stats: TrialStats | None = None
    tokens_per_trial: float | None = None   # mean over trials that were not exceptions

    def _count(self, label: str) -> int:
        return sum(1 for value in self.task_results.values() if value == label)

    @property
    def n_pass(self) -> int:
        return self._count("pass")

    @property
    def n_fail(self) -> int:
        return self._count("fail")

    @property
    def n_exception(self) -> int:
        return self._count("exception")

    @property
    def n_total(self) -> int:
        return len(self.task_results)

    def tasks_with(self, label: str) -> list[str]:
        return sorted(task for task, value in self.task_results.items() if value == label)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pass_rate": self.pass_rate, "n_pass": self.n_pass, "n_fail": self.n_fail,
            "n_exception": self.n_exception, "n_total": self.n_total, "k": self.k,
            "exception_types": dict(sorted(self.exception_types.items())),
            "task_results": dict(sorted(self.task_results.items())),
            "timeout_tasks": sorted(self.timeout_tasks),
            "tokens_per_trial": self.tokens_per_trial,
        }
        if self.k > 1:
            data["per_task_rollouts"] = {t: r.to_dict() for t, r in sorted(self.per_task_rollouts.items())}
            data["pass_at_k"] = {
                "pass_at": {str(i): v for i, v in self.pass_at.items()},
                "per_task_pass_at": {t: {str(i): _json_float(v) for i, v in est.items()}
                                     for t, est in sorted(self.per_task_pass_at.items())},
                "eligible_counts": {str(i): n for i, n in self.eligible_counts.items()},
            }
            if self.trial_stats is not None:
                data["trial_stats"] = self.trial_stats.to_dict()
        return data


def _json_float(value: float) -> float | None:
    # NaN (i > n) is not valid JSON; null says "not estimable"
    return None if math.isnan(value) else value


def trial_label(result: RolloutResult) -> Label:
    """A trial's label: its scored outcome (the driver applied ``timeout_as`` once, when it read
    the results: model.rollout.scored)."""
    return result.outcome


def exception_type(result: RolloutResult) -> str:
    """The trial's exception type, ``Unknown`` when none was recorded (spec §1.1)."""
    if result.exception_type:
        return result.exception_type
    return "Timeout" if result.timed_out else "Unknown"


def pass_at_estimate(n: int, c: int, i: int) -> float:
    """Chen et al.'s unbiased pass@i for one task with n trials of which c passed (§1.3)."""
    if i > n or i < 0 or n == 0:
        return math.nan
    if n - c < i:
        return 1.0 if c > 0 else 0.0
    return 1.0 - math.comb(n - c, i) / math.comb(n, i)


def classify(results_by_task: Mapping[str, Sequence[RolloutResult]], *, k: int) -> StepStats:
    """Label every task by its trials and compute the step's statistics (spec §1.2, §1.3).

    A task with no trials is left out, as upstream (the diff then sees it as exception).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    task_results: dict[str, str] = {}
    rollouts: dict[str, TaskRollouts] = {}
    exception_types: Counter[str] = Counter()
    task_exception_types: dict[str, str] = {}
    timeout_tasks: set[str] = set()
    tokens, token_trials = 0, 0
    for task in sorted(results_by_task):
        trials = results_by_task[task]
        if not trials:
            continue
        tp = tf = te = 0
        for result in trials:
            label = trial_label(result)
            if label == "pass":
                tp += 1
            elif label == "fail":
                tf += 1
            else:
                te += 1
                exception_types[exception_type(result)] += 1
                task_exception_types.setdefault(task, exception_type(result))
            if result.reward is None and result.is_timeout:
                timeout_tasks.add(task)
            if result.outcome != "exception":
                tokens += result.usage.total_tokens
                token_trials += 1
        total = len(trials)
        task_results[task] = "pass" if tp == total else "exception" if te == total else "fail"
        rollouts[task] = TaskRollouts(tp, tf, te, total)

    n_tasks = len(task_results)
    per_task_pass_at: dict[str, dict[int, float]] = {}
    pass_at: dict[int, float] = {}
    eligible: dict[int, int] = {}
    if k == 1:
        pass_rate = sum(1 for v in task_results.values() if v == "pass") / n_tasks if n_tasks else 0.0
        pass_at = {1: pass_rate}
    else:
        for task, r in rollouts.items():
            per_task_pass_at[task] = {i: pass_at_estimate(r.total, r.n_pass, i) for i in range(1, k + 1)}
        for i in range(1, k + 1):
            values = [est[i] for est in per_task_pass_at.values() if not math.isnan(est[i])]
            eligible[i] = len(values)
            pass_at[i] = sum(values) / len(values) if values else 0.0
        pass_rate = pass_at[1]
    trial_stats = TrialStats(
        sum(r.n_pass for r in rollouts.values()), sum(r.n_fail for r in rollouts.values()),
        sum(r.n_exception for r in rollouts.values()), sum(r.total for r in rollouts.values()))
    return StepStats(
        k=k, task_results=task_results, pass_rate=pass_rate,
        exception_types=dict(exception_types), task_exception_types=task_exception_types,
        timeout_tasks=frozenset(timeout_tasks),
        per_task_rollouts=rollouts if k > 1 else {}, pass_at=pass_at,
        per_task_pass_at=per_task_pass_at, eligible_counts=eligible,
        trial_stats=trial_stats if k > 1 else None,
        # no recorded usage at all (e.g. a scripted agent) is unknown, not zero
        tokens_per_trial=tokens / token_trials if tokens and token_trials else None,
    )


@dataclass(frozen=True)
class StepDiff:
    """The nine prev→cur cells and, with rollouts on both sides, the fail→fail split (§2)."""

    flipped: tuple[str, ...] = ()
    regressed: tuple[str, ...] = ()
    infra_recovered: tuple[str, ...] = ()
    infra_lost: tuple[str, ...] = ()
    stable_pass: tuple[str, ...] = ()
    stable_fail: tuple[str, ...] = ()
    exception_to_fail: tuple[str, ...] = ()
    fail_to_exception: tuple[str, ...] = ()
    exception_stable: tuple[str, ...] = ()
    rollout_improved: tuple[str, ...] = ()
    rollout_regressed: tuple[str, ...] = ()
    rollout_unchanged: tuple[str, ...] = ()
    rollout_details: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    has_rollouts: bool = False

    @property
    def net(self) -> int:
        return len(self.flipped) - len(self.regressed)

    @property
    def retention(self) -> float | None:
        """stable_pass / (stable_pass + regressed); None when nothing passed before (§2.5)."""
        denominator = len(self.stable_pass) + len(self.regressed)
        return len(self.stable_pass) / denominator if denominator else None

    def rollout_text(self, task: str) -> str:
        """``task (p/tot->c/tot)``, the way the query shows a rollout move (§2.4)."""
        if task not in self.rollout_details:
            return task
        prev_np, cur_np, total = self.rollout_details[task]
        return f"{task} ({prev_np}/{total}->{cur_np}/{total})"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {cell: list(getattr(self, cell)) for cell in DIFF_CELLS}
        data.update(net=self.net, retention=self.retention, has_rollouts=self.has_rollouts)
        if self.has_rollouts:
            data.update(rollout_improved=list(self.rollout_improved),
                        rollout_regressed=list(self.rollout_regressed),
                        rollout_unchanged=list(self.rollout_unchanged),
                        rollout_details={t: list(v) for t, v in sorted(self.rollout_details.items())})
        return data


def diff(prev: StepStats | None, cur: StepStats) -> StepDiff | None:
    """Diff step N-1 against step N over the union of their tasks (spec §2).

    None when there is no previous step. A task missing on one side counts as exception there.
    """
    if prev is None:
        return None
    cells: dict[str, list[str]] = {cell: [] for cell in DIFF_CELLS}
    for task in sorted(set(prev.task_results) | set(cur.task_results)):
        before = prev.task_results.get(task, "exception")
        after = cur.task_results.get(task, "exception")
        cells[_TRANSITIONS[(before, after)]].append(task)
    has_rollouts = bool(prev.per_task_rollouts) and bool(cur.per_task_rollouts)
    details: dict[str, tuple[int, int, int]] = {}
    moves: dict[str, list[str]] = {"rollout_improved": [], "rollout_regressed": [], "rollout_unchanged": []}
    if has_rollouts:
        for task in sorted(set(prev.per_task_rollouts) | set(cur.per_task_rollouts)):
            p, c = prev.per_task_rollouts.get(task), cur.per_task_rollouts.get(task)
            total = c.total if c else p.total if p else 0
            details[task] = (p.n_pass if p else 0, c.n_pass if c else 0, total)
        for task in cells["stable_fail"]:
            prev_np, cur_np, _ = details.get(task, (0, 0, 0))
            bucket = ("rollout_improved" if cur_np > prev_np
                      else "rollout_regressed" if cur_np < prev_np else "rollout_unchanged")
            moves[bucket].append(task)
    return StepDiff(**{cell: tuple(tasks) for cell, tasks in cells.items()},
                    **{bucket: tuple(tasks) for bucket, tasks in moves.items()},
                    rollout_details=details, has_rollouts=has_rollouts)


def stability(history: Mapping[str, Sequence[Sequence[Any]]], min_iterations: int = 3) -> dict[str, list[str]]:
    """Bucket every task by its labels over all steps so far (spec §2.6).

    ``history`` maps task → entries ``(step, label[, rollouts])``; exceptions are ignored
    except to mark a task ``infra_only``.
    """
    buckets: dict[str, list[str]] = {bucket: [] for bucket in STABILITY_BUCKETS}
    for task in sorted(history):
        labels = [entry[1] for entry in history[task]]
        verdicts = [label for label in labels if label in ("pass", "fail")]
        if not verdicts:
            if "exception" in labels:
                buckets["infra_only"].append(task)
            continue
        if "pass" in verdicts and "fail" in verdicts:
            buckets["unstable" if len(verdicts) >= min_iterations else "possibly_unstable"].append(task)
        else:
            buckets["stable_pass" if verdicts[0] == "pass" else "stable_fail"].append(task)
    return buckets
