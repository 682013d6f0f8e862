"""What a learner is asked and answers, as data: the Learner protocol an evolver is handed, its
result, the earlier rounds of a conversation and a one-shot call's sampling. Here, not in
learners/, so that evolvers/base.py names a learner without importing the sessions, the chat
clients and the agents behind them (issue 26.4: the evolvers' floor followed the learners').
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from git_hermit.model.rollout import Usage


@dataclass(frozen=True)
class LearnerResult:
    text: str
    usage: Usage
    ok: bool
    error: str | None = None
    duration_s: float = 0.0
    model: str | None = None


@dataclass(frozen=True)
class Exchange:
    """One earlier round of a conversation: what the learner was asked and what it answered."""

    asked: str
    answered: str


@dataclass(frozen=True)
class Sampling:
    """A one-shot call's sampling settings; None leaves the endpoint's own default."""

    max_tokens: int | None = None
    temperature: float | None = None


class Learner(Protocol):
    role: str

    def check_available(self) -> None: ...

    def ask(self, workspace: Path, prompt: str, *, timeout_s: float, key: str,
            earlier: tuple[Exchange, ...] = (), sampling: Sampling | None = None) -> LearnerResult:
        """Run one session (or call) in ``workspace``; the learner may edit files there.
        ``earlier``: the rounds before this one (``prompt`` then follows up on them)."""
