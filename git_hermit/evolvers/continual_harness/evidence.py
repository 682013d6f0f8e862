"""What the Refiner reads of a step: each rollout's trajectory and final output, its failure
signatures (an erred or timed-out session, a command that exited non-zero, an answer that never
came), and the memory notes the sessions left. Only with ``feedback`` does it read anything the
judge produced: the outcome, and the verdict on tasks below 1. Without it (the paper's own
setting) no outcome, reward, verdict or judge error reaches the Refiner, so a stream score
stays a score on unseen labels. Everything returned here has passed secret redaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from git_hermit.errors import HermitError
from git_hermit.model.rollout import RolloutResult
from git_hermit.redact import redact
from git_hermit.rollouts.runner import task_dirname
from git_hermit.rollouts.trajectories import iter_steps, step_gist

# Where a rollout directory keeps the memory file the session left, when the runner returns it.
SESSION_NOTES = "memory/NOTES.md"
MAX_STEPS_SHOWN = 40        # per attempt: the last steps, where sessions go wrong
MAX_RAW_TAIL = 3000         # a transcript no reader understands: its tail
MAX_CALL_CHARS = 300        # upstream's cut of a tool's args/result in the window
MAX_VERDICT_CHARS = 1500


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


def read_attempt(result: RolloutResult, directory: Path, *, feedback: bool) -> WindowAttempt:
    signatures: list[str] = []
    # Without feedback, only what the session itself did counts: a verifier's timeout or crash
    # is the judge speaking, so its type and error line stay hidden.
    session_side = feedback or not _judged(result)
    if result.timed_out or (session_side and result.is_timeout):
        signatures.append(f"the session timed out ({result.exception_type or 'timeout'})"
                          if session_side else "the session timed out")
    elif result.outcome == "exception" and session_side:
        signatures.append(f"the session erred: {result.exception_type or 'exception'}"
                          + (f": {result.error}" if result.error else ""))
    if not (result.final_answer or "").strip():
        signatures.append("no answer came")
    transcript = ""
    if result.trajectory and (directory / result.trajectory).is_file():
        transcript, failed = _transcript(directory / result.trajectory)
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


def _transcript(path: Path) -> tuple[str, list[str]]:
    """The trajectory's last steps as one-line gists, and a signature per failed command or erred step.
    A transcript in no known format (e.g. a `command` agent's stdout) is shown as its tail."""
    failed: list[str] = []
    try:
        steps = list(iter_steps(path))
    except HermitError:
        text = path.read_text(encoding="utf-8", errors="replace")
        return (("…" + text[-MAX_RAW_TAIL:]) if len(text) > MAX_RAW_TAIL else text).strip(), failed
    for step in steps:
        for call in step.failed_tool_calls:
            code = f" exited {call.exit_code}" if call.exit_code not in (None, 0) else " failed"
            failed.append(f"step {step.index}: {call.name} `{_clip(_one_line(str(call.input)), 200)}`{code}: "
                          f"{_clip(_one_line(call.output or ''), MAX_CALL_CHARS)}")
        if step.error:
            failed.append(f"step {step.index}: error: {_clip(_one_line(step.error), MAX_CALL_CHARS)}")
    shown = steps[-MAX_STEPS_SHOWN:]
    lines = [f"({len(steps) - len(shown)} earlier steps not shown)"] if len(shown) < len(steps) else []
    lines += [f"{step.index}. {step_gist(step)}" for step in shown]
    return "\n".join(lines), failed


def read_window(results: dict[str, list[RolloutResult]], rollouts_root: Path, *,
                feedback: bool) -> list[WindowAttempt]:
    """Every attempt of the step, in task then attempt order."""
    return [read_attempt(r, rollouts_root / task_dirname(task) / str(r.attempt), feedback=feedback)
            for task in results for r in sorted(results[task], key=lambda r: r.attempt)]


def render_window(attempts: list[WindowAttempt]) -> str:
    """The window as the Refiner reads it, one section per attempt."""
    parts = []
    for a in attempts:
        lines = [f"### Task {a.task}, attempt {a.attempt}" + (f": {a.status}" if a.status else "")]
        if a.signatures:
            lines += ["**Failure signatures:**", *(f"- {s}" for s in a.signatures)]
        if a.verdict:
            lines.append(f"**Judge's verdict:** {a.verdict}")
        lines.append("**Final answer:** " + (_clip(a.final_answer, 1000) if a.final_answer else "(none)"))
        if a.transcript:
            lines += ["**Trajectory:**", "```text", a.transcript.replace("```", "ʼʼʼ"), "```"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) if parts else "(no rollouts in this window)"


def render_failures(attempts: list[WindowAttempt]) -> str:
    lines = [f"- task {a.task}#{a.attempt}: {s}" for a in attempts for s in a.signatures]
    return "\n".join(lines) if lines else "(none detected)"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
