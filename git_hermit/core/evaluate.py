"""Rollouts of one commit on one split, their scores note, and held-out comparisons.

Shared by `git hermit rollout`, `git hermit eval` and the step driver: load tasks and rows
(every bad id or file is reported before anything runs), check the agent is available, run
the rows through the executor with resume, and turn the results into a Scores record.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from git_hermit.accounting import stats
from git_hermit.accounting.budget import Budget
from git_hermit.accounting.ledger import RETRIED, Ledger, LedgerEntry, row_of, sum_usage
from git_hermit.config import RunConfig
from git_hermit.core import preflight
from git_hermit.core.budget import check_budget_config, open_evaluation_budget
from git_hermit.core.failures import require_results
from git_hermit.core.runs import RunContext, eval_dir, open_run, run_dir
from git_hermit.core.scores_notes import add_spending, roles_of
from git_hermit.errors import BudgetReached, ConfigError, HermitError, InputError
from git_hermit.gitio import NOTES_REFS, NotesStore, Repo, RunLock
from git_hermit.model.records import Attempt, BaselineCI, Scores, TaskScore, dumps, loads
from git_hermit.model.rollout import RolloutResult, Usage, scored
from git_hermit.agents import make_agent
from git_hermit.rollouts.executors import open_executor
from git_hermit.rollouts.judges import check_judge_for_tasks, make_judge
from git_hermit.rollouts.rows import Split, load_split
from git_hermit.rollouts.runner import Progress, finished_result, read_retried, rollout_dir, run_jobs
from git_hermit.rollouts.tasks import Task, load_tasks, require_host_runnable
from git_hermit.rollouts.worker import RolloutJob
from git_hermit.supervise.sandbox import spec_from_config
from git_hermit.supervise.scratch import slots_kept


@dataclass(frozen=True)
class Benchmark:
    tasks: dict[str, Task]
    split: Split
    base_dir: Path

    def only(self, task_ids: Iterable[str]) -> "Benchmark":
        """The split cut to ``task_ids`` (a `--tasks` list, a streaming evolver's window), from
        what is parsed already: a step parses its tasks and rows once."""
        keep = set(task_ids)
        unknown = sorted(keep - set(self.split.tasks))
        if unknown:
            raise InputError(f"--tasks names task(s) not in split {self.split.name!r}: {', '.join(unknown[:5])}",
                             hint="see the split's rows file for its task ids")
        split = Split(self.split.name, tuple(r for r in self.split.rows if r.task in keep), self.split.k,
                      tuple(t for t in self.split.tasks if t in keep))
        return Benchmark(self.tasks, split, self.base_dir)


@dataclass(frozen=True)
class EvalRun:
    commit: str
    split: str
    k: int
    results: dict[str, list[RolloutResult]]
    ledger: Ledger
    duration_s: float
    reused: int
    # what no note holds yet, as far as this machine knows: "task#attempt" of the rows that ran in
    # this process, and the ledger keys of re-queued rate-limited attempts the directory's ledger
    # did not hold before this run (a stopped run's were written to its ledger and its note)
    fresh: frozenset[str] = frozenset()
    rows: int = 0                         # the rollouts the split asks for (fewer results: a stopped run's)

    def new_to(self, held: set[str]) -> dict[str, Usage]:
        """What this run's ledger adds, by role, to a note holding the rows ``held``: the rows it
        does not hold and the rows run again, and the re-queued attempts no note holds yet."""
        def new(key: str) -> bool:
            row = row_of(key)
            return key in self.fresh or (row == key and row not in held)
        return Ledger(entries=[e for e in self.ledger.entries if new(e.key)]).totals("role")

    @property
    def pass_at_1(self) -> float:
        return stats.pass_at_1(self.results)

    def pass_at(self) -> dict[int, float]:
        return stats.pass_at(self.results, range(1, self.k + 1))

    def pass_at_1_interval(self) -> stats.Interval:
        """pass@1 with its bootstrap 95% CI over tasks (a single number is no claim)."""
        return stats.bootstrap_interval(stats.per_task_pass_at_1(self.results))


def load_benchmark(config: RunConfig, split_name: str, *, k: int | None = None,
                   only_tasks: list[str] | None = None) -> Benchmark:
    """The tasks and the split's rows, parsed. ``k`` is resolved here and only here: the command's
    ``-k``, else ``evolver.params.k`` on the training split, else what the rows file holds."""
    base_dir = config.base_dir or Path.cwd()
    if not config.tasks.configured:
        raise ConfigError("hermit.yaml has no tasks: block", hint="e.g. tasks: {path: tasks.jsonl, id_field: id}")
    tasks = load_tasks(config.tasks, base_dir)
    rows_path = config.split_path(split_name)
    if rows_path is None:
        raise ConfigError(f"hermit.yaml data: has no split {split_name!r}",
                          hint=f"splits here: {', '.join(config.splits()) or 'none'}; add data: {{{split_name}: rows/{split_name}.txt}}")
    if k is None:
        k = config.train_k if split_name == "train" else None
    bench = Benchmark(tasks, load_split(base_dir / rows_path, tasks, k=k, name=split_name), base_dir)
    if only_tasks:
        bench = bench.only(only_tasks)
    require_host_runnable({t: tasks[t] for t in bench.split.tasks})
    return bench


def all_finished(config: RunConfig, bench: Benchmark, out_dirs: dict[str, Path], *,
                 keep_exceptions: bool = False) -> bool:
    """Whether every row of the split already has its result for each commit (→ its directory):
    then nothing runs, and nothing a rollout needs (a login, a binary) is asked for."""
    reuse = reuse_policy(config, keep_exceptions)
    return all(finished_result(job, out_dir, reuse) is not None
               for commit, out_dir in out_dirs.items() for job in make_jobs(config, bench, commit))


def reuse_policy(config: RunConfig, keep_exceptions: bool) -> Callable[[RolloutResult], bool]:
    """Which stored results stand as their rows' results. An exception (no reward: a timeout, a
    crash, a refused key) measured nothing, so it runs again, unless the command keeps them
    (``--keep-exceptions``) or ``timeout_as: fail`` scores it (a timeout) as the fail it then is."""
    if keep_exceptions:
        return lambda result: True
    how = config.timeout_as
    return lambda result: scored(result, how).outcome != "exception"


def make_jobs(config: RunConfig, bench: Benchmark, commit: str) -> list[RolloutJob]:
    agent_cfg = config.agent.block()   # a dict: it crosses the Dask boundary in each RolloutJob
    judge = make_judge(config.judge, base_dir=bench.base_dir)
    check_judge_for_tasks(judge, {t: bench.tasks[t] for t in bench.split.tasks})
    agent_env = config.agent_env()   # read here, on the user's machine: a Dask worker has another environment
    sandbox = spec_from_config(config.sandbox, backend=config.agent.backend,
                               provider=config.agent.provider)
    # one of each shared by every job: a step holds a job per row until it ends
    # the judge crosses to the worker as a dict (RolloutJob.judge_cfg: a Dask task's arguments are
    # pickled) as written; the worker types it again with make_judge, so JudgeConfig's defaults hold there
    judge_cfg, base_dir = config.judge.block(), str(bench.base_dir)
    timeout_s = config.agent.timeout_s
    return [RolloutJob(task=bench.tasks[row.task], attempt=row.attempt, commit=commit,
                       adapter_prefix=config.adapter, host=config.host, agent_cfg=agent_cfg,
                       judge_cfg=judge_cfg, judge_base_dir=base_dir, timeout_s=timeout_s, sandbox=sandbox,
                       agent_env=agent_env)
            for row in bench.split.rows]


def run_split(repo: Repo, config: RunConfig, bench: Benchmark, commit: str, out_dir: Path, *,
              on_progress: Callable[[Progress], None] | None = None, step: int | None = None,
              budget: Budget | None = None, keep_exceptions: bool = False) -> EvalRun:
    """Run (or resume) every row of the split on ``commit``; results under ``out_dir``, as they
    happened (a step passes its ``budget``, checked before each rollout starts). The results
    handed back are scored: ``timeout_as`` is applied here, once, to fresh and reused rollouts alike.
    A stored exception row runs again unless ``keep_exceptions``."""
    jobs = make_jobs(config, bench, commit)
    progress = Progress(total=len(jobs), on_change=on_progress, concurrency=config.concurrency)
    start = time.monotonic()
    slots = dict(config.executor.slots)
    try:
        with open_executor(repo, config.executor, config.concurrency) as handle:
            results = run_jobs(jobs, out_dir, handle, slots=slots, progress=progress, budget=budget,
                               before_start=make_agent(config.agent.block()).check_available,
                               reuse=reuse_policy(config, keep_exceptions))
    except (BudgetReached, KeyboardInterrupt) as stopped:
        if progress.done > progress.reused or progress.retried:
            # what finished is spent, and so is a rate-limited attempt re-queued: its ledger is
            # written now, so budgets and estimates count it, and a stopped step can record it
            # in a note (``partial``)
            finished: dict[str, list[RolloutResult]] = {}
            for job in jobs:
                result = finished_result(job, out_dir)
                if result is not None:
                    finished.setdefault(job.task.id, []).append(result)
            partial = _evaluated(config, bench, commit, out_dir, finished, step, time.monotonic() - start,
                                 progress.reused, progress.reused_rows)
            if isinstance(stopped, BudgetReached):
                stopped.partial = partial
        raise
    return _evaluated(config, bench, commit, out_dir, results, step, time.monotonic() - start, progress.reused,
                      progress.reused_rows)


def _evaluated(config: RunConfig, bench: Benchmark, commit: str, out_dir: Path,
               results: dict[str, list[RolloutResult]], step: int | None, duration_s: float, reused: int,
               reused_rows: set[str]) -> EvalRun:
    """The run's results scored (``timeout_as``), billed, and its directory's ledger written."""
    results = {task: [scored(r, config.timeout_as) for r in attempts] for task, attempts in results.items()}
    ledger = Ledger(config.prices)
    model = config.agent.model
    judge_model = config.judge.model
    for attempts in results.values():
        for result in attempts:
            ledger.add_rollout(result, model=model, judge_model=judge_model, step=step)
    backend = config.agent.backend
    earlier = _read_ledger(out_dir / "ledger.json")
    known = {(e.role, e.key) for e in earlier}
    fresh = {f"{r.task}#{r.attempt}" for attempts in results.values() for r in attempts} - reused_rows
    for row in bench.split.rows:     # attempts re-queued after a rate limit billed too, finished row or not
        for again in read_retried(rollout_dir(out_dir, row.task, row.attempt), commit, backend):
            ledger.add_retried(again.task, again.attempt, again.id, again.usage, model=model, step=step)
            key = f"{again.task}#{again.attempt}{RETRIED}{again.id}"
            if ("acting", key) not in known:    # not in a ledger (nor a note) before this run
                fresh.add(key)
    _write_ledger(out_dir / "ledger.json", ledger, frozenset(fresh), earlier)
    return EvalRun(commit, bench.split.name, bench.split.k, results, ledger, duration_s, reused, frozenset(fresh),
                   len(bench.split.rows))


def _read_ledger(path: Path) -> tuple[LedgerEntry, ...]:
    try:
        return tuple(Ledger.from_dict(json.loads(path.read_text())).entries)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ()


def _write_ledger(path: Path, ledger: Ledger, fresh: frozenset[str], earlier: tuple[LedgerEntry, ...]) -> None:
    """The directory's ledger: what was spent here, each rollout once. Earlier runs' entries
    (``earlier``, the file's) stay (rows a `--tasks` or `-k` re-run did not cover, and rows it ran
    again: that was spent too); this run's rows are added when they ran now (``fresh``) or the
    file did not have them."""
    known = {(e.role, e.key) for e in earlier}
    kept = Ledger(ledger.prices, [*earlier, *(e for e in ledger.entries
                                              if e.key in fresh or (e.role, e.key) not in known)])
    with open(path, "w") as handle:       # an entry at a time: a step's ledger has one per rollout
        handle.writelines(kept.json_chunks())


def scores_record(run: str, step: int, ev: EvalRun, *, ci: BaselineCI | None = None) -> Scores:
    tasks: dict[str, TaskScore] = {}
    for task, attempts in ev.results.items():   # already scored (run_split)
        tasks[task] = TaskScore(stats.task_label([r.outcome for r in attempts]), tuple(
            Attempt(r.outcome, r.reward, r.exception_type, r.usage.total_tokens or None) for r in attempts))
    usage = sum_usage(e.usage for e in ev.ledger.entries)
    return Scores(run=run, step=step, commit=ev.commit, split=ev.split, k=ev.k, pass_at_1=round(ev.pass_at_1, 6),
                  tasks=tasks, pass_at={str(i): round(v, 6) for i, v in ev.pass_at().items()}, ci=ci,
                  usage=usage.to_dict(), duration_s=round(ev.duration_s, 3),
                  usage_by_role={role: u.to_dict() for role, u in ev.ledger.totals("role").items()}
                  ).expecting(ev.rows)     # a stopped run's: partial


def merged_scores_text(repo: Repo, scores: Scores) -> str:
    """The commit's scores note text with the step's ``scores`` in it, keeping the other splits' scores.

    The note's top level is the training split a step evaluated (what `log` shows); a
    held-out split lands under ``splits.<name>`` of the same note. A step's record is the
    evaluation of its split, so it replaces that split's outcomes (keeping the other splits).
    """
    existing = read_scores(repo, scores.commit)
    if existing is not None and existing.split != scores.split:
        if scores.split == "train":
            scores = replace(scores, splits={**existing.splits, existing.split: existing.split_summary()})
        else:
            scores = replace(existing, splits={**existing.splits, scores.split: scores.split_summary()})
    elif existing is not None:
        scores = replace(scores, splits=existing.splits)
    return dumps("scores", scores)


def _merge_runs(old: Scores, new: Scores, ev: EvalRun | None = None) -> Scores:
    """One split's record after a `rollout`/`eval` re-run: never poorer than what the note held.

    Outcomes are merged per task (the new run's win); what only the old record knows — the
    step's CI, its evaluation (flips, verdicts, precision/recall), its stop, tasks the new run
    did not cover — is kept. A run that found nothing new returns ``old`` unchanged, so a fully
    reused re-run leaves the note byte-identical.

    Usage (see ``scores_notes``): the note's, plus the rows of ``ev`` the note did not hold and
    the rows ``ev`` ran again; a row run again replaces its outcome but adds its cost (the
    replaced rollout was spent too, maybe on another machine, which only the note records).
    A reused row the note holds adds nothing, nor does a re-queued rate-limited attempt a stopped
    run already noted (``EvalRun.new_to``). Without ``ev``, every row of ``new`` is new.

    A run the budget stopped leaves the record ``partial`` until it holds the rollouts it expected.
    """
    held = {f"{task}#{i}" for task, score in old.tasks.items() for i in range(1, len(score.attempts) + 1)}
    added = ev.new_to(held) if ev is not None else roles_of(new.usage, new.usage_by_role)
    spent: dict[str, Any] = {"usage": old.usage, "usage_by_role": old.usage_by_role, "duration_s": old.duration_s}
    if added:
        total, roles = add_spending(old.usage, old.usage_by_role, added)
        spent = {"usage": total, "usage_by_role": roles,
                 "duration_s": None if old.duration_s is None and new.duration_s is None
                 else round((old.duration_s or 0.0) + (new.duration_s or 0.0), 3)}
    tasks = dict(old.tasks)
    for task, score in new.tasks.items():   # attempt by attempt: a `-k 1` re-run keeps attempt 2
        attempts = list(tasks[task].attempts) if task in tasks else []
        for i, attempt in enumerate(score.attempts):
            attempts[i:i + 1] = [attempt]
        kept = tasks[task].disagreed if task in tasks else ()     # a merge's record of two machines' rows
        tasks[task] = TaskScore(stats.task_label([a.outcome for a in attempts]), tuple(attempts), kept)
    ci = new.ci or old.ci
    # partial while fewer rollouts than a stopped run (either) asked for have their result
    expected = max((p["expected"] for p in (old.partial, new.partial) if p), default=None)
    if tasks == old.tasks:
        return replace(old, ci=ci, **spent).expecting(expected)
    if tasks == new.tasks:
        return replace(new, ci=ci, evaluation=new.evaluation or old.evaluation, stop=new.stop or old.stop,
                       splits=old.splits, **spent).expecting(expected)
    counts = {t: (len(s.attempts), sum(a.outcome == "pass" for a in s.attempts)) for t, s in tasks.items()}
    ks = sorted({int(k) for k in (*old.pass_at, *new.pass_at)})
    pass_at = {str(k): round(sum(stats.pass_at_k(n, c, k) for n, c in counts.values() if n >= k)
                             / max(1, sum(1 for n, _ in counts.values() if n >= k)), 6) for k in ks}
    return replace(old, tasks=tasks, pass_at_1=round(float(stats.exact_pass_at_1(counts)), 6), pass_at=pass_at,
                   k=max(old.k, new.k), ci=ci, **spent).expecting(expected)


def _rerun_record(existing: Scores | None, scores: Scores, ev: EvalRun | None = None) -> Scores:
    """The whole note after a `rollout`/`eval` of ``scores.split`` (see ``_merge_runs``)."""
    if existing is None:
        return scores
    if existing.split == scores.split:
        return _merge_runs(existing, scores, ev)
    if scores.split == "train":   # the training split takes the top level; the held-out one moves down
        return replace(scores, splits={**existing.splits, existing.split: existing.split_summary()})
    entry = existing.splits.get(scores.split)
    if entry is not None:
        old = Scores.from_dict({"run": existing.run, "commit": existing.commit, "split": scores.split,
                                "v": existing.v, **entry})
        scores = _merge_runs(old, scores, ev)
    return replace(existing, splits={**existing.splits, scores.split: scores.split_summary()})


def write_scores(repo: Repo, scores: Scores, ev: EvalRun | None = None) -> None:
    """Merge a `rollout`/`eval` record (of ``ev``'s rows) into the commit's scores note; write
    only if it changed."""
    store = NotesStore(repo)
    current = store.read(NOTES_REFS["scores"], scores.commit)
    existing = loads("scores", current, where=scores.commit[:12]) if current else None
    merged = _rerun_record(existing, scores, ev)
    text = dumps("scores", merged)
    if text == current:
        return
    store.write(NOTES_REFS["scores"], scores.commit, text,
                f"git-hermit scores {scores.run} step {scores.step} ({scores.split})")


def read_scores(repo: Repo, commit: str) -> Scores | None:
    text = NotesStore(repo).read(NOTES_REFS["scores"], commit)
    return loads("scores", text, where=commit[:12]) if text else None


def training_rollouts(ctx: RunContext) -> tuple[Path, tuple[Path, ...]]:
    """What a sandboxed learner session may read: the run's rollouts (its prompts name their
    trajectories, one-file-per-step copies and hook audits), and within them the held-out
    splits' directories, which it may not (a learner never sees the held-out tasks' traces)."""
    evals = run_dir(ctx.repo, ctx.run) / "evals"
    held_out = tuple(sorted(p for p in evals.iterdir() if p.is_dir() and not p.name.endswith("-train"))) \
        if evals.is_dir() else ()
    return evals, held_out


def comparison_record(baseline_commit: str, comparison: stats.PairedComparison) -> BaselineCI:
    return BaselineCI(baseline=baseline_commit, delta=round(comparison.delta * 100, 3),
                    low=round(comparison.low * 100, 3), high=round(comparison.high * 100, 3))


def step_of(ctx: RunContext, commit: str) -> int:
    """The step whose rollouts evaluate ``commit``: step N evaluates the tip of step N-1."""
    for n, sha in ctx.steps:
        if sha == commit:
            return n + 1
    return ctx.tip[0] + 1


def rollout_commit(ctx: RunContext, rev: str | None, split: str, *, k: int | None = None,
                   only_tasks: list[str] | None = None,
                   on_progress: Callable[[Progress], None] | None = None, wait: bool = False,
                   say: Callable[[str], None] | None = None, keep_exceptions: bool = False
                   ) -> tuple[EvalRun, Scores]:
    """`git hermit rollout`: run a split on REV (default: the run's tip) and note its scores.

    Under the run lock, like `step`: two processes never run (and bill) the same rows twice
    nor both write the commit's scores note. Rows that are all exceptions are no score: nothing
    is noted (RolloutsFailed)."""
    with RunLock(ctx.repo, ctx.run, "git hermit rollout", wait=wait, on_wait=say):
        return _rollout_locked(open_run(ctx.repo, ctx.run), rev, split, k=k, only_tasks=only_tasks,
                               on_progress=on_progress, keep_exceptions=keep_exceptions)


def _rollout_locked(ctx: RunContext, rev: str | None, split: str, *, k: int | None,
                    only_tasks: list[str] | None,
                    on_progress: Callable[[Progress], None] | None, keep_exceptions: bool) -> tuple[EvalRun, Scores]:
    commit = ctx.repo.resolve_commit(rev) if rev else ctx.tip[1]
    bench = _benchmark_after_preflight(ctx, split, k=k, only_tasks=only_tasks, commits=(commit,),
                                       keep_exceptions=keep_exceptions)
    budget = open_evaluation_budget(ctx, f"the rollouts of {commit[:12]} on {split}")
    try:
        ev = run_split(ctx.repo, ctx.config, bench, commit, eval_dir(ctx, commit, split), on_progress=on_progress,
                       budget=budget, keep_exceptions=keep_exceptions)
    except BudgetReached as stopped:
        _note_partial(ctx, stopped)
        raise
    require_results(ev.results, f"{commit[:12]} on {split}")
    scores = scores_record(ctx.run, step_of(ctx, commit), ev)
    write_scores(ctx.repo, scores, ev)
    return ev, scores


def _note_partial(ctx: RunContext, stopped: BudgetReached) -> None:
    """The rollouts a reached budget left finished go to the commit's scores note, as a `--tasks`
    re-run's would: they were spent, and a clone's budget reads what was spent from the notes."""
    partial = stopped.partial
    if isinstance(partial, EvalRun):
        write_scores(ctx.repo, scores_record(ctx.run, step_of(ctx, partial.commit), partial), partial)


def _benchmark_after_preflight(ctx: RunContext, split: str, *, k: int | None, commits: tuple[str, ...],
                               only_tasks: list[str] | None = None, keep_exceptions: bool = False) -> Benchmark:
    """The split's benchmark, once the preflight found everything its rollouts need; when every
    row already has its result (a re-run, `train`'s held-out test of a finished run) nothing
    runs, so nothing is asked for. A benchmark that cannot be read goes to the preflight, which
    names every problem at once."""
    try:
        bench = load_benchmark(ctx.config, split, k=k, only_tasks=only_tasks)
    except HermitError:
        bench = None
    if bench is None or not all_finished(ctx.config, bench, {c: eval_dir(ctx, c, split) for c in commits},
                                         keep_exceptions=keep_exceptions):
        preflight.require(ctx.config, splits=(split,), learners=False)
        check_budget_config(ctx.config)      # a USD budget over an unpriced model: refused, never unbounded
    return bench if bench is not None else load_benchmark(ctx.config, split, k=k, only_tasks=only_tasks)


@dataclass(frozen=True)
class EvalReport:
    candidate: EvalRun
    baseline: EvalRun | None
    comparison: stats.PairedComparison | None


def eval_commits(ctx: RunContext, rev: str, baseline: str | None, split: str, *, k: int | None = None,
                 on_progress: Callable[[str], Callable[[Progress], None]] | None = None, wait: bool = False,
                 say: Callable[[str], None] | None = None, keep_exceptions: bool = False) -> EvalReport:
    """`git hermit eval`: pass@1/pass@k of REV on a split, vs a baseline with a paired bootstrap CI
    (under the run lock, like `rollout`). A commit whose rows are all exceptions is no score:
    nothing is noted (RolloutsFailed)."""
    with RunLock(ctx.repo, ctx.run, "git hermit eval", wait=wait, on_wait=say):
        return _eval_locked(open_run(ctx.repo, ctx.run), rev, baseline, split, k=k, on_progress=on_progress,
                            keep_exceptions=keep_exceptions)


def _eval_locked(ctx: RunContext, rev: str, baseline: str | None, split: str, *, k: int | None,
                 on_progress: Callable[[str], Callable[[Progress], None]] | None,
                 keep_exceptions: bool) -> EvalReport:
    runs: dict[str, EvalRun] = {}
    targets = [("candidate", ctx.repo.resolve_commit(rev))]
    if baseline:
        targets.append(("baseline", ctx.repo.resolve_commit(baseline)))
    bench = _benchmark_after_preflight(ctx, split, k=k, commits=tuple(commit for _, commit in targets),
                                       keep_exceptions=keep_exceptions)
    budget = open_evaluation_budget(ctx)
    with slots_kept():      # the baseline's rollouts reuse the candidate's directories
        for role, commit in targets:
            callback = on_progress(f"{role} {commit[:10]}") if on_progress else None
            if budget is not None:
                budget.what = f"the rollouts of {commit[:12]} on {split}"
            try:
                runs[role] = run_split(ctx.repo, ctx.config, bench, commit, eval_dir(ctx, commit, split),
                                       on_progress=callback, budget=budget, keep_exceptions=keep_exceptions)
            except BudgetReached as stopped:
                for finished in runs.values():
                    write_scores(ctx.repo, scores_record(ctx.run, step_of(ctx, finished.commit), finished), finished)
                _note_partial(ctx, stopped)
                raise
            require_results(runs[role].results, f"{commit[:12]} on {split}")
    comparison = stats.compare(runs["baseline"].results, runs["candidate"].results) if baseline else None
    for role, commit in targets:
        ci = comparison_record(targets[1][1], comparison) if (role == "candidate" and comparison) else None
        write_scores(ctx.repo, scores_record(ctx.run, step_of(ctx, commit), runs[role], ci=ci), runs[role])
    return EvalReport(runs["candidate"], runs.get("baseline"), comparison)
