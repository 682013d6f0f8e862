"""The normalised trajectory form every reader produces: steps, tool calls, a summary.

Field names follow Harbor's ATIF where it has one (source user/agent/system, message,
reasoning, tool calls matched to their outputs by call id). Pure data plus the tool-kind table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from git_hermit.hosts import registry
from git_hermit.model.rollout import Usage


def formats() -> tuple[str, ...]:
    """Every format a reader reads: each registered host names the formats its sessions write
    (asked when reading, so a plugin's host registered after this import counts); ATIF is Harbor's."""
    return (*(fmt for host in registry.hosts() for fmt in host.trajectory_formats), "atif")


TOOL_KINDS: tuple[str, ...] = ("shell", "patch", "read", "write", "mcp", "other")

# The seed's tool-kind table (Codex and Claude names), plus Pi's lower-case built-ins.
_KIND_BY_NAME: dict[str, str] = {
    "exec_command": "shell", "shell": "shell", "local_shell": "shell", "container.exec": "shell",
    "command_execution": "shell", "Bash": "shell", "bash": "shell",
    "apply_patch": "patch", "file_change": "patch",
    "Read": "read", "read": "read",
    "Write": "write", "Edit": "write", "MultiEdit": "write", "NotebookEdit": "write",
    "write": "write", "edit": "write",
    "mcp_tool_call": "mcp",
}


def tool_kind(name: str) -> str:
    """The coarse kind of a tool by its host name: shell, patch, read, write, mcp or other."""
    if name.startswith("mcp__"):
        return "mcp"
    return _KIND_BY_NAME.get(name, "other")


@dataclass(frozen=True)
class ToolCall:
    """One tool invocation and what came back (output None = no result was recorded)."""

    call_id: str
    name: str
    kind: str
    input: Any
    output: str | None = None
    exit_code: int | None = None
    failed: bool | None = None


@dataclass(frozen=True)
class Step:
    """One turn: a user or system message, or an agent turn (reasoning, text, tool calls + results).

    ``source`` "tool" marks a tool result whose call was not seen (a cut or reordered stream).
    """

    index: int
    source: str
    message: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    timestamp: str | None = None
    error: str | None = None

    @property
    def failed_tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(call for call in self.tool_calls if call.failed)

    @property
    def label(self) -> str:
        """A short file-name-safe tag: the source, plus the kinds of its tool calls."""
        kinds = list(dict.fromkeys(call.kind for call in self.tool_calls))
        return "-".join([self.source, *kinds])


@dataclass(frozen=True)
class TrajectorySummary:
    """What one streaming pass over a trajectory learns (usage totals per the format's rules)."""

    format: str
    steps: int
    tool_calls: int
    failed_tool_calls: int
    usage: Usage
    final_answer: str | None
    errors: tuple[str, ...]
    malformed_lines: int
    truncated: bool
    model: str | None
    session_id: str | None
    warnings: tuple[str, ...] = ()
    # False when the file records no usage at all, or only zeros (totals then read 0 but mean
    # "unknown")
    usage_known: bool = True
    version: str | None = None          # the host's version (or session-file version) recorded
    user_turns: int = 0                 # steps where the human spoke (not injected context)
    calls_by_kind: tuple[tuple[str, int], ...] = ()
    parent_session_id: str | None = None   # a sub-agent's session: the session that spawned it
