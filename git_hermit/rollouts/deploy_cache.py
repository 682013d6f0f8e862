"""Deploy an adapter into many fresh workspaces for the price of one render.

Every rollout of a step deploys the same adapter (one commit) for the same host; only the
workspace path differs. The first deployment of a (commit, adapter, host, interpreter) runs
``deploy`` and captures what it wrote (directories, files with their bytes and modes); later
workspaces get that tree written with one syscall per directory and three per file, the old
workspace path replaced by the new one. Workspaces whose paths need shell quoting fall back to
a full deploy. A workspace left by an earlier rollout is reset to the plan instead
(``deploy_reset``): files that still hold the plan's bytes are kept, the rest rewritten in
place, whatever else is there removed, so a step makes no new file in steady state.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
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
        data: dict[str, Any] = {key: value.replace(self.dest, str(dest)) if isinstance(value, str) else value
                for key, value in self.record_data.items()}
        data["files"] = hashes
        # DeployRecord.to_json's text, without its dataclasses.asdict (a third of this call's CPU)
        _write_new(os.path.join(dest, RECORD_NAME),
                   (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"), self.record_mode)
        return DeployRecord(**{**data, "host_args": tuple(data["host_args"])})

    @property
    def record_data(self) -> dict[str, Any]:
        return json.loads(self.record_json)

    def rendered(self, dest: Path) -> tuple[dict[str, tuple[bytes, int]], DeployRecord]:
        """Every file this deployment writes into ``dest`` (relative path -> bytes, mode), the
        record's own file included, and the record."""
        old, new = self.dest.encode(), str(dest).encode()
        hashes = dict(self.record.files)
        files: dict[str, tuple[bytes, int]] = {}
        for rel, content, mode, names_dest in self.files:
            if names_dest:
                content = content.replace(old, new)
                if rel in hashes:
                    hashes[rel] = hashlib.sha256(content).hexdigest()
            files[rel] = (content, mode)
        data: dict[str, Any] = {key: value.replace(self.dest, str(dest)) if isinstance(value, str) else value
                                for key, value in self.record_data.items()}
        data["files"] = hashes
        files[RECORD_NAME] = ((json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"), self.record_mode)
        return files, DeployRecord(**{**data, "host_args": tuple(data["host_args"])})

    def reset(self, dest: Path, keep: frozenset[str] = frozenset()) -> DeployRecord:
        """Make the used workspace ``dest`` hold exactly this deployment, plus the regular files
        at the relative paths ``keep`` (the caller overwrites them). A file whose bytes and mode
        match is kept as it is; one that differs is rewritten in place (same inode: no inode is
        allocated, which is what costs on ext4); what is not in the plan is removed. Symbolic
        links and files with other links are removed, never written through."""
        files, record = self.rendered(dest)
        dirs = dict(self.dirs)
        keep_dirs = {str(Path(rel).parent) for rel in keep} - {"."}
        for rel in list(keep_dirs):
            keep_dirs.update(str(parent) for parent in Path(rel).parents if str(parent) != ".")
        present: set[str] = set()
        _reset_dir(str(dest), "", files, dirs, keep, keep_dirs, present)
        for rel, mode in self.dirs:           # parents first
            if rel not in present:
                os.mkdir(os.path.join(dest, rel), mode)
        for rel, (content, mode) in files.items():
            if rel not in present:
                _write_new(os.path.join(dest, rel), content, mode)
        return record


def _write_new(path: str, content: bytes, mode: int) -> None:
    _write_all(os.open(path, _WRITE_FLAGS, mode), content)


def _write_all(fd: int, content: bytes) -> None:
    """Write ``content`` to ``fd`` whole, then close it."""
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _reset_dir(top: str, rel_dir: str, files: dict[str, tuple[bytes, int]], dirs: dict[str, int],
               keep: frozenset[str], keep_dirs: set[str], present: set[str]) -> None:
    with os.scandir(os.path.join(top, rel_dir)) as entries:
        listed = list(entries)
    for entry in listed:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        info = entry.stat(follow_symlinks=False)
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFDIR and (rel in dirs or rel in keep_dirs):
            if rel in dirs and info.st_mode & 0o7777 != dirs[rel]:
                os.chmod(entry.path, dirs[rel])
            present.add(rel)
            _reset_dir(top, rel, files, dirs, keep, keep_dirs, present)
            continue
        if kind == stat.S_IFREG and info.st_nlink == 1:
            if rel in files:
                content, mode = files[rel]
                if info.st_size != len(content) or _read(entry.path) != content:
                    _overwrite(entry.path, content)
                if info.st_mode & 0o7777 != mode:
                    os.chmod(entry.path, mode)
                present.add(rel)
                continue
            if rel in keep:
                continue
        if kind == stat.S_IFDIR:
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _overwrite(path: str, content: bytes) -> None:
    _write_all(os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)), content)


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


def _plan_key(commit: str, adapter: Path, host: str) -> tuple[str, str, str, str]:
    """What a plan is rendered from: the commit, the adapter's copy, the host and deploy's hook
    interpreter."""
    global _python
    if _python is None:
        _python = os.path.realpath(sys.executable)
    return (commit, str(adapter), host, _python)


def deploy_fresh(adapter: Path, dest: Path, host: str, *, commit: str) -> DeployRecord:
    """``deploy(adapter, dest, host)`` into the empty directory ``dest``, rendered once per
    (commit, adapter, host, interpreter) in this process and replayed for later workspaces.

    ``adapter`` must not change while its commit is the same (the worker's materialised copy)."""
    dest = Path(dest).resolve()
    key = _plan_key(commit, adapter, host)
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


def deploy_reset(adapter: Path, dest: Path, host: str, *, commit: str,
                 keep: frozenset[str] = frozenset()) -> DeployRecord:
    """``deploy_fresh`` into ``dest``, which may hold an earlier rollout's workspace: reset to
    the cached plan when there is one (files at ``keep`` stay for the caller to overwrite), else
    emptied and deployed."""
    dest = Path(dest).resolve()
    if not dest.is_dir():
        dest.mkdir()
        return deploy_fresh(adapter, dest, host, commit=commit)
    if _PLAIN_PATH.fullmatch(str(dest)):
        plan = _plans.get(_plan_key(commit, adapter, host))
        if plan is not None:
            try:
                return plan.reset(dest, keep)
            except OSError:     # e.g. a directory the agent made unwritable: start over
                pass
    shutil.rmtree(dest)
    dest.mkdir()
    return deploy_fresh(adapter, dest, host, commit=commit)


def reset_to_plan(adapter: Path, dest: Path, host: str, *, commit: str) -> None:
    """Reset the used workspace ``dest`` to the deployment of (commit, adapter, host) alone:
    whatever a task or an agent left there goes. OSError when this process holds no such plan
    (the caller removes the workspace instead)."""
    dest = Path(dest).resolve()
    plan = _plans.get(_plan_key(commit, adapter, host))
    if plan is None or not _PLAIN_PATH.fullmatch(str(dest)):
        raise OSError(f"{dest}: no deploy plan to reset it to")
    plan.reset(dest)


def forget() -> None:
    """Drop every cached plan (tests; a long-lived worker after its steps)."""
    with _lock:
        _plans.clear()
        _locks.clear()
