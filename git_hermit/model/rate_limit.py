"""``executor.rate_limit`` as data: how often a rate-limited rollout is rerun and the backoff between
tries. Here, not in rollouts/executors.py, so that reading hermit.yaml (config.py checks the block
once) does not import the executors and what they pull in: a warm ``log`` reads the config and
imports only what it needs (tests/test_scale.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from git_hermit.errors import ConfigError


@dataclass(frozen=True)
class RateLimitPolicy:
    """``executor.rate_limit``: how often a rate-limited rollout is rerun, and the host's backoff
    (``backoff_s`` doubling per consecutive rate limit up to ``max_backoff_s``, with jitter)."""

    retries: int = 5
    backoff_s: float = 5.0
    max_backoff_s: float = 120.0

    @classmethod
    def from_config(cls, cfg: Any) -> "RateLimitPolicy":
        if cfg is None:
            return cls()
        if not isinstance(cfg, dict) or set(cfg) - {"retries", "backoff_s", "max_backoff_s"}:
            raise ConfigError(f"executor.rate_limit {cfg!r} is not valid",
                              hint="use {retries: 5, backoff_s: 5, max_backoff_s: 120}")
        try:
            policy = cls(**{key: type(getattr(cls, key))(value) for key, value in cfg.items()})
        except (TypeError, ValueError):
            raise ConfigError(f"executor.rate_limit {cfg!r} is not valid",
                              hint="retries is a count, backoff_s and max_backoff_s are seconds") from None
        if policy.retries < 0 or policy.backoff_s < 0 or policy.max_backoff_s < policy.backoff_s:
            raise ConfigError(f"executor.rate_limit {cfg!r} is not valid",
                              hint="retries >= 0 and 0 <= backoff_s <= max_backoff_s")
        return policy

    def delay_s(self, consecutive: int, rng: Callable[[], float]) -> float:
        """The wait after the ``consecutive``-th rate limit in a row: exponential, "equal jitter"
        (half fixed, half random) so workers that were limited together do not return together."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** max(0, consecutive - 1))
        return ceiling / 2 + rng() * ceiling / 2
