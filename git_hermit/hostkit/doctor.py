"""`git hermit doctor`: is this machine and repository ready, and do the hosts still behave?

It reports git's version and the notes configuration (rewrite refs, remote notes refspecs),
the installed host CLIs and their versions, and with ``run_hosts`` one conformance session
of each installed host on the scripted model, row by row against the seed host table.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from git_hermit.gitio.notes import NOTES_REFS
from git_hermit.hostkit.conformance import SESSIONS, run_conformance
from git_hermit.hosts import registry
from git_hermit.hosts.locate import cli_version, find_node
from git_hermit.hosts.registry import find_host_cli

if TYPE_CHECKING:
    from git_hermit.gitio.repo import Repo

MIN_GIT = (2, 31)
HERMIT_NOTES = "refs/notes/hermit/*"


@dataclass(frozen=True)
class RemoteNotes:
    """Whether a remote fetches and pushes the hermit notes refs."""

    remote: str
    fetches_notes: bool
    pushes_notes: bool


@dataclass(frozen=True)
class HostStatus:
    host: str
    installed: bool
    cli: str | None
    version: str
    pinned: str
    conformance: dict[str, Any] | None = None  # ConformanceReport.to_json() when the host was run


@dataclass(frozen=True)
class DoctorReport:
    git_version: str
    repository: str | None
    notes_rewrite_refs: tuple[str, ...]
    notes_rewrite_missing: tuple[str, ...]
    remotes: tuple[RemoteNotes, ...]
    node: str | None
    hosts: tuple[HostStatus, ...]
    problems: tuple[str, ...] = field(default=())
    sandbox_ok: bool = False           # bubblewrap can create its namespaces here
    sandbox: str = ""                  # one line saying why (or why not)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _version_tuple(text: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(p) for p in match.groups() if p is not None) if match else ()


def _git_version(repo: "Repo | None") -> str:
    from git_hermit.gitio import git_version
    return git_version()


def _covers(patterns: list[str], ref: str) -> bool:
    return any(fnmatch.fnmatchcase(ref, p) for p in patterns)


def _refspec_targets(refspecs: list[str]) -> list[str]:
    """The local side a fetch refspec writes (``+src:dst`` → dst) or a push refspec sends (src)."""
    return [spec.lstrip("+").split(":")[0] for spec in refspecs] + \
        [spec.lstrip("+").split(":")[-1] for spec in refspecs]


def _remotes(repo: "Repo") -> tuple[RemoteNotes, ...]:
    sample = next(iter(NOTES_REFS.values()))
    remotes = []
    for name in repo.git("remote").split():
        fetch = _refspec_targets(repo.config_get_all(f"remote.{name}.fetch"))
        push = _refspec_targets(repo.config_get_all(f"remote.{name}.push"))
        # `git hermit fetch` keeps the remote's notes under refs/hermit-remote/<name>/ and merges them
        fetched = bool(repo.list_refs(f"refs/hermit-remote/{name}/notes/"))
        remotes.append(RemoteNotes(name, _covers(fetch, sample) or fetched, _covers(push, sample)))
    return tuple(remotes)


def _host_status(host: str, run_hosts: bool, work_dir: Path | None) -> HostStatus:
    cli = find_host_cli(host)
    pinned = registry.get(host).package.rsplit("@", 1)[1]
    if cli is None:
        return HostStatus(host, False, None, "", pinned)
    version = cli_version(cli)
    conformance = None
    if run_hosts:
        report, _ = run_conformance(host, cli, work_dir, sessions=SESSIONS[:1])
        conformance = report.to_json()
    return HostStatus(host, True, str(cli), version, pinned, conformance)


def doctor_report(repo: "Repo | None", run_hosts: bool, work_dir: Path | None = None,
                  extra_problems: tuple[str, ...] = ()) -> DoctorReport:
    """Inspect git, the repository's notes setup and the host CLIs (and run them if asked).
    ``extra_problems``: what the caller found missing for the configured runs (core/preflight.py)."""
    problems: list[str] = list(extra_problems)
    git_version = _git_version(repo)
    if _version_tuple(git_version) < MIN_GIT:
        problems.append(f"git {git_version} is older than {'.'.join(map(str, MIN_GIT))}")
    rewrite_refs: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    remotes: tuple[RemoteNotes, ...] = ()
    if repo is not None:
        rewrite_refs = tuple(repo.config_get_all("notes.rewriteRef"))
        missing = tuple(ref for ref in NOTES_REFS.values() if not _covers(list(rewrite_refs), ref))
        if missing:
            problems.append("notes.rewriteRef does not cover " + ", ".join(missing)
                            + f": amend/rebase would drop those notes (git config --add notes.rewriteRef '{HERMIT_NOTES}')")
        for command in ("amend", "rebase"):
            if (repo.config_get(f"notes.rewrite.{command}") or "true").lower() == "false":
                problems.append(f"notes.rewrite.{command} is false: {command} drops hermit notes")
        remotes = _remotes(repo)
        for remote in remotes:
            if not remote.fetches_notes:
                problems.append(f"remote {remote.remote} does not fetch {HERMIT_NOTES} "
                                f"(run `git hermit fetch {remote.remote}`: it merges them; a forced "
                                f"'+{HERMIT_NOTES}:{HERMIT_NOTES}' refspec would overwrite local notes)")
    node = find_node()
    # A host without hooks has no conformance session; its row says whether it is installed.
    hook_hosts = {h.name for h in registry.hook_hosts()}
    hosts = tuple(_host_status(host, run_hosts and host in hook_hosts, work_dir) for host in registry.names())
    for status in hosts:
        if status.installed and status.version != status.pinned:
            problems.append(f"{status.host} {status.version} is not the pinned {status.pinned}: the host table is unverified for it"
                            + ("" if run_hosts or status.host not in hook_hosts else " (run doctor --hosts)"))
        if status.conformance and not status.conformance["all_hold"]:
            broken = [c["row"] for c in status.conformance["checks"] if not c["holds"]]
            problems.append(f"{status.host} {status.version} departs from the host table: "
                            + ", ".join(broken + list(status.conformance["errors"])))
    from git_hermit import plugins
    from git_hermit.evolvers import registry as evolvers
    evolvers.names()   # loads the evolver plugins, so a broken one is known here too
    for group, name, error in dict.fromkeys(plugins.FAILURES):
        problems.append(f"plugin {name!r} ({group} entry point) could not be loaded and is skipped: {error[:300]}")
    if node is None and any(s.installed for s in hosts):
        problems.append("node is not on PATH; the host CLIs' launchers need it")
    from git_hermit.supervise.sandbox import probe   # lazy: doctor must start even without it
    sandbox_ok, sandbox = probe()
    if not sandbox_ok and repo is not None and _sandbox_enabled(repo):
        problems.append(f"hermit.yaml enables the sandbox but {sandbox}; `step` refuses to run "
                        "(set sandbox: {enabled: false} to run unsandboxed explicitly)")
    return DoctorReport(git_version, str(repo.work_tree) if repo is not None else None, rewrite_refs, missing,
                        remotes, str(node) if node else None, hosts, tuple(problems), sandbox_ok, sandbox)


def _sandbox_enabled(repo: "Repo") -> bool:
    from git_hermit.config import config_paths, parse_config
    from git_hermit.errors import HermitError
    for path in config_paths(repo.work_tree):
        try:
            if parse_config(path.read_text(), source=path.name).sandbox.enabled:
                return True
        except (HermitError, OSError):
            continue
    return False


def render_text(report: DoctorReport) -> str:
    """The human view of a doctor report."""
    mark = {True: "ok ", False: "!! "}
    lines = [f"{mark[_version_tuple(report.git_version) >= MIN_GIT]}git {report.git_version}"]
    if report.repository is None:
        lines.append("   (not in a repository: notes configuration not checked)")
    else:
        lines.append(f"   repository {report.repository}")
        lines.append(f"{mark[not report.notes_rewrite_missing]}notes.rewriteRef: "
                     + (", ".join(report.notes_rewrite_refs) or "(none)"))
        for remote in report.remotes:
            lines.append(f"{mark[remote.fetches_notes]}remote {remote.remote}: fetches hermit notes: "
                         f"{'yes' if remote.fetches_notes else 'no'}; pushes them: {'yes' if remote.pushes_notes else 'no'}")
    lines.append(f"{mark[report.node is not None]}node {report.node or 'not found'}")
    lines.append(f"{mark[report.sandbox_ok]}sandbox: {report.sandbox}")
    for status in report.hosts:
        if not status.installed:
            lines.append(f"!! {status.host}: not installed (`git hermit hosts install {status.host}` installs {status.pinned})")
            continue
        lines.append(f"{mark[status.version == status.pinned]}{status.host} {status.version or '?'} "
                     f"(pinned {status.pinned}) at {status.cli}")
        if status.conformance:
            for error in status.conformance["errors"]:
                lines.append(f"   !! {error}")
            for check in status.conformance["checks"]:
                lines.append(f"   {mark[check['holds']]}{check['row']}: {check['detail']}")
    lines.append("all good" if report.ok else f"{len(report.problems)} problem(s):")
    lines.extend(f"  - {problem}" for problem in report.problems)
    return "\n".join(lines)
