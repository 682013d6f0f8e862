"""Commit messages and file sets for adapter commits (subject, body, Hermit-* trailers).

Every commit git-hermit makes goes through ``step_message`` so subjects and trailers are
uniform: ``hermit(<evolver>) step N: <id>: <summary>`` plus Hermit-Run/Step/Evolver….
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from git_hermit.gitio import FileChange, format_message


def step_message(*, run: str, step: int, evolver: str, summary: str, body: str = "",
                 change_id: str | None = None, extra: list[tuple[str, str]] | None = None) -> str:
    subject = f"hermit({evolver}) step {step}: " + (f"{change_id}: " if change_id else "") + summary
    subject = " ".join(subject.split())[:200]
    trailers = [("Hermit-Run", run), ("Hermit-Step", str(step)), ("Hermit-Evolver", evolver)]
    if change_id:
        trailers.append(("Hermit-Change", change_id))
    trailers += extra or []
    return format_message(subject, body, trailers)


def files_from_dir(directory: Path) -> dict[str, FileChange]:
    """Every file under ``directory`` as a FileChange keyed by its relative POSIX path."""
    out: dict[str, FileChange] = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(root) / name
            rel = path.relative_to(directory).as_posix()
            if path.is_symlink():
                out[rel] = FileChange(os.readlink(path).encode(), "120000")
            else:
                mode = "100755" if path.stat().st_mode & stat.S_IXUSR else "100644"
                out[rel] = FileChange(path.read_bytes(), mode)
    return out
