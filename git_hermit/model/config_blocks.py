"""hermit.yaml's blocks below ``agent:`` as typed data: ``tasks``, ``judge``, ``data``, ``executor``,
``budget``, ``sandbox`` and ``trainer``, each a frozen dataclass whose field defaults are the ones
schemas/config.schema.json gives (tests/test_config_typed.py checks they agree). config.py builds
them once from a validated hermit.yaml; the parsers below config (rollouts/tasks.py,
rollouts/judges.py, supervise/sandbox.py) take them as they are, so no default is applied twice.
Here, in model/, so that those parsers read them without importing config and what it pulls in."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclasses_field   # JudgeConfig has a field named `field`
from typing import Any, Mapping

from git_hermit.model.rate_limit import RateLimitPolicy


def set_fields(cls: type, block: Mapping[str, Any] | None) -> dict[str, Any]:
    """The block's keys that name a field of ``cls`` and are set (a null is the default)."""
    names = set(cls.__dataclass_fields__) - {"given"}   # type: ignore[attr-defined]
    return {k: v for k, v in (block or {}).items() if k in names and v is not None}


# ``given`` keeps a block as written where its parser names every unknown key of it
# (rollouts/tasks.py, rollouts/judges.py).

@dataclass(frozen=True)
class TasksConfig:
    """``tasks:``: a records file (``path``) or a Harbor directory (``harbor``)."""

    path: str | None = None
    harbor: str | None = None
    id_field: str = "id"
    prompt_field: str = "prompt"
    answer_field: str = "answer"
    files_field: str | None = None
    prompt_file_field: str | None = None
    answer_file_field: str | None = None
    files_dir: str | None = None
    given: Mapping[str, Any] = dataclasses_field(default_factory=dict, repr=False)

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> TasksConfig:
        return cls(**set_fields(cls, block), given=dict(block or {}))

    @property
    def configured(self) -> bool:
        """Whether hermit.yaml has a ``tasks:`` block at all."""
        return bool(self.given)


@dataclass(frozen=True)
class JudgeConfig:
    """``judge:``: how a finished rollout is scored."""

    kind: str | None = None             # required by the schema; None: no judge block
    mode: str = "exact"
    tolerance: float = 0.0
    field: str | None = None
    command: Any = None                 # a string (split as by a shell) or an argv list
    timeout_s: float | None = None
    model: str | None = None
    rubric: str | None = None
    base_url: str | None = None
    env_key: str = "OPENAI_API_KEY"
    max_retries: int = 2
    given: Mapping[str, Any] = dataclasses_field(default_factory=dict, repr=False)

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> JudgeConfig:
        return cls(**set_fields(cls, block), given=dict(block or {}))

    def block(self) -> dict[str, Any]:
        """The block as written: the form that crosses the process / Dask boundary
        (RolloutJob.judge_cfg), typed again by make_judge on the worker, so its defaults are these."""
        return dict(self.given)


@dataclass(frozen=True)
class DataConfig:
    """``data:``: the splits (``<split>: <rows file>``) and a streaming evolver's ``step_size``."""

    splits: Mapping[str, str] = dataclasses_field(default_factory=dict)
    step_size: int | None = None

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> DataConfig:
        block = block or {}
        size = block.get("step_size")
        return cls(splits={k: v for k, v in block.items() if isinstance(v, str)},
                   step_size=None if size is None else int(size))


@dataclass(frozen=True)
class ExecutorConfig:
    """``executor:``: where rollouts run."""

    kind: str = "local"
    address: str = "local"              # dask: `local` starts a LocalCluster (the schema names no default)
    slots: Mapping[str, int] = dataclasses_field(default_factory=dict)
    workers: int = 2
    rate_limit: RateLimitPolicy = dataclasses_field(default_factory=RateLimitPolicy)   # its defaults its own

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> ExecutorConfig:
        values = set_fields(cls, block)
        values["slots"] = dict(values.get("slots") or {})
        values["rate_limit"] = RateLimitPolicy.from_config(values.get("rate_limit"))   # checked once, here
        return cls(**values)


@dataclass(frozen=True)
class BudgetConfig:
    """``budget:``: the run's spending cap (core/budget.py); None: no cap of that kind."""

    max_usd: float | None = None
    max_tokens: int | None = None

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> BudgetConfig:
        values = set_fields(cls, block)
        return cls(max_usd=float(values["max_usd"]) if "max_usd" in values else None,
                   max_tokens=int(values["max_tokens"]) if "max_tokens" in values else None)

    def items(self) -> list[tuple[str, float | int]]:
        """The caps set, by name."""
        return [(k, v) for k, v in (("max_tokens", self.max_tokens), ("max_usd", self.max_usd)) if v is not None]


@dataclass(frozen=True)
class SandboxConfig:
    """``sandbox:`` (seed 000's): bubblewrap around agents and learners; absent: off."""

    enabled: bool = False
    network: str = "restricted"
    allow: tuple[str, ...] = ()

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> SandboxConfig:
        values = set_fields(cls, block)
        if "allow" in values:
            values["allow"] = tuple(values["allow"])
        return cls(**values)


@dataclass(frozen=True)
class TrainerConfig:
    """``trainer:``: how ``train`` runs steps."""

    epochs: int = 10
    allow_early_stop: bool = True
    concurrency: int = 4
    max_exception_rate: float = 0.9     # see core/failures.py

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> TrainerConfig:
        values = set_fields(cls, block)
        return cls(**{k: type(getattr(cls, k))(v) for k, v in values.items()})
