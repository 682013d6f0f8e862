"""One git repository as git-hermit sees it: ``Repo``, the only object that runs git.

Its parts, bottom up: ``gitdir`` (discovery, processes, config), ``reading`` (the persistent
``cat-file --batch`` reader: objects, trees, commits, refs), ``writing`` (blobs, plumbing
commits, ref transactions). Here: committing a directory or a set of file changes, and writing
a commit's files into a directory (materialise) or comparing the work tree with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import GitStateError
from ..files import files_in_directory   # moved to git_hermit/files.py; gitio still re-exports it
from ..model.files import FileChange     # moved to model/; gitio still re-exports it
from .gitdir import git_version
from .objects import FILE_MODES, ZERO_SHA, CommitInfo, RefUpdate, TreeEntry
from .writing import ObjectWriter, ref_lock_error

__all__ = ["ZERO_SHA", "CommitInfo", "FileChange", "RefUpdate", "Repo", "TreeEntry", "files_in_directory",
           "git_version", "init_repository", "open_cache_repo", "ref_lock_error"]


class Repo(ObjectWriter):
    """A non-bare git repository located by ``discover``; the only object that runs git."""

    def write_commit(self, parent: str | None, changes: dict[str, FileChange | None], message: str,
                     author: tuple[str, str] | None = None) -> str:
        """A new commit: parent's tree (empty if None) with ``changes`` applied (None deletes). Moves no ref.
        ``author`` (name, email) replaces the configured author; the committer stays the user."""
        for change in changes.values():
            if change is not None and change.mode not in FILE_MODES:
                raise GitStateError(f"unsupported file mode {change.mode}", hint="use 100644, 100755 or 120000")
        written = [(self._check_path(path), change) for path, change in changes.items()]
        shas = iter(self.write_blobs([change.content for _, change in written if change is not None]))
        entries = {path: (None if change is None else (change.mode, next(shas))) for path, change in written}
        return self.commit_changes(parent, entries, message, skip_if_unchanged=False, author=author)

    def commit_directory(self, parent: str | None, directory: Path, prefix: str, message: str) -> str:
        """Parent's tree with the subtree at ``prefix`` replaced by ``directory``'s files; the parent itself if nothing changed."""
        prefix = prefix.strip("/")
        base = f"{self._check_path(prefix)}/" if prefix else ""
        existing = self.ls_tree(parent, prefix) if parent else {}
        wanted = {rel: (f.mode, f.content) for rel, f in files_in_directory(directory).items()}
        changes: dict[str, tuple[str, str] | None] = {}
        to_write: list[tuple[str, str, bytes]] = []
        for rel, (mode, content) in wanted.items():
            old = existing.get(rel)
            sha = self._blob_sha(content)
            if old is None or old.sha != sha or old.mode != mode:
                to_write.append((rel, mode, content))
        for rel in existing:
            if rel not in wanted:
                changes[f"{base}{rel}"] = None
        if parent and not changes and not to_write:
            return self.resolve_commit(parent)  # identical content: no process, no empty commit
        shas = self.write_blobs([content for _, _, content in to_write])
        for (rel, mode, _), sha in zip(to_write, shas):
            changes[f"{base}{rel}"] = (mode, sha)
        return self.commit_changes(parent, changes, message, skip_if_unchanged=True)

    def materialise(self, commit: str, prefix: str, dest: Path) -> int:
        """Write the files under ``prefix`` at ``commit`` into ``dest`` with exact bytes and modes; the file count.

        Blobs come through the batch reader (no checkout, no index). Existing files at the same
        paths are replaced; other files in ``dest`` are left alone. Submodule entries are skipped.
        """
        entries = {path: entry for path, entry in self.ls_tree(commit, prefix).items() if entry.type == "blob"}
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        paths = sorted(entries)
        blobs = self._batch.read_many([entries[path].sha for path in paths])
        made_dirs: set[Path] = {dest}
        for path, found in zip(paths, blobs):
            if found is None:
                raise GitStateError(f"blob of {path} is missing from the object database")
            if any(part in ("", ".", "..", ".git") for part in path.split("/")):
                raise GitStateError(f"refusing to write unsafe path {path!r} from commit {commit}")
            target = dest / path
            if target.parent not in made_dirs:
                target.parent.mkdir(parents=True, exist_ok=True)
                made_dirs.add(target.parent)
            if target.is_symlink() or (entries[path].mode == "120000" and target.exists()):
                target.unlink()
            if entries[path].mode == "120000":
                os.symlink(os.fsdecode(found[2]), target)
                continue
            with open(target, "wb") as handle:
                handle.write(found[2])
            os.chmod(target, 0o755 if entries[path].mode == "100755" else 0o644)
        return len(paths)

    def worktree_changes(self, commit: str, paths: list[str]) -> list[str]:
        """Paths under ``paths`` whose work-tree content differs from ``commit`` (edited, added
        untracked-but-not-ignored, or deleted). A throw-away index keeps the user's index as it is."""
        import tempfile   # here, not at the top: a read command (`log`) needs none
        with tempfile.TemporaryDirectory(prefix="hermit-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.git("read-tree", commit, env=env)
            present = [p for p in paths if (self.work_tree / p).exists() or self._batch.read(f"{commit}:{p}") is not None]
            if not present:
                return []
            self.git("add", "-A", "--", *present, env=self._writing_env(env))
            out = self.git_bytes("diff", "--cached", "--name-only", "-z", "--no-renames", commit, "--", *present,
                                 env=env)
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def init_repository(path: Path) -> Repo:
    """``git init`` at ``path`` through GitPython (an existing repository is opened as it is) and open it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        from ._gitpython import init
        env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
        try:
            init(path, env)
        except GitStateError:
            if not (path / ".git").exists():    # another process made it meanwhile: open that one
                raise
    return Repo.discover(path)


def open_cache_repo(path: Path) -> Repo:
    """A private repository at ``path`` (created on first use) that workers fetch bundles into.

    Safe to call from several processes at once: ``git init`` on an existing repository only
    re-initialises it. The work tree stays empty; commits are read and materialised from it.
    """
    return init_repository(path)
