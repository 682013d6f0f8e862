"""Trees built without an index: nested path changes applied onto a base tree with one
``git mktree --batch`` process, rewriting only the trees along the changed paths.

A record ref with a directory per step holds tens of thousands of files after a long run; a
temporary index would read and write all of them to add one step's. Here adding a directory costs
one tree per level of its own paths plus the few trees above it.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Union

from ..errors import GitStateError

if TYPE_CHECKING:
    from .reading import ObjectReader

TREE_MODE = "040000"
# {name: (mode, sha) | None (delete) | a nested change}
Change = Union[tuple[str, str], None, "dict[str, Change]"]


def nest(changes: dict[str, tuple[str, str] | None]) -> dict[str, Change]:
    """{"a/b/c": entry} → {"a": {"b": {"c": entry}}} (an entry with mode 040000 grafts a whole tree)."""
    root: dict[str, Change] = {}
    for path, entry in changes.items():
        parts = [p for p in path.strip("/").split("/")]
        if not parts or any(p in ("", ".", "..", ".git") or "\0" in p for p in parts):
            raise GitStateError(f"invalid path in a tree: {path!r}")
        node = root
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = entry
    return root


class TreeBuilder:
    """One ``git mktree --batch -z`` process writing trees bottom-up."""

    def __init__(self, repo: "ObjectReader"):
        self.repo = repo
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "TreeBuilder":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait()
            self._proc = None

    def mktree(self, entries: dict[str, tuple[str, str]]) -> str:
        if self._proc is None:
            # trees are written where the repository's new objects wait (the quarantine: gitdir.py)
            self._proc = self.repo._start(["mktree", "--batch", "-z"], env=self.repo._writing_env())
        assert self._proc.stdin is not None and self._proc.stdout is not None
        kinds = {TREE_MODE: "tree", "160000": "commit"}
        body = b"".join(f"{mode} {kinds.get(mode, 'blob')} {sha}\t".encode() + name.encode("utf-8", "surrogateescape")
                        + b"\0" for name, (mode, sha) in sorted(entries.items()))
        self._proc.stdin.write(body + b"\0")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline().strip().decode()
        if not line:
            error = self._proc.stderr.read().decode("utf-8", "replace") if self._proc.stderr else ""
            raise GitStateError(f"git mktree failed: {error.strip()[:200]}")
        return line

    def build(self, base: str | None, changes: dict[str, Change]) -> str | None:
        """The tree ``base`` (None: empty) with ``changes`` applied; None when the result is empty."""
        entries: dict[str, tuple[str, str]] = {}
        if base is not None:
            entries = {name: (mode, sha) for mode, name, sha in self.repo.tree_entries(base)}
        for name, change in changes.items():
            if isinstance(change, dict):
                old = entries.get(name)
                sub = self.build(old[1] if old is not None and old[0] == TREE_MODE else None, change)
                if sub is None:
                    entries.pop(name, None)
                else:
                    entries[name] = (TREE_MODE, sub)
            elif change is None:
                entries.pop(name, None)
            else:
                entries[name] = change
        return self.mktree(entries) if entries else None
