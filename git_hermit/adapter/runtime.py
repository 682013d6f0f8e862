"""The hook runtime's versions: which one an adapter carries, and what upgrading it changes.

The runtime (hook_runner.py, hermit_hooks.py, hooks.json; version 1 also had hook_hosts.py) is
committed into each adapter as fixed files. ``hooks/agent/runtimes.json`` lists every released
version's files by sha256, so an adapter committed with an older runtime still checks (its files
whole and unchanged keep working: the host's wire is written at deploy time, apart from them)
and ``git hermit upgrade-runtime`` knows what to replace and what to remove.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable, Mapping

from git_hermit import resources

RUNTIMES_FILE = "runtimes.json"
RUNNER = "hook_runner.py"


@dataclass(frozen=True)
class RuntimeStatus:
    """The runtime an adapter carries: ``version`` None when its files match no known version."""

    version: int | None
    current: int                     # the version this git-hermit ships

    @property
    def outdated(self) -> bool:
        return self.version is not None and self.version < self.current

    def describe(self) -> str:
        if self.version is None:
            return (f"hook runtime: its files match no known version (changed by hand?); "
                    f"this git-hermit ships runtime {self.current}")
        if self.outdated:
            return (f"hook runtime {self.version}: it keeps working; runtime {self.current} is newer "
                    "(`git hermit upgrade-runtime` commits it on the run's tip)")
        return f"hook runtime {self.version} (the newest)"


@cache
def known_versions() -> dict[int, dict[str, str]]:
    """version -> {hooks/agent file name: sha256} for every released runtime."""
    path = resources.hooks_dir() / "agent" / RUNTIMES_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    return {int(v): dict(files) for v, files in data["versions"].items()}


def current_version() -> int:
    return max(known_versions())


def runtime_prefix(fixed: Mapping[str, Path]) -> str | None:
    """Where a template's adapter keeps the runtime (the folder of its fixed hook_runner.py, '' at
    the top); None when the template carries no runtime."""
    shipped = resources.hooks_dir() / "agent"
    for rel, source in fixed.items():
        if source.name == RUNNER and source.parent == shipped:
            return posixpath.dirname(rel)
    return None


def runtime_paths(fixed: Mapping[str, Path]) -> frozenset[str]:
    """Every adapter path any known runtime version puts there (all fixed: no learner edits them)."""
    prefix = runtime_prefix(fixed)
    if prefix is None:
        return frozenset()
    return frozenset(posixpath.join(prefix, name) for files in known_versions().values() for name in files)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def identify(read: Callable[[str], bytes | None], fixed: Mapping[str, Path]) -> RuntimeStatus | None:
    """The version whose files ``read(adapter path)`` all returns unchanged (newest first); None
    when the template carries no runtime."""
    prefix = runtime_prefix(fixed)
    if prefix is None:
        return None
    versions = known_versions()
    for version in sorted(versions, reverse=True):
        contents = {name: read(posixpath.join(prefix, name)) for name in versions[version]}
        if all(data is not None and _sha256(data) == versions[version][name] for name, data in contents.items()):
            return RuntimeStatus(version, current_version())
    return RuntimeStatus(None, current_version())


def upgrade_changes(read: Callable[[str], bytes | None], fixed: Mapping[str, Path]) -> dict[str, bytes | None]:
    """adapter path -> new content (None: remove) that brings the adapter to the shipped runtime:
    the current version's files as installed, an older version's files it no longer has removed."""
    prefix = runtime_prefix(fixed)
    if prefix is None:
        return {}
    shipped = resources.hooks_dir() / "agent"
    current = known_versions()[current_version()]
    changes: dict[str, bytes | None] = {}
    for name in current:
        data = (shipped / name).read_bytes()
        rel = posixpath.join(prefix, name)
        if read(rel) != data:
            changes[rel] = data
    for rel in sorted(runtime_paths(fixed)):
        if posixpath.basename(rel) not in current and read(rel) is not None:
            changes[rel] = None
    return changes
