"""`git hermit trace`: what each session file holds, read by the trajectory readers in one
streaming pass — format and version, steps, tool calls, failures, tokens, cost (when
hermit.yaml has ``prices``), the final answer, and a session's sub-agent files beside it (and
a sub-agent's parent session), found where the file's host keeps them (Host.sub_sessions and
Host.parent_file: Claude Code's ``<session>/subagents/agent-*.jsonl``, Codex's rollouts whose
``session_meta`` names this thread as their parent).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    host = registry.host_for_format(summary.format)     # where its relatives are is the host's to say
    subagents = _sub_traces(host.sub_sessions(summary.format, path, summary.session_id), summary.format) if host else ()
    parent = host.parent_file(summary.format, path, summary.session_id, summary.parent_session_id) if host else None
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


def _sub_traces(found: list[Path], fmt: str) -> tuple[SubagentTrace, ...]:
    traces = []
    for sub in found:
        try:
            sub_summary = summarize(sub, fmt)
        except HermitError:
            continue
        traces.append(SubagentTrace(str(sub), sub_summary.steps, sub_summary.tool_calls, sub_summary.usage))
    return tuple(traces)
