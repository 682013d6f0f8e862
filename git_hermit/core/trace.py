"""`git hermit trace`: what each session file holds, read by the trajectory readers in one
streaming pass — format and version, steps, tool calls, failures, tokens, cost (when
hermit.yaml has ``prices``), the final answer, and a session's sub-agent files beside it (and
a sub-agent's parent session): Claude Code's ``<session>/subagents/agent-*.jsonl``, Codex's
rollouts whose ``session_meta`` names this thread as their parent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Mapping

from git_hermit.accounting.ledger import Price, price_usage
from git_hermit.errors import ConfigError, HermitError, InputError, NotARepository
from git_hermit.hosts import registry
from git_hermit.model.rollout import Usage
from git_hermit.trajectories import TrajectorySummary, detect_format, summarize

def families() -> dict[str, tuple[str, ...]]:
    """--format names a host (its family); the file's own shape picks the variant (stream or
    stored session). Each host module lists its formats."""
    return {host.family: host.trajectory_formats for host in registry.hosts()}


@dataclass(frozen=True)
class SubagentTrace:
    """A sub-agent transcript found beside a Claude session (its tokens, its size)."""

    path: str
    steps: int
    tool_calls: int
    usage: Usage


@dataclass(frozen=True)
class TraceReport:
    """One file's trace: the reader's summary, its usage priced, and what failed to read."""

    path: str
    summary: TrajectorySummary | None
    usage: Usage | None                  # priced when a price is known; None = unknown
    cost_source: str | None              # "prices" (hermit.yaml), "file" (the host's own), None
    subagents: tuple[SubagentTrace, ...] = ()
    error: HermitError | None = None
    parent: str | None = None            # a sub-agent's file: the session file that spawned it

    @property
    def usage_with_subagents(self) -> Usage | None:
        if self.usage is None or not self.subagents:
            return None
        total = self.usage
        for sub in self.subagents:
            total += sub.usage
        return total


def trace_prices(start: Path | None = None) -> dict[str, Price]:
    """hermit.yaml ``prices`` of the repository around ``start`` (every run's, merged); none
    outside a repository or without a hermit.yaml — trace works anywhere."""
    from git_hermit.config import config_paths, parse_config
    from git_hermit.gitio import Repo
    try:
        work_tree = Repo.discover(start).work_tree
    except NotARepository:
        return {}
    prices: dict[str, Price] = {}
    for path in config_paths(work_tree):
        try:
            config = parse_config(path.read_text(), source=str(path.relative_to(work_tree)), path=path)
        except ConfigError:
            continue            # a broken run config is `check`'s business, not trace's
        prices.update(config.prices)
    return prices


def trace_files(paths: list[Path], family: str | None = None,
                prices: Mapping[str, Price] | None = None) -> list[TraceReport]:
    """A TraceReport per path, in order; a file that cannot be read gets its error instead."""
    reports = []
    for path in paths:
        try:
            reports.append(_trace(Path(path), family, prices or {}))
        except HermitError as exc:
            reports.append(TraceReport(str(path), None, None, None, error=exc))
    return reports


def _trace(path: Path, family: str | None, prices: Mapping[str, Price]) -> TraceReport:
    summary = summarize(path, _format_for(path, family))
    usage, source = _priced(summary, prices)
    subagents: tuple[SubagentTrace, ...] = ()
    parent: Path | None = None
    if summary.format == "claude-session":
        subagents, parent = _subagents(path, summary), _claude_parent(path, summary)
    elif summary.format == "codex-rollout":
        subagents, parent = _codex_subagents(path, summary), _codex_parent(path, summary)
    return TraceReport(str(path), summary, usage, source, subagents, parent=str(parent) if parent else None)


def _format_for(path: Path, family: str | None) -> str | None:
    """The reader format: detected, checked against --format when given."""
    if family is None:
        return None
    variants = families()[family]
    try:
        detected = detect_format(path)
    except InputError:
        return variants[0]          # unrecognisable head (or empty): read it as the host's session
    if detected not in variants:
        raise InputError(f"{path} looks like {detected}, not {family}",
                         hint=f"drop --format to read it as {detected}, or pass the right file")
    return detected


def _priced(summary: TrajectorySummary, prices: Mapping[str, Price]) -> tuple[Usage | None, str | None]:
    if not summary.usage_known:
        return None, None
    price = prices.get(summary.model) if summary.model else None
    if price is not None:
        return price_usage(summary.usage, price), "prices"
    if summary.usage.cost_usd is not None:
        return summary.usage, "file"            # Pi and Claude's stream record their own cost
    return summary.usage, None


def _subagents(path: Path, summary: TrajectorySummary) -> tuple[SubagentTrace, ...]:
    """Sub-agent transcripts of this session: ``<session>/subagents/**/agent-*.jsonl`` beside
    it (Claude Code 2.1+), or older flat ``agent-*.jsonl`` files carrying its sessionId."""
    if path.name.startswith("agent-"):
        return ()
    found = sorted((path.parent / path.stem / "subagents").glob("**/agent-*.jsonl"))
    if summary.session_id:
        found += [p for p in sorted(path.parent.glob("agent-*.jsonl"))
                  if _first_session_id(p) == summary.session_id]
    return _sub_traces(found, "claude-session")


def _sub_traces(found: list[Path], fmt: str) -> tuple[SubagentTrace, ...]:
    traces = []
    for sub in found:
        try:
            sub_summary = summarize(sub, fmt)
        except HermitError:
            continue
        traces.append(SubagentTrace(str(sub), sub_summary.steps, sub_summary.tool_calls, sub_summary.usage))
    return tuple(traces)


def _claude_parent(path: Path, summary: TrajectorySummary) -> Path | None:
    """A sub-agent transcript's session file: ``<session>.jsonl`` beside the ``<session>/``
    folder whose ``subagents/`` holds it, else (older flat files) ``<sessionId>.jsonl``."""
    if not path.name.startswith("agent-"):
        return None
    for folder in path.parents:
        if folder.name == "subagents":
            session = folder.parent.with_name(folder.parent.name + ".jsonl")
            return session if session.is_file() else None
    flat = path.with_name(f"{summary.session_id}.jsonl") if summary.session_id else None
    return flat if flat is not None and flat.is_file() and flat != path else None


_DAY_DIR = re.compile(r"\d{4}/\d{2}/\d{2}$")


def _session_dirs(path: Path, *days: int) -> list[Path]:
    """Where a rollout's relatives are: its own folder and, when the folder is Codex's
    ``sessions/YYYY/MM/DD``, the folders ``days`` away (a child spawned past midnight)."""
    folders = [path.parent]
    if not _DAY_DIR.search(path.parent.as_posix()):
        return folders
    sessions = path.parent.parent.parent.parent
    try:
        day = date(int(path.parent.parent.parent.name), int(path.parent.parent.name), int(path.parent.name))
    except ValueError:
        return folders
    for offset in days:
        other = day + timedelta(days=offset)
        folder = sessions / f"{other:%Y}" / f"{other:%m}" / f"{other:%d}"
        if folder.is_dir():
            folders.append(folder)
    return folders


def _codex_subagents(path: Path, summary: TrajectorySummary) -> tuple[SubagentTrace, ...]:
    """Rollouts beside this one whose session_meta names this thread as their parent."""
    if not summary.session_id:
        return ()
    found = [candidate for folder in _session_dirs(path, 1) for candidate in sorted(folder.glob("rollout-*.jsonl"))
             if candidate != path and _rollout_parent(candidate) == summary.session_id]
    return _sub_traces(found, "codex-rollout")


def _codex_parent(path: Path, summary: TrajectorySummary) -> Path | None:
    """A sub-agent rollout's parent: the rollout file named after the parent thread's id."""
    if not summary.parent_session_id:
        return None
    for folder in _session_dirs(path, -1):
        for candidate in sorted(folder.glob(f"rollout-*-{summary.parent_session_id}.jsonl")):
            return candidate
    return None


def _rollout_parent(path: Path) -> str | None:
    """The parent session a stored session file names, read alone by the host that wrote it."""
    host = registry.host_for_format("codex-rollout")
    return host.parent_session(path) if host else None


def _first_session_id(path: Path) -> str | None:
    with open(path, "rb") as lines:
        for raw in lines:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("sessionId"):
                return str(record["sessionId"])
    return None
