"""One git repository as git-hermit sees it: discovery, reads, ref transactions, plumbing commits.

Reads go through one persistent ``cat-file --batch`` (trees are parsed here, so listing and
materialising an adapter starts no process); every other git process goes through
``Repo.git``. Commits are built in a temporary index, so the user's index and work tree are
never touched, and refs only move in ``update-ref --stdin`` transactions with old values.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ..errors import GitLockFile, GitStateError, NotARepository, RefConflict
from ..files import files_in_directory   # moved to git_hermit/files.py; gitio still re-exports it
from ..model.files import FileChange     # moved to model/; gitio still re-exports it
from ._process import BatchReader, first_error_line, run_git
from .trailers import parse_trailers

ZERO_SHA = "0" * 40

_HINT_NOT_REPO = "run git-hermit inside a git work tree (or `git init` one first)"


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


_FILE_MODES = {"100644", "100755", "120000"}


_LOCK_EXISTS = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def ref_lock_error(path: Path) -> GitLockFile:
    """The one error for a git lock file left in the way of a ref update."""
    return GitLockFile(
        f"git lock file {path} blocks a ref this command must update (a git command is running, or one crashed)",
        hint=f"if no git command is running in this repository, remove it (rm '{path}') and rerun")


def _is_full_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _subject_of(message: str) -> str:
    # git's %s: the first paragraph with its lines joined by spaces.
    lines: list[str] = []
    for line in message.splitlines():
        if not line.strip():
            if lines:
                break
            continue
        lines.append(line.strip())
    return " ".join(lines)


def _iso_date(ident_line: str) -> str:
    """Strict ISO 8601 from an ident's ``<timestamp> <+hhmm>`` tail."""
    timestamp, offset = ident_line.rsplit(" ", 2)[-2:]
    sign = -1 if offset.startswith("-") else 1
    delta = timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5])) * sign
    return datetime.fromtimestamp(int(timestamp), timezone(delta)).isoformat()


def _parse_commit(sha: str, raw: bytes) -> CommitInfo:
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
            author_date = _iso_date(value)
    message = message_bytes.decode("utf-8", "replace")
    return CommitInfo(
        sha=sha, parents=tuple(parents), tree=tree, author_date=author_date,
        subject=_subject_of(message), message=message, trailers=tuple(parse_trailers(message)),
    )


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class Repo:
    """A non-bare git repository located by ``discover``; the only object that runs git."""

    def __init__(self, work_tree: Path, git_dir: Path, common_dir: Path, object_format: str = "sha1"):
        self.work_tree = work_tree
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.object_format = object_format
        self._hash_len = 32 if object_format == "sha256" else 20
        # Absolute GIT_DIR / GIT_WORK_TREE: every git process sees this repository whatever
        # the caller's cwd or a relative GIT_DIR in the environment said.
        self._env = {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work_tree),
                     "GIT_TERMINAL_PROMPT": "0"}
        self._env.pop("GIT_PREFIX", None)
        self._batch = BatchReader(work_tree, self._env)
        self._objects_dir: str | None = None      # absolute objects directory, once asked

    # ----------------------------------------------------------------------------- discovery
    @classmethod
    def discover(cls, start: Path | None = None) -> "Repo":
        """The repository containing ``start`` (default: cwd), honouring GIT_DIR / GIT_WORK_TREE."""
        start = Path(start or Path.cwd()).resolve()
        env = dict(os.environ)
        for var in ("GIT_DIR", "GIT_WORK_TREE"):
            if env.get(var):
                # Relative values are relative to our cwd, not to ``start``: pin them.
                env[var] = str(Path(env[var]).resolve())
        if not start.is_dir():
            raise NotARepository(f"{start} is not a directory", hint=_HINT_NOT_REPO)
        proc = run_git(
            ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir",
             "--show-object-format", "--show-toplevel"],
            cwd=start, env=env,
        )
        lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
        if proc.returncode == 0 and len(lines) == 4:
            git_dir, common_dir, object_format, top = lines
            return cls(Path(top), Path(git_dir), Path(common_dir), object_format)
        cls._refuse(start, env, proc.stderr)
        raise AssertionError("unreachable")

    @staticmethod
    def _refuse(start: Path, env: dict[str, str], stderr: bytes) -> None:
        probe = run_git(["rev-parse", "--is-bare-repository", "--is-inside-git-dir"], cwd=start, env=env)
        answers = probe.stdout.decode().split()
        if probe.returncode == 0 and answers[:1] == ["true"]:
            raise NotARepository(
                f"{start} is a bare repository; git-hermit needs a work tree",
                hint="clone it (`git clone <bare> <dir>`) or add a worktree (`git worktree add <dir>`) and run there",
            )
        if probe.returncode == 0 and answers[1:2] == ["true"]:
            raise NotARepository(f"{start} is inside a .git directory, not a work tree", hint=_HINT_NOT_REPO)
        message = first_error_line(stderr)
        hint = _HINT_NOT_REPO
        if "safe.directory" in stderr.decode("utf-8", "replace"):
            hint = "git refuses this repository's ownership; see `git config --global --add safe.directory <path>`"
        raise NotARepository(f"not a git repository: {start} ({message})", hint=hint)

    # ----------------------------------------------------------------------------- processes
    def _run(self, args: Iterable[str], *, input: bytes | None = None, env: dict[str, str] | None = None,
             cwd: Path | None = None):
        full_env = self._env if not env else {**self._env, **env}
        return run_git(list(args), cwd=cwd or self.work_tree, env=full_env, input=input)

    def git(self, *args: str, input: bytes | str | None = None, env: dict[str, str] | None = None,
            check: bool = True, cwd: Path | None = None) -> str:
        """Run one git process; its stdout as text. Fails with GitStateError (git's message) unless check=False."""
        data = input.encode() if isinstance(input, str) else input
        proc = self._run(args, input=data, env=env, cwd=cwd)
        if check and proc.returncode != 0:
            raise self._error(args, proc.stderr)
        return proc.stdout.decode("utf-8", "surrogateescape")

    def git_bytes(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
                  check: bool = True) -> bytes:
        """Like ``git`` but stdout as raw bytes (for -z output with arbitrary paths)."""
        proc = self._run(args, input=input, env=env)
        if check and proc.returncode != 0:
            raise self._error(args, proc.stderr)
        return proc.stdout

    @staticmethod
    def _error(args: Iterable[str], stderr: bytes) -> GitStateError:
        args = list(args)
        while args[:1] == ["-c"]:  # name the subcommand, not the -c options before it
            args = args[2:]
        line = first_error_line(stderr)
        hint = None
        if "Please tell me who you are" in stderr.decode("utf-8", "replace") or "empty ident" in line:
            hint = "set an identity: git config user.name '…' && git config user.email '…'"
        return GitStateError(f"git {args[0] if args else ''} failed: {line}", hint=hint)

    def close(self) -> None:
        """Stop the batch reader (restarted on the next read if the Repo is used again)."""
        self._batch.close()

    def __enter__(self) -> "Repo":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._batch.close()
        except Exception:  # interpreter shutdown: nothing useful left to do
            pass

    # ----------------------------------------------------------------------------- objects and refs
    def read_objects(self, names: list[str]) -> list[tuple[str, str, bytes] | None]:
        """(sha, type, content) per object name, in order (None if missing): one pipelined batch exchange."""
        return self._batch.read_many(names)

    def tree_entries(self, tree: str) -> list[tuple[str, str, str]]:
        """(mode, name, sha) of one tree level (any name resolving to a tree, e.g. ``<commit>^{tree}``)."""
        kind, content = self.read_object(tree)
        if kind != "tree":
            raise GitStateError(f"'{tree}' is not a tree")
        return self._parse_tree(content)

    def read_object(self, rev: str) -> tuple[str, bytes]:
        """(type, content) of any object name, through the persistent batch reader."""
        found = self._batch.read(rev)
        if found is None:
            raise GitStateError(f"unknown object '{rev}'", hint="check the revision or path")
        return found[1], found[2]

    def rev_parse(self, rev: str) -> str | None:
        """Full sha of ``rev^{commit}``; None if it names no commit."""
        if not rev or "\n" in rev:
            return None
        found = self._batch.read(f"{rev}^{{commit}}")
        return found[0] if found else None

    def resolve_commit(self, rev: str) -> str:
        sha = self.rev_parse(rev)
        if sha is None:
            raise GitStateError(f"unknown revision '{rev}'", hint="check the name with `git log --oneline --all`")
        return sha

    def read_ref(self, ref: str) -> str | None:
        """The object sha a full ref name (``refs/…`` or ``HEAD``) points to; None if it does not exist."""
        if not (ref == "HEAD" or ref.startswith("refs/")):
            raise GitStateError(f"'{ref}' is not a full ref name", hint="use the full name, e.g. refs/heads/main")
        found = self._batch.read(ref)
        return found[0] if found else None

    def list_refs(self, prefix: str) -> dict[str, str]:
        """{full ref name: object sha} for refs whose name starts with ``prefix`` (a plain string prefix,
        e.g. "refs/heads/hermit/r/step-"); annotated tags give the tag object's sha, not peeled."""
        # for-each-ref matches whole path components only: ask for the enclosing directory, filter here.
        directory = prefix[: prefix.rfind("/") + 1] or "refs/"
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", directory)
        refs = {}
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            if name.startswith(prefix):
                refs[name] = sha
        return refs

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
        proc = self._run(["update-ref", "-m", message, "--stdin"], input=("\n".join(lines) + "\n").encode())
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

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self._run(["merge-base", "--is-ancestor", ancestor, descendant])
        if proc.returncode in (0, 1):
            return proc.returncode == 0
        raise self._error(["merge-base"], proc.stderr)

    def is_empty(self) -> bool:
        """True when HEAD has no commit yet (a fresh repository)."""
        return self.rev_parse("HEAD") is None

    def read_symbolic(self, ref: str) -> str | None:
        """The ref a symbolic ref (e.g. ``refs/remotes/origin/HEAD``) points to; None if it is not one."""
        out = self.git("symbolic-ref", "-q", ref, check=False).strip()
        return out or None

    def head_branch(self) -> str | None:
        """Short name of the checked-out branch; None when HEAD is detached."""
        out = self.git("symbolic-ref", "-q", "--short", "HEAD", check=False).strip()
        return out or None

    # ----------------------------------------------------------------------------- trees and commits
    def _parse_tree(self, content: bytes) -> list[tuple[str, str, str]]:
        """(mode, name, sha) of a raw tree object; modes normalised as ls-tree prints them."""
        entries = []
        pos = 0
        while pos < len(content):
            space = content.index(b" ", pos)
            nul = content.index(b"\0", space)
            mode = content[pos:space].decode()
            name = content[space + 1:nul].decode("utf-8", "surrogateescape")
            sha = content[nul + 1:nul + 1 + self._hash_len].hex()
            entries.append((mode.zfill(6), name, sha))
            pos = nul + 1 + self._hash_len
        return entries

    def _walk_tree(self, tree_sha: str, base: str = "") -> dict[str, TreeEntry]:
        """All non-tree entries below a tree, one batch request per tree level (no process)."""
        result: dict[str, TreeEntry] = {}
        pending = [(tree_sha, base)]
        while pending:
            answers = self._batch.read_many([sha for sha, _ in pending])
            next_level = []
            for (sha, prefix), found in zip(pending, answers):
                if found is None or found[1] != "tree":
                    raise GitStateError(f"tree {sha} is missing from the object database")
                for mode, name, child in self._parse_tree(found[2]):
                    path = f"{prefix}{name}"
                    if mode == "040000":
                        next_level.append((child, f"{path}/"))
                    else:
                        result[path] = TreeEntry(mode, "commit" if mode == "160000" else "blob", child)
            pending = next_level
        return result

    def tree_of(self, rev: str) -> str:
        """Tree sha of a commit (or tree) name."""
        found = self._batch.read(f"{rev}^{{tree}}")
        if found is None:
            raise GitStateError(f"unknown revision '{rev}'", hint="check the name with `git log --oneline --all`")
        return found[0]

    def ls_tree(self, commit: str, prefix: str = "") -> dict[str, TreeEntry]:
        """Files under ``prefix`` at ``commit``, recursively, keys relative to prefix; {} if prefix is absent or a file."""
        prefix = prefix.strip("/")
        name = f"{commit}:{prefix}" if prefix else f"{commit}^{{tree}}"
        found = self._batch.read(name)
        if found is None:
            if self.rev_parse(commit) is None:
                raise GitStateError(f"unknown revision '{commit}'", hint="check the name with `git log --oneline --all`")
            return {}
        if found[1] != "tree":
            return {}
        return self._walk_tree(found[0])

    def read_blob(self, commit: str, path: str) -> bytes | None:
        """Content of ``path`` at ``commit``; None if absent or not a file."""
        found = self._batch.read(f"{commit}:{path.strip('/')}")
        if found is None or found[1] != "blob":
            return None
        return found[2]

    def commit_info(self, rev: str) -> CommitInfo:
        found = self._batch.read(f"{rev}^{{commit}}")
        if found is None:
            raise GitStateError(f"unknown revision '{rev}'", hint="check the name with `git log --oneline --all`")
        return _parse_commit(found[0], found[2])

    def log(self, rev: str, paths: list[str] | None = None, max_count: int | None = None) -> list[CommitInfo]:
        """Commits reachable from ``rev`` (newest first), optionally touching ``paths``; one git process."""
        args = ["-c", "log.showSignature=false", "-c", "log.follow=false", "log", "-z", "--encoding=UTF-8",
                "--format=%H%x00%P%x00%T%x00%aI%x00%B"]
        if max_count is not None:
            args.append(f"--max-count={max_count}")
        args += [rev, "--", *(paths or [])]
        proc = self._run(args)
        if proc.returncode != 0:
            raise GitStateError(f"cannot list history of '{rev}': {first_error_line(proc.stderr)}",
                                hint="check the name with `git log --oneline --all`")
        fields = proc.stdout.decode("utf-8", "replace").split("\0")
        commits = []
        # Five NUL-separated fields per commit, each commit NUL-terminated (messages hold no NUL).
        for start in range(0, len(fields) - 4, 5):
            sha, parents, tree, date, message = fields[start:start + 5]
            commits.append(CommitInfo(
                sha=sha, parents=tuple(parents.split()), tree=tree, author_date=date,
                subject=_subject_of(message), message=message, trailers=tuple(parse_trailers(message)),
            ))
        return commits

    def _blob_sha(self, content: bytes) -> str:
        """The id git would give this content as a blob (no process)."""
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
        out = self.git_bytes("fast-import", "--quiet", "--cat-blob-fd=1", input=bytes(stream))
        shas = out.decode().split()
        if len(shas) != len(contents):
            raise GitStateError("git fast-import did not report every blob it stored")
        return shas

    def commit_changes(self, parent: str | None, changes: dict[str, tuple[str, str] | None],
                       message: str, skip_if_unchanged: bool = False, merge_parents: tuple[str, ...] = (),
                       author: tuple[str, str] | None = None) -> str:
        """Parent's tree + ``{path: (mode, blob sha) | None}`` in a temporary index, committed with ``commit-tree``."""
        parent_sha = self.resolve_commit(parent) if parent else None
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
            tree = self.git("write-tree", env=env).strip()
        if skip_if_unchanged and parent_sha and tree == self.tree_of(parent_sha):
            return parent_sha
        args = ["commit-tree", tree]
        for one in ([parent_sha] if parent_sha else []) + list(merge_parents):
            args += ["-p", one]
        # An author (e.g. the learner that wrote the change) with the user as committer.
        env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]} if author else None
        return self.git(*args, "-F", "-", input=message, env=env).strip()

    def commit_tree(self, tree: str, parent: str, message: str) -> str:
        """A commit of ``tree`` on ``parent`` (moves no ref)."""
        return self.git("commit-tree", tree, "-p", parent, "-F", "-", input=message).strip()

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
        proc = self._run(["merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", onto, undo])
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

    def write_commit(self, parent: str | None, changes: dict[str, FileChange | None], message: str,
                     author: tuple[str, str] | None = None) -> str:
        """A new commit: parent's tree (empty if None) with ``changes`` applied (None deletes). Moves no ref.
        ``author`` (name, email) replaces the configured author; the committer stays the user."""
        for change in changes.values():
            if change is not None and change.mode not in _FILE_MODES:
                raise GitStateError(f"unsupported file mode {change.mode}", hint="use 100644, 100755 or 120000")
        written = [(self._check_path(path), change) for path, change in changes.items()]
        shas = iter(self.write_blobs([change.content for _, change in written if change is not None]))
        entries = {path: (None if change is None else (change.mode, next(shas))) for path, change in written}
        return self.commit_changes(parent, entries, message, skip_if_unchanged=False, author=author)

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits; None when they share no history."""
        proc = self._run(["merge-base", a, b])
        if proc.returncode == 1:
            return None
        if proc.returncode != 0:
            raise self._error(["merge-base"], proc.stderr)
        return proc.stdout.decode().strip() or None

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
        real = self._objects_dir
        with tempfile.TemporaryDirectory(prefix="hermit-fsck-") as temp:
            (Path(temp) / "pack").mkdir()
            proc = self._run(["index-pack", "--strict", "--stdin"], input=pack,
                             env={"GIT_OBJECT_DIRECTORY": temp, "GIT_ALTERNATE_OBJECT_DIRECTORIES": real})
        return None if proc.returncode == 0 else first_error_line(proc.stderr)

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
        with tempfile.TemporaryDirectory(prefix="hermit-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.git("read-tree", commit, env=env)
            present = [p for p in paths if (self.work_tree / p).exists() or self._batch.read(f"{commit}:{p}") is not None]
            if not present:
                return []
            self.git("add", "-A", "--", *present, env=env)
            out = self.git_bytes("diff", "--cached", "--name-only", "-z", "--no-renames", commit, "--", *present,
                                 env=env)
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    # ----------------------------------------------------------------------------- config, excludes, bundles
    def config_get(self, key: str) -> str | None:
        proc = self._run(["config", "--get", key])
        if proc.returncode == 1:
            return None
        if proc.returncode != 0:
            raise self._error(["config"], proc.stderr)
        return proc.stdout.decode("utf-8", "surrogateescape").rstrip("\n")

    def config_get_all(self, key: str) -> list[str]:
        proc = self._run(["config", "--get-all", key])
        if proc.returncode == 1:
            return []
        if proc.returncode != 0:
            raise self._error(["config"], proc.stderr)
        return proc.stdout.decode("utf-8", "surrogateescape").splitlines()

    def config_set(self, key: str, value: str) -> None:
        self.git("config", key, value)

    def config_add(self, key: str, value: str) -> None:
        self.git("config", "--add", key, value)

    def info_exclude_add(self, pattern: str) -> bool:
        """Append ``pattern`` to ``<common_dir>/info/exclude`` unless present; True if added."""
        path = self.common_dir / "info" / "exclude"
        current = path.read_bytes().decode("utf-8", "surrogateescape") if path.exists() else ""
        if pattern in current.splitlines():
            return False
        if current and not current.endswith("\n"):
            current += "\n"
        _atomic_write(path, (current + pattern + "\n").encode("utf-8", "surrogateescape"))
        return True

    def bundle_create(self, path: Path, revs: list[str]) -> None:
        """Write a bundle of ``revs`` (ref names, so the bundle can name them) to ``path``."""
        self.git("bundle", "create", str(Path(path).resolve()), *revs)

    def bundle_fetch(self, path: Path, ref: str) -> None:
        """Fetch ``ref`` from the bundle at ``path`` into the same ref name here (forced)."""
        self.git("fetch", "--quiet", "--no-tags", str(Path(path).resolve()), f"+{ref}:{ref}")


def git_version() -> str:
    """The installed git's version (e.g. ``2.39.5``), without needing a repository."""
    proc = run_git(["version"], cwd=Path.cwd(), env=dict(os.environ))
    return proc.stdout.decode(errors="replace").strip().removeprefix("git version ").strip()


def init_repository(path: Path) -> Repo:
    """``git init`` at ``path`` (an existing repository is only re-initialised) and open it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
        proc = run_git(["init", "-q", str(path)], cwd=path, env=env)
        if proc.returncode != 0 and not (path / ".git").exists():
            raise GitStateError(f"cannot create a repository at {path}: {first_error_line(proc.stderr)}")
    return Repo.discover(path)


def open_cache_repo(path: Path) -> Repo:
    """A private repository at ``path`` (created on first use) that workers fetch bundles into.

    Safe to call from several processes at once: ``git init`` on an existing repository only
    re-initialises it. The work tree stays empty; commits are read and materialised from it.
    """
    return init_repository(path)
