"""The run's budget and its forecast, from the ledger of every step so far.

Each step records its ledger (rollouts, judge calls, learner sessions, by role) in the run's records
(``steps/NNNN/ledger.json``, core/records.py; a copy in ``.hermit/runs/<run>/step-NNNN/``) and its
totals by role in its analysis note; a step without records is read from its notes. `rollout`/`eval` ledgers outside
steps (``evals/<commit>-<split>/ledger.json``) count too, and so does a step the budget stopped,
from its files or (another machine's) from the scores note it wrote (``carried_over``). Here they
are summed into what the run spent, ``open_budget``/``open_evaluation_budget`` build the caps the
step driver and `rollout`/`eval` check, ``check_budget_config`` refuses a USD cap over a model
without a price, and ``estimate`` forecasts the next steps (`git hermit estimate`).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from git_hermit.accounting.budget import ROLLOUT_ROLES, Budget, Spread, rollout_usages
from git_hermit.accounting.ledger import Ledger, LedgerEntry, sum_usage
from git_hermit.config import RunConfig
from git_hermit.core.integrity import Damage
from git_hermit.core.records import RunRecords, records_ref
from git_hermit.core.runs import RunContext, eval_dir, run_dir, step_dir
from git_hermit.core.scores_notes import roles_of
from git_hermit.errors import ConfigError
from git_hermit.gitio import NOTES_REFS, NotesStore
from git_hermit.model.bounded_json import load_bounded
from git_hermit.model.records import MAX_NOTE_BYTES, MAX_NOTE_DEPTH
from git_hermit.model.rollout import Usage

LEDGER_FILE = "ledger.json"


def budget_limits(config: RunConfig) -> tuple[float | None, int | None]:
    return config.budget.max_usd, config.budget.max_tokens


def _learner_models(config: RunConfig) -> dict[str, str | None]:
    """role → the model its sessions bill (None: none is configured)."""
    evolver = config.evolver or {}
    if config.learner_base == "scripted":
        return {"learners": "scripted"}       # scripted learners report the model "scripted"
    model = (evolver.get("model") or {}).get("name")
    models: dict[str, str | None] = {"learners": model}
    debugger = config.evolver_params().get("debugger") or {}    # an evolver with a Debugger role may bill its own model
    if debugger.get("model"):
        models["debugger"] = debugger["model"]
    return models


def check_budget_config(config: RunConfig) -> None:
    """A USD budget needs a price for every model the run bills: otherwise it is refused here,
    before anything runs, instead of going silently unbounded (a token budget needs none)."""
    max_usd, _ = budget_limits(config)
    if max_usd is None:
        return
    prices = config.prices
    roles: dict[str, str | None] = {"agent.model": config.agent.model}
    if config.judge.kind == "llm":
        roles["judge.model"] = config.judge.model
    for role, model in _learner_models(config).items():
        roles["evolver.model.name" if role == "learners" else f"evolver.params.{role}.model"] = model
    unset = [key for key, model in roles.items() if not model]
    if unset:
        raise ConfigError(f"budget.max_usd is set but {', '.join(unset)} is not set, so its cost is unknown",
                          hint="name the model and give it a price in prices:, or budget by max_tokens")
    missing = sorted({str(m) for m in roles.values() if m not in prices})
    if missing:
        raise ConfigError(f"budget.max_usd is set but model(s) {', '.join(missing)} have no price, "
                          "so the run's cost would be unknown and the budget unbounded",
                          hint="add prices: {" + missing[0] + ": {input: …, output: …}} (USD per 1M tokens) "
                               "to hermit.yaml, or budget by max_tokens")


def step_ledgers(ctx: RunContext, before: int | None = None) -> dict[int, list[LedgerEntry]]:
    """Each finished step's ledger entries (re-priced where they had no cost), by step number.

    A step that stopped training has a ledger but no branch, so every step up to the one after the
    tip counts; ``before`` leaves out that step and later ones. A step is read from its records
    (``steps/NNNN/ledger.json`` in the run's records ref), else from a local ledger (a step recorded
    before records existed), else from its notes (never two of them: no double count)."""
    prices = ctx.config.prices
    last = ctx.tip[0] + 1 if before is None else before - 1
    found: dict[int, list[LedgerEntry]] = {}
    missing: list[int] = []
    # the run's records first: the same ledger in every clone, whatever moved a step's branch since
    recorded = RunRecords(ctx.repo, ctx.run, ctx.read_ref(records_ref(ctx.run))).ledgers(range(1, last + 1))
    for n in range(1, last + 1):
        data = recorded.get(n) or _read_json(step_dir(ctx.repo, ctx.run, n) / LEDGER_FILE)
        if data is None:
            missing.append(n)
            continue
        ledger = Ledger(prices)
        for item in data.get("entries", []):
            ledger.add(LedgerEntry.from_dict(item))
        found[n] = list(ledger.entries)
    if missing:
        found.update(_noted_steps(ctx, missing, Ledger(prices)))
    return dict(sorted(found.items()))


def _role_model(config: RunConfig, role: str) -> str | None:
    if role in ROLLOUT_ROLES:
        return config.agent.model if role == "acting" else config.judge.model
    models = _learner_models(config)
    return models.get(role) or models.get("learners")


def _noted_steps(ctx: RunContext, steps: list[int], ledger: Ledger) -> dict[int, list[LedgerEntry]]:
    """Steps without a local ledger (a fresh clone, a cleaned ``.hermit/``) from their notes: the
    analysis note on step N's tip holds its totals by role, the scores note on H_{N-1} how many
    rollouts it ran (a step that stopped training has only the latter, with its rollouts' usage).

    Made into ledger entries so the rest reads them as a local ledger: one acting entry per
    rollout (the first carries the role's total; the rollout mean stays exact), one per other role."""
    store = NotesStore(ctx.repo)
    analyses = store.read_all(NOTES_REFS["analysis"])
    scores = store.read_all(NOTES_REFS["scores"])
    tips = dict(ctx.steps)
    found: dict[int, list[LedgerEntry]] = {}
    for n in steps:
        evaluated = tips.get(n - 1)
        record = _note_json(scores.get(evaluated), "scores", evaluated) if evaluated else None
        if record is not None and (record.get("split") != "train" or record.get("step") != n):
            record = None
        rollouts = sum(len(t.get("attempts", [])) for t in (record or {}).get("tasks", {}).values())
        analysis = _note_json(analyses.get(tips[n]), "analysis", tips[n]) if n in tips else None
        by_role: dict[str, Usage] = {}
        if analysis is not None and isinstance(analysis.get("ledger"), dict):
            by_role = roles_of(None, analysis["ledger"])
        elif record is not None and record.get("stop"):
            by_role = noted_usage(record)
        if not by_role:
            continue
        entries = []
        for role, usage in by_role.items():
            model = _role_model(ctx.config, role)
            entries.append(ledger.add(LedgerEntry(role, "notes#1" if role in ROLLOUT_ROLES else role,
                                                  model, usage, n)))
        entries += [LedgerEntry("acting", f"notes#{i}", None, Usage(cost_usd=0.0), n)
                    for i in range(2, rollouts + 1)]
        found[n] = entries
    return found


def noted_usage(record: dict[str, Any]) -> dict[str, Usage]:
    """A scores record's usage by role (a note older than ``usage_by_role``: its agents')."""
    return roles_of(record.get("usage"), record.get("usage_by_role"))


def _nothing(usage: Usage) -> bool:
    """No tokens and no cost (differences of summed costs aside)."""
    return not usage.total_tokens and (usage.cost_usd or 0.0) < 1e-9


# The damaged notes an estimate read (each left out): `estimate` names them in its warnings.
_DAMAGED: ContextVar[list[str] | None] = ContextVar("damaged_notes", default=None)


def _note_json(text: str | None, kind: str | None = None, commit: str | None = None) -> dict[str, Any] | None:
    """A note's (or a ledger file's) JSON within the notes' bounds; None when absent or damaged, and
    a damaged note named for the warnings of the estimate reading it."""
    if not text:
        return None
    try:
        data = load_bounded(text, max_depth=MAX_NOTE_DEPTH, max_bytes=MAX_NOTE_BYTES)
    except ValueError as exc:
        seen = _DAMAGED.get()
        if kind and commit and seen is not None:
            seen.append(Damage(kind, commit, str(exc)).message)
        return None
    return data if isinstance(data, dict) else None


def eval_ledgers(ctx: RunContext) -> list[LedgerEntry]:
    """What `rollout`, `eval` and `train`'s held-out test spent outside steps: the ledgers under
    ``evals/<commit>-<split>/``, leaving out each step's own training rollouts (H_{N-1} on
    ``train``: in step N's ledger, or the unfinished step's). The usage its scores note records
    for the split beyond the local ledger counts too (``notes/…``): all of it in a fresh clone,
    other machines' rollouts of it after a fetch (the note sums every machine's)."""
    prices = ctx.config.prices
    in_steps = {f"{sha[:12]}-train" for _, sha in ctx.steps}
    ledger = Ledger(prices)
    local: dict[str, dict[str, Usage]] = {}
    for path in sorted((run_dir(ctx.repo, ctx.run) / "evals").glob(f"*/{LEDGER_FILE}")):
        if path.parent.name in in_steps:
            continue
        data = _read_json(path)
        if data is None:
            continue
        here = Ledger(prices)
        for item in data.get("entries", []):
            entry = LedgerEntry.from_dict(item)
            # keyed by directory too: the same row of two commits or splits is two rollouts
            here.add(ledger.add(replace(entry, key=f"{path.parent.name}/{entry.key}", step=None)))
        local[path.parent.name] = here.totals("role")
    for commit, text in NotesStore(ctx.repo).read_all(NOTES_REFS["scores"]).items():
        note = _note_json(text, "scores", commit)
        if note is None or note.get("run") != ctx.run:
            continue
        splits = note.get("splits")
        if not isinstance(splits, dict):
            splits = {}
        for split, record in [(note.get("split"), note), *splits.items()]:
            name = f"{commit[:12]}-{split}"
            if name in in_steps or not isinstance(record, dict):
                continue
            mine = local.get(name)
            for role, usage in noted_usage(record).items():      # priced at the role's model when it has no cost
                if mine is not None:
                    usage = _minus(usage, mine.get(role))
                    if _nothing(usage):   # all of it is here
                        continue
                ledger.add(LedgerEntry(role, name if mine is None else f"{name}/notes", _role_model(ctx.config, role),
                                       usage))
    return list(ledger.entries)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return _note_json(path.read_text())
    except OSError:
        return None


def unfinished_step(ctx: RunContext) -> tuple[int, list[LedgerEntry]]:
    """The step after the tip and the ledger entries of its rollouts that already finished
    (a step the budget or Ctrl-C stopped): spent, though no step ledger holds them yet."""
    from git_hermit.rollouts.runner import RETRIED_FILE, read_result, read_retried
    n, commit = ctx.tip[0] + 1, ctx.tip[1]
    if (step_dir(ctx.repo, ctx.run, n) / LEDGER_FILE).is_file():
        return n, []
    ledger = Ledger(ctx.config.prices)
    root = eval_dir(ctx, commit, "train") / "rollouts"
    model = ctx.config.agent.model
    for directory in sorted(p.parent for p in root.glob("*/*/result.json")):
        result = read_result(directory, commit)
        if result is not None:
            ledger.add_rollout(result, model=model, judge_model=ctx.config.judge.model, step=n)
    for path in sorted(root.glob(f"*/*/{RETRIED_FILE}")):    # re-queued rate-limited attempts: billed too
        for retried in read_retried(path.parent, commit):
            ledger.add_retried(retried.task, retried.attempt, retried.id, retried.usage, model=model, step=n)
    return n, list(ledger.entries)


def noted_unfinished(ctx: RunContext) -> tuple[dict[str, Usage], int]:
    """What the scores note on the tip says the unfinished step spent, by role, and how many
    rollouts it finished: a step the budget stopped writes it there (so does a `rollout` of the
    tip's training rows). ({}, 0): no such note."""
    n, commit = ctx.tip[0] + 1, ctx.tip[1]
    record = _note_json(NotesStore(ctx.repo).read(NOTES_REFS["scores"], commit), "scores", commit)
    if (record is None or record.get("run") != ctx.run or record.get("split") != "train"
            or record.get("step") != n or record.get("stop")):
        return {}, 0
    tasks = record.get("tasks")
    attempts = [t.get("attempts") for t in tasks.values() if isinstance(t, dict)] if isinstance(tasks, dict) else []
    return noted_usage(record), sum(len(a) for a in attempts if isinstance(a, list))


def carried_over(ctx: RunContext, local: list[LedgerEntry], *, resuming: bool = False) -> list[LedgerEntry]:
    """The unfinished step's spending its note records beyond this machine's finished rollouts
    (``local``): in a fresh clone all of it, on the machine that stopped it nothing of its rollouts.
    ``resuming`` (the step's own budget) leaves out the learners' part where the rollouts are here:
    their sessions are kept here too, and billed again by the resumed step's ledger.

    One entry per rollout not here (the first carries the role's total, so the mean is exact) and
    one per other role, keyed ``notes/…``."""
    noted, count = noted_unfinished(ctx)
    mine = Ledger(entries=local).totals("role")
    count -= len(rollout_usages(local))
    ledger = Ledger(ctx.config.prices)
    n = ctx.tip[0] + 1
    for role, usage in noted.items():
        if role not in ROLLOUT_ROLES and resuming and local:
            continue
        left = _minus(usage, mine.get(role))
        if _nothing(left):    # all of it is here
            continue
        model = _role_model(ctx.config, role)
        ledger.add(LedgerEntry(role, "notes/1" if role in ROLLOUT_ROLES else f"notes/{role}", model, left, n))
        if role == "acting":
            for i in range(2, count + 1):
                ledger.add(LedgerEntry(role, f"notes/{i}", model, Usage(cost_usd=0.0), n))
    return list(ledger.entries)


def _per(total: Usage, count: int) -> Usage:
    """The mean of ``count`` usages that sum to ``total``."""
    return Usage(round(total.input_tokens / count), round(total.cached_input_tokens / count),
                 round(total.output_tokens / count), round(total.reasoning_tokens / count),
                 None if total.cost_usd is None else total.cost_usd / count)


def _minus(a: Usage, b: Usage | None) -> Usage:
    if b is None:
        return a
    cost = None if a.cost_usd is None else max(a.cost_usd - (b.cost_usd or 0.0), 0.0)
    return Usage(max(a.input_tokens - b.input_tokens, 0), max(a.cached_input_tokens - b.cached_input_tokens, 0),
                 max(a.output_tokens - b.output_tokens, 0), max(a.reasoning_tokens - b.reasoning_tokens, 0), cost)


def _learner_usage(entries: list[LedgerEntry]) -> Usage:
    return sum_usage(e.usage for e in entries if e.role not in ROLLOUT_ROLES)


def open_budget(ctx: RunContext, step: int) -> Budget:
    """Step ``step``'s budget: the run's spending in earlier steps and the ledger's means."""
    config = ctx.config
    max_usd, max_tokens = budget_limits(config)
    if max_usd is None and max_tokens is None:
        # nothing to check: the run's history (ledgers, notes) is not read on every step
        return Budget(step=step, prices=config.prices, model=config.agent.model,
                      judge_model=config.judge.model)
    past = step_ledgers(ctx, before=step)
    entries = [e for step_entries in past.values() for e in step_entries]
    outside = eval_ledgers(ctx)
    carried: list[LedgerEntry] = []
    if step == ctx.tip[0] + 1:    # what other machines spent on this step before it stopped: this step's
        carried = carried_over(ctx, unfinished_step(ctx)[1], resuming=True)
    learners = [_learner_usage(step_entries) for step_entries in past.values()]
    learner_mean = _per(sum_usage(learners), len(learners)) if learners else None
    prices = config.prices
    return Budget(step=step, max_usd=max_usd, max_tokens=max_tokens,
                  prior=sum_usage(e.usage for e in [*entries, *outside]), prior_entries=[*entries, *outside, *carried],
                  history_rollouts=rollout_usages([*entries, *carried]), learner_per_step=learner_mean, prices=prices,
                  model=config.agent.model, judge_model=config.judge.model,
                  carried=carried)


def open_evaluation_budget(ctx: RunContext, what: str = "the rollouts") -> Budget | None:
    """The budget of a `git hermit rollout`/`eval` (None: hermit.yaml sets none). Everything the run
    spent is its prior: the steps', the evaluations', and a stopped step's finished rollouts."""
    config = ctx.config
    max_usd, max_tokens = budget_limits(config)
    if max_usd is None and max_tokens is None:
        return None
    entries = [e for step_entries in step_ledgers(ctx).values() for e in step_entries]
    running = unfinished_step(ctx)[1]
    every = [*entries, *eval_ledgers(ctx), *running, *carried_over(ctx, running)]
    return Budget(step=None, max_usd=max_usd, max_tokens=max_tokens, prior=sum_usage(e.usage for e in every),
                  prior_entries=every, history_rollouts=rollout_usages(every), prices=config.prices,
                  model=config.agent.model, judge_model=config.judge.model,
                  evaluation=True, what=what)


@dataclass(frozen=True)
class RoleForecast:
    tokens: Spread
    cost_usd: Spread | None          # None: some of the role's usage has no price

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens.to_dict(), "cost_usd": self.cost_usd.to_dict() if self.cost_usd else None}


@dataclass(frozen=True)
class Estimate:
    """The next ``steps`` steps' expected tokens and cost, from ``steps_seen`` finished steps."""

    run: str
    steps: int
    steps_seen: int
    spent: Usage                             # the finished steps' and the unfinished one's
    per_step: dict[str, RoleForecast]        # by role
    next_tokens: tuple[float, float] | None  # (mean, sd) over the next steps
    next_cost: tuple[float, float] | None
    max_usd: float | None
    max_tokens: int | None
    unfinished: tuple[int, int] | None = None   # (step, its finished rollouts) of a stopped step
    spent_by_role: dict[str, Usage] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()           # the damaged notes it read (each left out)

    @property
    def left_usd(self) -> float | None:
        if self.max_usd is None or self.spent.cost_usd is None:
            return None
        return max(self.max_usd - self.spent.cost_usd, 0.0)

    @property
    def left_tokens(self) -> int | None:
        return None if self.max_tokens is None else max(self.max_tokens - self.spent.total_tokens, 0)

    def steps_left(self) -> int | None:
        """How many more steps the budget covers at the mean cost of one (None: no budget or no data)."""
        counts = []
        if self.left_usd is not None and self.next_cost and self.next_cost[0] > 0:
            counts.append(int(self.left_usd // (self.next_cost[0] / self.steps)))
        if self.left_tokens is not None and self.next_tokens and self.next_tokens[0] > 0:
            counts.append(int(self.left_tokens // (self.next_tokens[0] / self.steps)))
        return min(counts) if counts else None

    def to_dict(self) -> dict[str, Any]:
        def pair(value: tuple[float, float] | None) -> dict[str, float] | None:
            return None if value is None else {"mean": value[0], "sd": value[1]}
        return {"run": self.run, "steps": self.steps, "steps_seen": self.steps_seen,
                "spent": {"tokens": self.spent.total_tokens, "cost_usd": self.spent.cost_usd,
                          "by_role": {role: {"tokens": u.total_tokens, "cost_usd": u.cost_usd}
                                      for role, u in self.spent_by_role.items()}},
                "unfinished": (None if self.unfinished is None else
                               {"step": self.unfinished[0], "rollouts": self.unfinished[1]}),
                "per_step": {role: f.to_dict() for role, f in self.per_step.items()},
                "next": {"tokens": pair(self.next_tokens), "cost_usd": pair(self.next_cost)},
                "budget": {"max_usd": self.max_usd, "max_tokens": self.max_tokens, "left_usd": self.left_usd,
                           "left_tokens": self.left_tokens, "steps_left": self.steps_left()},
                "warnings": list(self.warnings)}


def estimate(ctx: RunContext, steps: int = 1) -> Estimate:
    """Per role, the spread of a step's tokens and cost over the finished steps; the next
    ``steps`` steps expect ``steps`` × the mean, with sd × √steps (steps taken as independent)."""
    seen: list[str] = []
    token = _DAMAGED.set(seen)
    try:
        made = _estimate(ctx, steps)
    finally:
        _DAMAGED.reset(token)
    return replace(made, warnings=tuple(dict.fromkeys(seen)))


def _estimate(ctx: RunContext, steps: int) -> Estimate:
    past = step_ledgers(ctx)
    max_usd, max_tokens = budget_limits(ctx.config)
    entries = [e for step_entries in past.values() for e in step_entries]
    roles: list[str] = []
    for entry in entries:
        if entry.role not in roles:
            roles.append(entry.role)
    per_step: dict[str, RoleForecast] = {}
    for role in roles:
        # a step without the role (no failing task for the Debugger) counts as zero for it
        usages = [sum_usage(e.usage for e in step_entries if e.role == role) for step_entries in past.values()]
        cost = None if any(u.cost_usd is None for u in usages) else _spread(u.cost_usd or 0.0 for u in usages)
        per_step[role] = RoleForecast(_spread(u.total_tokens for u in usages), cost)
    totals = [sum_usage(e.usage for e in step_entries) for step_entries in past.values()]
    next_tokens = next_cost = None
    if totals:
        token_spread = _spread(u.total_tokens for u in totals)
        next_tokens = (steps * token_spread.mean, math.sqrt(steps) * token_spread.sd)
        if all(u.cost_usd is not None for u in totals):
            cost_spread = _spread(u.cost_usd or 0.0 for u in totals)
            next_cost = (steps * cost_spread.mean, math.sqrt(steps) * cost_spread.sd)
    step, running = unfinished_step(ctx)
    rollouts = max(len(rollout_usages(running)), noted_unfinished(ctx)[1])
    every = [*entries, *running, *carried_over(ctx, running), *eval_ledgers(ctx)]
    return Estimate(ctx.run, steps, len(past), sum_usage(e.usage for e in every), per_step,
                    next_tokens, next_cost, max_usd, max_tokens, (step, rollouts) if rollouts else None,
                    Ledger(entries=every).totals("role"))


def _spread(values: Iterable[float]) -> Spread:
    """The spread of values known to be there (one per finished step)."""
    spread = Spread.of(values)
    if spread is None:
        raise ValueError("no values to spread")
    return spread
