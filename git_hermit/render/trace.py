"""Text and JSON views of `git hermit trace`: a short block per session file, or one JSON
object per file (usage fields null when the file records no usage). The final answer is the
file's own text: clipped to its first ``FINAL_ANSWER_CHARS`` characters in JSON, to one line
with control characters replaced in the text view."""

from __future__ import annotations

from typing import Any

from git_hermit.core.trace import TraceReport
from git_hermit.model.rollout import Usage


# enough for a verdict or a short report, small enough for a line per file in `--json`
FINAL_ANSWER_CHARS = 1000
_GIST_CHARS = 120


def _answer_gist(text: str) -> str:
    """One terminal-safe line: whitespace folded, control characters (escape sequences) shown
    as "?", clipped."""
    flat = " ".join(text.split())
    flat = "".join(ch if ch.isprintable() else "?" for ch in flat)
    return flat if len(flat) <= _GIST_CHARS else flat[: _GIST_CHARS - 1] + "…"


def _usage_json(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return {"input": None, "cached_input": None, "output": None, "reasoning": None}
    return {"input": usage.input_tokens, "cached_input": usage.cached_input_tokens,
            "output": usage.output_tokens, "reasoning": usage.reasoning_tokens}


def trace_json(report: TraceReport) -> dict[str, Any]:
    """The machine-readable trace of one file (stable keys; see the README)."""
    if report.summary is None:
        error = report.error
        return {"path": report.path, "format": None, "version": None, "steps": None, "user_turns": None,
                "tool_calls": None, "tool_calls_by_kind": {}, "failed_tool_calls": None,
                "usage": _usage_json(None), "usage_known": False, "cost_usd": None, "cost_source": None,
                "model": None, "session_id": None, "truncated": None, "malformed_lines": None,
                "warnings": [], "errors": [error.message if error else "unreadable"],
                "hint": error.hint if error else None, "subagents": [], "parent": None,
                "final_answer": None, "final_answer_chars": None}
    summary = report.summary
    data: dict[str, Any] = {
        "path": report.path, "format": summary.format, "version": summary.version,
        "steps": summary.steps, "user_turns": summary.user_turns,
        "tool_calls": summary.tool_calls, "tool_calls_by_kind": dict(summary.calls_by_kind),
        "failed_tool_calls": summary.failed_tool_calls,
        "usage": _usage_json(report.usage), "usage_known": report.usage is not None,
        "cost_usd": report.usage.cost_usd if report.usage is not None else None,
        "cost_source": report.cost_source,
        "model": summary.model, "session_id": summary.session_id, "truncated": summary.truncated,
        "malformed_lines": summary.malformed_lines,
        "warnings": list(summary.warnings), "errors": list(summary.errors),
        "subagents": [{"path": s.path, "steps": s.steps, "tool_calls": s.tool_calls, "usage": _usage_json(s.usage)}
                      for s in report.subagents],
        "parent": report.parent,
        "final_answer": summary.final_answer[:FINAL_ANSWER_CHARS] if summary.final_answer else None,
        "final_answer_chars": len(summary.final_answer) if summary.final_answer else None,
    }
    with_subagents = report.usage_with_subagents
    if with_subagents is not None:
        data["usage_with_subagents"] = _usage_json(with_subagents)
    return data


def _tokens(usage: Usage | None) -> str:
    if usage is None:
        return "unknown (the file records no usage)"
    return (f"input {usage.input_tokens:,} (cached {usage.cached_input_tokens:,}), "
            f"output {usage.output_tokens:,} (reasoning {usage.reasoning_tokens:,})")


def trace_lines(report: TraceReport) -> list[str]:
    """A short human-readable block for one file."""
    if report.summary is None:
        message = report.error.message if report.error else "unreadable"
        return [f"{report.path}", f"  error: {message}"]
    summary = report.summary
    version = f" {summary.version}" if summary.version else ""
    kinds = ", ".join(f"{kind} {count}" for kind, count in summary.calls_by_kind) or "none"
    lines = [
        report.path,
        f"  format: {summary.format}{version}; model: {summary.model or '?'}",
        f"  steps: {summary.steps}; user turns: {summary.user_turns}",
        f"  tool calls: {summary.tool_calls} ({kinds}); failed: {summary.failed_tool_calls}",
        f"  tokens: {_tokens(report.usage)}",
    ]
    if report.usage is not None and report.usage.cost_usd is not None:
        where = "hermit.yaml prices" if report.cost_source == "prices" else "recorded in the file"
        lines.append(f"  cost: ${report.usage.cost_usd:.4f} ({where})")
    elif report.usage is not None:
        lines.append("  cost: unknown (no price for this model in hermit.yaml)")
    if summary.final_answer:
        lines.append(f"  final answer: {_answer_gist(summary.final_answer)}")
    if report.parent:
        lines.append(f"  parent: {report.parent}")
    for sub in report.subagents:
        lines.append(f"  sub-agent {sub.path}: {sub.steps} steps, {sub.tool_calls} tool calls, "
                     f"tokens {_tokens(sub.usage)}")
    if report.usage_with_subagents is not None:
        lines.append(f"  tokens with sub-agents: {_tokens(report.usage_with_subagents)}")
    lines.append(f"  truncated: {'yes' if summary.truncated else 'no'}"
                 + (f"; malformed lines: {summary.malformed_lines}" if summary.malformed_lines else ""))
    lines += [f"  warning: {w}" for w in summary.warnings]
    lines += [f"  error: {e}" for e in summary.errors]
    return lines
