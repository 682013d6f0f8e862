"""A run's spending cap, checked before each rollout and learner session of a step starts.

``Budget`` holds hermit.yaml's ``budget: {max_usd, max_tokens}``, what the run spent before
this step, the means the ledger gives per rollout and per step's learners, and the step's live
ledger. The runner asks ``start_step`` once and ``may_start`` before it submits each rollout;
learners go through ``guard``. `rollout`/`eval` get one with ``evaluation``: refused only once
the budget is reached, stopped before a rollout that would cross it. History: core/budget.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from git_hermit.accounting.ledger import Ledger, LedgerEntry, Price, row_of, sum_usage
from git_hermit.errors import BudgetReached, ConfigError
from git_hermit.model.rollout import RolloutResult, Usage

ROLLOUT_ROLES = ("acting", "judge")     # billed per rollout; every other role is a learner's


@dataclass(frozen=True)
class Spread:
    """Mean, sample standard deviation and range of some per-step or per-rollout figures."""

    mean: float
    sd: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread | None":
        values = list(values)
        if not values:
            return None
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(statistics.fmean(values), sd, min(values), max(values), len(values))

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "sd": self.sd, "min": self.min, "max": self.max}


def usd(value: float) -> str:
    """``$0.06``, ``$0.005``, ``$12.50``: cents for sums of dollars, four decimals below."""
    if abs(value) >= 1:
        return f"${value:,.2f}"
    text = f"{value:.4f}".rstrip("0")
    return "$" + (text + "0" * max(0, 2 - len(text.split(".")[1])))


def rollout_usages(entries: Iterable[LedgerEntry]) -> list[Usage]:
    """One usage per rollout (its agent, its judge, its re-queued rate-limited attempts), from
    ledger entries of any steps. A row with only re-queued attempts is no rollout (yet)."""
    grouped: dict[tuple[Any, str], list[Usage]] = {}
    finished: set[tuple[Any, str]] = set()
    for entry in entries:
        if entry.role in ROLLOUT_ROLES:
            row = (entry.step, row_of(entry.key))
            grouped.setdefault(row, []).append(entry.usage)
            if row[1] == entry.key:
                finished.add(row)
    return [sum_usage(usages) for row, usages in grouped.items() if row in finished]


def unpriced_models(entries: Iterable[LedgerEntry]) -> list[str]:
    """Models whose usage has tokens but no cost (no price): they make a USD total unknown."""
    return sorted({str(e.model) for e in entries if e.usage.cost_usd is None and e.usage.total_tokens > 0})


class Budget:
    """The cap of one step (or one `rollout`/`eval`). Without limits every check passes."""

    def __init__(self, *, step: int | None, max_usd: float | None = None, max_tokens: int | None = None,
                 prior: Usage = Usage(cost_usd=0.0), prior_entries: Iterable[LedgerEntry] = (),
                 history_rollouts: Iterable[Usage] = (), learner_per_step: Usage | None = None,
                 prices: Mapping[str, Price] | None = None, model: str | None = None,
                 judge_model: str | None = None, evaluation: bool = False, what: str | None = None,
                 carried: Iterable[LedgerEntry] = ()):
        self.step = step
        # `git hermit rollout`/`eval`: the user asked for that measurement, so only a reached
        # budget refuses it, and its reused rollouts are in ``prior`` already
        self.evaluation = evaluation
        self.what = what or f"step {step}"     # what the messages name
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.prior = prior
        self.learner_per_step = learner_per_step
        self.prices = dict(prices or {})
        self.model = model
        self.judge_model = judge_model
        self._unpriced = set(unpriced_models(prior_entries))
        history = list(history_rollouts)
        # running sums, so that each check costs the same whatever the number of rollouts
        self._rollouts_total = sum_usage(history)
        self._rollouts_count = len(history)
        # this step's spending on other machines (from its note: core/budget.carried_over), then
        # its rollouts here, finished or reused; the step's ledger starts with it too
        self.carried = list(carried)
        self._step_rollouts = sum_usage(e.usage for e in self.carried)
        self._step_ledger: Ledger | None = None    # once the learners run: the step's whole ledger
        self.stopped = False                       # set when a rollout was not started

    @property
    def limited(self) -> bool:
        return self.max_usd is not None or self.max_tokens is not None

    # --- what was spent, what one more piece of work costs --------------------------------
    def spent(self) -> Usage:
        step = self._step_ledger.total() if self._step_ledger is not None else self._step_rollouts
        return sum_usage([self.prior, step])

    def _spent_checked(self) -> Usage:
        """Spent so far; a USD cap over spending whose cost is unknown is refused, never ignored."""
        spent = self.spent()
        if self.max_usd is not None and spent.cost_usd is None:
            models = set(self._unpriced)
            if self._step_ledger is not None:
                models |= set(unpriced_models(self._step_ledger.entries))
            raise ConfigError(f"budget.max_usd is set but the cost of model(s) {', '.join(sorted(models)) or '?'} "
                              "is unknown (no price)",
                              hint="add them to prices: in hermit.yaml (USD per 1M tokens), or budget by max_tokens")
        return spent

    def rollout_mean(self) -> Usage | None:
        """Mean usage of one rollout: this step's finished ones and every earlier step's."""
        count = self._rollouts_count
        if not count:
            return None
        total = self._rollouts_total
        return Usage(round(total.input_tokens / count), round(total.cached_input_tokens / count),
                     round(total.output_tokens / count), round(total.reasoning_tokens / count),
                     None if total.cost_usd is None else total.cost_usd / count)

    def _crosses(self, spent: Usage, extra_tokens: float, extra_usd: float) -> bool:
        if self.max_tokens is not None and spent.total_tokens + extra_tokens > self.max_tokens:
            return True
        return self.max_usd is not None and (spent.cost_usd or 0.0) + extra_usd > self.max_usd + 1e-12

    def _reached(self, spent: Usage) -> bool:
        if self.max_tokens is not None and spent.total_tokens >= self.max_tokens:
            return True
        return self.max_usd is not None and (spent.cost_usd or 0.0) >= self.max_usd - 1e-12

    # --- the checks -------------------------------------------------------------------------
    def start_step(self, pending: int) -> None:
        """Refuse to start the step when its estimate (the pending rollouts at the mean cost of
        one, plus a step's mean learner cost) would cross the budget."""
        if not self.limited or (self.evaluation and not pending):   # a re-run that spends nothing
            return
        spent = self._spent_checked()
        if self._reached(spent):
            raise self._error(f"budget reached before {self.what} could start")
        if self.evaluation:
            return
        per_rollout = self.rollout_mean() or Usage(cost_usd=0.0)
        learners = self.learner_per_step or Usage(cost_usd=0.0)
        tokens = pending * per_rollout.total_tokens + learners.total_tokens
        cost = pending * (per_rollout.cost_usd or 0.0) + (learners.cost_usd or 0.0)
        if self._crosses(spent, tokens, cost):
            parts = []
            if self.max_usd is not None:
                parts.append(f"{usd(cost)} ({pending} rollout(s) × {usd(per_rollout.cost_usd or 0.0)}"
                             f" + learners {usd(learners.cost_usd or 0.0)})")
            if self.max_tokens is not None:
                parts.append(f"{tokens:,.0f} tokens")
            raise self._error(f"{self.what} would cross the budget: it is estimated at {' and '.join(parts)}")

    def may_start(self, in_flight: int) -> bool:
        """Whether one more rollout may start: the spending so far plus the mean cost of it and
        of every rollout in flight stays within the budget. False stops the step's submissions."""
        if not self.limited or self.stopped:
            return not self.stopped
        spent = self._spent_checked()
        mean = self.rollout_mean() or Usage(cost_usd=0.0)
        ahead = in_flight + 1
        if self._reached(spent) or self._crosses(spent, ahead * mean.total_tokens, ahead * (mean.cost_usd or 0.0)):
            self.stopped = True
        return not self.stopped

    def add_rollout(self, result: RolloutResult, *, reused: bool = False) -> None:
        """Bill one finished (or reused) rollout of this step, priced as the step's ledger prices it."""
        if reused and self.evaluation:
            return                           # an evaluation's reused rollouts are in ``prior``
        one = Ledger(self.prices)
        one.add_rollout(result, model=self.model, judge_model=self.judge_model, step=self.step)
        usage = one.total()
        self._unpriced.update(unpriced_models(one.entries))
        self._step_rollouts = sum_usage([self._step_rollouts, usage])
        self._rollouts_total = sum_usage([self._rollouts_total, usage])
        self._rollouts_count += 1

    def add_retried(self, retried: Any, *, reused: bool = False) -> None:
        """Bill a rate-limited attempt the runner re-queued (a ``runner.RetriedAttempt``): spent, and
        part of its rollout's mean cost, though not a rollout of its own."""
        if reused and self.evaluation:
            return                           # an evaluation's earlier spending is in ``prior``
        one = Ledger(self.prices)
        one.add_retried(retried.task, retried.attempt, retried.id, retried.usage, model=self.model, step=self.step)
        usage = one.total()
        self._unpriced.update(unpriced_models(one.entries))
        self._step_rollouts = sum_usage([self._step_rollouts, usage])
        self._rollouts_total = sum_usage([self._rollouts_total, usage])

    def reached_error(self, finished: int, total: int) -> BudgetReached:
        return self._error(f"budget reached in {self.what}: {finished} of its {total} rollout(s) finished "
                           f"(kept), {total - finished} not started")

    def before_session(self, role: str) -> None:
        if self.limited and self._reached(self._spent_checked()):
            raise self._error(f"budget reached in {self.what} before a {role} session")

    def guard(self, factory: Callable[[str], Any]) -> Callable[[str], Any]:
        """The step's learner factory, each learner checking the budget before a session."""
        if not self.limited:
            return factory
        return lambda role: _GuardedLearner(factory(role), self)

    def watch(self, ledger: Ledger) -> Ledger:
        """From now on ``ledger`` (the step's: its rollouts, and the sessions the learners bill
        there, a resumed step's reused ones included) is this step's spending."""
        self._step_ledger = ledger
        return ledger

    def _error(self, what: str) -> BudgetReached:
        spent = self.spent()
        parts = []
        if self.max_usd is not None:
            left = max(self.max_usd - (spent.cost_usd or 0.0), 0.0)
            parts.append(f"spent {usd(spent.cost_usd or 0.0)} of budget.max_usd {usd(self.max_usd)} ({usd(left)} left)")
        if self.max_tokens is not None:
            left_tokens = max(self.max_tokens - spent.total_tokens, 0)
            parts.append(f"spent {spent.total_tokens:,} of budget.max_tokens {self.max_tokens:,} tokens ({left_tokens:,} left)")
        keys = " or ".join(k for k, v in (("budget.max_usd", self.max_usd), ("budget.max_tokens", self.max_tokens))
                           if v is not None)
        return BudgetReached(f"{what}; {'; '.join(parts)}",
                             hint=f"raise {keys} in hermit.yaml and re-run; finished rollouts and sessions "
                                  "are kept (`git hermit estimate` forecasts the next steps)")


class _GuardedLearner:
    """A learner whose every session first checks the budget (its other attributes pass through)."""

    def __init__(self, inner: Any, budget: Budget):
        self._inner = inner
        self._budget = budget

    def ask(self, *args: Any, **kwargs: Any) -> Any:
        self._budget.before_session(getattr(self._inner, "role", "learner"))
        return self._inner.ask(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

