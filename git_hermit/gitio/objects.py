"""Git's records as git-hermit reads them (tree entries, commits, ref updates) and the parsing
of a raw commit object: plain data and pure functions, no process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .trailers import parse_trailers

ZERO_SHA = "0" * 40


@dataclass(frozen=True)
class TreeEntry:
    """One path in a tree: mode as ls-tree shows it ("100644", "100755", "120000", "160000")."""

    mode: str
    type: str  # "blob" | "commit" (a submodule)
    sha: str


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: tuple[str, ...]
    tree: str
    author_date: str  # strict ISO 8601, e.g. 2026-01-01T00:00:00+00:00 (git's %aI)
    subject: str
    message: str
    trailers: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RefUpdate:
    """new None deletes the ref; old None does not check it; old ZERO_SHA requires it not to exist."""

    ref: str
    new: str | None
    old: str | None = None


FILE_MODES = {"100644", "100755", "120000"}


def subject_of(message: str) -> str:
    # git's %s: the first paragraph with its lines joined by spaces.
    lines: list[str] = []
    for line in message.splitlines():
        if not line.strip():
            if lines:
                break
            continue
        lines.append(line.strip())
    return " ".join(lines)


def iso_date(ident_line: str) -> str:
    """Strict ISO 8601 from an ident's ``<timestamp> <+hhmm>`` tail."""
    timestamp, offset = ident_line.rsplit(" ", 2)[-2:]
    sign = -1 if offset.startswith("-") else 1
    delta = timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5])) * sign
    return datetime.fromtimestamp(int(timestamp), timezone(delta)).isoformat()


def parse_commit(sha: str, raw: bytes) -> CommitInfo:
    header, _, message_bytes = raw.partition(b"\n\n")
    tree = ""
    parents: list[str] = []
    author_date = ""
    for line in header.decode("utf-8", "replace").split("\n"):
        if line.startswith(" "):
            continue  # continuation of a multi-line header (gpgsig, mergetag)
        key, _, value = line.partition(" ")
        if key == "tree":
            tree = value
        elif key == "parent":
            parents.append(value)
        elif key == "author":
            author_date = iso_date(value)
    message = message_bytes.decode("utf-8", "replace")
    return CommitInfo(
        sha=sha, parents=tuple(parents), tree=tree, author_date=author_date,
        subject=subject_of(message), message=message, trailers=tuple(parse_trailers(message)),
    )
