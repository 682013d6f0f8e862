"""Commit messages for adapter commits (subject, body, Hermit-* trailers) and their authors.

Every commit git-hermit makes goes through ``step_message`` so subjects and trailers are
uniform: ``hermit(<evolver>) step N: <id>: <summary>`` plus Hermit-Run/Step/Evolver…. Subjects
read well in a pull request: at most 72 characters, cut at a word boundary with "…", the whole
summary kept in the body. Commits a learner wrote carry a learner author (``learner_author``);
the committer stays the user who ran the step.
"""

from __future__ import annotations

from typing import Any

from git_hermit.gitio import format_message

SUBJECT_MAX = 72
LEARNER_EMAIL = "learner@git-hermit.invalid"   # .invalid: reserved, never a real mailbox


def subject_line(prefix: str, summary: str, limit: int = SUBJECT_MAX) -> tuple[str, bool]:
    """(subject, cut?): ``prefix + summary`` on one line, cut at a word boundary to ``limit`` chars."""
    full = " ".join(f"{prefix}{summary}".split())
    if len(full) <= limit:
        return full, False
    head = full[: limit - 1]
    space = head.rfind(" ")
    if space > len(prefix.rstrip()):         # never cut inside the prefix's last word
        head = head[:space]
    return head.rstrip(" ,;:-") + "…", True


def step_message(*, run: str, step: int, evolver: str, summary: str, body: str = "",
                 change_id: str | None = None, extra: list[tuple[str, str]] | None = None) -> str:
    prefix = f"hermit({evolver}) step {step}: " + (f"{change_id}: " if change_id else "")
    subject, cut = subject_line(prefix, summary)
    summary_text = " ".join(summary.split())
    if cut and summary_text not in " ".join(body.split()):
        body = summary_text + ("\n\n" + body if body.strip() else "")
    trailers = [("Hermit-Run", run), ("Hermit-Step", str(step)), ("Hermit-Evolver", evolver)]
    if change_id:
        trailers.append(("Hermit-Change", change_id))
    trailers += extra or []
    return format_message(subject, body, trailers)


def learner_author(evolver: str, evolver_block: dict[str, Any]) -> tuple[str, str]:
    """The author of commits a learner wrote, e.g. ``git-hermit ahe learner (codex gpt-5.6-luna)``."""
    base = str(evolver_block.get("base") or "learner")
    model = evolver_block.get("model")
    name = model.get("name") if isinstance(model, dict) else model
    what = " ".join(str(x) for x in (base, name) if x)
    return f"git-hermit {evolver} learner ({what})", LEARNER_EMAIL
