"""Reading a repository: objects, trees and commits through the persistent ``cat-file --batch``
(trees are parsed here, so listing an adapter starts no process), refs, history and ancestry.
"""

from __future__ import annotations

from ..errors import GitStateError
from ._process import first_error_line
from .gitdir import GitDir
from .objects import CommitInfo, TreeEntry, parse_commit, subject_of
from .trailers import parse_trailers


class ObjectReader(GitDir):
    """The reads of ``Repo``: no method here changes the repository."""

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

    def list_refs(self, prefix: str, *more: str) -> dict[str, str]:
        """{full ref name: object sha} for refs whose name starts with ``prefix`` or one of ``more``
        (plain string prefixes, e.g. "refs/heads/hermit/r/step-"), in one git process; annotated tags
        give the tag object's sha, not peeled."""
        prefixes = (prefix, *more)
        # for-each-ref matches whole path components only: ask for the enclosing directories, filter here.
        directories = dict.fromkeys(p[: p.rfind("/") + 1] or "refs/" for p in prefixes)
        out = self.git("for-each-ref", "--format=%(objectname) %(refname)", *directories)
        refs = {}
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            if name.startswith(prefixes):
                refs[name] = sha
        return refs

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self._run(["merge-base", "--is-ancestor", ancestor, descendant])
        if proc.returncode in (0, 1):
            return proc.returncode == 0
        raise self._error(["merge-base"], proc.stderr)

    def parents_of(self, tips: list[str], exclude: list[str]) -> dict[str, tuple[str, ...]]:
        """{commit: its parents} of every commit reachable from ``tips`` and not from ``exclude``, in ONE
        ``git rev-list --parents`` (ancestry among many new commits without a process per question)."""
        if not tips:
            return {}
        proc = self._run(["rev-list", "--parents", *tips, *(["--not", *exclude] if exclude else [])])
        if proc.returncode != 0:
            raise GitStateError(f"cannot list the history of {len(tips)} commit(s): {first_error_line(proc.stderr)}")
        graph: dict[str, tuple[str, ...]] = {}
        for line in proc.stdout.decode().splitlines():
            sha, *parents = line.split()
            graph[sha] = tuple(parents)
        return graph

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits; None when they share no history."""
        proc = self._run(["merge-base", a, b])
        if proc.returncode == 1:
            return None
        if proc.returncode != 0:
            raise self._error(["merge-base"], proc.stderr)
        return proc.stdout.decode().strip() or None

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

    def ls_tree_text(self, rev: str, paths: list[str] | None = None) -> str:
        """``git ls-tree -r`` of ``rev`` below ``paths`` as text, one ``<mode> <size> <path>`` line per
        file (sizes from the object headers, no blob read), in ONE process: a remote's records are checked so."""
        proc = self._run(["ls-tree", "-r", "--full-tree", "--format=%(objectmode) %(objectsize) %(path)", rev, "--",
                          *(paths or [])])
        if proc.returncode != 0:
            raise GitStateError(f"cannot list {rev!r}: {first_error_line(proc.stderr)}")
        return proc.stdout.decode("utf-8", "surrogateescape")

    def object_sizes(self, shas: list[str]) -> list[int | None]:
        """Each object's size in bytes (None: missing), in ONE ``cat-file --batch-check``: whether a
        blob may be read into memory is decided before reading it."""
        if not shas:
            return []
        proc = self._run(["cat-file", "--batch-check=%(objectsize)"], input=("\n".join(shas) + "\n").encode())
        lines = proc.stdout.decode().splitlines()
        return [int(line) if line.isdigit() else None for line in lines]

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
        return parse_commit(found[0], found[2])

    def log(self, rev: str, paths: list[str] | None = None, max_count: int | None = None,
            first_parent: bool = False) -> list[CommitInfo]:
        """Commits reachable from ``rev`` (newest first), optionally touching ``paths``; one git process.
        ``first_parent``: only along first parents (a merge's other side left out)."""
        args = ["-c", "log.showSignature=false", "-c", "log.follow=false", "log", "-z", "--encoding=UTF-8",
                "--format=%H%x00%P%x00%T%x00%aI%x00%B"]
        if first_parent:
            args.append("--first-parent")
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
                subject=subject_of(message), message=message, trailers=tuple(parse_trailers(message)),
            ))
        return commits
