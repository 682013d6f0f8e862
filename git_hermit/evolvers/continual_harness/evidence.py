"""What the Refiner reads of a step: each task's statement (``task_info_chars`` of it), each
rollout's trajectory (``trace_view``, ``trace_chars`` of it) and final output, its failure
signatures (a session that erred — exited non-zero, or an error reached it — or timed out, a
command that exited non-zero, an answer that never came), and the memory notes the sessions
left. Only with ``feedback`` does it read anything the judge produced: the outcome, and the
verdict on tasks below 1. Without it (the paper's own setting) no outcome, reward, verdict or
judge error reaches the Refiner, so a stream score stays a score on unseen labels. Everything
returned here has passed secret redaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from git_hermit.errors import HermitError
from git_hermit.evolvers.continual_harness.trace_view import clip_middle, step_lines
from git_hermit.model.rollout import RolloutResult
from git_hermit.redact import redact
from git_hermit.rollouts.runner import task_dirname
from git_hermit.trajectories import iter_steps

# Where a rollout directory keeps the memory file the session left, when the runner returns it.
SESSION_NOTES = "memory/NOTES.md"
# The task statement the rollout kept: task.md in its task's directory (beside result.json in
# runs made before it was kept once per task).
TASK_FILE = "task.md"
MAX_CALL_CHARS = 300        # upstream's cut of a tool's args/result in a signature
MAX_VERDICT_CHARS = 1500
TRACE_CHARS = 12_000        # the defaults of trace_chars and task_info_chars (params.schema.json)
TASK_INFO_CHARS = 3_000


@dataclass(frozen=True)
class WindowAttempt:
    task: str
    attempt: int
    status: str | None              # pass | fail | exception; None without feedback (a judge label)
    signatures: tuple[str, ...]
    transcript: str
    final_answer: str | None
    verdict: str | None             # the judge's feedback, only with feedback on and reward < 1
    session_notes: str | None       # the memory the session wrote, if the runner returned it


def _judged(result: RolloutResult) -> bool:
    """Whether the judge ran on this attempt: it did unless the session itself timed out or erred
    (then the worker never calls it); every verdict, exceptions included, carries its output."""
    return bool(result.verifier_output) or result.reward is not None


def read_attempt(result: RolloutResult, directory: Path, *, feedback: bool,
                 trace_chars: int = TRACE_CHARS) -> WindowAttempt:
    signatures: list[str] = []
    judged = _judged(result)
    # Without feedback, only what the session itself did counts: a verifier's timeout or crash
    # is the judge speaking, so its type and error line stay hidden.
    session_side = feedback or not judged
    if result.timed_out or (session_side and result.is_timeout):
        signatures.append(f"the session timed out ({result.exception_type or 'timeout'})"
                          if session_side else "the session timed out")
    elif result.outcome == "exception" and not judged:
        signatures.append(f"the session erred: {result.exception_type or 'exception'}"
                          + (f": {result.error}" if result.error else ""))
    elif result.outcome == "exception" and feedback:
        signatures.append(f"the judge erred: {result.exception_type or 'exception'}"
                          + (f": {result.error}" if result.error else ""))
    elif result.outcome != "exception" and result.error:
        # judged, yet the session failed: it exited non-zero (or its backend reported an error)
        signatures.append(f"the session erred: {_clip(_one_line(result.error), MAX_CALL_CHARS)}")
    if not (result.final_answer or "").strip():
        signatures.append("no answer came")
    transcript = ""
    if result.trajectory and (directory / result.trajectory).is_file():
        transcript, failed = _transcript(directory / result.trajectory, trace_chars)
        signatures += failed
    verdict = None
    if feedback and (result.reward is None or result.reward < 1) and result.outcome != "exception":
        verdict = f"reward {result.reward if result.reward is not None else 'none'}"
        if result.verifier_output.strip():
            verdict += ": " + _clip(result.verifier_output.strip(), MAX_VERDICT_CHARS)
    notes_path = directory / SESSION_NOTES
    notes = notes_path.read_text(encoding="utf-8", errors="replace") if notes_path.is_file() else None
    return WindowAttempt(result.task, result.attempt, result.outcome if feedback else None,
                   tuple(redact(s) for s in signatures),
                   redact(transcript), redact(result.final_answer) if result.final_answer else None,
                   redact(verdict) if verdict else None, redact(notes) if notes is not None else None)


def _transcript(path: Path, limit: int) -> tuple[str, list[str]]:
    """The trajectory as the Refiner reads it (trace_view, within ``limit`` characters), and a
    signature per failed command or erred step. A transcript in no known format (e.g. a `command`
    agent's stdout) is its text, cut the same way."""
    failed: list[str] = []
    try:
        steps = list(iter_steps(path))
    except HermitError:
        return clip_middle(path.read_text(encoding="utf-8", errors="replace").strip(), limit), failed
    for step in steps:
        for call in step.failed_tool_calls:
            code = f" exited {call.exit_code}" if call.exit_code not in (None, 0) else " failed"
            failed.append(f"step {step.index}: {call.name} `{_clip(_one_line(str(call.input)), 200)}`{code}: "
                          f"{_clip(_one_line(call.output or ''), MAX_CALL_CHARS)}")
        if step.error:
            failed.append(f"the session erred at step {step.index}: {_clip(_one_line(step.error), MAX_CALL_CHARS)}")
    return clip_middle("\n".join(step_lines(steps)), limit), failed


@dataclass(frozen=True)
class Window:
    """A step's window: each task's statement (cut to ``task_info_chars``; "" when not kept or
    not shown) and every attempt, in task then attempt order."""

    statements: Mapping[str, str]
    attempts: tuple[WindowAttempt, ...]

    @property
    def signatures(self) -> int:
        return sum(len(a.signatures) for a in self.attempts)


def task_statement(task_dir: Path, attempt_dirs: list[Path], limit: int) -> str:
    """The task's statement as the rollouts kept it, redacted, within ``limit`` characters."""
    if limit <= 0:
        return ""
    for folder in (task_dir, *attempt_dirs):
        if (folder / TASK_FILE).is_file():
            return clip_middle(redact((folder / TASK_FILE).read_text(encoding="utf-8", errors="replace").strip()),
                               limit)
    return ""


def read_window(results: dict[str, list[RolloutResult]], rollouts_root: Path, *, feedback: bool,
                trace_chars: int = TRACE_CHARS, task_info_chars: int = TASK_INFO_CHARS) -> Window:
    """Every task's statement and every attempt of the step, in task then attempt order."""
    statements: dict[str, str] = {}
    attempts: list[WindowAttempt] = []
    for task in results:
        runs = sorted(results[task], key=lambda r: r.attempt)
        folder = rollouts_root / task_dirname(task)
        statements[task] = task_statement(folder, [folder / str(r.attempt) for r in runs], task_info_chars)
        attempts += [read_attempt(r, folder / str(r.attempt), feedback=feedback, trace_chars=trace_chars)
                     for r in runs]
    return Window(statements, tuple(attempts))


def _fence(text: str) -> str:
    """``text`` in a ```text block it cannot close early."""
    return "```text\n" + text.replace("```", "ʼʼʼ") + "\n```"


def render_window(window: Window) -> str:
    """The window as the Refiner reads it: per task, its statement, then one section per attempt."""
    parts = []
    shown: set[str] = set()
    for a in window.attempts:
        statement = window.statements.get(a.task, "")
        if statement and a.task not in shown:
            shown.add(a.task)
            parts.append(f"### Task {a.task}: the task statement\n{_fence(statement)}")
        lines = [f"### Task {a.task}, attempt {a.attempt}" + (f": {a.status}" if a.status else "")]
        if a.signatures:
            lines += ["**Failure signatures:**", *(f"- {s}" for s in a.signatures)]
        if a.verdict:
            lines.append(f"**Judge's verdict:** {a.verdict}")
        lines.append("**Final answer:** " + (_clip(a.final_answer, 1000) if a.final_answer else "(none)"))
        if a.transcript:
            lines += ["**Trajectory:**", _fence(a.transcript)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) if parts else "(no rollouts in this window)"


def render_failures(window: Window) -> str:
    lines = [f"- task {a.task}#{a.attempt}: {s}" for a in window.attempts for s in a.signatures]
    return "\n".join(lines) if lines else "(none detected)"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
