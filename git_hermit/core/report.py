"""`git hermit report`: everything a step's pull request description says, read from refs and notes.

A step N's pull request is ``hermit/<run>/step-NNNN`` against step N−1's branch (the branch the
run was initialised on for step 1: core/pullrequest.py stacks them). Its changes are judged by step N+1's rollouts of H_N (the scores note on H_N and the verdict
notes on its commits), so a report written before that says "not evaluated yet". Nothing here
reads ``.hermit/`` working files: a clone that fetched the run reports the same.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from git_hermit.core.card import AdapterCard, build_card
from git_hermit.core.history import RunHistory, StepView, load_history, stream_scores
from git_hermit.core.runs import RunContext, parse_step_name, seed_branch, step_ref
from git_hermit.errors import DamagedRecord, GitStateError, SchemaError
from git_hermit.gitio import NOTES_REFS, NotesStore, remote_url

_GITHUB = re.compile(r"^(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)"
                     r"(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class Score:
    """pass@1 of one commit on one split, with its CI against the previous step when known."""

    step: int                    # the step whose tip (H_step) was evaluated
    commit: str
    split: str
    k: int
    tasks: int
    pass_at_1: float
    ci_delta: float | None = None      # points
    ci_low: float | None = None
    ci_high: float | None = None
    ci_baseline: str | None = None
    best: bool = False
    partial: dict[str, int] | None = None   # a budget-stopped evaluation's {"rollouts", "expected"}


@dataclass(frozen=True)
class ChangeRow:
    id: str
    component: str
    files: tuple[str, ...]
    description: str
    predicted_fixes: tuple[str, ...]
    risks: tuple[str, ...]
    commit: str
    verdict: str | None = None
    fixed: tuple[str, ...] = ()
    still_failing: tuple[str, ...] = ()
    risks_realised: tuple[str, ...] = ()
    rolled_back_by: str | None = None
    # a few of the tasks the verdict rests on, from the judging step's scores note:
    # {task, kind: fixed|regressed, before, before_outcome, after, after_outcome, judge}
    examples: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class RollbackRow:
    commit: str
    reverts: str
    verdict: str | None
    reason: str
    change_ids: tuple[str, ...] = ()     # the changes declared on the reverted commit


@dataclass(frozen=True)
class LedgerRow:
    role: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class ProvenanceRow:
    commit: str
    skill: str
    level: str
    source_task_ids: tuple[str, ...]


@dataclass(frozen=True)
class StepReport:
    run: str
    step: int
    head: str                    # the step branch (short name)
    base: str                    # the branch the run was initialised on
    tip: str
    evolver: str | None
    evaluation: Score | None     # H_step as the next step's rollouts measured it
    evaluated_before: Score | None   # H_{step-1}, what this step's rollouts measured
    curve: tuple[Score, ...]
    changes: tuple[ChangeRow, ...]
    undeclared: tuple[str, ...]
    rollbacks: tuple[RollbackRow, ...]
    held_out: tuple[Score, ...]
    ledger: tuple[LedgerRow, ...]
    predictions: dict[str, Any] | None
    stop: str | None
    repo_slug: str | None        # OWNER/REPO when origin is on GitHub
    adapter: str = "adapter"
    notes: tuple[str, ...] = field(default_factory=tuple)
    card: AdapterCard | None = None     # the step's tip is the run's final adapter: its card
    # tasks that regressed when the next step measured H_step and that no change of it predicted
    unpredicted: tuple[str, ...] = ()
    has_best: bool = True               # the run keeps a best tag (ahe); stream evolvers keep none
    # evo-harness: {level: {"status": accepted|rejected|skipped, "reasons": [...], "files": [...]}}
    levels: dict[str, Any] = field(default_factory=dict)
    # evo-harness: the skills a level commit wrote, with the tasks supporting each (provenance notes)
    provenance: tuple[ProvenanceRow, ...] = ()
    # continual-harness: {pass: {"status": applied|unchanged|dropped, "reason", "changes"}}, the memory fold
    passes: dict[str, Any] = field(default_factory=dict)
    memory_fold: dict[str, Any] | None = None
    skipped: str | None = None           # continual-harness: why the passes were skipped
    stream: dict[str, Any] | None = None     # cumulative stream pass@1 over the windows so far
    streaming: bool = False              # each step rolls out a new window of a stream (its online score)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def title(self) -> str:
        if self.changes:
            what = f"{len(self.changes)} change(s)"
        elif self.levels:
            accepted = [name for name, lv in self.levels.items() if lv.get("status") == "accepted"]
            what = f"level(s) {', '.join(accepted)} accepted" if accepted else "no level accepted"
        elif self.passes or self.memory_fold:
            applied = [name for name, ps in self.passes.items() if ps.get("status") == "applied"]
            if (self.memory_fold or {}).get("status") == "applied":
                applied.append("memory fold")
            what = f"{', '.join(applied)} applied" if applied else "no pass applied"
        else:
            what = "no declared changes"
        if self.rollbacks:
            what += f", {len(self.rollbacks)} rollback(s)"
        text = f"hermit {self.run} step {self.step}: {what}"
        if self.evaluation is not None:
            text += f", pass@1 {self.evaluation.pass_at_1:.3f} ({self.evaluation.split})"
            if self.evaluation.partial:
                text += f" (partial: {self.evaluation.partial['rollouts']}/{self.evaluation.partial['expected']} rollouts)"
        return text


def github_slug(url: str | None) -> str | None:
    """``OWNER/REPO`` of a GitHub remote URL; None for any other host or a path."""
    match = _GITHUB.match(url or "")
    return match["slug"] if match else None


def base_branch(ctx: RunContext) -> str:
    """The branch the run was initialised on: the seed commit's trailer, else origin's default
    branch, else the checked-out branch, else ``main``."""
    seeded = seed_branch(ctx.repo, ctx.run)
    if seeded:
        return seeded
    head = ctx.repo.read_symbolic("refs/remotes/origin/HEAD")
    if head and head.startswith("refs/remotes/origin/"):
        return head.removeprefix("refs/remotes/origin/")
    return ctx.repo.head_branch() or "main"


def _score(view: StepView, best: str | None = None) -> Score | None:
    s = view.scores
    if s is None:
        return None
    ci = s.ci
    return Score(step=view.step, commit=view.commit, split=s.split, k=s.k, tasks=len(s.tasks),
                 pass_at_1=s.pass_at_1, ci_delta=ci.delta if ci else None, ci_low=ci.low if ci else None,
                 ci_high=ci.high if ci else None, ci_baseline=ci.baseline if ci else None,
                 best=best == view.commit, partial=s.partial)


def _held_out(view: StepView) -> list[Score]:
    out = []
    for split, data in sorted(((view.scores.splits if view.scores else None) or {}).items()):
        if not isinstance(data, dict) or "pass_at_1" not in data:
            continue
        ci = data.get("ci") or {}
        tasks = data.get("tasks")
        out.append(Score(step=view.step, commit=view.commit, split=split, k=int(data.get("k") or 0),
                         tasks=len(tasks) if isinstance(tasks, dict) else int(tasks or 0),
                         pass_at_1=float(data["pass_at_1"]), ci_delta=ci.get("delta"), ci_low=ci.get("low"),
                         ci_high=ci.get("high"), ci_baseline=ci.get("baseline"), partial=data.get("partial")))
    return out


def _body(message: str) -> str:
    """A commit message without its subject and trailer paragraph."""
    paragraphs = message.strip().split("\n\n")[1:]
    if paragraphs and all(re.match(r"^[A-Za-z0-9-]+: ", line) or line.startswith(" ")
                          for line in paragraphs[-1].splitlines()):
        paragraphs = paragraphs[:-1]
    return "\n\n".join(paragraphs).strip()


def _predictions(history: RunHistory, step: int) -> dict[str, Any] | None:
    """The run's prediction precision/recall as of the evaluation of H_step (from scores notes)."""
    for view in reversed([v for v in history.steps if v.step <= step]):
        evaluation = (view.scores.evaluation or {}) if view.scores else {}
        run = (evaluation.get("precision_recall") or {}).get("run")
        if run:
            return run
    return None


def resolve_step(ctx: RunContext, target: str | None) -> int:
    """STEP (``2``, ``step-2``), a step branch or any revision that is a step tip; default: the tip."""
    if target is None:
        return ctx.tip[0]
    step = parse_step_name(target)
    if step is not None:
        ctx.step_commit(step)
        return step
    sha = ctx.repo.resolve_commit(target)
    for n, commit in ctx.steps:
        if commit == sha:
            return n
    raise GitStateError(f"{target!r} is not the tip of a step of run {ctx.run!r}",
                        hint="name a step (`2`, `step-2`) or its branch hermit/<run>/step-NNNN")


def build_report(ctx: RunContext, target: str | None = None) -> StepReport:
    history: RunHistory = load_history(ctx)
    step = resolve_step(ctx, target)
    views = {v.step: v for v in history.steps}
    view = views[step]
    scored = [s for v in history.steps if v.step <= step and (s := _score(v, None))]
    # best-ever as of this step: the first to reach the highest pass@1 (the best tag's strict rule)
    whole = [s for s in scored if not s.partial]    # a budget-stopped evaluation's pass@1 is no step's score
    # only a run with a best tag has a best-ever (the stream evolvers keep none)
    has_best = history.best is not None
    top = max(whole, key=lambda s: s.pass_at_1) if whole and has_best else None
    curve = tuple(replace(s, best=s is top) for s in scored)
    judged_examples = ((view.scores.evaluation or {}) if view.scores else {}).get("examples") or []
    changes = tuple(ChangeRow(
        id=c.change.id, component=c.change.component or "", files=tuple(c.change.files),
        description=c.change.description, predicted_fixes=tuple(c.change.predicted_fixes),
        risks=tuple(c.change.risk_tasks), commit=c.commit,
        verdict=c.verdict.verdict if c.verdict else None,
        fixed=tuple(c.verdict.actually_fixed) if c.verdict else (),
        still_failing=tuple(c.verdict.still_failed) if c.verdict else (),
        risks_realised=tuple(c.verdict.risk_realized) if c.verdict else (),
        rolled_back_by=c.verdict.rollback_commit if c.verdict else None,
        examples=tuple(e for e in judged_examples if isinstance(e, dict) and e.get("change_id") == c.change.id))
        for c in view.changes)
    declared: dict[str, list[str]] = {}
    for v in history.steps:
        for c in v.changes:
            declared.setdefault(c.commit, []).append(c.change.id)
    rollbacks = tuple(RollbackRow(commit=c.sha, reverts=c.reverts or "", verdict=c.reverts_verdict,
                                  reason=_body(c.info.message), change_ids=tuple(declared.get(c.reverts or "", ())))
                      for c in view.rollbacks)
    ledger_src = (view.analysis.body.get("ledger") or {}) if view.analysis else {}
    ledger = tuple(LedgerRow(role, int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0),
                             u.get("cost_usd")) for role, u in sorted(ledger_src.items()))
    analysis = (view.analysis.body if view.analysis else None) or {}
    evolver = next((v for c in view.commits for k, v in c.info.trailers if k == "Hermit-Evolver"), None)
    return StepReport(
        run=ctx.run, step=step, head=step_ref(ctx.run, step).removeprefix("refs/heads/"),
        base=base_branch(ctx), tip=view.commit, evolver=evolver or ctx.config.evolver_name,
        evaluation=next((s for s in curve if s.step == step), None),
        evaluated_before=next((s for s in curve if s.step == step - 1), None),
        curve=curve, changes=changes, undeclared=tuple(c.sha for c in view.commits if c.undeclared),
        rollbacks=rollbacks, held_out=tuple(_held_out(view)), ledger=ledger,
        predictions=_predictions(history, step), stop=view.scores.stop if view.scores else None,
        repo_slug=github_slug(remote_url(ctx.repo, "origin")), adapter=ctx.config.adapter, notes=tuple(view.bad_notes),
        card=build_card(ctx, view.commit, history) if view.commit == history.final else None,
        unpredicted=tuple(str(t) for t in ((view.scores.evaluation or {}) if view.scores else {})
                          .get("unattributed_regressions") or ()),
        streaming=_streaming(evolver or ctx.config.evolver_name), has_best=has_best, levels=dict(analysis.get("levels") or {}), provenance=_provenance(ctx, view),
        passes=dict(analysis.get("passes") or {}), memory_fold=analysis.get("memory_fold"),
        skipped=analysis.get("skipped"), stream=stream_score(history, step) if analysis.get("passes") is not None
        or analysis.get("memory_fold") is not None else None)


def _streaming(evolver: str | None) -> bool:
    from git_hermit.evolvers.registry import find
    spec = find(evolver) if evolver else None
    return bool(spec and spec.streaming)


def _provenance(ctx: RunContext, view: StepView) -> tuple[ProvenanceRow, ...]:
    from git_hermit.model.records import note_data
    store = NotesStore(ctx.repo)
    rows = []
    for commit in view.commits:
        try:
            text = store.read_bytes(NOTES_REFS["provenance"], commit.sha)
            data = note_data("provenance", text) if text is not None else None
        except (DamagedRecord, SchemaError):
            continue      # `git hermit check` names a damaged note; the report shows what it can read
        for skill, entry in sorted(((data or {}).get("skills") or {}).items()):
            rows.append(ProvenanceRow(commit.sha, skill, str(entry.get("level", "")),
                                      tuple(str(t) for t in entry.get("source_task_ids") or ())))
    return tuple(rows)


def stream_score(history: RunHistory, step: int) -> dict[str, Any] | None:
    """The cumulative stream pass@1 up to ``step`` (history.stream_scores' number), None before
    any window."""
    upto = [entry for n, entry in stream_scores(history).items() if n <= step]
    if not upto or upto[-1]["pass_at_1"] is None:
        return None
    return {key: upto[-1][key] for key in ("pass_at_1", "tasks", "windows")}
