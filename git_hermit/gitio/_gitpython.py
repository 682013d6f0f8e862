"""GitPython, where it does the job: ``git init``, config reads, and the push/fetch transfer with
GitPython's progress reporting.

GitPython is imported only when one of these runs (``import git``: 80 ms): shell completion, `log`
and the hook path never reach this module. What stays gitio's own plumbing, with bench/gitpython.py's
figures (GitPython's time over gitio's, one run at load average 4 on 2 cores): repository discovery,
which every command makes: 1.89x in a fresh command process (98 ms against 52 ms: the ``import git``
it would add to `log`, completion and every hook; warm, in-process, GitPython's is 0.31x); writing
1,000 blobs: 39x (loose objects against one ``fast-import``). Reading objects stays with discovery
(GitPython's object database needs its Repo, so `log` would pay the same import; warm, 1,000 blobs
read 1.37x). GitPython here: config reads 0.10x (its parser, 0.12 ms against a ``git config``
process's 1.23 ms), ``git init`` 1.26x (once per repository, on no hot path), push and fetch
(the network and git's pack work dominate; the figure is git's).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import GitStateError
from ._process import _debug_line, debug_enabled, first_error_line

if TYPE_CHECKING:
    import git

# (op_code, cur_count, max_count, message): GitPython's RemoteProgress.update arguments
ProgressCallback = Callable[[int, "str | float", "str | float | None", str], None]


def _git() -> Any:
    import git      # here, not at the top: see the module docstring
    return git


def _stderr_text(exc: Exception) -> bytes:
    """git's own stderr from a GitCommandError (GitPython wraps it as ``\\n  stderr: '…'``)."""
    text = str(getattr(exc, "stderr", "") or "")
    found = re.search(r"stderr: '(.*)'\s*$", text, re.DOTALL)
    return (found.group(1) if found else text).encode("utf-8", "replace")


# ----------------------------------------------------------------------------- init
def init(path: Path, env: Mapping[str, str]) -> None:
    """``git init`` at ``path`` through GitPython (``Repo.init``); GitStateError with git's message."""
    git = _git()
    try:
        git.Repo.init(str(path), mkdir=True, quiet=True, env=dict(env)).close()
    except git.exc.GitCommandError as exc:
        raise GitStateError(f"cannot create a repository at {path}: {first_error_line(_stderr_text(exc))}") from exc


# ----------------------------------------------------------------------------- config
def config_files(common_dir: Path, env: Mapping[str, str]) -> list[str]:
    """The files ``git config --get`` reads, lowest precedence first: system (unless
    GIT_CONFIG_NOSYSTEM), global (GIT_CONFIG_GLOBAL, or the XDG file and ~/.gitconfig), the
    repository's, and the worktree's when extensions.worktreeConfig is on (read by the caller)."""
    files: list[str] = []
    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() not in ("1", "true", "yes", "on"):
        files.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    home = env.get("HOME") or os.path.expanduser("~")
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(env["GIT_CONFIG_GLOBAL"])
    else:
        files.append(os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "git", "config"))
        files.append(os.path.join(home, ".gitconfig"))
    files.append(str(common_dir / "config"))
    return [f for f in files if os.path.isfile(f)]


def _split_key(key: str) -> tuple[str, str]:
    """``remote.origin.url`` → (``remote "origin"``, ``url``); section and option names are
    case-insensitive in git, a subsection is not."""
    section, _, rest = key.partition(".")
    middle, _, option = rest.rpartition(".")
    return (f'{section.lower()} "{middle}"' if middle else section.lower()), option.lower()


def config_values(git_dir: Path, common_dir: Path, env: Mapping[str, str], key: str) -> list[str]:
    """Every value of ``key`` in the configuration git reads (in its order: the last one wins),
    parsed by GitPython's GitConfigParser (its [include] paths followed)."""
    git = _git()
    files = config_files(common_dir, env)
    parser = git.config.GitConfigParser(files, read_only=True)
    parser.read()
    worktree = git_dir / "config.worktree"
    if worktree.is_file() and _values(parser, "extensions", "worktreeconfig")[-1:] == ["true"]:
        parser = git.config.GitConfigParser([*files, str(worktree)], read_only=True)
        parser.read()
    return _values(parser, *_split_key(key))


def _values(parser: Any, section: str, option: str) -> list[str]:
    out: list[str] = []
    for name in parser.sections():
        head, sep, sub = name.partition(" ")
        if head.lower() + sep + sub != section:
            continue
        for found, values in parser.items_all(name):
            if found.lower() == option:
                out += [str(v) for v in values]
    return out


# ----------------------------------------------------------------------------- push and fetch
@dataclass
class Transfer:
    """How a push or fetch ended: git's exit status, its stdout and its stderr (progress left out)."""

    returncode: int
    stdout: bytes
    stderr: bytes


def _terminal_progress(stream: TextIO) -> ProgressCallback:
    """A progress line on ``stream`` (a terminal), redrawn in place, like git's own."""
    def update(op_code: int, cur_count: str | float, max_count: str | float | None = None, message: str = "") -> None:
        from git.util import RemoteProgress
        stage = {RemoteProgress.COUNTING: "Counting objects", RemoteProgress.COMPRESSING: "Compressing objects",
                 RemoteProgress.WRITING: "Writing objects", RemoteProgress.RECEIVING: "Receiving objects",
                 RemoteProgress.RESOLVING: "Resolving deltas", RemoteProgress.FINDING_SOURCES: "Finding sources",
                 RemoteProgress.CHECKING_OUT: "Checking out files"
                 }.get(op_code & RemoteProgress.OP_MASK, "Transferring")
        counts = f"{int(float(cur_count))}/{int(float(max_count))}" if max_count else f"{int(float(cur_count))}"
        end = "\n" if op_code & RemoteProgress.END else ""
        stream.write(f"\r{stage}: {counts} {message.strip()}\033[K{end}")
        stream.flush()
    return update


def transfer(work_tree: Path, env: Mapping[str, str], command: str, args: list[str],
             progress: ProgressCallback | None = None) -> Transfer:
    """Run ``git push`` or ``git fetch`` (``command``) with ``args`` through GitPython's command
    runner, its RemoteProgress parsing git's progress: to ``progress`` when given, else drawn on
    stderr when stderr is a terminal, else not asked for (git prints none)."""
    git = _git()
    from git.cmd import handle_process_output
    from git.util import CallableRemoteProgress, RemoteProgress

    if progress is None and sys.stderr.isatty():
        progress = _terminal_progress(sys.stderr)
    reporter: RemoteProgress = CallableRemoteProgress(progress) if progress else RemoteProgress()
    runner = git.Git(str(work_tree))
    out: list[bytes] = []
    started = time.perf_counter()
    proc = getattr(runner, command)(*(["--progress"] if progress else []), *args, as_process=True, env=dict(env))
    handle_process_output(proc, lambda line: out.append(line if isinstance(line, bytes) else line.encode()),
                          reporter.new_message_handler(), finalizer=None, decode_streams=False)
    try:
        proc.wait()
        status = 0
    except git.exc.GitCommandError as exc:
        status = exc.status if isinstance(exc.status, int) else 128
    if debug_enabled():
        _debug_line([command, *args], time.perf_counter() - started, "GitPython, ")
    stderr = "\n".join([*reporter.error_lines, *reporter.other_lines]).encode("utf-8", "replace")
    return Transfer(status, b"".join(line if line.endswith(b"\n") else line + b"\n" for line in out), stderr)
