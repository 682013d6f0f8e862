"""The Agent Debugger's jobs, queries, retry policy and fallback text (spec/ahe.md §6;
upstream evolve.py:1103-1530 _build_adb_jobs, _run_single_adb_ask, the retry loop). Pure:
the lead runs one learner session per job and hands back ``{task: response}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import Any, Literal

from git_hermit.evolvers.ahe.analysis import StepStats
from git_hermit.evolvers.files import rollout_dir, write_json_atomic
from git_hermit.model.rollout import RolloutResult

Mode = Literal["debug", "summary"]
TraceLabel = Literal["PASS", "FAIL", "TIMEOUT"]
ErrorKind = Literal["failed", "error", "timeout", "exception"]

TRUNCATED_PREFIX = "... (truncated) ...\n"
# every failure string the session runner produces starts with this (upstream: "[adb")
ERROR_PREFIX = "[debugger"
EXPLODED_DIR = "steps"       # the trajectory split one file per step, beside trajectory

DEBUG_QUERY = """\
{n_total} rollouts of this task: {n_pass} passed, {n_fail} failed, {n_timeout} timed out.
{trace_labels}

The verifier output included below is the real result of the external tests, which the
agent never saw. Check every claim you make about a trace against it.

Answer in four numbered sections:
1. ROOT CAUSE: the underlying reason the failing rollouts failed, confirmed against the verifier output.
2. PASS vs FAIL: what the passing rollouts did that the failing ones did not (say so if none passed).
3. CRITICAL MISTAKE: the step where the failing rollouts went wrong, citing the trace and its step file.
4. GENERAL MECHANISM: a structural, task-independent change to the adapter (prompt rule, script,
   middleware hook, skill, sub-agent or memory) that would prevent this class of failure.

Stay with general patterns, not fixes for this one task. Under 300 words."""

DEBUG_QUERY_K1 = """\
The single rollout of this task FAILED.
{trace_labels}

The verifier output included below is the real result of the external tests, which the
agent never saw; the agent may well have believed it succeeded. Check every claim you make
about the trace against it.

Answer in four numbered sections:
1. FAILURE POINT: the exact step where the rollout went wrong, citing its step file.
2. ROOT CAUSE: why it failed. Say which it was: the agent thought it had succeeded but the
   verifier disagrees, or the agent hit errors it did not overcome.
3. WHAT SHOULD HAVE BEEN DONE: the approach that would have passed.
4. GENERAL LESSON: a structural, task-independent change to the adapter (prompt rule, script,
   middleware hook, skill, sub-agent or memory) that would prevent this class of failure.

Under 300 words."""

SUMMARY_QUERY = """\
All {n_total} rollouts of this task passed.
{trace_labels}

Read one representative trace and answer in three numbered sections:
1. KEY STRATEGY: the approach that made it pass.
2. REUSABLE PATTERN: what other tasks could reuse from it.
3. FRAGILITY RISK: anything fragile or lucky that could make a later rollout fail.

Under 150 words."""

SUMMARY_QUERY_K1 = """\
The single rollout of this task passed.
{trace_labels}

Read the trace and answer in three numbered sections:
1. KEY STRATEGY: the approach that made it pass.
2. SUCCESS FACTORS: the decisions and checks it depended on.
3. REUSABLE PATTERN: what other tasks could reuse from it.

Under 150 words."""

TIMEOUT_NOTE = (
    "⚠️ TIMEOUT INFO: {n_timeout} of {n_total} rollouts timed out. Find out whether the agent "
    "looped, retried the same action endlessly, persisted with a wrong approach, or faced a task "
    "too large for the time limit. The trace has no timestamps, so judge by the steps taken.\n\n")

TRACES_HEADER = (
    "TRACES (read-only). For each rollout: the acting agent's whole event stream, the same "
    "events one file per step (INDEX.md lists them), and the hook audit, hook-calls.jsonl: "
    "every call the adapter's middleware received and what it returned (context added, "
    "tool call denied, stop blocked). Check whether the middleware helped or misled the agent.")

VERIFIER_BANNER = (
    "⚠️ VERIFIER TEST OUTPUT (the external tests' result for each non-passing rollout; "
    "the agent NEVER sees this):")


@dataclass(frozen=True)
class DebugTrace:
    """One analysed rollout of a task: its label, reward and the files the Debugger reads."""

    attempt: int
    label: TraceLabel
    reward: float                      # -1.0 for a TIMEOUT trace, as upstream
    trajectory: str
    steps_dir: str | None
    hook_log: str | None
    verifier_output: str               # already cut to verifier_tail_chars

    def to_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "label": self.label, "reward": self.reward,
                "trajectory": self.trajectory, "steps_dir": self.steps_dir,
                "hook_log": self.hook_log, "verifier_output": self.verifier_output}


@dataclass(frozen=True)
class DebugJob:
    """One Debugger session's input: a task, its traces and the rendered query (§6.1, §6.2)."""

    task: str
    mode: Mode
    n_pass: int
    n_fail: int
    n_timeout: int
    is_timeout: bool
    traces: tuple[DebugTrace, ...]
    query: str = ""

    @property
    def n_total(self) -> int:
        return self.n_pass + self.n_fail + self.n_timeout

    @property
    def trace_paths(self) -> list[str]:
        return [t.trajectory for t in self.traces]

    @property
    def trace_rewards(self) -> list[float]:
        return [t.reward for t in self.traces]

    @property
    def verifier_outputs(self) -> list[str]:
        return [t.verifier_output for t in self.traces]

    @property
    def trace_labels(self) -> str:
        return "Trace verdict: " + ", ".join(
            f"trace{i:02d}={t.label}" for i, t in enumerate(self.traces, start=1))

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "mode": self.mode, "n_pass": self.n_pass, "n_fail": self.n_fail,
                "n_timeout": self.n_timeout, "is_timeout": self.is_timeout,
                "traces": [t.to_dict() for t in self.traces], "query": self.query}


@dataclass(frozen=True)
class DebugReport:
    """A finished job: the session's answer, or the fallback text when every attempt failed."""

    job: DebugJob
    response: str
    failed: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = self.job.to_dict()
        data.pop("query")
        data.update(response=self.response, failed=self.failed)
        return data


def tail_chars(text: str, limit: int) -> str:
    """The stripped text, or its last ``limit`` chars after the truncation marker (§6.1)."""
    text = text.strip()
    if len(text) > limit:
        return TRUNCATED_PREFIX + text[-limit:]
    return text


def tail_lines(text: str, limit: int) -> str:
    return "\n".join(text.splitlines()[-limit:])


def _trace_reward(result: RolloutResult) -> float | None:
    if result.reward is not None:
        return float(result.reward)
    if result.outcome == "pass":
        return 1.0
    if result.outcome == "fail" and not result.is_timeout:
        return 0.0
    return None


def _select_traces(results: Sequence[RolloutResult], is_timeout: bool, root: PurePath, *,
                   verifier_output: bool, verifier_tail_chars: int, explode_traces: bool,
                   redact: Callable[[str], str]) -> list[DebugTrace]:
    traces: list[DebugTrace] = []
    for result in sorted(results, key=lambda r: r.attempt):
        if not result.trajectory:
            continue  # upstream drops a trial whose trace file is missing
        reward = _trace_reward(result)
        if reward is None and not is_timeout:
            continue  # a pure-exception trial is never analysed
        label: TraceLabel
        if reward is None or result.is_timeout:
            # ``timeout_as: fail`` makes a timeout a fail (no reward) for the diff, but the Debugger
            # must still know the agent ran out of time rather than answered wrong
            reward, label = -1.0, "TIMEOUT"
        else:
            label = "PASS" if reward >= 1.0 else "FAIL"
        base = rollout_dir(root, result.task, result.attempt)
        trajectory = base / result.trajectory
        traces.append(DebugTrace(
            attempt=result.attempt, label=label, reward=reward,
            trajectory=trajectory.as_posix(),
            # only a JSONL event stream is exploded (the lead's explode): a plain-text trace has no steps/
            steps_dir=(trajectory.parent / EXPLODED_DIR).as_posix()
            if explode_traces and trajectory.suffix == ".jsonl" else None,
            hook_log=(base / result.hook_log).as_posix() if result.hook_log else None,
            verifier_output=tail_chars(redact(result.verifier_output or ""), verifier_tail_chars)
            if verifier_output else "",
        ))
    return traces


def build_jobs(stats: StepStats, results_by_task: Mapping[str, Sequence[RolloutResult]], *,
               rollouts_root: PurePath, max_tasks: int = 90, verifier_output: bool = True,
               verifier_tail_chars: int = 4000, verifier_tail_lines: int = 60,
               explode_traces: bool = True,
               templates: Mapping[str, str] | None = None,
               redact: Callable[[str], str] = lambda text: text) -> list[DebugJob]:
    """One job per eligible task with traces, debug jobs first, cut to ``max_tasks`` (§6.1).

    Eligible: tasks labelled pass or fail, and exception tasks that timed out. The query
    template is chosen by ``stats.k`` (the configured k, not the number of traces).
    ``redact`` is applied to every verifier output before it is cut and shown (secrets must
    never reach a learner).
    """
    jobs: list[DebugJob] = []
    for task in sorted(stats.task_results):
        label = stats.task_results[task]
        is_timeout = task in stats.timeout_tasks or any(r.is_timeout for r in results_by_task.get(task, ()))
        if label == "exception" and not is_timeout:
            continue
        traces = _select_traces(results_by_task.get(task, ()), is_timeout, rollouts_root,
                                verifier_output=verifier_output,
                                verifier_tail_chars=verifier_tail_chars,
                                explode_traces=explode_traces, redact=redact)
        if not traces:
            continue  # a task with no trajectories is absent from the analysis
        n_pass = sum(1 for t in traces if t.reward >= 1.0)
        n_timeout = sum(1 for t in traces if t.reward < 0)
        n_fail = len(traces) - n_pass - n_timeout
        mode: Mode = "debug" if n_fail or n_timeout else "summary"
        jobs.append(DebugJob(task, mode, n_pass, n_fail, n_timeout, is_timeout, tuple(traces)))
    jobs.sort(key=lambda j: (j.mode != "debug", -(j.n_fail + j.n_timeout)))
    return [_with_query(job, k=stats.k, verifier_tail_lines=verifier_tail_lines, templates=templates)
            for job in jobs[:max_tasks]]


def template_for(mode: Mode, k: int, templates: Mapping[str, str] | None = None) -> str:
    """The query template for a mode and k; ``templates`` may override any of the four
    (keys as upstream's config: qa_query_debug, qa_query_debug_k1, qa_query_summary,
    qa_query_summary_k1)."""
    key = f"qa_query_{mode}" + ("_k1" if k == 1 else "")
    defaults = {"qa_query_debug": DEBUG_QUERY, "qa_query_debug_k1": DEBUG_QUERY_K1,
                "qa_query_summary": SUMMARY_QUERY, "qa_query_summary_k1": SUMMARY_QUERY_K1}
    return (templates or {}).get(key) or defaults[key]


def _fill(template: str, values: Mapping[str, Any]) -> str:
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError):
        return template  # upstream: a template that does not format is used raw


def verifier_context(job: DebugJob, tail: int = 60) -> str:
    """The banner and one block per non-passing trace with output (§6.2), '' if none."""
    blocks = [
        f"--- Verifier test output (rollout {i}, {t.label}) ---\n"
        f"{tail_lines(t.verifier_output, tail)}\n--- end verifier output ---"
        for i, t in enumerate(job.traces, start=1) if t.label != "PASS" and t.verifier_output]
    return "\n\n".join([VERIFIER_BANNER, *blocks]) if blocks else ""


def traces_section(job: DebugJob) -> str:
    header = TRACES_HEADER
    if not any(t.steps_dir for t in job.traces):   # a plain-text trace (a `command` agent's) is not exploded
        header = header.replace(" the same events one file per step (INDEX.md lists them), and", "")
    lines = [header]
    for i, t in enumerate(job.traces, start=1):
        parts = [f"trajectory `{t.trajectory}`"]
        if t.steps_dir:
            parts.append(f"one file per step `{t.steps_dir}/`")
        if t.hook_log:
            parts.append(f"hook audit `{t.hook_log}`")
        lines.append(f"- trace{i:02d} ({t.label}, rollout {t.attempt}): " + "; ".join(parts))
    return "\n".join(lines)


def render_query(job: DebugJob, *, k: int, verifier_tail_lines: int = 60,
                 templates: Mapping[str, str] | None = None) -> str:
    """Timeout note, the mode×k template, the traces, then the verifier context."""
    values = {"n_total": job.n_total, "n_pass": job.n_pass, "n_fail": job.n_fail,
              "n_timeout": job.n_timeout, "trace_labels": job.trace_labels}
    parts = [(_fill(TIMEOUT_NOTE, values) if job.n_timeout else "")
             + _fill(template_for(job.mode, k, templates), values), traces_section(job)]
    context = verifier_context(job, verifier_tail_lines)
    if context:
        parts.append(context)
    return "\n\n".join(parts)


def _with_query(job: DebugJob, **kwargs: Any) -> DebugJob:
    return replace(job, query=render_query(job, **kwargs))


def error_response(kind: ErrorKind, detail: str) -> str:
    """The failure string a session runner returns, e.g. ``[debugger timeout] exceeded 600s``."""
    return f"{ERROR_PREFIX} {kind}] {detail}"


def should_retry(response: str | None) -> bool:
    """A missing, empty or error response is retried (upstream: starts with ``[adb``)."""
    return response is None or not response.strip() or response.startswith(ERROR_PREFIX)


def backoff_schedule(retries: int = 3, backoff_s: float = 2.0) -> list[float]:
    """Waits before attempts 2..retries: backoff_s * 2**i (2 s, 4 s with the defaults)."""
    return [backoff_s * 2 ** i for i in range(max(1, retries) - 1)]


def failed_verifier_lines(job: DebugJob) -> list[str]:
    return [line for output in job.verifier_outputs for line in output.splitlines()
            if line.startswith(("FAILED ", "FAILED\t"))]


def fallback_text(job: DebugJob, error_line: str) -> str:
    """What stands in for the analysis when every attempt failed (§6.4)."""
    lines = [error_line.splitlines()[0] if error_line.strip() else error_response("failed", "no response"), ""]
    failed = failed_verifier_lines(job)
    if failed:
        how = "timed out" if error_line.startswith(f"{ERROR_PREFIX} timeout]") else "failed"
        lines.append(f"The debugger analysis {how}. Verifier test failures:")
        lines.extend(f"  - {line}" for line in failed)
        lines.append("(Full verifier output is in the Verifier Test Output section below.)")
    if job.is_timeout:
        # upstream adds a per-turn timing breakdown here; our event streams carry no timestamps
        for i, t in enumerate(job.traces, start=1):
            if t.label == "TIMEOUT":
                lines.append(f"trace{i:02d} timed out; its steps: `{t.steps_dir or t.trajectory}`")
    lines.append("")
    lines.append("**NOTE**: LLM analysis was not available for this task. Read the raw trace "
                 "directly (see Trace Paths) if you need more.")
    return "\n".join(lines)


def finish(jobs: Sequence[DebugJob], responses: Mapping[str, str | None]) -> list[DebugReport]:
    """Pair each job with its final response, the fallback text standing in for a failure."""
    reports = []
    for job in jobs:
        response = responses.get(job.task)
        if response is None or should_retry(response):
            error = response if response and response.strip() else error_response("failed", "no response")
            reports.append(DebugReport(job, fallback_text(job, error), failed=True))
        else:
            reports.append(DebugReport(job, response.strip()))
    return reports


def write_jobs(directory: Path, jobs: Sequence[DebugJob]) -> Path:
    """jobs.json: every job with its rendered query, as the sessions received them."""
    path = directory / "jobs.json"
    write_json_atomic(path, [job.to_dict() for job in jobs])
    return path
