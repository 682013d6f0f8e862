"""Reflection on one failed training run: the evidence a Worker reads (result, task statement,
feedback, final answer, trajectory — redacted, cut to ``max_evidence_chars`` with the cut marked), and
the parsing of its answer, ``{lesson, trigger, evidence, scope_hint}`` or ``{"skip": true}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from git_hermit.model.learner_json import load_json
from git_hermit.model.rollout import RolloutResult
from git_hermit.redact import redact
from git_hermit.trajectories import iter_steps, render_step

FIELDS = ("lesson", "trigger", "evidence", "scope_hint")
# the task statement the rollout kept: task.md in its task's directory (beside result.json in
# runs made before it was kept once per task)
PROMPT_FILES = ("task.md", "prompt.md", "prompt.txt")


def needs_reflection(result: RolloutResult, threshold: float) -> bool:
    """A run the seed reflects on: one that failed to execute, or scored below ``success_threshold``.

    The score decides, not the pass label (which needs a reward of 1.0): with a threshold of 0.5
    a run scored 0.7 is not reflected; with 1.5 even a pass is. An exception, or a fail without a
    reward (a timeout counted as a fail), failed to execute and is always reflected."""
    if result.outcome == "exception":
        return True
    if result.reward is None:
        return result.outcome != "pass"
    return result.reward < threshold


def experience_id(result: RolloutResult) -> str:
    return f"{result.task}#{result.attempt}"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked so no reader mistakes it for the whole."""
    if len(text) <= limit:
        return text
    mark = f"\n[… truncated: {len(text) - limit} more characters …]"
    return text[:max(0, limit - len(mark))] + mark


def evidence(result: RolloutResult, directory: Path, limit: int) -> str:
    """The run's evidence for the Worker, redacted and within ``limit`` characters."""
    parts = [f"Task: {result.task} (attempt {result.attempt})",
             f"Outcome: {result.outcome}" + (f", reward {result.reward}" if result.reward is not None else "")
             + (f", {result.exception_type}" if result.exception_type else "")]
    statement = next((folder / name for folder in (directory, directory.parent) for name in PROMPT_FILES
                      if (folder / name).is_file()), None)
    if statement is not None:
        parts += ["", "## Task statement", statement.read_text(errors="replace")]
    if result.error:
        parts += ["", "## Error", result.error]
    if result.verifier_output:
        parts += ["", "## Evaluation feedback", result.verifier_output]
    parts += ["", "## Final answer", result.final_answer or "(none)"]
    trajectory = directory / result.trajectory if result.trajectory else None
    if trajectory is not None and trajectory.is_file():
        parts += ["", "## Trajectory"]
        try:
            for step in iter_steps(trajectory):
                parts.append(render_step(step, max_chars=4000))
                if sum(map(len, parts)) > limit:
                    break   # the rest would be cut anyway: stop reading a long trace
        except Exception as exc:   # an unreadable trace is noted, never fatal
            parts.append(f"(the trajectory could not be read: {type(exc).__name__})")
    return clip(redact("\n".join(parts)), limit)


@dataclass(frozen=True)
class Reflection:
    """A parsed Worker answer: an experience, a skip, or an answer we could not use (``problem``)."""

    skip: bool = False
    experience: dict[str, str] | None = None
    problem: str | None = None


def parse(reply: str, evidence_limit: int) -> Reflection:
    data = _json_object(reply)
    if data is None:
        return Reflection(problem="the answer holds no JSON object")
    if data.get("skip") is True:
        return Reflection(skip=True)
    missing = [f for f in ("lesson", "trigger") if not isinstance(data.get(f), str) or not data[f].strip()]
    if missing:
        return Reflection(problem=f"the answer lacks {', '.join(missing)}")
    experience = {f: redact(str(data.get(f) or "")).strip() for f in FIELDS}
    experience["evidence"] = clip(experience["evidence"], evidence_limit)
    return Reflection(experience=experience)


def _json_object(reply: str) -> dict[str, Any] | None:
    """The answer's JSON object: the whole reply, a fenced block, or the first ``{…}`` span."""
    candidates = [reply.strip(), *re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", reply, re.S)]
    start, end = reply.find("{"), reply.rfind("}")
    if 0 <= start < end:
        candidates.append(reply[start:end + 1])
    for text in candidates:
        try:
            data = load_json(text)
        except ValueError:     # not JSON, or nested past what a record holds (never a RecursionError)
            continue
        if isinstance(data, dict):
            return data
    return None
