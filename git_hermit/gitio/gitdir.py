"""Where a repository is and how git is run in it: discovery (with GIT_DIR / GIT_WORK_TREE
honoured), the one process wrapper (``git``, ``git_bytes``) with git's first error line as the
message, the persistent ``cat-file --batch`` reader's life, config, excludes and bundles.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Self

from ..atomic import write_atomic
from ..errors import NO_SPACE_TEXT, GitStateError, HermitError, NotARepository, disk_full
from ._process import BatchReader, first_error_line, run_git, start_git
from .quarantine import gc_paused, shared as shared_quarantine

_HINT_NOT_REPO = "run git-hermit inside a git work tree (or `git init` one first)"


class GitDir:
    """A repository's directories and its git processes; ``Repo`` builds on it. A bare one (``bare``,
    opened only by ``discover(bare_ok=True)``, for the commands that only read) has no work tree:
    ``work_tree`` is then its git directory, where its processes run."""

    def __init__(self, work_tree: Path, git_dir: Path, common_dir: Path, object_format: str = "sha1",
                 bare: bool = False):
        self.work_tree = work_tree
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.object_format = object_format
        self.bare = bare
        self._hash_len = 32 if object_format == "sha256" else 20
        # Absolute GIT_DIR / GIT_WORK_TREE: every git process sees this repository whatever
        # the caller's cwd or a relative GIT_DIR in the environment said.
        self._env = {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work_tree),
                     "GIT_TERMINAL_PROMPT": "0"}
        if bare:                  # (and whatever the caller's environment said)
            self._env.pop("GIT_WORK_TREE")
        self._env.pop("GIT_PREFIX", None)
        self._batch = BatchReader(work_tree, self._env)
        self._objects_dir: str | None = None      # absolute objects directory, once asked
        # new objects wait in a quarantine until a ref transaction publishes them (quarantine.py)
        objects = os.environ.get("GIT_OBJECT_DIRECTORY")
        self._alternates = os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES") or None
        self._quarantine = shared_quarantine(common_dir, Path(objects).resolve() if objects else common_dir / "objects")
        if self._quarantine.active:      # another Repo of this process wrote objects not yet published
            self._borrow_quarantine()

    # ----------------------------------------------------------------------------- discovery
    @classmethod
    def discover(cls, start: Path | None = None, *, bare_ok: bool = False) -> Self:
        """The repository containing ``start`` (default: cwd), honouring GIT_DIR / GIT_WORK_TREE;
        a bare repository only with ``bare_ok`` (a command that reads refs and notes only)."""
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
        if bare_ok:
            bare = run_git(["rev-parse", "--is-bare-repository", "--path-format=absolute", "--git-dir",
                            "--git-common-dir", "--show-object-format"], cwd=start, env=env)
            found = bare.stdout.decode("utf-8", "surrogateescape").splitlines()
            if bare.returncode == 0 and len(found) == 4 and found[0] == "true":
                return cls(Path(found[1]), Path(found[1]), Path(found[2]), found[3], bare=True)
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
             cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
        full_env = self._env if not env else {**self._env, **env}
        return run_git(list(args), cwd=cwd or self.work_tree, env=full_env, input=input)

    def _start(self, args: list[str], env: dict[str, str] | None = None) -> "subprocess.Popen[bytes]":
        """A long-lived git process in this repository (stdin/stdout/stderr pipes)."""
        return start_git(args, cwd=self.work_tree, env={**self._env, **env} if env else self._env)

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

    def _error(self, args: Iterable[str], stderr: bytes) -> HermitError:
        args = list(args)
        while args[:1] == ["-c"]:  # name the subcommand, not the -c options before it
            args = args[2:]
        line = first_error_line(stderr)
        if any(text in stderr.decode("utf-8", "replace") for text in NO_SPACE_TEXT):
            return disk_full(self.common_dir, f"git {args[0] if args else ''}: {line}")
        hint = None
        if "Please tell me who you are" in stderr.decode("utf-8", "replace") or "empty ident" in line:
            hint = "set an identity: git config user.name '…' && git config user.email '…'"
        return GitStateError(f"git {args[0] if args else ''} failed: {line}", hint=hint)

    def _borrow_quarantine(self) -> None:
        """Have this Repo's readers see the quarantine's objects (the batch reader restarts)."""
        borrowed = os.pathsep.join(p for p in (str(self._quarantine.path), self._alternates) if p)
        if self._env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES") != borrowed:
            self._env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = borrowed
            self._batch.close()
            self._batch = BatchReader(self.work_tree, self._env)

    def _writing_env(self, env: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a git process that writes objects: into the quarantine, which this
        Repo's readers then borrow from."""
        written = self._quarantine.writer_env(self._alternates)
        self._borrow_quarantine()
        return {**written, **(env or {})}

    @contextlib.contextmanager
    def _publishing(self) -> Iterator[None]:
        """Around a ref transaction: with `git gc` held off, the quarantined objects enter the
        object database, then the transaction runs (quarantine.py)."""
        if not self._quarantine.pending():
            yield
            return
        with gc_paused(self.common_dir):
            self._quarantine.publish()
            yield

    def close(self) -> None:
        """Stop the batch reader (restarted on the next read if the Repo is used again)."""
        self._batch.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._batch.close()
        except Exception:  # interpreter shutdown: nothing useful left to do
            pass

    # ----------------------------------------------------------------------------- config, excludes, bundles
    def config_get(self, key: str) -> str | None:
        """The value of ``key`` git would use (the last one set), or None; read by GitPython."""
        values = self.config_get_all(key)
        return values[-1] if values else None

    def config_get_all(self, key: str) -> list[str]:
        """Every value of ``key`` across the system, global and repository configuration, read by
        GitPython's config parser (no git process: gitio/_gitpython.py)."""
        import configparser
        from ._gitpython import config_values
        try:
            return config_values(self.git_dir, self.common_dir, self._env, key)
        except (configparser.Error, OSError, UnicodeDecodeError) as exc:
            # a config file GitPython's parser refuses: git's own answer, or its error
            proc = self._run(["config", "--get-all", key])
            if proc.returncode == 1:
                return []
            if proc.returncode != 0:
                raise self._error(["config"], proc.stderr) from exc
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
        write_atomic(path, (current + pattern + "\n").encode("utf-8", "surrogateescape"))
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
