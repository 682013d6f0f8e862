"""Streaming plumbing shared by the readers: tolerant JSONL records, the per-read state, and
the assembler that groups host events into ATIF-like steps while holding only the open step.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from git_hermit.model.rollout import Usage

from .model import Step, ToolCall, tool_kind

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

    @property
    def truncated(self) -> bool:
        return self.cut_last_line or self.open_turn

    def add_error(self, text: str) -> None:
        if not self.errors or self.errors[-1] != text:   # Codex repeats a fatal error as turn.failed
            self._keep(self.errors, text)

    def add_warning(self, text: str) -> None:
        self._keep(self.warnings, text)

    def _keep(self, into: list[str], text: str) -> None:
        if len(into) < MAX_KEPT_MESSAGES:
            into.append(text)
        else:
            self.dropped_messages += 1


def iter_records(path: Path, state: ReadState) -> Iterator[dict[str, Any]]:
    """Each JSON object line of ``path``; bad lines are counted in ``state``, never raised."""
    with open(path, "rb") as lines:
        for raw in lines:
            try:
                record = json.loads(raw)
            except ValueError:            # includes UnicodeDecodeError
                if not raw.strip():       # blank lines are fine (checked only here: it copies)
                    continue
                state.malformed_lines += 1
                # only the file's last line can lack its newline: a writer stopped mid-line
                state.cut_last_line = state.cut_last_line or not raw.endswith(b"\n")
                continue
            if isinstance(record, dict):
                yield record
            else:
                state.malformed_lines += 1


def parse_arguments(arguments: Any) -> Any:
    """A tool call's arguments: JSON-encoded strings decoded to objects, anything else as is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def content_text(content: Any, *, types: tuple[str, ...] = ("text", "input_text", "output_text")) -> str:
    """The text of a string or of a list of typed content blocks (other block types skipped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in types:
                parts.append(str(block.get("text", "")))
        return "\n".join(part for part in parts if part)
    if isinstance(content, dict):
        return content_text([content], types=types)
    return str(content)


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# An agent turn is reasoning, then text, then tool calls, then their results; an event that
# ranks below the last one seen starts the next turn.
_REASONING, _MESSAGE, _CALL, _RESULT = range(4)


class _Draft:
    __slots__ = ("rank", "timestamp", "reasoning", "message", "calls", "usage", "error")

    def __init__(self, timestamp: str | None):
        self.rank = _REASONING
        self.timestamp = timestamp
        self.reasoning: list[str] = []
        self.message: list[str] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.usage: Usage | None = None
        self.error: str | None = None


class StepAssembler:
    """Turns a reader's events into numbered Steps; only the one open agent step is held."""

    def __init__(self) -> None:
        self._next_index = 0
        self._open: _Draft | None = None
        self._ready: deque[Step] = deque()
        self._held: list[tuple[str, str, dict[str, Any]]] = []

    # -- events ---------------------------------------------------------------------------
    def user(self, text: str, timestamp: str | None = None) -> None:
        self.close()
        self._emit("user", text, timestamp=timestamp)

    def system(self, text: str, timestamp: str | None = None, *, error: str | None = None) -> None:
        """A system step. Inside an open agent turn (a hook run between a call and its result,
        injected context) it is held and emitted right after that turn, keeping the call with
        its result."""
        if self._open is not None:
            self._held.append(("system", text, {"timestamp": timestamp, "error": error}))
        else:
            self._emit("system", text, timestamp=timestamp, error=error)

    def reasoning(self, text: str, timestamp: str | None = None) -> None:
        if text:
            self._agent(_REASONING, timestamp).reasoning.append(text)

    def message(self, text: str, timestamp: str | None = None) -> None:
        if text:
            self._agent(_MESSAGE, timestamp).message.append(text)

    def call(self, call_id: str, name: str, arguments: Any, timestamp: str | None = None,
             *, kind: str | None = None) -> None:
        draft = self._agent(_CALL, timestamp)
        draft.calls[call_id] = {"call_id": call_id, "name": name, "kind": kind or tool_kind(name),
                                "input": arguments}

    def result(self, call_id: str, output: str | None, *, exit_code: int | None = None,
               failed: bool | None = None, timestamp: str | None = None) -> None:
        if self._open is None or call_id not in self._open.calls:
            # a result whose call we never saw (cut stream): keep it as its own tool step
            self.close()
            orphan = ToolCall(call_id, "unknown", "other", None, output, exit_code, failed)
            self._emit("tool", "", timestamp=timestamp, tool_calls=(orphan,))
            return
        self._open.rank = _RESULT
        self._open.calls[call_id].update(output=output, exit_code=exit_code, failed=failed)

    def completed_call(self, call_id: str, name: str, arguments: Any, output: str | None, *,
                       exit_code: int | None = None, failed: bool | None = None,
                       timestamp: str | None = None, kind: str | None = None) -> None:
        """A call reported together with its result (Codex exec items)."""
        self.call(call_id, name, arguments, timestamp, kind=kind)
        self.result(call_id, output, exit_code=exit_code, failed=failed, timestamp=timestamp)

    def usage(self, usage: Usage, *, replace: bool = False) -> None:
        """Per-step usage, added to the open agent step (dropped if none is open).

        ``replace``: a newer snapshot of the same model call's usage (Claude repeats it).
        """
        if self._open is not None:
            current = self._open.usage
            self._open.usage = usage if current is None or replace else current + usage

    def agent_error(self, text: str) -> None:
        if self._open is not None:
            self._open.error = text
        else:
            self.system("", error=text)

    # -- output ---------------------------------------------------------------------------
    def close(self) -> None:
        draft, self._open = self._open, None
        if draft is None:
            return
        held, self._held = self._held, []
        calls = tuple(ToolCall(**{"output": None, "exit_code": None, "failed": None, **c})
                      for c in draft.calls.values())
        self._emit("agent", "\n\n".join(draft.message), timestamp=draft.timestamp,
                   reasoning="\n\n".join(draft.reasoning) or None, tool_calls=calls,
                   usage=draft.usage, error=draft.error)
        for source, message, fields in held:
            self._emit(source, message, **fields)

    def drain(self) -> Iterator[Step]:
        while self._ready:
            yield self._ready.popleft()

    def _agent(self, rank: int, timestamp: str | None) -> _Draft:
        if self._open is None or rank < self._open.rank:
            self.close()
            self._open = _Draft(timestamp)
        self._open.rank = max(self._open.rank, rank)
        return self._open

    def _emit(self, source: str, message: str, **fields: Any) -> None:
        self._ready.append(Step(self._next_index, source, message, **fields))
        self._next_index += 1
