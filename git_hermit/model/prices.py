"""hermit.yaml ``prices:`` as data: USD per 1M tokens per model, parsed and checked once. Here, not
in accounting/ledger.py, so that reading the config imports no ledger (and no rollout record): a
warm ``log`` reads the config and imports only what it needs (tests/test_scale.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from git_hermit.errors import ConfigError


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens. Cached input is billed at ``cached_input`` instead of ``input``."""

    input: float
    cached_input: float
    output: float


def load_prices(spec: Mapping[str, Any] | None) -> dict[str, Price]:
    """Parse hermit.yaml ``prices:``; ``cached_input`` defaults to ``input``."""
    prices: dict[str, Price] = {}
    for model, entry in (spec or {}).items():
        if not isinstance(entry, Mapping) or "input" not in entry or "output" not in entry:
            raise ConfigError(f"prices.{model}: needs input and output (USD per 1M tokens)",
                              "e.g. prices: {gpt-5.6-luna: {input: 1.25, cached_input: 0.125, output: 10.0}}")
        unknown = sorted(set(entry) - {"input", "cached_input", "output"})
        if unknown:
            raise ConfigError(f"prices.{model}: unknown key(s) {', '.join(unknown)}",
                              "known keys: input, cached_input, output")
        try:
            price = Price(float(entry["input"]), float(entry.get("cached_input", entry["input"])),
                          float(entry["output"]))
        except (TypeError, ValueError):
            raise ConfigError(f"prices.{model}: prices must be numbers", "USD per 1M tokens") from None
        if min(price.input, price.cached_input, price.output) < 0:
            raise ConfigError(f"prices.{model}: prices cannot be negative")
        prices[str(model)] = price
    return prices
