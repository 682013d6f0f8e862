"""One rollout's result and token usage: the record every rollout writes as result.json.

Pure data (no I/O): frozen dataclasses with canonical JSON (``to_json``/``from_json``),
shared by the rollout runner, the judges, the ledger and the evolvers' analysis.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Outcome = Literal["pass", "fail", "exception"]


# Records are slotted and share what repeats: a step holds one RolloutResult per rollout (the
# evolvers read them), so their size is what grows with the number of rollouts.
@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call or rollout used, and its cost when a price is known (None = unknown)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        # cached input is a subset of input; reasoning is a subset of output (OpenAI usage shape)
        return self.input_tokens + self.output_tokens

    def __add__(self, other: "Usage") -> "Usage":
        cost = None if self.cost_usd is None and other.cost_usd is None else (
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0))
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            cost,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Usage":
        data = data or {}
        usage = cls(**{k: data[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens",
                                             "reasoning_tokens", "cost_usd") if k in data})
        return _NO_USAGE if usage == _NO_USAGE else usage     # frozen: one shared "nothing used"


_NO_USAGE = Usage()


@dataclass(frozen=True, slots=True)
class RolloutResult:
    """What one attempt of one task produced, as judged.

    ``outcome`` follows spec/ahe.md §1.1: pass (reward >= 1), fail (a reward < 1, or a
    ``timeout_as: fail`` timeout), exception (no reward: agent/judge crash or timeout).
    ``exception_type`` is set for exceptions (a timeout's type ends in ``Timeout``).
    Paths are relative to the rollout's own directory.
    """

    task: str
    attempt: int
    outcome: Outcome
    reward: float | None = None
    exception_type: str | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    usage: Usage = field(default_factory=Usage)
    judge_usage: Usage = field(default_factory=Usage)
    final_answer: str | None = None
    verifier_output: str = ""          # the judge's feedback the Debugger reads (never shown to the agent)
    error: str | None = None           # a one-line description of an exception outcome
    commit: str = ""                   # the adapter commit the rollout ran
    agent: str = ""                    # backend name (codex, claude-code, pi, command, scripted)
    trajectory: str | None = None      # e.g. "trajectory.jsonl"
    hook_log: str | None = None        # e.g. "hook-calls.jsonl"
    v: int = 1

    @property
    def is_timeout(self) -> bool:
        return self.timed_out or (self.exception_type is not None and "Timeout" in self.exception_type)

    def with_(self, **changes: Any) -> "RolloutResult":
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = self.usage.to_dict()
        data["judge_usage"] = self.judge_usage.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RolloutResult":
        fields = dict(data)
        fields["usage"] = Usage.from_dict(fields.get("usage"))
        fields["judge_usage"] = Usage.from_dict(fields.get("judge_usage"))
        known = cls.__dataclass_fields__.keys()
        for name in _REPEATED:          # the same few values in every result of a step
            if isinstance(fields.get(name), str):
                fields[name] = sys.intern(fields[name])
        return cls(**{k: v for k, v in fields.items() if k in known})


_REPEATED = ("outcome", "exception_type", "commit", "agent", "trajectory", "hook_log")


def scored(result: RolloutResult, timeout_as: str) -> RolloutResult:
    """The result as the run scores it: with ``timeout_as: fail`` (seed 000) a timed-out rollout
    (agent or verifier) is a fail, still without a reward and with its exception type, so it
    still reads as a timeout. Applied once, when a command reads its results (core/evaluate.py
    run_split); the stored result is as it happened."""
    if timeout_as == "fail" and result.outcome == "exception" and result.is_timeout:
        return replace(result, outcome="fail")
    return result
