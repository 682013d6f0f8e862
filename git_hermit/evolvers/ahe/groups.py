"""Declared changes that share files: reported to the Evolve Agent by check_spec while it can
still fix them, and otherwise committed as one change group (one commit listing every member,
rolled back whole), since a commit per change cannot split one file's edits between two changes.
Pure functions over manifest entries.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def adapter_relative(rel: str) -> str:
    """A manifest path relative to the adapter: ``./x``, ``adapter/x`` and ``x`` are the same file
    (only whole ``./`` prefixes go: ``.agents/…`` keeps its dot)."""
    clean = rel.strip()
    while clean.startswith("./"):
        clean = clean[2:]
    return clean[len("adapter/"):] if clean.startswith("adapter/") else clean


@dataclass(frozen=True)
class Group:
    """Changes committed together (one member: an ordinary change commit)."""

    members: tuple[Any, ...]           # the manifest's changes, in manifest order
    files: tuple[str, ...]             # every file a member declares
    shared: tuple[str, ...]            # files declared by more than one member

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(_id(m) for m in self.members)


def _id(change: Any) -> str:
    return str(change.get("id") if isinstance(change, Mapping) else change.id)


def _files(change: Any) -> list[str]:
    files = change.get("files") if isinstance(change, Mapping) else change.files
    return [adapter_relative(str(f)) for f in (files or ()) if isinstance(f, str)]


def group_changes(changes: Sequence[T]) -> list[Group]:
    """Connected components of "declares a file the other declares", ordered by first member."""
    parent = list(range(len(changes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, change in enumerate(changes):
        for path in _files(change):
            if path in owner:
                a, b = root(owner[path]), root(i)
                parent[max(a, b)] = min(a, b)
            else:
                owner[path] = i
    members: dict[int, list[int]] = {}
    for i in range(len(changes)):
        members.setdefault(root(i), []).append(i)
    groups = []
    for first in sorted(members):
        idx = members[first]
        seen: dict[str, int] = {}
        for i in idx:
            for path in dict.fromkeys(_files(changes[i])):
                seen[path] = seen.get(path, 0) + 1
        groups.append(Group(tuple(changes[i] for i in idx), tuple(seen), tuple(p for p, n in seen.items() if n > 1)))
    return groups


def overlap_messages(changes: Iterable[Any]) -> list[str]:
    """One line per file that two or more declared changes list (what check_spec reports)."""
    listed: dict[str, list[str]] = {}
    for change in changes:
        for path in dict.fromkeys(_files(change)):
            listed.setdefault(path, []).append(_id(change))
    return [f"{path} is declared by {' and '.join(ids)}: overlapping changes are committed as one change "
            "group and rolled back together; give each change its own files, or merge them into one change"
            for path, ids in listed.items() if len(ids) > 1]


def manifest_overlaps(path: Path) -> list[str]:
    """check_spec's manifest rule on ``state/change_manifest.json``; nothing to say when it is absent
    (the agent may check the adapter before writing it) or not a manifest (validated at the end)."""
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return [f"not JSON: {exc}"]
    changes = raw.get("changes") if isinstance(raw, dict) else None
    if not isinstance(changes, list):
        return []
    return overlap_messages(c for c in changes if isinstance(c, dict) and "id" in c)
