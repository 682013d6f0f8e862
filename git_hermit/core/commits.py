"""Commit messages for adapter commits (subject, body, Hermit-* trailers).

Every commit git-hermit makes goes through ``step_message`` so subjects and trailers are
uniform: ``hermit(<evolver>) step N: <id>: <summary>`` plus Hermit-Run/Step/Evolver….
"""

from __future__ import annotations

from git_hermit.gitio import format_message


def step_message(*, run: str, step: int, evolver: str, summary: str, body: str = "",
                 change_id: str | None = None, extra: list[tuple[str, str]] | None = None) -> str:
    subject = f"hermit({evolver}) step {step}: " + (f"{change_id}: " if change_id else "") + summary
    subject = " ".join(subject.split())[:200]
    trailers = [("Hermit-Run", run), ("Hermit-Step", str(step)), ("Hermit-Evolver", evolver)]
    if change_id:
        trailers.append(("Hermit-Change", change_id))
    trailers += extra or []
    return format_message(subject, body, trailers)
