"""Rollouts that ended without a result (exceptions): what they were, and when they stop a command.

An exception row has no reward (a timeout, a crashed agent or judge, a refused key): it measured
nothing about the adapter. ``Failures`` counts a batch's by type with its first error; a
`rollout`/`eval` whose rows are all exceptions, or a step whose exception share passes
``trainer.max_exception_rate``, raises ``RolloutsFailed`` before anything is scored or learned.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from git_hermit.errors import RolloutsFailed
from git_hermit.model.rollout import RolloutResult

FIRST_ERROR_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

RERUN_HINT = ("the exception rows run again on the next command and finished rows are reused "
              "(`--keep-exceptions` keeps the exceptions instead)")


def _one_line(text: str) -> str:
    """An agent's or judge's error as one printable line (it is untrusted: no terminal escapes)."""
    line = " ".join(text.split())
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line)
    return line if len(line) <= FIRST_ERROR_CHARS else line[:FIRST_ERROR_CHARS - 1] + "…"


@dataclass(frozen=True)
class Failures:
    """A batch's exception rows: how many of how many, by type, and the first one's error."""

    rows: int
    by_type: Mapping[str, int]
    first_error: str | None

    @property
    def count(self) -> int:
        return sum(self.by_type.values())

    @property
    def share(self) -> float:
        return self.count / self.rows if self.rows else 0.0

    def types_text(self) -> str:
        """``AgentTimeout 6, RewardFileNotFoundError 2`` (most first)."""
        return ", ".join(f"{name} {n}" for name, n in sorted(self.by_type.items(), key=lambda kv: (-kv[1], kv[0])))

    def line(self) -> str:
        """``2 exception(s): AgentTimeout 2; first: agent timed out after 1s`` ('' when none)."""
        if not self.count:
            return ""
        first = f"; first: {self.first_error}" if self.first_error else ""
        return f"{self.count} exception(s): {self.types_text()}{first}"


def failures_of(results: Mapping[str, Sequence[RolloutResult]]) -> Failures:
    """The exception rows of ``results`` (scored: a ``timeout_as: fail`` timeout is a fail)."""
    by_type: Counter[str] = Counter()
    first: RolloutResult | None = None
    rows = 0
    for task in sorted(results):
        for result in sorted(results[task], key=lambda r: r.attempt):
            rows += 1
            if result.outcome != "exception":
                continue
            by_type[result.exception_type or "Exception"] += 1
            if first is None:
                first = result
    error = (first.error or first.exception_type) if first is not None else None
    return Failures(rows, dict(by_type), _one_line(error) if error else None)


def require_results(results: Mapping[str, Sequence[RolloutResult]], what: str) -> Failures:
    """The batch's failures; RolloutsFailed when every row is one (``what``: "the rollouts of … on train")."""
    failures = failures_of(results)
    if failures.rows and failures.count == failures.rows:
        raise RolloutsFailed(
            f"all {failures.rows} rollout(s) of {what} ended in an exception, so nothing was scored: "
            f"{failures.types_text()}; the first: {failures.first_error or 'no message'}",
            hint=f"fix the cause (the agent's key or login, its network, its timeout_s, the judge) and re-run: "
                 f"{RERUN_HINT}")
    return failures


def check_exception_rate(results: Mapping[str, Sequence[RolloutResult]], rate: float, *, step: int,
                         evaluated: str) -> Failures:
    """A step's failures; RolloutsFailed, before its learners, when their share passes ``rate``."""
    failures = failures_of(results)
    if failures.rows and failures.share > rate:
        raise RolloutsFailed(
            f"step {step} stopped before its learners: {failures.count} of {failures.rows} rollout(s) of "
            f"{evaluated} ended in an exception ({failures.share:.0%} > trainer.max_exception_rate {rate:g}): "
            f"{failures.types_text()}; the first: {failures.first_error or 'no message'}",
            hint=f"fix the cause and run the step again: {RERUN_HINT}; if the adapter itself causes them, "
                 "raise trainer.max_exception_rate (1.0: never stop) so its changes are judged")
    return failures
