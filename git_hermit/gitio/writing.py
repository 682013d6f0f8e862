"""Writing a repository: blobs through one ``fast-import``, commits built in a temporary index
(the user's index and work tree are never touched), three-way reverts with ``merge-tree``, a
strict fsck of new objects, and refs moved only in ``update-ref --stdin`` transactions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import GitLockFile, GitStateError, RefConflict
from ._process import first_error_line
from .objects import ZERO_SHA, RefUpdate
from .reading import ObjectReader

REF_LOCK_WAIT_MS = 10_000
_LOCK_EXISTS = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def ref_lock_error(path: Path) -> GitLockFile:
    """The one error for a git lock file left in the way of a ref update."""
    return GitLockFile(
        f"git lock file {path} blocks a ref this command must update (a git command is running, or one crashed)",
        hint=f"if no git command is running in this repository, remove it (rm '{path}') and rerun")


class ObjectWriter(ObjectReader):
    """The writes of ``Repo``: new objects and commits (which move no ref), and ref transactions."""

    def update_refs(self, updates: list[RefUpdate], message: str = "git-hermit") -> None:
        """All updates in one ``update-ref --stdin`` transaction; any old-value mismatch → RefConflict, nothing moved."""
        if not updates:
            return
        zero = "0" * (self._hash_len * 2)
        lines = ["start"]
        for update in updates:
            old = zero if update.old == ZERO_SHA else update.old
            if update.new is None:
                if old == zero:
                    raise ValueError(f"deleting {update.ref} with old={ZERO_SHA} makes no sense")
                lines.append(f"delete {update.ref}" + (f" {old}" if old else ""))
            else:
                lines.append(f"update {update.ref} {update.new}" + (f" {old}" if old else ""))
        lines += ["prepare", "commit"]
        # the quarantined objects the refs will point at enter the database, with `git gc` held off
        # until they are reachable; a running git holding ref locks (a gc packing refs) is waited for
        # as git itself can (its defaults, 1 s for packed-refs and 0.1 s for a ref, are short of a busy gc)
        with self._publishing():
            proc = self._run(["-c", f"core.packedRefsTimeout={REF_LOCK_WAIT_MS}",
                              "-c", f"core.filesRefLockTimeout={REF_LOCK_WAIT_MS}",
                              "update-ref", "-m", message, "--stdin"], input=("\n".join(lines) + "\n").encode())
        if proc.returncode == 0:
            return
        moved = [u.ref for u in updates
                 if u.old is not None and (self.read_ref(u.ref) or zero) != (zero if u.old == ZERO_SHA else u.old)]
        if moved:
            raise RefConflict(
                f"ref {moved[0]} moved while git-hermit was updating it; nothing was changed",
                hint="another process is working on this repository; retry when it is done",
            )
        held = _LOCK_EXISTS.search(proc.stderr.decode("utf-8", "replace"))
        if held:   # git's "Unable to create '<ref>.lock': File exists"
            raise ref_lock_error(Path(held[1]))
        raise self._error(["update-ref"], proc.stderr)

    def _blob_sha(self, content: bytes) -> str:
        """The id git would give this content as a blob (no process)."""
        import hashlib   # here: it loads OpenSSL (~3 ms), which a read command never needs
        digest = hashlib.sha256 if self.object_format == "sha256" else hashlib.sha1
        return digest(b"blob %d\0" % len(content) + content).hexdigest()

    def write_blobs(self, contents: list[bytes]) -> list[str]:
        """Store blobs in the object database with one ``fast-import`` process; their shas in order.

        fast-import takes every blob on stdin and answers ``get-mark`` with its id, so no
        temporary file is made per blob (file creation dominated on slow filesystems). Small
        batches end up as loose objects (git's ``fastimport.unpackLimit``), large ones as one pack.
        """
        if not contents:
            return []
        stream = bytearray()
        for mark, content in enumerate(contents, 1):
            stream += b"blob\nmark :%d\ndata %d\n" % (mark, len(content))
            stream += content
            stream += b"\n"
        for mark in range(1, len(contents) + 1):
            stream += b"get-mark :%d\n" % mark
        # Blind to the object database (only the user's own alternates): a blob already there but
        # unreachable (a rollout's result.json identical to a discarded one) would otherwise be
        # skipped, and a `git gc --prune=now` could remove it before our ref transaction publishes
        # it; written into the quarantine, it is ours until then (quarantine.py)
        env = {**self._writing_env(), "GIT_ALTERNATE_OBJECT_DIRECTORIES": self._alternates or ""}
        out = self.git_bytes("fast-import", "--quiet", "--cat-blob-fd=1", input=bytes(stream), env=env)
        shas = out.decode().split()
        if len(shas) != len(contents):
            raise GitStateError("git fast-import did not report every blob it stored")
        return shas

    def commit_changes(self, parent: str | None, changes: dict[str, tuple[str, str] | None],
                       message: str, skip_if_unchanged: bool = False, merge_parents: tuple[str, ...] = (),
                       author: tuple[str, str] | None = None) -> str:
        """Parent's tree + ``{path: (mode, blob sha) | None}`` in a temporary index, committed with ``commit-tree``."""
        parent_sha = self.resolve_commit(parent) if parent else None
        import tempfile   # here, not at the top: a read command (`log`) needs none
        with tempfile.TemporaryDirectory(prefix="hermit-index-") as temp:
            env = {"GIT_INDEX_FILE": str(Path(temp, "index"))}
            if parent_sha:
                self.git("read-tree", parent_sha, env=env)
            else:
                self.git("read-tree", "--empty", env=env)
            records = []
            for path, entry in sorted(changes.items()):
                if entry is None:
                    records.append(f"0 {'0' * (self._hash_len * 2)}\t{path}\0")
                else:
                    records.append(f"{entry[0]} {entry[1]}\t{path}\0")
            if records:
                self.git("update-index", "-z", "--index-info", input="".join(records), env=env)
            tree = self.git("write-tree", env=self._writing_env(env)).strip()
        if skip_if_unchanged and parent_sha and tree == self.tree_of(parent_sha):
            return parent_sha
        args = ["commit-tree", tree]
        for one in ([parent_sha] if parent_sha else []) + list(merge_parents):
            args += ["-p", one]
        # An author (e.g. the learner that wrote the change) with the user as committer.
        author_env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]} if author else None
        return self.git(*args, "-F", "-", input=message, env=self._writing_env(author_env)).strip()

    def commit_tree(self, tree: str, parent: str | None, message: str, *more_parents: str) -> str:
        """A commit of ``tree`` on ``parent`` (None: a root commit) and ``more_parents`` (moves no ref)."""
        args = ["commit-tree", tree]
        for one in (parent, *more_parents):
            if one:
                args += ["-p", one]
        return self.git(*args, "-F", "-", input=message, env=self._writing_env()).strip()

    def write_tree(self, base: str | None, changes: dict[str, tuple[str, str] | None]) -> str:
        """Tree ``base`` (a tree or commit name; None: empty) with ``{path: (mode, sha) | None}`` applied
        (mode 040000 grafts an existing tree at the path; None deletes), index-free: only the trees
        along the changed paths are written (gitio/trees.py)."""
        from .trees import TreeBuilder, nest
        base_tree = self.tree_of(base) if base else None
        with TreeBuilder(self) as builder:
            return builder.build(base_tree, nest(changes)) or builder.mktree({})

    def revert_tree(self, change_commit: str, onto: str) -> tuple[str, tuple[str, ...]]:
        """The three-way revert of ``change_commit`` on ``onto``, as ``git revert`` computes it, without
        touching the work tree or the index: (tree, conflicted paths); the tree is only usable when no
        path conflicts.

        git 2.39's ``merge-tree --write-tree`` has no ``--merge-base``, so the base is made to be the
        change: merge ``onto`` with a throw-away commit holding the change's parent tree on top of the
        change; their merge base is then the change, and the merge takes its diff out of ``onto``.
        """
        info = self.commit_info(change_commit)
        if not info.parents:
            raise GitStateError(f"{change_commit[:12]} is a root commit; it has no diff to take out")
        undo = self.commit_tree(self.tree_of(info.parents[0]), info.sha, "git-hermit: undo (never published)\n")
        proc = self._run(["merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", onto, undo],
                         env=self._writing_env())
        if proc.returncode not in (0, 1):
            raise self._error(["merge-tree"], proc.stderr)
        tree, *paths = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
        return tree.strip(), tuple(p for p in paths if p) if proc.returncode == 1 else ()

    @staticmethod
    def _check_path(path: str) -> str:
        clean = path.strip("/")
        parts = clean.split("/")
        if not clean or any(part in ("", ".", "..", ".git") for part in parts) or "\0" in clean:
            raise GitStateError(f"invalid path in a commit: {path!r}")
        return clean

    def fsck_new_objects(self, new: str, old: str | None) -> str | None:
        """git's first complaint when the objects reachable from ``new`` but not from ``old`` fail
        ``git fsck --strict``; None when they pass.

        They are packed and read back with ``index-pack --strict`` — what a remote with
        ``receive.fsckObjects`` runs on a push — into a throw-away object directory that borrows
        this repository's objects as an alternate, so only the new objects are checked and
        nothing is added here.
        """
        objects = self.git_bytes("rev-list", "--objects", new, *(["--not", old] if old else []))
        pack = self.git_bytes("pack-objects", "-q", "--stdout", input=objects)
        if self._objects_dir is None:
            self._objects_dir = self.git("rev-parse", "--path-format=absolute", "--git-path", "objects").strip()
        # the database and what waits in the quarantine (the new objects' parents may be there)
        real = os.pathsep.join(p for p in (self._objects_dir, self._env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")) if p)
        import tempfile
        with tempfile.TemporaryDirectory(prefix="hermit-fsck-") as temp:
            (Path(temp) / "pack").mkdir()
            proc = self._run(["index-pack", "--strict", "--stdin"], input=pack,
                             env={"GIT_OBJECT_DIRECTORY": temp, "GIT_ALTERNATE_OBJECT_DIRECTORIES": real})
        return None if proc.returncode == 0 else first_error_line(proc.stderr)
