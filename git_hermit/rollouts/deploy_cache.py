"""Deploy an adapter into many fresh workspaces for the price of one render.

Every rollout of a step deploys the same adapter (one commit) for the same host; only the
workspace path differs. The first deployment of a (commit, adapter, host, interpreter) runs
``deploy`` and captures what it wrote (directories, files with their bytes and modes); later
workspaces get that tree written with one syscall per directory and three per file, the old
workspace path replaced by the new one. Workspaces whose paths need shell quoting fall back to
a full deploy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from git_hermit.adapter.deploy import RECORD_NAME, DeployRecord, deploy

# Paths made of these characters are the same shell-quoted and JSON-escaped, so replacing one
# such workspace path by another in deploy's output equals rendering for the new one.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._/+-]+")
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class DeployPlan:
    """What ``deploy`` wrote into the workspace ``dest``: directories (parents first) and files
    (relative path, bytes, mode), with whether each file names ``dest`` (rendered per workspace)."""

    dest: str
    record: DeployRecord
    dirs: tuple[tuple[str, int], ...]
    files: tuple[tuple[str, bytes, int, bool], ...]
    record_mode: int = 0o644
    record_json: str = ""                 # record.to_json(), parsed per write (cheaper than asdict)

    def write(self, dest: Path) -> DeployRecord:
        """Write this deployment into the fresh, empty directory ``dest``; its record."""
        old, new = self.dest.encode(), str(dest).encode()
        for rel, mode in self.dirs:
            os.mkdir(os.path.join(dest, rel), mode)
        hashes = dict(self.record.files)
        for rel, content, mode, names_dest in self.files:
            if names_dest:
                content = content.replace(old, new)
                if rel in hashes:
                    hashes[rel] = hashlib.sha256(content).hexdigest()
            _write_new(os.path.join(dest, rel), content, mode)
        # every path in the record (dest, the hook command) names the workspace
        data = {key: value.replace(self.dest, str(dest)) if isinstance(value, str) else value
                for key, value in self.record_data.items()}
        data["files"] = hashes
        # DeployRecord.to_json's text, without its dataclasses.asdict (a third of this call's CPU)
        _write_new(os.path.join(dest, RECORD_NAME),
                   (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"), self.record_mode)
        return DeployRecord(**{**data, "host_args": tuple(data["host_args"])})

    @property
    def record_data(self) -> dict[str, Any]:
        return json.loads(self.record_json)


def _write_new(path: str, content: bytes, mode: int) -> None:
    fd = os.open(path, _WRITE_FLAGS, mode)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def capture(dest: Path, record: DeployRecord) -> DeployPlan:
    """The plan that recreates what ``deploy`` just wrote into the otherwise empty ``dest``."""
    dirs: list[tuple[str, int]] = []
    files: list[tuple[str, bytes, int, bool]] = []
    marker = str(dest).encode()
    record_mode = 0o644
    for root, dirnames, filenames in os.walk(dest):
        dirnames.sort()
        rel_root = os.path.relpath(root, dest)
        for name in dirnames:
            rel = os.path.normpath(os.path.join(rel_root, name))
            dirs.append((rel, os.stat(os.path.join(root, name)).st_mode & 0o7777))
        for name in sorted(filenames):
            rel = os.path.normpath(os.path.join(rel_root, name))
            path = os.path.join(root, name)
            mode = os.stat(path).st_mode & 0o7777
            if rel == RECORD_NAME:
                record_mode = mode
                continue
            with open(path, "rb") as handle:
                content = handle.read()
            # bytecode keeps the first workspace's path as co_filename; importlib replaces it
            # with the real source's on load (deploy's own bytecode cache does the same)
            names_dest = marker in content and not name.endswith(".pyc")
            files.append((rel, content, mode, names_dest))
    return DeployPlan(dest=str(dest), record=record, dirs=tuple(dirs), files=tuple(files),
                      record_mode=record_mode, record_json=record.to_json())


_plans: dict[tuple[str, ...], DeployPlan] = {}
KEEP = 8    # plans kept per process: a long run moves from commit to commit
_locks: dict[tuple[str, ...], threading.Lock] = {}
_lock = threading.Lock()
_python: str | None = None


def deploy_fresh(adapter: Path, dest: Path, host: str, *, commit: str) -> DeployRecord:
    """``deploy(adapter, dest, host)`` into the empty directory ``dest``, rendered once per
    (commit, adapter, host, interpreter) in this process and replayed for later workspaces.

    ``adapter`` must not change while its commit is the same (the worker's materialised copy)."""
    global _python
    dest = Path(dest).resolve()
    if _python is None:
        _python = os.path.realpath(sys.executable)    # deploy's hook interpreter
    key = (commit, str(adapter), host, _python)
    if not _PLAIN_PATH.fullmatch(str(dest)):
        return deploy(adapter, dest, host)
    with _lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        plan = _plans.get(key)
        if plan is None:
            record = deploy(adapter, dest, host)
            _plans[key] = capture(dest, record)
            with _lock:
                while len(_plans) > KEEP:
                    oldest = next(iter(_plans))
                    del _plans[oldest]
                    _locks.pop(oldest, None)
            return record
    return plan.write(dest)


def forget() -> None:
    """Drop every cached plan (tests; a long-lived worker after its steps)."""
    with _lock:
        _plans.clear()
        _locks.clear()
