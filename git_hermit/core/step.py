"""The step driver shared by all evolvers: `git hermit step`, `train` and `finalize`.

Step N takes the run lock, runs the rollouts of H_{N-1} (the tip of step N-1) with resume,
hands the results and the run's notes to the evolver, then turns its result into commits
(plumbing), notes and ``hermit/<run>/step-NNNN`` in ONE ref transaction at the end — so a
step killed anywhere leaves no half-written ref or note, and rerunning resumes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping

from git_hermit.adapter.check_spec import check_adapter
from git_hermit.adapter.screen import Limits, screen
from git_hermit.adapter.templates import load_template
from git_hermit.core import preflight
from git_hermit.core.budget import carried_over, check_budget_config, open_budget
from git_hermit.core.commits import learner_author, step_message
from git_hermit.core.evaluate import (EvalRun, comparison_record, load_benchmark, merged_scores_text, read_scores,
                                     run_split, scores_record, training_rollouts)
from git_hermit.core.failures import check_exception_rate
from git_hermit.core.history import ChangeView, RunHistory, StepView, load_history
from git_hermit.core.records import (FINAL_FILE, RunRecords, StepRecord, StepRecords, add_file, missing_records,
                                     pending_ref, publish_pending, records_ref, restore_pending, rollout_parts)
from git_hermit.core.review import run_reviews
from git_hermit.core.runs import RunContext, best_tag, eval_dir, final_tag, open_run, run_dir, step_dir, step_ref
from git_hermit.errors import BudgetReached, ConfigError, GitStateError, RecordsMissing, RefConflict
from git_hermit.evolvers import registry
from git_hermit.evolvers.base import Evolver, PastChange, PastEvaluation, PastRollback, StepContext, StepResult
from git_hermit.gitio import (NOTES_REFS, FileChange, KeepAlive, NotesStore, RefUpdate, Repo, RunLock, ZERO_SHA,
                              check_ref_locks, drop_stale_keepalive)
from git_hermit.accounting import stats
from git_hermit.accounting.budget import ROLLOUT_ROLES, Budget
from git_hermit.accounting.ledger import Ledger
from git_hermit.atomic import write_atomic
from git_hermit.learners import SessionLearner, make_learner
from git_hermit.model.learner import Learner
from git_hermit.model.records import Analysis, Scores, content_hash, dumps, loads
from git_hermit.redact import redact
from git_hermit.rollouts.runner import Progress, task_dirname
from git_hermit.supervise.sandbox import spec_from_config
from git_hermit.supervise.scratch import clean_stale, slots_kept

if TYPE_CHECKING:
    from git_hermit.core.card import CardText

MAX_PUBLISH_ATTEMPTS = 5


class RunFinished(Exception):
    """The run has nothing left to do (its target was reached, or its stream is spent): not an
    error; `step` and `train` say so and exit 0 without touching a ref or a note."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class StepOutcome:
    step: int
    evaluated: str                  # H_{N-1}
    pass_at_1: float
    tip: str | None                 # H_N (None when training stopped before learning)
    commits: int
    stop: str | None
    rejected: tuple[str, ...]
    comparison: stats.PairedComparison | None
    verdicts: dict[str, str] = field(default_factory=dict)
    rollbacks: int = 0
    best: bool = False
    run: str = ""
    compared_to: int | None = None  # the comparison's baseline is H_<compared_to>
    empty: bool = False             # H_N is the step's one empty commit ("no adapter changes")


def make_evolver(name: str) -> Evolver:
    """The registered evolver ``name`` (evolvers/registry.py), a fresh instance."""
    return registry.make_evolver(name)


def _previous_evaluations(repo: Repo, ctx: RunContext, current_step: int) -> list[PastEvaluation]:
    """Earlier evaluations of this run's step tips, from one batched read of the scores notes."""
    texts = NotesStore(repo).read_all(NOTES_REFS["scores"])
    past = []
    for n, sha in ctx.steps:
        text = texts.get(sha)
        if not text:
            continue
        scores = loads("scores", text, where=sha[:12])
        if scores.run == ctx.run and scores.split == "train" and scores.step < current_step:
            past.append(PastEvaluation.of(scores.step, sha, scores))
    return sorted(past, key=lambda e: e.step)


def _revert_files(repo: Repo, adapter: str) -> Callable[[str], dict[str, FileChange | None]]:
    prefix = adapter.rstrip("/")

    def revert(change_commit: str) -> dict[str, FileChange | None]:
        info = repo.commit_info(change_commit)
        before = repo.ls_tree(info.parents[0], prefix) if info.parents else {}
        after = repo.ls_tree(change_commit, prefix)
        files: dict[str, FileChange | None] = {}
        for path in sorted(set(before) | set(after)):
            if before.get(path) == after.get(path):
                continue
            old = before.get(path)
            files[path] = None if old is None else FileChange(repo.read_object(old.sha)[1], old.mode)
        return files
    return revert


def _past_rollbacks(history: RunHistory, prev_view: StepView | None) -> list[PastRollback]:
    """The rollbacks step N-1 committed, each with the tasks its reverted changes had regressed (their
    realised risks, plus the judging step's unattributed regressions) and had fixed, from the notes."""
    if prev_view is None:
        return []
    views: dict[str, list[ChangeView]] = {cv.commit: [] for sv in history.steps for cv in sv.changes}
    for sv in history.steps:
        for cv in sv.changes:
            views[cv.commit].append(cv)
    analysis_of = {sv.step: (sv.analysis.body if sv.analysis else {}) for sv in history.steps}
    found = []
    for rollback in prev_view.rollbacks:
        if rollback.reverts is None:     # never: rollbacks are the commits that name what they revert
            continue
        changes = views.get(rollback.reverts, [])
        restores: list[str] = []
        undoes: list[str] = []
        for cv in changes:
            if cv.verdict is None:
                continue
            restores += cv.verdict.risk_realized
            restores += analysis_of.get(cv.verdict.step, {}).get("unattributed_regressions") or []
            undoes += cv.verdict.actually_fixed
        found.append(PastRollback(rollback.sha, rollback.reverts, tuple(cv.change.id for cv in changes),
                                  tuple(dict.fromkeys(restores)), tuple(dict.fromkeys(undoes))))
    return found


def _learner_factory(ctx: RunContext) -> Callable[[str], Learner]:
    params = ctx.config.evolver_params()
    scripted = registry.get(ctx.config.evolver_name).scripted    # its folder's defaults for base: scripted

    def learner(role: str) -> Learner:
        overrides = {}
        if role == "debugger":
            dbg = params.get("debugger") or {}
            overrides = {"name": dbg.get("model"), "effort": dbg.get("effort"), "bin": dbg.get("bin"),
                         "args": dbg.get("args")}
        learner = make_learner(ctx.config.evolver, role, base=ctx.config.learner_base, scripted_default=scripted.get(role), overrides=overrides)
        if isinstance(learner, SessionLearner):
            # seed 000: the learners' sandbox, hosted web search set explicitly, hidden paths
            learner.sandbox = spec_from_config(ctx.config.sandbox, backend=learner.backend,
                                               provider=learner.cfg.get("provider"))
            if learner.sandbox is not None:      # the traces its prompt names, read-only
                readable, held_out = training_rollouts(ctx)
                learner.sandbox = learner.sandbox.with_readable(readable, hidden=held_out)
            learner.cfg["web_search"] = bool(params.get("web_search", False))
            learner.hide = tuple(params.get("hide") or ())
        return learner
    return learner


def _adapter_files(repo: Repo, commit: str, adapter: str, under: str) -> dict[str, FileChange]:
    prefix = "/".join(p for p in (adapter.strip("/"), under.strip("/")) if p and p != ".")
    return {path: FileChange(repo.read_object(entry.sha)[1], entry.mode)
            for path, entry in repo.ls_tree(commit, prefix).items() if entry.type == "blob"}


def _materialise(repo: Repo, commit: str, adapter: str, dest: Path) -> None:
    repo.materialise(commit, adapter, dest)


def run_step(repo: Repo, run: str | None = None, *, say: Callable[[str], None] = print,
             on_progress: Callable[[Progress], None] | None = None, wait: bool = False,
             keep_exceptions: bool = False) -> StepOutcome:
    ctx = open_run(repo, run)
    _refuse_if_stopped(repo, ctx)            # a finished run says so, whatever this machine lacks
    preflight.require_for_step(ctx.config)   # every missing file, program, key or login, before spending
    spec_from_config(ctx.config.sandbox)     # refuse now when the sandbox is asked for but cannot run
    check_budget_config(ctx.config)          # a USD budget over an unpriced model: refused, never unbounded
    with RunLock(repo, ctx.run, "git hermit step", wait=wait, on_wait=say):
        ctx = open_run(repo, ctx.run)        # re-read under the lock: another step may have landed
        _check_publishable(repo, ctx.run)
        clean_stale()                        # workspaces and login copies of a killed run
        return _step_locked(repo, ctx, say=say, on_progress=on_progress, keep_exceptions=keep_exceptions)


def _require_history(repo: Repo, ctx: RunContext) -> None:
    """RecordsMissing when this repository lacks part of the run's history (its notes, or an earlier
    step's records): the learners would get less than the run has, so the step refuses to start."""
    missing = missing_records(repo, ctx.run, [n for n, _ in ctx.steps])
    if missing:
        raise RecordsMissing(
            f"step {ctx.tip[0] + 1} of run {ctx.run!r} needs the run's whole history, and this repository lacks "
            f"{missing.what()}",
            hint=f"bring them with `{missing.command()}` (a plain git clone or fetch brings neither notes nor "
                 "records); nothing was run")


def _rollout_dirs(ev: EvalRun) -> list[tuple[str, str]]:
    return [(task_dirname(task), str(r.attempt)) for task, results in ev.results.items() for r in results]


def _publish_rollouts(repo: Repo, ctx: RunContext, n: int, evaluated: str, rollouts_home: Path, ev: EvalRun) -> None:
    publish_pending(repo, ctx.run, n, evaluated, rollouts_home / "rollouts", _rollout_dirs(ev))


def _refuse_if_stopped(repo: Repo, ctx: RunContext) -> None:
    """RunFinished when a step already evaluated the tip and stopped training: a rerun would only
    rewrite notes. (A spent stream is found once the tasks are read, under the lock.)"""
    n, evaluated = ctx.tip[0] + 1, ctx.tip[1]
    stopped = read_scores(repo, evaluated)
    if stopped is not None and stopped.split == "train" and stopped.stop and ctx.config.allow_early_stop:
        raise RunFinished(f"step {stopped.step} evaluated H_{n - 1} and stopped training ({stopped.stop})")


def _keepalive_base(run: str) -> str:
    return f"refs/hermit-tmp/{run}"


def _check_publishable(repo: Repo, run: str) -> None:
    """Before the step spends anything: no git lock file may block a ref its transaction moves,
    and keep-alive refs a killed step left behind are dropped (we hold the run lock)."""
    check_ref_locks(repo, [f"refs/heads/hermit/{run}/", f"refs/tags/hermit/{run}/", "refs/notes/hermit/",
                           _keepalive_base(run) + "/"])
    drop_stale_keepalive(repo, _keepalive_base(run))


def step_params(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """The params an evolver's step reads: config.params without ``k``, which the step carries once,
    as StepContext.k (resolved by load_benchmark: ``-k``, else evolver.params.k, else the rows file)."""
    return MappingProxyType({key: value for key, value in params.items() if key != "k"})


def _step_locked(repo: Repo, ctx: RunContext, *, say: Callable[[str], None],
                 on_progress: Callable[[Progress], None] | None, keep_exceptions: bool = False) -> StepOutcome:
    config = ctx.config
    n, evaluated = ctx.tip[0] + 1, ctx.tip[1]
    evolver = make_evolver(config.evolver_name)
    params = config.evolver_params()
    _refuse_if_stopped(repo, ctx)            # again under the lock: another step may have stopped it
    _require_history(repo, ctx)              # never continue a run with less of its history than it has
    if hasattr(evolver, "check_config"):    # the evolver's own start-up checks, before any rollout
        evolver.check_config(config)
    bench = load_benchmark(config, "train")       # parsed once: a window is cut from it below
    chosen = evolver.step_tasks(bench.split.tasks, n, params)
    if chosen is not None and not chosen:
        raise RunFinished(f"the training stream is spent (all {len(bench.split.tasks)} tasks were used)")
    here = step_dir(repo, ctx.run, n)
    here.mkdir(parents=True, exist_ok=True)
    say(f"step {n}: rollouts of H_{n - 1} (hermit/{ctx.run}/step-{n - 1:04d} {evaluated[:12]})")
    if chosen is not None:
        bench = bench.only(chosen)
    # One rollouts directory per (commit, split): rows `git hermit rollout` already ran are reused.
    rollouts_home = eval_dir(ctx, evaluated, "train")
    # rollouts another machine finished for this step and published (a job killed mid-step): reused
    restored = restore_pending(repo, ctx.run, n, evaluated, rollouts_home / "rollouts")
    if restored:
        say(f"step {n}: {restored} finished rollout(s) taken from {pending_ref(ctx.run)} (run elsewhere)")
    budget = open_budget(ctx, n)             # the run's cap and its ledger so far (core/budget.py)
    try:
        ev = run_split(repo, config, bench, evaluated, rollouts_home, on_progress=on_progress, step=n, budget=budget,
                       keep_exceptions=keep_exceptions)
    except BudgetReached as stopped:
        partial = stopped.partial if isinstance(stopped.partial, EvalRun) else None
        if partial is not None:
            _publish_rollouts(repo, ctx, n, evaluated, rollouts_home, partial)
        _note_stopped(repo, ctx, n, partial, None, budget)
        raise
    # rollouts that mostly measured nothing (timeouts, crashes, a refused key) teach nothing: the
    # step stops here, its finished rollouts kept here, and its exception rows run again next time
    check_exception_rate(ev.results, config.max_exception_rate, step=n, evaluated=f"H_{n - 1}")
    # the rollout phase is over: its results are published now, so a restart in a fresh checkout of a
    # remote this is pushed to (`git hermit push` may run mid-step) re-runs none of them
    _publish_rollouts(repo, ctx, n, evaluated, rollouts_home, ev)
    history = _previous_evaluations(repo, ctx, n)
    comparison = None
    if history:
        prev = history[-1]
        prev_rates = {t: sum(a.outcome == "pass" for a in s.attempts) / len(s.attempts)
                      for t, s in prev.scores.tasks.items() if s.attempts}
        if set(prev_rates) & set(ev.results):
            comparison = stats.paired_bootstrap(prev_rates, stats.per_task_pass_at_1(ev.results))
    scores = scores_record(ctx.run, n, ev,
                           ci=comparison_record(history[-1].commit, comparison) if comparison else None)
    # what other machines spent on this step before it stopped there (its note's part beyond the
    # rollouts reused here): a budget read it before the step; without one, it is read now
    carried = budget.carried if budget.max_usd is not None or budget.max_tokens is not None else carried_over(
        ctx, [e for e in ev.ledger.entries if e.key not in ev.fresh], resuming=True)
    if carried:
        # rows another machine ran before this one ran them again: the note counts both, as the
        # step's ledger does (see core.scores_notes)
        rollouts = Ledger(entries=[*(e for e in carried if e.role in ROLLOUT_ROLES), *ev.ledger.entries])
        scores = replace(scores, usage=rollouts.total().to_dict(),
                         usage_by_role={role: u.to_dict() for role, u in rollouts.totals("role").items()})
    say(f"step {n}: pass@1 {ev.pass_at_1:.3f}" + (f" ({comparison} vs H_{history[-1].step - 1})" if comparison else "")
        + (f"; {ev.reused} rollouts reused" if ev.reused else ""))

    run_history = load_history(ctx)
    prev_view = next((v for v in run_history.steps if v.step == n - 1), None)
    prev_changes = [PastChange(cv.commit, cv.change) for cv in (prev_view.changes if prev_view else [])]
    prev_rollbacks = _past_rollbacks(run_history, prev_view)
    best_commit = repo.read_ref(best_tag(ctx.run))
    best = None
    if best_commit:
        best_scores = read_scores(repo, best_commit)
        # exact, from the note's per-attempt outcomes: the note's pass_at_1 is rounded to 6 digits,
        # and 1/3 must tie with 1/3, never beat 0.333333
        best = (best_commit, stats.exact_pass_at_1(
            {t: (len(s.attempts), sum(a.outcome == "pass" for a in s.attempts))
             for t, s in best_scores.tasks.items()})) if best_scores else None
    # the step's ledger: what other machines spent on it before it stopped there, then its rollouts
    ledger = budget.watch(Ledger(config.prices, [*carried, *ev.ledger.entries]))
    template = load_template(config.template)
    limits = Limits.of(config.evolver)
    step_ctx = StepContext(
        config=config, params=step_params(params), run=ctx.run, step=n, commit=evaluated,
        results=ev.results, k=ev.k, tasks=bench.split.tasks, rollouts_root=rollouts_home / "rollouts",
        step_dir=here, run_dir=run_dir(repo, ctx.run), work_tree=repo.work_tree, history=history,
        prev_changes=prev_changes, best=best, ledger=ledger, learner=budget.guard(_learner_factory(ctx)),
        revert_files=_revert_files(repo, config.adapter),
        adapter_files=lambda under="", commit=None: _adapter_files(repo, commit or evaluated, config.adapter, under),
        materialise=lambda dest, commit=None: _materialise(repo, commit or evaluated, config.adapter, dest),
        check=lambda directory: [v for v in check_adapter(directory, template, hosts=True, run_host=config.host)
                                 if v.severity == "error"],
        screen=lambda files, before, directory: screen(files, template=template, limits=limits, before=before,
                                                       directory=directory),
        say=say, prev_rollbacks=prev_rollbacks,
        past_records=lambda: RunRecords(repo, ctx.run).learner_files(n), reviews=run_reviews(repo, ctx.run))
    try:
        result = evolver.learn(step_ctx)
    except BudgetReached:
        _note_stopped(repo, ctx, n, ev, ledger, budget)
        raise
    # one or two example flips per judged change (answers before and after, the judge): the scores
    # note on the judged commit keeps them, so a clone shows them beside the verdicts
    from git_hermit.core.flip_examples import flip_examples
    examples = flip_examples(result.verdicts.values(), ev.results,
                             lambda: RunRecords(repo, ctx.run).rollout_records(n - 1) if n > 1 else {})
    if examples:
        result.analysis["examples"] = examples
    ledger_text = "".join(ledger.json_chunks()).encode()
    write_atomic(here / "ledger.json", ledger_text, durable=True)
    rollout_records, traces = rollout_parts(rollouts_home / "rollouts", _rollout_dirs(ev))
    step_records = StepRecords(StepRecord(ctx.run, n, config.evolver_name, evaluated, None, rollouts=sum(
        len(r) for r in ev.results.values())), ledger_text, rollout_records, traces,
        {path: redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
         for path, data in result.records.items()})
    outcome = _publish(repo, ctx, n, evaluated, scores, result, ledger, comparison, step_records, say)
    return replace(outcome, compared_to=history[-1].step - 1 if comparison else None)


def _note_stopped(repo: Repo, ctx: RunContext, n: int, ev: EvalRun | None, ledger: Ledger | None,
                  budget: Budget) -> None:
    """A step the budget stopped records its finished rollouts and everything it spent (its
    learner sessions and what other machines spent on it too, by role) in the scores note of the
    commit it evaluates, as `git hermit rollout` of those rows would: the local files stay on
    this machine, the note travels, so a clone's budget counts what was spent."""
    if ev is None:                           # nothing finished (refused at start): nothing to note
        return
    spent = ledger if ledger is not None else Ledger(entries=[*budget.carried, *ev.ledger.entries])
    scores = replace(scores_record(ctx.run, n, ev), usage=spent.total().to_dict(),
                     usage_by_role={role: u.to_dict() for role, u in spent.totals("role").items()})
    store = NotesStore(repo)
    text = merged_scores_text(repo, scores)
    if text != store.read(NOTES_REFS["scores"], ev.commit):
        store.write(NOTES_REFS["scores"], ev.commit, text, f"git-hermit {ctx.run} step {n} (stopped: budget)")


def _publish(repo: Repo, ctx: RunContext, n: int, evaluated: str, scores: Scores, result: StepResult,
             ledger: Ledger, comparison: stats.PairedComparison | None, records: StepRecords,
             say: Callable[[str], None]) -> StepOutcome:
    """Commits, notes and refs of the step, published in one CAS transaction. Until then every
    object written here is held by a keep-alive ref (a concurrent `git gc --prune=now` cannot
    prune it), deleted in that same transaction."""
    keep = KeepAlive(repo, f"{_keepalive_base(ctx.run)}/step-{n:04d}")
    try:
        return _publish_kept(repo, ctx, n, evaluated, scores, result, ledger, comparison, records, keep, say)
    except BaseException:
        keep.drop()
        raise


def _publish_kept(repo: Repo, ctx: RunContext, n: int, evaluated: str, scores: Scores, result: StepResult,
                  ledger: Ledger, comparison: stats.PairedComparison | None, records: StepRecords, keep: KeepAlive,
                  say: Callable[[str], None]) -> StepOutcome:
    config = ctx.config
    evolver = config.evolver_name
    tip = evaluated
    manifest_notes: dict[str, str] = {}
    provenance_notes: dict[str, str] = {}
    template, limits = load_template(config.template), Limits.of(config.evolver)
    for index, planned in enumerate(result.commits):
        # The last gate, whatever the evolver: learner content is screened (rollbacks restore
        # committed content), and every new object must pass `git fsck --strict` as a strict
        # remote would check it. A refused commit is dropped with the ones after it (they were
        # built on it) and the reason recorded, like any refused learner output.
        refused = [] if planned.reverts else screen(planned.files, template=template, limits=limits)
        if refused:
            _refuse_from(result, index, refused, say)
            break
        extra = list(planned.trailers)
        if planned.manifest is not None:
            note = redact(dumps("manifest", planned.manifest))
            extra.append(("Hermit-Manifest", content_hash(note)))
        if planned.reverts:
            extra.append(("Hermit-Reverts", planned.reverts))
            if planned.verdict:
                extra.append(("Hermit-Verdict", planned.verdict))
        message = step_message(run=ctx.run, step=n, evolver=evolver, summary=redact(planned.summary),
                               body=redact(planned.body), change_id=planned.change_id, extra=extra)
        files = {f"{config.adapter}/{path}": change for path, change in planned.files.items()}
        # the learner wrote change commits (author), the user ran the step (committer)
        author = None if planned.reverts else learner_author(evolver, config.evolver)
        commit = repo.write_commit(tip, files, message, author=author)
        complaint = repo.fsck_new_objects(commit, tip)
        if complaint:
            _refuse_from(result, index, [f"git fsck --strict refuses the commit '{redact(planned.summary)}': "
                                         f"{complaint}"], say)
            break
        tip = commit
        keep.hold({"tip": tip})
        if planned.manifest is not None:
            manifest_notes[tip] = note
        if planned.provenance is not None:
            provenance_notes[tip] = redact(dumps("provenance", planned.provenance))
        if planned.reverts and planned.reverts in result.verdicts:   # the verdict names its rollback
            result.verdicts[planned.reverts] = replace(result.verdicts[planned.reverts], rollback_commit=tip)
    if result.stop is None and tip == evaluated:
        # every step gets its own tip (the home of its analysis note), even with no edits
        why = "; ".join(result.rejected) or result.unchanged or "the learners made no edits to the adapter"
        tip = repo.write_commit(evaluated, {}, step_message(
            run=ctx.run, step=n, evolver=evolver, summary="no adapter changes", body=redact(why)))
        keep.hold({"tip": tip})
    verdict_notes = {commit: dumps("verdicts", verdict) for commit, verdict in result.verdicts.items()}
    analysis = dict(result.analysis)
    # step N learns H_N from the rollouts of H_{N-1}: the note (on H_N) says which adapter it analysed
    analysis["evaluated"] = f"H_{n - 1}"
    analysis["commit_evaluated"] = evaluated
    if result.rejected:
        analysis["rejected"] = list(dict.fromkeys([*analysis.get("rejected", []), *result.rejected]))
    analysis["ledger"] = {role: usage.to_dict() for role, usage in ledger.totals("role").items()}
    analysis["tokens_per_trial"] = ledger.tokens_per_trial()
    analysis_note = None
    if result.stop is None:
        analysis_note = dumps("analysis", Analysis(ctx.run, n, evolver, json.loads(redact(json.dumps(analysis)))))
    evaluation = {k: result.analysis[k] for k in ("flips", "verdicts", "unattributed_regressions", "precision_recall",
                                                  "rollback_flips", "rollback_regressions", "examples")
                  if result.analysis.get(k)}
    scores = replace(scores, stop=result.stop, evaluation=json.loads(redact(json.dumps(evaluation))) or None)
    for attempt in range(MAX_PUBLISH_ATTEMPTS):
        store = NotesStore(repo)
        updates: list[RefUpdate] = []
        batches = {"scores": {evaluated: merged_scores_text(repo, scores)}, "manifest": manifest_notes,
                   "verdicts": verdict_notes, "provenance": provenance_notes}
        if analysis_note is not None:
            batches["analysis"] = {tip: analysis_note}
        for kind, notes in batches.items():
            new, old = store.prepare(NOTES_REFS[kind], notes, f"git-hermit {ctx.run} step {n}")
            if new is not None:
                updates.append(RefUpdate(NOTES_REFS[kind], new, old or ZERO_SHA))
        keep.hold({f"notes-{u.ref.rsplit('/', 1)[1]}": u.new for u in updates if u.new is not None})
        # the step's records (and traces), anchored to the commits it evaluated and published
        stepped = replace(records, record=replace(records.record, tip=None if result.stop else tip, stop=result.stop))
        record_updates, held = stepped.updates(repo)
        updates += record_updates
        keep.hold(held)
        if result.stop is None:
            updates.append(RefUpdate(step_ref(ctx.run, n), tip, ZERO_SHA))
        if result.best:
            updates.append(RefUpdate(best_tag(ctx.run), evaluated, repo.read_ref(best_tag(ctx.run)) or ZERO_SHA))
        try:
            repo.update_refs(updates + keep.releases(), message=f"git hermit step {n}")
            keep.published()
            break
        except RefConflict:
            if repo.read_ref(step_ref(ctx.run, n)):
                raise GitStateError(f"step {n} of run {ctx.run!r} was published by another process",
                                    hint="see `git hermit log`; nothing of this attempt was written") from None
            if attempt + 1 == MAX_PUBLISH_ATTEMPTS:
                raise
    rollbacks = sum(1 for c in result.commits if c.reverts)
    return StepOutcome(step=n, evaluated=evaluated, pass_at_1=scores.pass_at_1,
                       tip=None if result.stop else tip, commits=len(result.commits), stop=result.stop,
                       empty=result.stop is None and not result.commits,
                       rejected=tuple(result.rejected), comparison=comparison,
                       verdicts={v.change_id: v.verdict for v in result.verdicts.values()},
                       rollbacks=rollbacks, best=result.best, run=ctx.run)


def _refuse_from(result: StepResult, index: int, reasons: list[str], say: Callable[[str], None]) -> None:
    """Drop planned commit ``index`` and every later one (built on it); record why (exit 8)."""
    later = len(result.commits) - index - 1
    if later:
        reasons = [*reasons, f"{later} later commit(s) of the step were built on it and are dropped too"]
    for reason in reasons:
        say(f"refused: {reason}")
    result.rejected.extend(reasons)
    del result.commits[index:]


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainOutcome:
    steps: tuple[StepOutcome, ...]
    reason: str


def train(repo: Repo, run: str | None = None, *, epochs: int | None = None, say: Callable[[str], None] = print,
          on_progress: Callable[[Progress], None] | None = None, wait: bool = False,
          keep_exceptions: bool = False, on_step: Callable[[StepOutcome], None] | None = None) -> TrainOutcome:
    """Run steps until ``epochs`` steps exist, the target stops training, or Ctrl-C.

    A streaming evolver (``step_limit``) runs its stream once instead: every window when its
    limit is None, whatever ``trainer.epochs`` says (it bounds the other evolvers); ``--epochs`` still caps.
    ``on_step`` hears each step's outcome as the step ends (a train of hours shows its verdicts,
    rollbacks and commits as they happen, not at its end).
    """
    ctx = open_run(repo, run)
    limit, unit = _step_limit(ctx, epochs)
    done: list[StepOutcome] = []
    with slots_kept():      # each step's rollouts reuse the last step's directories
        return _train_steps(repo, ctx, limit, unit, done, say=say, on_progress=on_progress, wait=wait,
                            keep_exceptions=keep_exceptions, on_step=on_step)


def _train_steps(repo: Repo, ctx: RunContext, limit: int | None, unit: str, done: list[StepOutcome], *,
                 say: Callable[[str], None], on_progress: Callable[[Progress], None] | None,
                 wait: bool, keep_exceptions: bool, on_step: Callable[[StepOutcome], None] | None) -> TrainOutcome:
    while True:
        ctx = open_run(repo, ctx.run)
        if limit is not None and ctx.tip[0] >= limit:
            return TrainOutcome(tuple(done), f"{limit} step(s) done ({unit})")
        try:
            outcome = run_step(repo, ctx.run, say=say, on_progress=on_progress, wait=wait,
                               keep_exceptions=keep_exceptions)
        except RunFinished as finished:
            return TrainOutcome(tuple(done), f"run {ctx.run!r} is finished: {finished.reason}" if not done
                                else finished.reason)
        done.append(outcome)
        if on_step is not None:
            on_step(outcome)
        if outcome.stop:
            return TrainOutcome(tuple(done), outcome.stop)


def _step_limit(ctx: RunContext, epochs: int | None) -> tuple[int | None, str]:
    """(the run's last step number or None for the stream's end, what sets it)."""
    if epochs is not None:
        return epochs, "epochs"
    evolver = make_evolver(ctx.config.evolver_name)
    if hasattr(evolver, "step_limit"):
        return evolver.step_limit(ctx.config.evolver_params())
    return ctx.config.epochs, "epochs"


@dataclass(frozen=True)
class FinalizeOutcome:
    commit: str
    mode: str
    pass_at_1: float | None
    archive: Path | None
    warning: str
    partial: dict[str, int] | None = None    # the budget stopped the rollouts of pass_at_1
    card: Path | None = None                 # the CARD.md written beside the adapter


def finalize(repo: Repo, run: str | None = None, *, archive: Path | None = None, wait: bool = False,
             on_wait: Callable[[str], None] | None = None, card_text: CardText | None = None) -> FinalizeOutcome:
    """Tag the final commit; with ``card_text`` (render/card.markdown) also write its CARD.md beside
    the adapter and into the archive (core/archiving.py)."""
    ctx = open_run(repo, run)
    with RunLock(repo, ctx.run, "git hermit finalize", wait=wait, on_wait=on_wait):
        return _finalize_locked(repo, open_run(repo, ctx.run), archive, card_text)


def _finalize_locked(repo: Repo, ctx: RunContext, archive: Path | None,
                     card_text: CardText | None = None) -> FinalizeOutcome:
    spec = registry.get(ctx.config.evolver_name)
    mode = ctx.config.final_mode
    if mode not in ("best_ever", "last"):
        raise ConfigError(f"evolver.params.final must be best_ever or last, not {mode!r}")
    if mode == "best_ever":
        commit = repo.read_ref(best_tag(ctx.run))
        if commit is None:
            hint = ("run `git hermit step` at least once, or set final: last" if not spec.streaming
                    else f"{spec.name} sets no best-ever tag: set evolver.params.final: last")
            raise GitStateError(f"run {ctx.run!r} has no best-ever commit yet", hint=hint)
    else:
        commit = ctx.tip[1]
    old = repo.read_ref(final_tag(ctx.run))
    scores = read_scores(repo, commit)
    # seed 000's final_selection.json, a record of the run (the tag alone says no more than the commit)
    selection = {"v": 1, "run": ctx.run, "mode": mode, "commit": commit,
                 "step": next((n for n, sha in ctx.steps if sha == commit), None),
                 "evaluated_by_step": scores.step if scores else None,
                 "pass_at_1": scores.pass_at_1 if scores else None, "split": scores.split if scores else None}
    record, _ = add_file(repo, records_ref(ctx.run), FINAL_FILE,
                         (json.dumps(selection, indent=2, sort_keys=True) + "\n").encode(), "git hermit finalize")
    repo.update_refs([RefUpdate(final_tag(ctx.run), commit, old or ZERO_SHA), record], message="git hermit finalize")
    written = card = text = None
    if card_text is not None:
        from git_hermit.core.archiving import write_card
        card, text = write_card(ctx, commit, card_text)
    if archive is not None:
        # streaming runs: the host-native layout for the run's host (core/archiving.py)
        from git_hermit.core.archiving import write_archive
        write_archive(repo, ctx.config, commit, archive, card=text)
        written = archive
    warning = ("this commit was chosen on the training split; its training pass@1 overstates what it scores "
               "on held-out tasks. Measure it with: git hermit eval "
               f"{commit[:12]} --baseline hermit/{ctx.run}/step-0000 --split test")
    return FinalizeOutcome(commit, mode, scores.pass_at_1 if scores else None, written, warning,
                           scores.partial if scores else None, card)
