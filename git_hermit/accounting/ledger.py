"""The ledger: tokens and cost of every rollout, judge call and learner session, by role.

Owns the price table (hermit.yaml ``prices: {model: {input, cached_input, output}}``, USD per
1M tokens), ``price_usage`` and ``Ledger``. A model without a price (a login) has cost None:
unknown, never invented; a total that includes such usage is unknown too. Roles in use:
``acting`` (the agent under test), ``judge``, and the learners' ``debugger``, ``evolve``, … .
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Mapping

from git_hermit.model.jsonstream import LazyList, json_chunks
from git_hermit.model.prices import Price as Price, load_prices as load_prices   # re-exported: the ledger's readers name them here
from git_hermit.model.rollout import RolloutResult, Usage

_PER_TOKEN = 1e-6
# An attempt the model's rate limit ended and the runner re-queued is billed under its row's key
# and this mark (``t1#2~rate-limited-<id>``): the row's cost, but no trial of it (runner.py).
RETRIED = "~rate-limited-"


def row_of(key: str) -> str:
    """The row (``task#attempt``) a ledger key bills: a re-queued attempt's key names its row."""
    return key.split(RETRIED, 1)[0]


def price_usage(usage: Usage, price: Price | None) -> Usage:
    """``usage`` with ``cost_usd`` from ``price`` (None when there is no price).

    Cached tokens are a subset of input and reasoning tokens a subset of output (the OpenAI
    usage shape ``Usage`` follows), so reasoning is billed as output once.
    """
    if price is None:
        return replace(usage, cost_usd=None)
    uncached = max(usage.input_tokens - usage.cached_input_tokens, 0)
    cost = (uncached * price.input + usage.cached_input_tokens * price.cached_input
            + usage.output_tokens * price.output) * _PER_TOKEN
    return replace(usage, cost_usd=cost)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One billed call: a rollout's agent, a judge call, a learner session.

    ``outcome`` is set on acting entries (a trial's outcome) so that token means can leave out
    exception trials, as the paper does (spec/ahe.md §11.3).
    """

    role: str
    key: str                     # e.g. "task#2", "debugger/task", "evolve"
    model: str | None
    usage: Usage
    step: int | None = None
    outcome: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "key": self.key, "model": self.model, "usage": self.usage.to_dict(),
                "step": self.step, "outcome": self.outcome}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LedgerEntry":
        return cls(data["role"], data["key"], data.get("model"), Usage.from_dict(data.get("usage")),
                   data.get("step"), data.get("outcome"))


def add_by_role(totals: Mapping[str, Usage], more: Mapping[str, Usage]) -> dict[str, Usage]:
    """``totals`` with ``more`` added to it role by role (a role new to it comes last)."""
    out = dict(totals)
    for role, usage in more.items():
        out[role] = sum_usage([out[role], usage]) if role in out else usage
    return out


def sum_usage(usages: Iterable[Usage]) -> Usage:
    """Token sums; the cost is None as soon as any usage with tokens has an unknown cost."""
    total = Usage(cost_usd=0.0)
    unknown = False
    for usage in usages:
        total = total + usage
        unknown = unknown or (usage.cost_usd is None and usage.total_tokens > 0)
    return replace(total, cost_usd=None) if unknown else total


class Ledger:
    """Thread-safe list of entries (rollouts finish on executor threads) with totals."""

    def __init__(self, prices: Mapping[str, Price] | None = None,
                 entries: Iterable[LedgerEntry] = ()):
        self.prices = dict(prices or {})
        self._entries = list(entries)
        self._lock = threading.Lock()

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        with self._lock:
            return tuple(self._entries)

    def add(self, entry: LedgerEntry) -> LedgerEntry:
        """Record ``entry``, pricing it from the table unless its usage already has a cost."""
        if entry.usage.cost_usd is None and entry.model is not None:
            entry = replace(entry, usage=price_usage(entry.usage, self.prices.get(entry.model)))
        with self._lock:
            self._entries.append(entry)
        return entry

    def record(self, role: str, key: str, model: str | None, usage: Usage, *,
               step: int | None = None, outcome: str | None = None) -> LedgerEntry:
        return self.add(LedgerEntry(role, key, model, usage, step, outcome))

    def add_rollout(self, result: RolloutResult, *, model: str | None, judge_model: str | None = None,
                    step: int | None = None) -> None:
        """Bill one rollout: its agent (role ``acting``) and, if it used tokens, its judge."""
        key = f"{result.task}#{result.attempt}"
        self.record("acting", key, model, result.usage, step=step, outcome=result.outcome)
        if result.judge_usage.total_tokens or result.judge_usage.cost_usd:
            self.record("judge", key, judge_model, result.judge_usage, step=step)

    def add_retried(self, task: str, attempt: int, retry_id: str, usage: Usage, *, model: str | None,
                    step: int | None = None) -> None:
        """Bill a rate-limited attempt the runner re-queued (an ``exception``, so no trial mean counts it)."""
        self.record("acting", f"{task}#{attempt}{RETRIED}{retry_id}", model, usage, step=step, outcome="exception")

    def totals(self, by: str = "role") -> dict[Any, Usage]:
        """Summed usage grouped by ``role``, ``model`` or ``step`` (insertion order)."""
        if by not in ("role", "model", "step"):
            raise ValueError(f"totals(by=…) takes role, model or step, not {by!r}")
        groups: dict[Any, list[Usage]] = {}
        for entry in self.entries:
            groups.setdefault(getattr(entry, by), []).append(entry.usage)
        return {name: sum_usage(usages) for name, usages in groups.items()}

    def total(self) -> Usage:
        return sum_usage(entry.usage for entry in self.entries)

    def tokens_per_trial(self) -> float | None:
        """Mean acting tokens per trial, exception trials left out (None: no such trial, or no trial
        recorded any usage, e.g. a command agent: unknown, not zero, as the AHE stats say)."""
        trials = [entry.usage.total_tokens for entry in self.entries
                  if entry.role == "acting" and entry.outcome != "exception"]
        return sum(trials) / len(trials) if trials and sum(trials) else None

    def successes_per_mtok(self, pass_at_1: float) -> float | None:
        """Succ/Mtok = pass@1 · 10⁶ / mean tokens per trial (spec/ahe.md §11.4)."""
        per_trial = self.tokens_per_trial()
        return pass_at_1 * 1e6 / per_trial if per_trial else None

    def to_dict(self) -> dict[str, Any]:
        return {"v": 1, "entries": [entry.to_dict() for entry in self.entries]}

    def lazy_dict(self) -> dict[str, Any]:
        """``to_dict()`` with its entries made as they are written (``model.jsonstream``)."""
        entries = self.entries
        return {"v": 1, "entries": LazyList(lambda: (entry.to_dict() for entry in entries))}

    def json_chunks(self) -> Iterator[str]:
        """``json.dumps(self.to_dict(), indent=2) + "\\n"``, an entry at a time: a step's ledger
        has an entry per rollout, and their dicts all at once were the peak of a step's memory."""
        yield from json_chunks(self.lazy_dict(), indent=2)
        yield "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], prices: Mapping[str, Price] | None = None) -> "Ledger":
        return cls(prices, (LedgerEntry.from_dict(item) for item in data.get("entries", [])))

    def render(self, by: str = "role") -> list[str]:
        """Human lines: one per group and a total, e.g. ``acting  1.2M tok (…)  $3.10``."""
        rows = [(str(name), usage) for name, usage in self.totals(by).items()]
        rows.append(("total", self.total()))
        width = max(len(name) for name, _ in rows)
        return [f"{name:<{width}}  {format_usage(usage)}" for name, usage in rows]


def format_usage(usage: Usage) -> str:
    """Tokens and cost of a group; no tokens at all means the backend reported none (every model
    call reads input), so both are shown as unknown rather than as a measured 0 and $0.00."""
    if usage.total_tokens == 0:
        return "tokens unknown (not reported)  cost unknown"
    cost = "cost unknown" if usage.cost_usd is None else f"${usage.cost_usd:,.2f}"
    return (f"{_tokens(usage.total_tokens)} tok (in {_tokens(usage.input_tokens)}, cached "
            f"{_tokens(usage.cached_input_tokens)}, out {_tokens(usage.output_tokens)}, reasoning "
            f"{_tokens(usage.reasoning_tokens)})  {cost}")


def _tokens(count: int) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= limit:
            return f"{count / limit:.1f}{suffix}"
    return str(count)
