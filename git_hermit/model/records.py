"""The records git-hermit keeps as git notes: manifest, verdict, scores, provenance, analysis.

Each is a frozen dataclass with ``to_dict``/``from_dict``; ``dumps``/``loads`` give canonical
JSON (sorted keys, carrying ``"v"``) and validate against ``schemas/`` on both sides.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:   # results() imports it: reading notes (`log`) needs no rollout result
    from git_hermit.model.rollout import Outcome, RolloutResult
from git_hermit.model.schema import schema_errors, validate

VerdictName = Literal["EFFECTIVE", "PARTIALLY_EFFECTIVE", "MIXED", "INEFFECTIVE", "HARMFUL"]
SCHEMA_VERSION = 1


def canonical_json(data: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, trailing newline (readable in git log --notes)."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def content_hash(text: str) -> str:
    """``sha256:<hex>`` of a note's text, as carried by the Hermit-Manifest trailer."""
    import hashlib   # here: it loads OpenSSL (~3 ms), which a read command never needs
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _fields_of(record: Any) -> dict[str, Any]:
    """A record's fields, one level deep (``asdict`` deep-copies every value: the run's log --json
    spent most of its time there)."""
    # type(record) is hashable, as every class is; mypy checks Hashable against the instances'
    # __hash__ rather than type's and so rejects any class passed to a functools.cache function.
    return {name: getattr(record, name) for name in _field_names(type(record))}  # type: ignore[arg-type]


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
        data = _fields_of(self)
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
    """The verdict note on a change commit, once the next step's rollouts judged it: the one record
    of a judged change (the AHE attribution makes it; change_evaluation.json entries are drawn from it)."""

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
        data = _fields_of(self)
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
    outcome: Outcome                 # the scores schema's enum: pass, fail, exception
    reward: float | None
    exception_type: str | None = None
    tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _attempt_dict(self.outcome, self.reward, self.exception_type, self.tokens)


def _attempt_dict(outcome: str, reward: float | None, exception_type: str | None, tokens: int | None) -> dict[str, Any]:
    data: dict[str, Any] = {"outcome": outcome, "reward": reward}
    if exception_type is not None:
        data["exception_type"] = exception_type
    if tokens is not None:
        data["tokens"] = tokens
    return data


@dataclass(frozen=True)
class Disagreed:
    """An attempt of a row two machines both ran with another outcome or reward than the one the
    note kept (``attempt`` is the row's attempt number; see ``core.scores_notes``)."""

    attempt: int
    outcome: Outcome
    reward: float | None
    exception_type: str | None = None
    tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, **_attempt_dict(self.outcome, self.reward, self.exception_type, self.tokens)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Disagreed":
        return cls(int(data["attempt"]), data["outcome"], data.get("reward"), data.get("exception_type"),
                   data.get("tokens"))


@dataclass(frozen=True)
class TaskScore:
    outcome: str
    attempts: tuple[Attempt, ...]
    disagreed: tuple[Disagreed, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"outcome": self.outcome, "attempts": [a.to_dict() for a in self.attempts]}
        if self.disagreed:
            data["disagreed"] = [d.to_dict() for d in self.disagreed]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TaskScore":
        return cls(data["outcome"], tuple(Attempt(a["outcome"], a.get("reward"), a.get("exception_type"),
                                                  a.get("tokens")) for a in data["attempts"]),
                   tuple(Disagreed.from_dict(d) for d in data.get("disagreed", ())))


class TaskScores(Mapping[str, TaskScore]):
    """A scores note's per-task entries, each made a TaskScore when first read.

    A run's history holds one scores note per step; `log` and `report` read their pass@1, not their
    (tasks × k) attempts, so a 10,000-step log would otherwise build 100,000s of records it never uses.
    ``deferred`` holds only the count and outcomes, and asks ``load`` for the entries when one is read.
    """

    __slots__ = ("_raw", "_made", "_load", "_count", "_outcomes")

    def __init__(self, raw: dict[str, dict[str, Any]]):
        self._raw: dict[str, dict[str, Any]] | None = raw
        self._made: dict[str, TaskScore] = {}
        self._load: Callable[[], dict[str, dict[str, Any]]] | None = None
        self._count = len(raw)
        self._outcomes: dict[str, int] | None = None

    @classmethod
    def deferred(cls, count: int, outcomes: dict[str, int],
                 load: Callable[[], dict[str, dict[str, Any]]]) -> "TaskScores":
        made = cls({})
        made._raw, made._load, made._count, made._outcomes = None, load, count, dict(outcomes)
        return made

    def _entries(self) -> dict[str, dict[str, Any]]:
        if self._raw is None:
            assert self._load is not None
            self._raw = self._load()
        return self._raw

    def __getitem__(self, task: str) -> TaskScore:
        made = self._made.get(task)
        if made is None:
            made = self._made[task] = TaskScore.from_dict(self._entries()[task])
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"TaskScores({dict(self)!r})"

    def __getstate__(self) -> dict[str, Any]:   # the loader may hold a repository: send the entries
        return {"raw": self._entries()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        TaskScores.__init__(self, state["raw"])

    def outcomes(self) -> dict[str, int]:
        """How many tasks ended pass / fail / exception (read without making the records)."""
        if self._outcomes is None:
            counts = {"pass": 0, "fail": 0, "exception": 0}
            counts.update(Counter(map(itemgetter("outcome"), self._entries().values())))
            self._outcomes = counts
        return dict(self._outcomes)

    def exception_types(self) -> dict[str, int]:
        """The exception attempts by type, ``Exception`` when unnamed (read without making the records)."""
        found: Counter[str] = Counter(a.get("exception_type") or "Exception" for data in self._entries().values()
                                      for a in data["attempts"] if a["outcome"] == "exception")
        return dict(sorted(found.items()))

    def disagreements(self) -> int:
        """How many rows two machines ran with different outcomes (read without making the records)."""
        return sum(len(data.get("disagreed") or ()) for data in self._entries().values())

    def to_dict(self) -> dict[str, Any]:
        """What ``{task: TaskScore.to_dict()}`` gives, straight from the note's data."""
        return {task: self.task_dict(task) for task in self._entries()}

    def task_dict(self, task: str) -> dict[str, Any]:
        """``to_dict()[task]``, made alone."""
        data = self._entries()[task]
        return {"outcome": data["outcome"],
                "attempts": [_attempt_dict(a["outcome"], a.get("reward"), a.get("exception_type"),
                                           a.get("tokens")) for a in data["attempts"]],
                **({"disagreed": [Disagreed.from_dict(d).to_dict() for d in data["disagreed"]]}
                   if data.get("disagreed") else {})}


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
    tasks: Mapping[str, TaskScore]     # a TaskScores when read from a note
    pass_at: dict[str, float] = field(default_factory=dict)
    ci: BaselineCI | None = None
    usage: dict[str, Any] | None = None
    duration_s: float | None = None
    splits: dict[str, Any] = field(default_factory=dict)   # other splits' scores of this commit
    stop: str | None = None                                # training stopped after this evaluation
    evaluation: dict[str, Any] | None = None               # flips, verdicts, precision/recall it found
    usage_by_role: dict[str, Any] | None = None            # ``usage`` by role (older notes: none)
    # a run the budget stopped: {"rollouts": finished, "expected": the split's}, its pass@1 over
    # the finished ones only (None: every rollout asked for has its result)
    partial: dict[str, int] | None = None
    v: int = SCHEMA_VERSION

    def to_dict(self, *, tasks: bool = True) -> dict[str, Any]:
        """The note's data; ``tasks=False`` leaves out the per-task outcomes (`log --json`)."""
        data: dict[str, Any] = {
            "v": self.v, "run": self.run, "step": self.step, "commit": self.commit,
            "split": self.split, "k": self.k, "pass_at_1": self.pass_at_1,
        }
        if tasks:
            data["tasks"] = (self.tasks.to_dict() if isinstance(self.tasks, TaskScores)
                             else {t: s.to_dict() for t, s in self.tasks.items()})
        if self.pass_at:
            data["pass_at"] = dict(self.pass_at)
        if self.ci is not None:
            data["ci"] = asdict(self.ci)
        if self.usage is not None:
            data["usage"] = self.usage
        if self.usage_by_role:
            data["usage_by_role"] = self.usage_by_role
        if self.duration_s is not None:
            data["duration_s"] = self.duration_s
        if self.splits:
            data["splits"] = self.splits
        if self.stop:
            data["stop"] = self.stop
        if self.evaluation:
            data["evaluation"] = self.evaluation
        if self.partial:
            data["partial"] = dict(self.partial)
        return data

    def task_dict(self, task: str) -> dict[str, Any]:
        """``to_dict()["tasks"][task]``, made alone (``rollout --json`` writes one task at a time)."""
        return self.tasks.task_dict(task) if isinstance(self.tasks, TaskScores) else self.tasks[task].to_dict()

    def rollouts(self) -> int:
        return sum(len(score.attempts) for score in self.tasks.values())

    def expecting(self, expected: int | None) -> "Scores":
        """This record marked partial when it holds fewer than ``expected`` rollouts, else whole."""
        finished = self.rollouts()
        return replace(self, partial={"rollouts": finished, "expected": expected}
                       if expected and finished < expected else None)

    def results(self) -> dict[str, tuple[RolloutResult, ...]]:
        """The note's attempts as the typed results a step reads (outcomes already scored, so
        ``timeout_as`` is not applied again): how a past evaluation reaches an evolver."""
        from git_hermit.model.rollout import RolloutResult
        return {task: tuple(RolloutResult(task, i, a.outcome, a.reward, a.exception_type)
                            for i, a in enumerate(score.attempts, 1))
                for task, score in self.tasks.items()}

    def split_summary(self) -> dict[str, Any]:
        """This record's own split as an entry of another record's ``splits``."""
        data = self.to_dict()
        return {k: data[k] for k in ("k", "pass_at_1", "pass_at", "tasks", "ci", "usage", "usage_by_role", "step",
                                     "partial") if k in data}

    @classmethod
    def from_dict(cls, data: dict[str, Any], tasks: Mapping[str, TaskScore] | None = None) -> "Scores":
        """``tasks`` given: the note's data without its ``tasks`` (see TaskScores.deferred)."""
        if tasks is None:
            tasks = TaskScores(data["tasks"])
        ci = BaselineCI(**data["ci"]) if data.get("ci") else None
        return cls(run=data["run"], step=data["step"], commit=data["commit"], split=data["split"],
                   k=data["k"], pass_at_1=data["pass_at_1"], tasks=tasks,
                   pass_at=dict(data.get("pass_at", {})), ci=ci, usage=data.get("usage"),
                   duration_s=data.get("duration_s"), splits=dict(data.get("splits", {})), stop=data.get("stop"),
                   evaluation=data.get("evaluation"), usage_by_role=data.get("usage_by_role"),
                   partial=data.get("partial"), v=data["v"])


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


@dataclass(frozen=True)
class ReviewEntry:
    """One reviewer command applied by `git hermit review` (/hermit rollback, keep or note)."""

    command: Literal["rollback", "keep", "note"]
    run: str
    step: int                      # the step of the pull request's head branch
    reviewer: str                  # the GitHub login
    association: str               # OWNER | MEMBER | COLLABORATOR (no one else acts)
    pr: int
    url: str                       # the comment's or review's html_url
    at: str                        # when the reviewer wrote it
    event: str | None = None       # issue_comment | pull_request_review | pull_request_review_comment
    target: str | None = None      # rollback, keep: the change as named (step-2:chg-1)
    change_ids: tuple[str, ...] = ()
    commit: str | None = None      # the commit the note is on (the change's, or the step's tip)
    text: str | None = None        # the reason or the note: redacted, bounded
    rollback_commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = _fields_of(self)
        data["change_ids"] = list(self.change_ids) or None
        return _drop_none(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReviewEntry":
        return cls(**{**data, "change_ids": tuple(data.get("change_ids", ()))})


@dataclass(frozen=True)
class ReviewNote:
    """The review note on a commit: its entries keyed by comment and command (merges by union)."""

    entries: dict[str, ReviewEntry] = field(default_factory=dict)
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"v": self.v, "entries": {key: e.to_dict() for key, e in sorted(self.entries.items())}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReviewNote":
        return cls(entries={key: ReviewEntry.from_dict(e) for key, e in data["entries"].items()}, v=data["v"])


class _NoteRecord(Protocol):
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any: ...


# Which schema and class each notes ref's records use.
RECORD_KINDS: dict[str, tuple[str, type[_NoteRecord]]] = {
    "manifest": ("manifest", Manifest),
    "verdicts": ("verdict", VerdictNote),
    "scores": ("scores", Scores),
    "provenance": ("provenance", Provenance),
    "analysis": ("analysis", Analysis),
    "reviews": ("review", ReviewNote),
}

def dumps(kind: str, record: Any) -> str:
    """Canonical JSON of a record for notes ref ``kind``, validated before it is written."""
    schema, _ = RECORD_KINDS[kind]
    data = record.to_dict()
    validate(schema, data, what=f"{kind} note")
    return canonical_json(data)


# A note is read from anywhere (fetched, edited, damaged): within these bounds or not at all. No
# note git-hermit writes comes near them (a 10,000-step run's largest, a scores note, is a few MB).
MAX_NOTE_BYTES = 64 * 1024 * 1024
MAX_NOTE_DEPTH = 128       # learner JSON, the deepest a note embeds, is cut at 100 levels


def note_data(kind: str, raw: bytes | str) -> Any:
    """A note's JSON, read within the bounds (size before parsing, nesting, strict UTF-8) and
    validated against its kind's schema; SchemaError (with the reason, no label) when it is not.
    The one reading of a note's text: every command reads notes through it (loads), and fetch
    checks a remote's notes with it before they enter local refs (check_note)."""
    from git_hermit.errors import SchemaError
    from git_hermit.model.bounded_json import load_bounded
    schema, _ = RECORD_KINDS[kind]
    try:
        data = load_bounded(raw, max_depth=MAX_NOTE_DEPTH, max_bytes=MAX_NOTE_BYTES)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:          # TooDeep, TooLarge
        raise SchemaError(str(exc)) from None
    problems = schema_errors(schema, data)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SchemaError(f"fails its schema {problems[0]}{more}",
                          hint=f"it must match the shipped schemas/{schema}.schema.json")
    return data


def check_note(kind: str, raw: bytes | str) -> str | None:
    """Why a note of ``kind`` cannot be read (None when it can): for a remote's notes on fetch."""
    from git_hermit.errors import SchemaError
    try:
        note_data(kind, raw)
    except SchemaError as exc:
        return exc.message.strip()
    return None


def loads(kind: str, text: bytes | str, *, where: str = "") -> Any:
    """Parse and validate a note of ``kind``; SchemaError names the note when it is bad (damaged:
    not UTF-8 or JSON, too large, nested too deeply, or failing its schema)."""
    from git_hermit.errors import SchemaError
    label = f"{kind} note{(' on ' + where) if where else ''}"
    try:
        data = note_data(kind, text)
    except SchemaError as exc:
        raise SchemaError(f"{label} is damaged: {exc.message}", hint=f"remove it (git notes --ref=hermit/{kind} "
                          f"remove <commit>) or fetch it again; {exc.hint}" if exc.hint else
                          f"remove it (git notes --ref=hermit/{kind} remove <commit>) or fetch it again") from None
    return cls_of(kind).from_dict(data)


def cls_of(kind: str) -> type[_NoteRecord]:
    return RECORD_KINDS[kind][1]
