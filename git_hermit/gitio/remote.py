"""Remotes: fetching a run's refs into a tracking namespace and pushing refs atomically with leases.

``fetch_tracking`` force-fetches the remote's ``hermit`` branches, tags, notes and run refs
(``refs/hermit/<run>/records`` …; the traces only when asked), and any branches named (a run's base
branch), into ``refs/hermit-remote/<name>/…`` (never into the user's refs), so the caller can merge
them by its own rules. ``push_atomic`` sends every ref in one ``git push --atomic`` where each ref carries a
lease (the remote value we merged with): a remote that moved in between rejects the whole push.
Both transfers run through GitPython, which reports git's progress (drawn on a terminal's stderr;
gitio/_gitpython.py).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import GitStateError, RefConflict
from ._gitpython import transfer
from ._process import first_error_line
from .repo import Repo

TRACKING_ROOT = "refs/hermit-remote"
# What a run shares, as remote patterns (refs/heads/hermit/<run>/step-NNNN, tags, notes, the run's
# records and pending rollouts under refs/hermit/<run>/; its traces only when asked: they are large)
SHARED_PATTERNS = ("refs/heads/hermit/", "refs/tags/hermit/", "refs/notes/hermit/", "refs/hermit/")
TRACES_PATTERN = "refs/hermit/*/traces"


@dataclass(frozen=True)
class PushedRef:
    """One line of ``git push --porcelain``: flag (' ' fast-forward, '+' forced, '*' new, '-' deleted,
    '=' up to date, '!' rejected), the remote ref, and git's summary (e.g. ``abc..def``)."""

    flag: str
    ref: str
    summary: str

    @property
    def moved(self) -> bool:
        return self.flag in (" ", "+", "*", "-")


def remote_url(repo: Repo, remote: str) -> str | None:
    """The configured fetch URL of ``remote`` (None when it is not a configured remote name)."""
    return repo.config_get(f"remote.{remote}.url")


def tracking_name(repo: Repo, remote: str) -> str:
    """A ref-safe name for ``remote``: the remote's own name, or a short hash of a URL/path."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", remote) and remote_url(repo, remote) is not None:
        return remote
    return "url-" + hashlib.sha1(remote.encode()).hexdigest()[:12]


def tracking_prefix(repo: Repo, remote: str) -> str:
    return f"{TRACKING_ROOT}/{tracking_name(repo, remote)}/"


def check_remote(repo: Repo, remote: str) -> None:
    """A clear error when ``remote`` is neither a configured remote nor a reachable repository."""
    proc = repo._run(["ls-remote", "--heads", remote, "refs/heads/hermit/__probe__"])
    if proc.returncode != 0:
        raise GitStateError(f"cannot reach remote {remote!r}: {first_error_line(proc.stderr)}",
                            hint="name a configured remote (`git remote -v`) or a repository URL/path")


def fetch_tracking(repo: Repo, remote: str, *, branches: tuple[str, ...] = (), traces: bool = False) -> dict[str, str]:
    """Force-fetch the remote's shared refs (and ``branches``, full names such as ``refs/heads/main``)
    into the tracking namespace, dropping refs the remote no longer has; returns {remote ref name:
    sha} as the remote has them now. The traces refs come only with ``traces``."""
    prefix = tracking_prefix(repo, remote)
    specs = [f"+{pattern}*:{prefix}{pattern.removeprefix('refs/')}*" for pattern in SHARED_PATTERNS]
    if not traces:
        specs.append(f"^{TRACES_PATTERN}")    # a negative refspec (git 2.29+): not these
    specs += [f"+{branch}:{prefix}{branch.removeprefix('refs/')}" for branch in branches
              if branch.startswith("refs/heads/") and not branch.startswith("refs/heads/hermit/")]
    proc = transfer(repo.work_tree, repo._env, "fetch", ["--no-tags", "--no-write-fetch-head", "--prune", remote, *specs])
    if proc.returncode != 0 and branches and "couldn't find remote ref" in proc.stderr.decode("utf-8", "replace"):
        # a branch the remote does not have (yet): fetch the rest; the caller sees it absent
        return fetch_tracking(repo, remote, traces=traces)
    if proc.returncode != 0:
        check_remote(repo, remote)      # the clearer error when the remote is not there at all
        raise GitStateError(f"git fetch from {remote!r} failed: {first_error_line(proc.stderr)}",
                            hint="check the remote with `git ls-remote " + remote + "`")
    found = {"refs/" + ref.removeprefix(prefix): sha for ref, sha in repo.list_refs(prefix).items()}
    if not traces:      # a traces ref tracked by an earlier --traces fetch is not the remote's state now
        found = {ref: sha for ref, sha in found.items() if not _is_traces(ref)}
    return found


def _is_traces(ref: str) -> bool:
    parts = ref.split("/")
    return len(parts) == 4 and parts[:2] == ["refs", "hermit"] and parts[3] == "traces"


def pack_size(repo: Repo, tips: list[str], known: list[str]) -> int:
    """Bytes of the pack holding what is reachable from ``tips`` and not from ``known``: what a
    push of ``tips`` to a remote that has ``known`` adds (git sends about this pack)."""
    if not tips:
        return 0
    objects = repo.git_bytes("rev-list", "--objects", *tips, *(["--not", *known] if known else []))
    if not objects.strip():
        return 0
    return len(repo.git_bytes("pack-objects", "-q", "--stdout", input=objects))


def push_atomic(repo: Repo, remote: str, refs: list[tuple[str | None, str, str | None]]) -> list[PushedRef]:
    """Push ``(local sha or None to delete, remote ref, expected remote sha or None for absent)`` in
    ONE atomic push.

    Every ref carries ``--force-with-lease=<ref>:<expected>``: the caller has merged with exactly
    that remote state, so a remote that moved since rejects the push whole (RefConflict), and the
    caller fetches, merges and tries again. Nothing is pushed that the caller did not check.
    """
    if not refs:
        return []
    args = ["--atomic", "--porcelain", "--no-verify"]
    for _sha, ref, expected in refs:
        args.append(f"--force-with-lease={ref}:{expected or ''}")
    args.append(remote)
    args += [f"{sha}:{ref}" if sha else f":{ref}" for sha, ref, _ in refs]
    proc = transfer(repo.work_tree, repo._env, "push", args)
    results = _parse_porcelain(proc.stdout.decode("utf-8", "replace"))
    if proc.returncode == 0:
        return results
    rejected = [r for r in results if r.flag == "!"]
    text = proc.stderr.decode("utf-8", "replace") + proc.stdout.decode("utf-8", "replace")
    # Another push moved a ref since we fetched (stale lease), or holds its lock right now (the
    # remote's atomic transaction failed): both are races the caller settles by fetching again.
    raced = ("stale info", "fetch first", "atomic push failed", "atomic transaction failed", "cannot lock ref",
             "failed to lock", "incorrect old value", "failed to update ref")
    # A ref refused for its own reason (a protected branch, a declining hook) is no race: say so.
    refused = [r for r in rejected if not any(marker in r.summary for marker in raced)]
    if not refused and any(marker in text for marker in raced):
        raise RefConflict(f"the remote {remote!r} moved while git-hermit was pushing; nothing was pushed",
                          hint="someone pushed at the same time; run the same command again")
    first = (refused or rejected)[0] if refused or rejected else None
    why = first.summary if first else first_error_line(proc.stderr)
    where = f" ({first.ref})" if first else ""
    raise GitStateError(f"git push to {remote!r} failed{where}: {why}; nothing was pushed",
                        hint="check the remote's permissions and protected refs")


def _parse_porcelain(text: str) -> list[PushedRef]:
    out = []
    for line in text.splitlines():
        if "\t" not in line or line.startswith(("To ", "Done")):
            continue
        flag, refs, *rest = line.split("\t")
        out.append(PushedRef(flag[:1] or " ", refs.split(":")[-1], rest[0] if rest else ""))
    return out
