"""The records git-hermit keeps as git notes: manifest, verdict, scores, provenance, analysis.

Each is a frozen dataclass with ``to_dict``/``from_dict``; ``dumps``/``loads`` give canonical
JSON (sorted keys, carrying ``"v"``) and validate against ``schemas/`` on both sides.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from git_hermit.model.rollout import RolloutResult
from git_hermit.model.schema import validate

VerdictName = Literal["EFFECTIVE", "PARTIALLY_EFFECTIVE", "MIXED", "INEFFECTIVE", "HARMFUL"]
SCHEMA_VERSION = 1


def canonical_json(data: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, trailing newline (readable in git log --notes)."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def content_hash(text: str) -> str:
    """``sha256:<hex>`` of a note's text, as carried by the Hermit-Manifest trailer."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class Change:
    """One declared change: what it edits, the failure it targets, what it predicts."""

    id: str
    description: str
    files: tuple[str, ...]
    failure_pattern: str
    predicted_fixes: tuple[str, ...]
    risk_tasks: tuple[str, ...]
    component: str
    type: str | None = None
    why_this_component: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("files", "predicted_fixes", "risk_tasks"):
            data[key] = list(data[key])
        return _drop_none(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Change":
        return cls(
            id=data["id"], description=data["description"], files=tuple(data["files"]),
            failure_pattern=data.get("failure_pattern", ""),
            predicted_fixes=tuple(data.get("predicted_fixes", ())),
            risk_tasks=tuple(data.get("risk_tasks", ())), component=data.get("component", ""),
            type=data.get("type"), why_this_component=data.get("why_this_component"),
        )


@dataclass(frozen=True)
class Manifest:
    """The manifest note: on a change commit, the change(s) that commit makes."""

    run: str
    step: int
    changes: tuple[Change, ...]
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"v": self.v, "run": self.run, "step": self.step,
                "changes": [c.to_dict() for c in self.changes]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Manifest":
        return cls(run=data["run"], step=data["step"],
                   changes=tuple(Change.from_dict(c) for c in data["changes"]), v=data["v"])


@dataclass(frozen=True)
class VerdictNote:
    """The verdict note on a change commit, once the next step's rollouts judged it."""

    run: str
    step: int                      # the step whose rollouts produced the verdict
    change_id: str
    verdict: VerdictName
    actually_fixed: tuple[str, ...]
    still_failed: tuple[str, ...]
    risk_realized: tuple[str, ...]
    predicted_fixes: tuple[str, ...] = ()
    predicted_risks: tuple[str, ...] = ()
    hit_rate: str | None = None
    evaluated_commit: str | None = None
    rollback_commit: str | None = None
    rollback_note: str | None = None
    also: tuple["VerdictNote", ...] = ()   # the other changes declared on the same commit
    v: int = SCHEMA_VERSION

    # a member of a change group keeps its own rollback_note ("rolled back with chg-2")
    _OWN = ("change_id", "verdict", "actually_fixed", "still_failed", "risk_realized", "predicted_fixes",
            "predicted_risks", "hit_rate", "rollback_note")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("actually_fixed", "still_failed", "risk_realized", "predicted_fixes", "predicted_risks"):
            data[key] = list(data[key])
        data["also"] = [{k: v for k, v in other.to_dict().items() if k in self._OWN} for other in self.also]
        if not data["also"]:
            del data["also"]
        return _drop_none(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "VerdictNote":
        fields = dict(data)
        for key in ("actually_fixed", "still_failed", "risk_realized", "predicted_fixes", "predicted_risks"):
            fields[key] = tuple(fields.get(key, ()))
        fields["also"] = tuple(cls.from_dict({**entry, "run": data["run"], "step": data["step"]})
                               for entry in data.get("also", ()))
        return cls(**fields)

    def for_change(self, change_id: str) -> "VerdictNote | None":
        """This note's verdict on ``change_id`` (a shared commit's note holds one per change)."""
        if self.change_id == change_id:
            return self
        other = next((o for o in self.also if o.change_id == change_id), None)
        return None if other is None else replace(other, evaluated_commit=self.evaluated_commit,
                                                  rollback_commit=self.rollback_commit,
                                                  rollback_note=other.rollback_note or self.rollback_note)


@dataclass(frozen=True)
class Attempt:
    outcome: str
    reward: float | None
    exception_type: str | None = None
    tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(asdict(self)) | {"reward": self.reward}


@dataclass(frozen=True)
class TaskScore:
    outcome: str
    attempts: tuple[Attempt, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "attempts": [a.to_dict() for a in self.attempts]}


@dataclass(frozen=True)
class BaselineCI:
    """A paired bootstrap CI of this commit's pass@1 minus a baseline's, in points (×100)."""

    baseline: str
    delta: float
    low: float
    high: float


@dataclass(frozen=True)
class Scores:
    """The scores note on an evaluated commit: per-task per-attempt outcomes and pass@1."""

    run: str
    step: int
    commit: str
    split: str
    k: int
    pass_at_1: float
    tasks: dict[str, TaskScore]
    pass_at: dict[str, float] = field(default_factory=dict)
    ci: BaselineCI | None = None
    usage: dict[str, Any] | None = None
    duration_s: float | None = None
    splits: dict[str, Any] = field(default_factory=dict)   # other splits' scores of this commit
    stop: str | None = None                                # training stopped after this evaluation
    evaluation: dict[str, Any] | None = None               # flips, verdicts, precision/recall it found
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "v": self.v, "run": self.run, "step": self.step, "commit": self.commit,
            "split": self.split, "k": self.k, "pass_at_1": self.pass_at_1,
            "tasks": {t: s.to_dict() for t, s in self.tasks.items()},
        }
        if self.pass_at:
            data["pass_at"] = dict(self.pass_at)
        if self.ci is not None:
            data["ci"] = asdict(self.ci)
        if self.usage is not None:
            data["usage"] = self.usage
        if self.duration_s is not None:
            data["duration_s"] = self.duration_s
        if self.splits:
            data["splits"] = self.splits
        if self.stop:
            data["stop"] = self.stop
        if self.evaluation:
            data["evaluation"] = self.evaluation
        return data

    def results(self) -> dict[str, tuple[RolloutResult, ...]]:
        """The note's attempts as the typed results a step reads (outcomes already scored, so
        ``timeout_as`` is not applied again): how a past evaluation reaches an evolver."""
        return {task: tuple(RolloutResult(task, i, a.outcome, a.reward, a.exception_type)
                            for i, a in enumerate(score.attempts, 1))
                for task, score in self.tasks.items()}

    def split_summary(self) -> dict[str, Any]:
        """This record's own split as an entry of another record's ``splits``."""
        data = self.to_dict()
        return {k: data[k] for k in ("k", "pass_at_1", "pass_at", "tasks", "ci", "usage", "step") if k in data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Scores":
        tasks = {
            t: TaskScore(s["outcome"], tuple(Attempt(a["outcome"], a.get("reward"), a.get("exception_type"),
                                                     a.get("tokens")) for a in s["attempts"]))
            for t, s in data["tasks"].items()
        }
        ci = BaselineCI(**data["ci"]) if data.get("ci") else None
        return cls(run=data["run"], step=data["step"], commit=data["commit"], split=data["split"],
                   k=data["k"], pass_at_1=data["pass_at_1"], tasks=tasks,
                   pass_at=dict(data.get("pass_at", {})), ci=ci, usage=data.get("usage"),
                   duration_s=data.get("duration_s"), splits=dict(data.get("splits", {})), stop=data.get("stop"),
                   evaluation=data.get("evaluation"), v=data["v"])


@dataclass(frozen=True)
class Provenance:
    """evo-harness: per skill of a level commit, the tasks/experiences supporting it."""

    run: str
    step: int
    skills: dict[str, dict[str, Any]]
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"v": self.v, "run": self.run, "step": self.step, "skills": self.skills}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Provenance":
        return cls(run=data["run"], step=data["step"], skills=data["skills"], v=data["v"])


@dataclass(frozen=True)
class Analysis:
    """The analysis note on a step's tip: the evolver's report (overview, rollbacks, rejections…)."""

    run: str
    step: int
    evolver: str
    body: dict[str, Any] = field(default_factory=dict)
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {**self.body, "v": self.v, "run": self.run, "step": self.step, "evolver": self.evolver}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Analysis":
        body = {k: v for k, v in data.items() if k not in ("v", "run", "step", "evolver")}
        return cls(run=data["run"], step=data["step"], evolver=data["evolver"], body=body, v=data["v"])


# Which schema and class each notes ref's records use.
RECORD_KINDS: dict[str, tuple[str, type]] = {
    "manifest": ("manifest", Manifest),
    "verdicts": ("verdict", VerdictNote),
    "scores": ("scores", Scores),
    "provenance": ("provenance", Provenance),
    "analysis": ("analysis", Analysis),
}

def dumps(kind: str, record: Any) -> str:
    """Canonical JSON of a record for notes ref ``kind``, validated before it is written."""
    schema, _ = RECORD_KINDS[kind]
    data = record.to_dict()
    validate(schema, data, what=f"{kind} note")
    return canonical_json(data)


def loads(kind: str, text: str, *, where: str = "") -> Any:
    """Parse and validate a note of ``kind``; SchemaError names the note when it is bad."""
    schema, cls = RECORD_KINDS[kind]
    label = f"{kind} note{(' on ' + where) if where else ''}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        from git_hermit.errors import SchemaError
        raise SchemaError(f"{label} is not JSON ({exc.msg} at line {exc.lineno})",
                          hint="repair or remove the note with git notes --ref") from None
    validate(schema, data, what=label)
    return cls.from_dict(data)
