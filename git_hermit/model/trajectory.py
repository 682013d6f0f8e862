"""The normalised trajectory form every reader produces (steps, tool calls, a summary) and the
per-read state a reader fills besides the steps. Pure data plus the tool-kind table: here, below
hosts/base.py, so that the Host protocol names Step and ReadState without importing a reader.

Field names follow Harbor's ATIF where it has one (source user/agent/system, message,
reasoning, tool calls matched to their outputs by call id).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from git_hermit.model.rollout import Usage

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


MAX_KEPT_MESSAGES = 50   # errors/warnings kept verbatim; the rest are only counted (constant memory)


@dataclass
class ReadState:
    """What a reader learns besides the steps; filled in while the step iterator is consumed."""

    format: str
    session_id: str | None = None
    model: str | None = None
    final_answer: str | None = None
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dropped_messages: int = 0
    malformed_lines: int = 0
    cut_last_line: bool = False
    # Streams with an end marker (turn.completed, result, turn_end) set ``open_turn`` while a
    # turn runs; a stream that stops inside one was cut off.
    open_turn: bool = False
    # calls whose result never came; when the last agent step has one, the session stopped
    # while a tool ran (earlier ones were interrupted and the session went on)
    unanswered_calls: int = 0
    stopped_mid_call: bool = False
    # False when the file carries no usage record at all: totals are unknown, not zero
    usage_known: bool = True
    version: str | None = None
    user_turns: int = 0
    parent_session_id: str | None = None
    line_number: int = 0                # of the record being read (set by iter_records)
    # (first, last) line ranges a pre-pass found to be abandoned branches (Claude rewinds)
    abandoned: list[tuple[int, int]] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.cut_last_line or self.open_turn or self.stopped_mid_call

    @property
    def usage_recorded(self) -> bool:
        """Usage is known when the file records some, and not only zeros: a session whose every
        model call failed writes zero counts (Pi) or none (Codex exec), and zero is not a count."""
        usage = self.usage
        return self.usage_known and any((usage.input_tokens, usage.cached_input_tokens, usage.output_tokens,
                                         usage.reasoning_tokens, usage.cost_usd))

    def add_error(self, text: str, *, repeat: bool = False) -> None:
        """Keep an error; an immediate repeat is dropped (Codex repeats a fatal error as
        turn.failed) unless ``repeat`` says each occurrence is its own event."""
        if repeat or not self.errors or self.errors[-1] != text:
            self._keep(self.errors, text)

    def add_warning(self, text: str) -> None:
        self._keep(self.warnings, text)

    def _keep(self, into: list[str], text: str) -> None:
        if len(into) < MAX_KEPT_MESSAGES:
            into.append(text)
        else:
            self.dropped_messages += 1
