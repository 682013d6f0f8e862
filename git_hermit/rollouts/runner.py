"""Drive a batch of rollouts: resume, schedule with per-host slots, write results atomically.

Each row ``<task>#<n>`` has a directory ``<out>/rollouts/<task>/<n>/``; a row whose
``result.json`` exists (for the same commit) is reused, so a killed run resumes without
re-running or re-billing finished rollouts; a stored exception (no result) runs again. ``result.json`` is written last and atomically.
"""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from git_hermit.accounting.budget import Budget
from git_hermit.atomic import write_atomic
from git_hermit.errors import disk_full
from git_hermit.model.rollout import RolloutResult, Usage
from git_hermit.redact import redact, secret_values
from git_hermit.agents.hosts import RATE_LIMITED
from git_hermit.rollouts.executors import RolloutHandle
from git_hermit.rollouts.worker import DISK_FULL, TASK_FILE, RolloutJob, RolloutOutput, execute_rollout
from git_hermit.supervise.process import kill_all
from git_hermit.supervise.scratch import clean_stale, end_batch

RESULT_FILE = "result.json"
# A row's attempts the model's rate limit ended and the driver re-queued, one JSON line each: what
# they billed counts in the ledger (ledger.RETRIED keys), though no result of theirs is scored.
RETRIED_FILE = "rate-limited.jsonl"
WORKER_LOST_RERUNS = 2     # a row whose worker broke under it runs again this often, then is stored
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def task_dirname(task_id: str) -> str:
    """A filesystem-safe, collision-free directory name for a task id."""
    safe = _SAFE.sub("_", task_id)
    if safe != task_id or safe in (".", ".."):
        import hashlib
        safe = f"{safe[:60]}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"
    return safe


def rollout_dir(out_dir: Path, task_id: str, attempt: int) -> Path:
    return out_dir / "rollouts" / task_dirname(task_id) / str(attempt)


def read_result(directory: Path, commit: str | None = None, agent: str | None = None) -> RolloutResult | None:
    """The finished result in ``directory`` (None if absent, unreadable, or for another commit or agent)."""
    path = directory / RESULT_FILE
    if not path.is_file():
        return None
    try:
        result = RolloutResult.from_dict(json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError):
        return None
    if commit is not None and result.commit != commit:
        return None
    if agent is not None and result.agent != agent:
        return None
    return result


def store_output(directory: Path, output: RolloutOutput) -> RolloutResult:
    """Write the artefacts, then result.json last (so its presence means 'finished').

    Everything is redacted first: learners read these files, and no secret from the
    environment may reach a learner, a note or a report.
    """
    directory.mkdir(parents=True, exist_ok=True)
    values = secret_values()       # once: it sorts the whole environment
    for name, data in output.files.items():
        # written in place, not through a temp file and a rename: result.json, written last,
        # is what says the rollout finished, and a rerun of an unfinished one rewrites these
        content = redact(data.decode("utf-8", "surrogateescape"), values).encode("utf-8", "surrogateescape")
        if name == TASK_FILE:
            # the same for every attempt: kept once, in the task's directory (each file made is
            # an inode, and on ext4 without a journal each new inode costs a scan)
            _write_if_changed(directory.parent / TASK_FILE, content)
            continue
        target = directory / name
        if "/" in name:
            target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    result = RolloutResult.from_dict(output.result)
    result = result.with_(final_answer=redact(result.final_answer, values) if result.final_answer else result.final_answer,
                          verifier_output=redact(result.verifier_output, values),
                          error=redact(result.error, values) if result.error else result.error)
    # Not fsynced either (an fsync is 5-25 ms here, on the driver's one thread, for each file:
    # 2,000 rollouts would wait 10-50 s). The rename keeps it atomic: a killed process loses
    # nothing (the page cache outlives it); after a power cut a result.json may be empty, which
    # read_result takes for unfinished, so that rollout reruns.
    write_atomic(directory / RESULT_FILE, (json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    return result


def _write_if_changed(path: Path, content: bytes) -> None:
    try:
        if path.read_bytes() == content:
            return
    except OSError:
        pass
    path.write_bytes(content)


@dataclass(frozen=True)
class RetriedAttempt:
    """A re-queued rate-limited attempt of row ``task#attempt``; ``id`` keys it in ledgers (once)."""

    task: str
    attempt: int
    id: str
    usage: Usage


def record_retried(directory: Path, output: RolloutOutput) -> RetriedAttempt:
    """Keep what a re-queued attempt billed (the usage the worker read from its trajectory before
    its scratch went) beside the row's result: a killed or stopped run, resumed, still bills it once."""
    result = output.result
    retried = RetriedAttempt(str(result["task"]), int(result["attempt"]), uuid.uuid4().hex[:12],
                             Usage.from_dict(result.get("usage")))
    line = {"id": retried.id, "task": retried.task, "attempt": retried.attempt, "commit": result.get("commit"),
            "agent": result.get("agent"), "usage": retried.usage.to_dict()}
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / RETRIED_FILE, "a") as handle:    # one write: a kill leaves whole lines
        handle.write(json.dumps(line, sort_keys=True) + "\n")
    return retried


def read_retried(directory: Path, commit: str | None = None, agent: str | None = None) -> list[RetriedAttempt]:
    """The re-queued attempts recorded in ``directory`` (of ``commit`` and ``agent`` when given)."""
    try:
        lines = (directory / RETRIED_FILE).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            data = json.loads(line)
            if (commit is None or data.get("commit") == commit) and (agent is None or data.get("agent") == agent):
                found.append(RetriedAttempt(str(data["task"]), int(data["attempt"]), str(data["id"]),
                                            Usage.from_dict(data.get("usage"))))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue                  # a torn last line (power cut): that attempt is lost, not invented
    return found


def job_retried(job: RolloutJob, out_dir: Path) -> list[RetriedAttempt]:
    return read_retried(rollout_dir(out_dir, job.task.id, job.attempt), job.commit, _backend(job))


def _backend(job: RolloutJob) -> str:
    return str(job.agent_cfg["backend"])   # filled in by config.AgentConfig, on the driver


@dataclass
class Progress:
    """Counts for live progress; ``on_change`` is called after every change."""

    total: int
    reused: int = 0
    reused_rows: set[str] = field(default_factory=set)   # "task#attempt" of the rows whose results were there
    retried: set[str] = field(default_factory=set)       # ids of the rate-limited attempts re-queued in this run
    done: int = 0
    running: int = 0
    failed: int = 0
    concurrency: int | None = None  # agents allowed at once (more jobs are in flight: prepared ahead)
    started_at: float = field(default_factory=time.monotonic)
    on_change: Callable[["Progress"], None] | None = None

    def eta_s(self) -> float | None:
        finished = self.done - self.reused
        remaining = self.total - self.done
        if finished <= 0 or remaining <= 0:
            return None
        return (time.monotonic() - self.started_at) / finished * remaining

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)


def finished_result(job: RolloutJob, out_dir: Path,
                    reuse: Callable[[RolloutResult], bool] | None = None) -> RolloutResult | None:
    """The stored result of ``job`` under ``out_dir``, or None when it must (re)run. A result of
    another acting agent (hermit.yaml changed) is not this job's result, nor one ``reuse`` refuses
    (an exception row: core/evaluate.py's ``reuse_policy``)."""
    found = read_result(rollout_dir(out_dir, job.task.id, job.attempt), job.commit, _backend(job))
    return None if found is None or (reuse is not None and not reuse(found)) else found




def run_jobs(jobs: Iterable[RolloutJob], out_dir: Path, handle: RolloutHandle, *,
             slots: dict[str, int] | None = None, progress: Progress | None = None,
             budget: Budget | None = None,
             before_start: Callable[[], None] | None = None,
             reuse: Callable[[RolloutResult], bool] | None = None) -> dict[str, list[RolloutResult]]:
    """Run every job not already finished; results grouped by task, attempts in order.
    ``before_start`` runs once before the first rollout starts (never when all are reused);
    ``reuse`` says which stored results stand (None: all of them).

    With a ``budget`` (a step's), the batch is refused when its estimate would cross it, and
    no rollout starts once it would: the finished ones are stored, then BudgetReached."""
    jobs = list(jobs)
    clean_stale()            # scratch (workspaces, copied logins) a killed run left behind
    progress = progress or Progress(total=len(jobs))
    results: dict[tuple[str, int], RolloutResult] = {}
    pending: list[RolloutJob] = []
    for job in jobs:
        finished = finished_result(job, out_dir, reuse)
        if finished is not None:
            results[(job.task.id, job.attempt)] = finished
            progress.reused += 1
            progress.reused_rows.add(f"{job.task.id}#{job.attempt}")
            progress.done += 1
            progress.failed += finished.outcome != "pass"
        else:
            pending.append(job)
    progress.changed()
    if budget is not None:
        for result in results.values():     # reused: billed by this step's ledger all the same
            budget.add_rollout(result, reused=True)
        for job in jobs:                     # so are attempts a killed or stopped run re-queued
            for retried in job_retried(job, out_dir):
                budget.add_retried(retried, reused=True)
        budget.start_step(len(pending))
    if pending and before_start is not None:
        before_start()
    limits = dict(slots or {})
    in_flight: dict[Future[RolloutOutput], RolloutJob] = {}
    per_host: dict[str, int] = {}
    queue = list(pending)

    try:
        full = _drive(queue, in_flight, per_host, limits, handle, out_dir, results, progress, budget)
    except KeyboardInterrupt:
        # Ctrl-C: end every agent now (they run in their own sessions, out of the terminal's
        # reach); their rollouts stay unfinished (no result.json) and rerun on resume.
        for future in in_flight:
            future.cancel()
        kill_all()
        handle.interrupt()     # remote workers: cancel the queued, end the running (their agents too)
        raise
    finally:
        end_batch()            # this process's reused rollout directories (Dask workers: at close)
    if full is not None:       # the finished rollouts are stored; the one that hit the full disk runs again
        raise disk_full(None, f"{full}; {len(results)} of {len(jobs)} rollouts are finished and kept")
    if budget is not None and budget.stopped:
        raise budget.reached_error(len(results), len(jobs))
    grouped: dict[str, list[RolloutResult]] = {}
    for job in jobs:
        grouped.setdefault(job.task.id, []).append(results[(job.task.id, job.attempt)])
    return grouped


def _drive(queue: list[RolloutJob], in_flight: dict[Future[RolloutOutput], RolloutJob], per_host: dict[str, int],
           limits: dict[str, int], handle: RolloutHandle, out_dir: Path,
           results: dict[tuple[str, int], RolloutResult], progress: Progress,
           budget: Budget | None = None) -> str | None:
    """Submit within the worker and per-host limits; store each result as it completes.

    A rollout the model's rate limit ended (``RateLimited``, an infrastructure error) is not
    stored (only what it billed: ``record_retried``): its host pauses for a jittered, growing backoff (no new rollout of that host starts
    meanwhile, whichever worker would run it) and the rollout goes back to the queue's head,
    up to ``handle.rate_limit.retries`` times; then it is stored as the exception it is.
    A rollout whose worker broke under it (a lost Dask worker: ``KilledWorker``, ``CancelledError``)
    is the executor's failure, not the task's: it goes back to the queue, up to
    ``WORKER_LOST_RERUNS`` times, and only then is stored as that exception. A rollout that failed
    for lack of space (``DiskFull``) is not stored either (what it billed is kept, as for a rate
    limit): no rollout starts after it, the ones running finish, and the batch ends saying why
    (the returned reason; None when every rollout was stored)."""
    full: str | None = None
    policy = handle.rate_limit
    paused_until: dict[str, float] = {}     # host -> monotonic time its backoff ends
    limited_in_row: dict[str, int] = {}     # host -> consecutive rate-limited rollouts
    reruns: dict[tuple[str, int], int] = {}
    lost: dict[tuple[str, int], int] = {}   # row -> times its worker broke under it
    rng = random.Random()

    def can_start(job: RolloutJob) -> bool:
        limit = limits.get(job.host)
        if limit is not None and per_host.get(job.host, 0) >= limit:
            return False
        return paused_until.get(job.host, 0.0) <= time.monotonic()

    while (queue and not (budget and budget.stopped)) or in_flight:
        # submit as many as the executor's workers, the host slots and the budget allow
        index = 0
        while index < len(queue) and len(in_flight) < handle.workers:
            if budget is not None and not budget.may_start(len(in_flight)):
                break                        # the ones in flight finish and are kept
            job = queue[index]
            if not can_start(job):
                index += 1
                continue
            queue.pop(index)
            fields, extra = handle.ship(job.commit)
            job = replace(job, **fields)
            in_flight[handle.executor.submit(execute_rollout, job, *extra)] = job
            per_host[job.host] = per_host.get(job.host, 0) + 1
            progress.running += 1
        progress.changed()
        now = time.monotonic()
        resume = [until - now for host, until in paused_until.items() if until > now
                  and any(job.host == host for job in queue)]
        timeout = max(0.0, min(resume)) if resume else None
        if not in_flight:
            time.sleep(timeout or 0.0)       # everything left waits out a host's backoff
            continue
        done, _ = wait(list(in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            job = in_flight.pop(future)
            per_host[job.host] -= 1
            progress.running -= 1
            key = (job.task.id, job.attempt)
            try:
                output = future.result()
            except Exception as exc:   # the worker itself broke (e.g. a lost Dask worker)
                if lost.get(key, 0) < WORKER_LOST_RERUNS:
                    lost[key] = lost.get(key, 0) + 1
                    queue.insert(0, job)      # run again on a worker still up (its nanny's new one)
                    progress.changed()
                    continue
                output = RolloutOutput(RolloutResult(
                    task=job.task.id, attempt=job.attempt, outcome="exception",
                    exception_type=type(exc).__name__, error=f"{type(exc).__name__}: {exc}",
                    commit=job.commit, agent=_backend(job)).to_dict(), {})
            if output.result.get("exception_type") == DISK_FULL:
                retried = record_retried(rollout_dir(out_dir, job.task.id, job.attempt), output)
                progress.retried.add(retried.id)
                if budget is not None:
                    budget.add_retried(retried)
                full = full or str(output.result.get("error") or "a rollout ran out of space")
                queue.clear()          # every later rollout would fail the same way: none starts
                continue
            if output.result.get("exception_type") == RATE_LIMITED:
                limited_in_row[job.host] = limited_in_row.get(job.host, 0) + 1
                delay = policy.delay_s(limited_in_row[job.host], rng.random)
                paused_until[job.host] = max(paused_until.get(job.host, 0.0), time.monotonic() + delay)
                handle.pause(job.host, time.time() + delay)     # the jobs in flight wait too
                if reruns.get(key, 0) < policy.retries:
                    reruns[key] = reruns.get(key, 0) + 1
                    # billed all the same: kept (once) for the ledger, and spent for the budget
                    retried = record_retried(rollout_dir(out_dir, job.task.id, job.attempt), output)
                    progress.retried.add(retried.id)    # spent by this run (a stop keeps it: run_split)
                    if budget is not None:
                        budget.add_retried(retried)
                    queue.insert(0, job)
                    continue
                output = RolloutOutput({**output.result, "error": f"{output.result.get('error')} "
                                        f"(rerun {reruns.get(key, 0)} times after a backoff)"}, output.files)
            else:
                limited_in_row[job.host] = 0
            result = store_output(rollout_dir(out_dir, job.task.id, job.attempt), output)
            results[key] = result
            if budget is not None:
                budget.add_rollout(result)
            progress.done += 1
            progress.failed += result.outcome != "pass"
            progress.changed()
    return full
