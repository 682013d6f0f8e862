"""The adapter card's facts: what a trained adapter is, how it was made and how it scored, read
from the run's refs, notes and config only (never from ``.hermit/``), so every clone that fetched
the run builds the same card. render/card.py writes it as CARD.md; `finalize` puts it beside the
adapter and into its archive, `convert` into every plugin.

The card is not committed: the final tag names the measured commit, a card would need a commit
of its own (whose tree is not the one evaluated), and it would go stale the moment a held-out
evaluation is added; the template's check_spec (unknown-file) would also flag a CARD.md in the
adapter. It is regenerated, byte for byte, by `git hermit show final --card`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from git_hermit import __version__
from git_hermit.accounting import stats
from git_hermit.adapter.components import inventory
from git_hermit.adapter.plugins.base import CARD_FILE
from git_hermit.adapter.screen import Limits
from git_hermit.adapter.templates import load_template
from git_hermit.config import CONFIG_FILE
from git_hermit.core.evaluate import read_scores
from git_hermit.core.history import RunHistory, StepView, load_history
from git_hermit.core.runs import RunContext, final_tag, list_runs, open_run, step_ref
from git_hermit.errors import HermitError
from git_hermit.evolvers import registry
from git_hermit.gitio import Repo
from git_hermit.model.inventory import Inventory

TRAIN_SPLIT = "train"


@dataclass(frozen=True)
class KeptChange:
    step: int
    id: str
    component: str
    description: str
    verdict: str | None          # None: not judged (the next step's rollouts have not run)
    commit: str


@dataclass(frozen=True)
class StreamStep:
    """A streaming evolver's step: its passes (continual-harness) or levels (evo-harness)."""

    step: int
    commit: str
    kind: str                                  # "passes" | "levels"
    parts: tuple[tuple[str, str, str], ...]    # (pass or level, status, what it changed or why not)


@dataclass(frozen=True)
class SplitScore:
    split: str
    k: int
    tasks: int
    pass_at_1: float
    low: float | None            # its bootstrap 95% CI over tasks
    high: float | None
    delta: float | None = None   # points against ``baseline`` (a paired bootstrap CI)
    delta_low: float | None = None
    delta_high: float | None = None
    baseline: str | None = None
    partial: dict[str, int] | None = None


@dataclass(frozen=True)
class RoleSpend:
    role: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None       # None: some of it used a model hermit.yaml gives no price


@dataclass(frozen=True)
class AdapterCard:
    run: str
    template: str
    adapter_dir: str
    host: str
    agent: str                   # backend (and model)
    seed_commit: str
    commit: str
    step: int | None             # the step whose tip the commit is
    final: bool                  # the commit is the run's final tag
    final_mode: str              # best_ever | last
    steps: int                   # the run's steps so far
    evolver: str
    learners: str                # evolver.base (and model)
    params: tuple[tuple[str, str], ...]
    contents: Inventory
    kept: tuple[KeptChange, ...]
    rolled_back: tuple[KeptChange, ...]
    stream: tuple[StreamStep, ...]
    training: SplitScore | None  # the commit on the training split (measured by the next step)
    seed_training: SplitScore | None
    held_out: tuple[SplitScore, ...]
    stop: str | None
    spending: tuple[RoleSpend, ...]           # the steps' ledgers, by role
    eval_spending: tuple[RoleSpend, ...]      # held-out evaluations, by role
    settings: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    version: str = __version__


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value) or "[]"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_value(v)}" for k, v in sorted(value.items())) or "{}"
    return "none" if value is None else str(value)


def _rates(tasks: Any) -> dict[str, float]:
    rates = {}
    for task, data in (tasks or {}).items() if isinstance(tasks, dict) else ():
        attempts = data.get("attempts") if isinstance(data, dict) else None
        if attempts:
            rates[str(task)] = sum(a.get("outcome") == "pass" for a in attempts) / len(attempts)
    return rates


def _split_score(split: str, data: dict[str, Any]) -> SplitScore:
    rates = _rates(data.get("tasks"))
    interval = stats.bootstrap_interval(rates) if rates else None
    ci = data.get("ci") or {}
    tasks = data.get("tasks")
    return SplitScore(split=split, k=int(data.get("k") or 0),
                      tasks=len(tasks) if isinstance(tasks, dict) else int(tasks or 0),
                      pass_at_1=float(data["pass_at_1"]), low=interval.low if interval else None,
                      high=interval.high if interval else None, delta=ci.get("delta"), delta_low=ci.get("low"),
                      delta_high=ci.get("high"), baseline=ci.get("baseline"), partial=data.get("partial"))


def _splits(note: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every split a scores note (as data, or its cached summary) holds: its own and the others."""
    if not note:
        return {}
    found = {str(k): v for k, v in (note.get("splits") or {}).items() if isinstance(v, dict) and "pass_at_1" in v}
    found[str(note.get("split"))] = note
    return found


def _summary(view: StepView) -> dict[str, Any] | None:
    """A step tip's scores note without its per-task outcomes (the history's cached summary)."""
    if view.scores_data is not None:
        return view.scores_data
    return view.scores.to_dict(tasks=False) if view.scores is not None else None


def _spend(ledgers: list[dict[str, Any]]) -> tuple[RoleSpend, ...]:
    totals: dict[str, list[Any]] = {}
    for ledger in ledgers:
        for role, usage in sorted(ledger.items()):
            if not isinstance(usage, dict):
                continue
            entry = totals.setdefault(str(role), [0, 0, []])
            entry[0] += int(usage.get("input_tokens") or 0)
            entry[1] += int(usage.get("output_tokens") or 0)
            entry[2].append(usage.get("cost_usd"))
    return tuple(RoleSpend(role, i, o, sum(c) if c and all(x is not None for x in c) else None)
                 for role, (i, o, c) in sorted(totals.items()))


def _step_of(ctx: RunContext, commit: str) -> int | None:
    return next((n for n, sha in ctx.steps if sha == commit), None)


def _changes(history: RunHistory, upto: int) -> tuple[tuple[KeptChange, ...], tuple[KeptChange, ...]]:
    """The declared changes in H_upto (kept) and those a rollback took out before it."""
    rollback_step = {cv.sha: view.step for view in history.steps for cv in view.rollbacks}
    kept, gone = [], []
    for view in history.steps:
        if view.step > upto:
            break
        for change in view.changes:
            row = KeptChange(view.step, change.change_id, change.change.component or "", change.description,
                             change.verdict_name, change.commit)
            undone = change.rolled_back_by or change.rollback_commit
            if undone and rollback_step.get(undone, upto + 1) <= upto:
                gone.append(row)
            else:
                kept.append(row)
    return tuple(kept), tuple(gone)


def _stream(view: StepView) -> StreamStep | None:
    body = view.analysis_data or {}
    parts, kind = [], ""
    for key in ("passes", "levels"):
        for name, outcome in (body.get(key) or {}).items() if isinstance(body.get(key), dict) else ():
            if not isinstance(outcome, dict):
                continue
            what = outcome.get("changes") or outcome.get("files") or outcome.get("reasons") or []
            why = outcome.get("reason")
            text = "; ".join(str(w) for w in what) if isinstance(what, list) else str(what)
            parts.append((str(name), str(outcome.get("status") or ""), text or (str(why) if why else "")))
            kind = key
    return StreamStep(view.step, view.commit, kind, tuple(parts)) if parts else None


def _settings(ctx: RunContext) -> tuple[tuple[str, str], ...]:
    config = ctx.config
    sandbox = config.sandbox
    enabled = sandbox.enabled
    limits = Limits.of(config.evolver)
    rows = [("sandbox", "on (bubblewrap)" if enabled else "off: agents and learners ran unconfined")]
    if enabled:
        network = sandbox.network
        allow = ", ".join(sandbox.allow) or "none"
        rows.append(("network", f"{network}" + (f" (allow-list: {allow}; and the model endpoint)"
                                                 if network == "restricted" else "")))
    rows.append(("learner output limits", f"files ≤ {limits.max_file_bytes:,} bytes, "
                                          f"adapter ≤ {limits.max_adapter_bytes:,} bytes"))
    rows.append(("budget", ", ".join(f"{k} {v}" for k, v in sorted(config.budget.items())) or "none"))
    priced = sorted(config.prices)
    rows.append(("prices", ", ".join(priced) if priced else "none set: costs are unknown"))
    return tuple(rows)


def _warnings(ctx: RunContext, history: RunHistory, card_final: bool, mode: str,
              held_out: tuple[SplitScore, ...]) -> tuple[str, ...]:
    out = []
    if card_final and mode == "best_ever":
        out.append("chosen on the training split (the best-ever pass@1 there): its training score overstates "
                   "what it scores on tasks it has not seen")
    if not held_out:
        out.append("not evaluated on a held-out split: measure it with git hermit eval --split test before "
                   "trusting it")
    for split in held_out:
        if split.partial:
            out.append(f"the budget stopped its {split.split} evaluation: pass@1 counts "
                       f"{split.partial.get('rollouts')} of {split.partial.get('expected')} rollouts")
    for view in history.steps:
        partial = (_summary(view) or {}).get("partial")
        if isinstance(partial, dict):
            out.append(f"the budget stopped step {view.step + 1}'s evaluation of H_{view.step} "
                       f"({partial.get('rollouts')} of {partial.get('expected')} rollouts)")
    if ctx.config.agent.backend == "scripted":
        out.append("the acting agent is scripted (simulated): these scores measure no model")
    if (ctx.config.evolver.get("base") or "") == "scripted":
        out.append("the learners are scripted (simulated): no model wrote these changes")
    bad = sum(len(view.bad_notes) for view in history.steps)
    if bad:
        out.append(f"{bad} note(s) failed their schema and are left out of this card")
    return tuple(out)


def build_card(ctx: RunContext, commit: str, history: RunHistory | None = None) -> AdapterCard:
    """The card of ``commit`` (usually the run's final tag), from refs and notes (``history``: the
    run's, when the caller has loaded it already)."""
    repo, config = ctx.repo, ctx.config
    history = history or load_history(ctx)
    step = _step_of(ctx, commit)
    final = repo.read_ref(final_tag(ctx.run)) == commit
    spec = registry.get(config.evolver_name)
    template = load_template(config.template)
    entries = repo.ls_tree(commit, config.adapter)
    contents = inventory(entries, template, lambda rel: repo.read_blob(commit, f"{config.adapter}/{rel}"))
    upto = step if step is not None else ctx.tip[0]
    kept, gone = _changes(history, upto)
    stream = tuple(s for view in history.steps if 0 < view.step <= upto and (s := _stream(view)))
    # the whole notes of the two commits the card scores (the history keeps summaries only)
    own, seed = (scored.to_dict() if (scored := read_scores(repo, sha)) else None for sha in (commit, ctx.steps[0][1]))
    noted = {view.commit: _summary(view) for view in history.steps}
    splits = _splits(own)
    held_out = tuple(_split_score(name, data) for name, data in sorted(splits.items()) if name != TRAIN_SPLIT)
    training = _split_score(TRAIN_SPLIT, splits[TRAIN_SPLIT]) if TRAIN_SPLIT in splits else None
    seed_splits = _splits(seed)
    seed_training = _split_score(TRAIN_SPLIT, seed_splits[TRAIN_SPLIT]) if TRAIN_SPLIT in seed_splits else None
    ledgers = [view.analysis_data.get("ledger") or {} for view in history.steps
               if view.analysis_data and 0 < view.step <= upto]
    eval_ledgers = []
    for summary in [*noted.values(), *([] if commit in noted else [own])]:
        for name, data in _splits(summary).items():
            if name != TRAIN_SPLIT and isinstance(data.get("usage_by_role"), dict):
                eval_ledgers.append(data["usage_by_role"])
    mode = config.final_mode
    agent = config.agent
    model = config.evolver.get("model")
    model_name = model.get("name") if isinstance(model, dict) else model
    params = tuple((str(k), _value(v)) for k, v in sorted(config.evolver_params().items()))
    stop = next((str(data["stop"]) for data in reversed(list(noted.values())) if data and data.get("stop")), None)
    return AdapterCard(
        run=ctx.run, template=template.id, adapter_dir=config.adapter, host=config.host,
        agent=" ".join(str(x) for x in (agent.backend, agent.model) if x),
        seed_commit=ctx.steps[0][1], commit=commit, step=step, final=final, final_mode=mode, steps=ctx.tip[0],
        evolver=spec.name, learners=" ".join(str(x) for x in (config.evolver.get("base"), model_name) if x) or "default",
        params=params, contents=contents, kept=kept, rolled_back=gone, stream=stream,
        training=training, seed_training=seed_training, held_out=held_out, stop=stop, spending=_spend(ledgers),
        eval_spending=_spend(eval_ledgers), settings=_settings(ctx),
        warnings=_warnings(ctx, history, final, mode, held_out))


def card_path(ctx: RunContext) -> Path:
    """Where finalize writes the card: beside the run's adapter directory, as ``CARD.md`` for the
    repository's main run (hermit.yaml) and ``CARD-<run>.md`` for a run of its own hermit/<run>.yaml."""
    adapter = ctx.repo.work_tree / ctx.config.adapter
    main = ctx.config.path is None or ctx.config.path.name == CONFIG_FILE
    return adapter.parent / (CARD_FILE if main else f"CARD-{ctx.run}.md")


def step_branch(run: str, step: int) -> str:
    return step_ref(run, step).removeprefix("refs/heads/")


CardText = Callable[[AdapterCard], str]


@dataclass(frozen=True)
class CardLink:
    """Where `show` points for the card of a run's final commit (the same in every clone)."""

    run: str
    path: str | None             # CARD.md relative to the work tree; None when the run's config is absent
    command: str                 # what prints it in any clone

    def text(self) -> str:
        where = f"{self.path} (written by `git hermit finalize`); " if self.path else ""
        return f"{where}`{self.command}` prints it"

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "path": self.path, "command": self.command}


def card_link(repo: Repo, commit: str, run: str | None = None) -> CardLink | None:
    """The card of the run whose final tag is ``commit`` (None when it is no run's final): the run
    is the commit's Hermit-Run trailer (or ``run``), so a commit that is no final costs no git process."""
    trailers = dict(repo.commit_info(commit).trailers)
    name = run or trailers.get("Hermit-Run")
    if not name or repo.read_ref(final_tag(name)) != commit:
        return None
    command = "git hermit show final --card" + (f" --run {name}" if len(list_runs(repo)) > 1 else "")
    try:
        path = None if repo.bare else card_path(open_run(repo, name))   # a bare repository has no work tree
    except HermitError:
        path = None
    return CardLink(name, path.relative_to(repo.work_tree).as_posix() if path else None, command)
