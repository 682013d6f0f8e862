"""The seed's parameters of evo-harness with their defaults, read once from ``evolver.params``
(a bad value is one ConfigError line, never a traceback deep inside a step)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from git_hermit.errors import ConfigError
from git_hermit.evolvers.params import param_defaults

# the defaults of the fields below, from the evolver's params.schema.json (which config.py validates)
DEFAULTS: dict[str, Any] = {key: value for key, value in param_defaults("evo-harness").items()
                            if key in ("batch_size", "max_steps", "success_threshold", "general_min_tasks",
                                       "max_general_skills", "max_topic_skills", "max_skill_chars",
                                       "max_library_chars", "max_evidence_chars")}
# the params that are also check_spec limits of the evo-harness template (check_adapter(limits=…))
LIMIT_KEYS = ("general_min_tasks", "max_general_skills", "max_topic_skills", "max_skill_chars", "max_library_chars")


@dataclass(frozen=True)
class EvoParams:
    batch_size: int
    max_steps: int | None
    success_threshold: float
    general_min_tasks: int
    max_general_skills: int
    max_topic_skills: int
    max_skill_chars: int
    max_library_chars: int
    max_evidence_chars: int

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> "EvoParams":
        values = {key: raw[key] for key in DEFAULTS}   # ``raw`` is config.params: its defaults applied there
        for key, value in values.items():
            if key == "max_steps" and value is None:
                continue
            if key == "success_threshold":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= (1 if key in (
                    "batch_size", "max_steps") else 0)
            if not ok:
                raise ConfigError(f"evolver.params.{key} is {value!r}, which is not valid for evo-harness",
                                  hint=f"use a {'number' if key == 'success_threshold' else 'non-negative integer'}"
                                       f" (default {DEFAULTS[key]!r})")
        return cls(**values)

    def limits(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in LIMIT_KEYS}
