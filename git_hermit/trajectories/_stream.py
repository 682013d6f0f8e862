"""Streaming plumbing shared by the readers: tolerant JSONL records filling the per-read state
(model/trajectory.py's ReadState), and the assembler that groups host events into ATIF-like
steps while holding only the open step.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Iterator

from git_hermit.model.rollout import Usage
from git_hermit.model.trajectory import ReadState, Step, ToolCall, tool_kind


def iter_records(path: Path, state: ReadState) -> Iterator[dict[str, Any]]:
    """Each JSON object line of ``path``; bad lines are counted and warned about (with their
    line number) in ``state``, never raised."""
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            state.line_number = number
            try:
                record = json.loads(raw)
            except ValueError:            # includes UnicodeDecodeError
                if not raw.strip():       # blank lines are fine (checked only here: it copies)
                    continue
                state.malformed_lines += 1
                # only the file's last line can lack its newline: a writer stopped mid-line
                cut = not raw.endswith(b"\n")
                state.cut_last_line = state.cut_last_line or cut
                state.add_warning(f"line {number}: " + ("cut off mid-record" if cut else "not valid JSON")
                                  + " (skipped)")
                continue
            if isinstance(record, dict):
                yield record
            else:
                state.malformed_lines += 1
                state.add_warning(f"line {number}: not a JSON object (skipped)")


def parse_arguments(arguments: Any) -> Any:
    """A tool call's arguments: JSON-encoded strings decoded to objects, anything else as is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


_IMAGE_TYPES = ("image", "input_image")


def image_placeholder(block: dict[str, Any]) -> str:
    """``[image: media type, bytes]`` for an image block of any host (Claude ``source``, Pi
    ``data``/``mimeType``, Codex ``image_url`` data URL): the image is never silently lost."""
    source = got if isinstance(got := block.get("source"), dict) else block
    media = source.get("media_type") or source.get("mimeType") or source.get("mime_type")
    data = source.get("data")
    url = block.get("image_url")
    url = url.get("url") if isinstance(url, dict) else url
    if not data and isinstance(url, str) and url.startswith("data:"):
        header, _, data = url.partition(",")
        media = media or header[5:].split(";")[0]
    if isinstance(data, str) and data:
        size = len(data) * 3 // 4 - data[-2:].count("=")      # base64 → bytes, not decoded
        return f"[image: {media or 'unknown type'}, {size} bytes]"
    where = url if isinstance(url, str) else source.get("url")
    return f"[image: {media or 'unknown type'}{', ' + str(where)[:200] if where else ''}]"


def content_text(content: Any, *, types: tuple[str, ...] = ("text", "input_text", "output_text")) -> str:
    """The text of a string or of a list of typed content blocks (images become a placeholder,
    other block types are skipped)."""
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
            elif isinstance(block, dict) and block.get("type") in _IMAGE_TYPES:
                parts.append(image_placeholder(block))
        return "\n".join(part for part in parts if part)
    if isinstance(content, dict):
        return content_text([content], types=types)
    return str(content)


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# An agent turn is reasoning, then text, then tool calls, then their results; an event that
# ranks below the last one seen starts the next turn — unless it belongs to the same model
# message (``group``): Claude writes one message as several records and may interleave the
# tool results of its parallel calls between them.
_REASONING, _MESSAGE, _CALL, _RESULT = range(4)


class _Draft:
    __slots__ = ("rank", "timestamp", "reasoning", "message", "calls", "usage", "error", "group")

    def __init__(self, timestamp: str | None, group: Any = None):
        self.rank = _REASONING
        self.timestamp = timestamp
        self.reasoning: list[str] = []
        self.message: list[str] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.usage: dict[Any, Usage] = {}     # per model message: a newer snapshot replaces
        self.error: str | None = None
        self.group = group


class StepAssembler:
    """Turns a reader's events into numbered Steps; only the one open agent step is held."""

    def __init__(self, state: ReadState | None = None) -> None:
        self._next_index = 0
        self._open: _Draft | None = None
        self._ready: deque[Step] = deque()
        self._held: list[tuple[str, str, dict[str, Any]]] = []
        self._state = state
        self._usage_serial = 0

    # -- events ---------------------------------------------------------------------------
    def user(self, text: str, timestamp: str | None = None) -> None:
        self.close()
        if self._state is not None:
            self._state.user_turns += 1
            self._state.stopped_mid_call = False
        self._emit("user", text, timestamp=timestamp)

    def system(self, text: str, timestamp: str | None = None, *, error: str | None = None) -> None:
        """A system step. Inside an open agent turn (a hook run between a call and its result,
        injected context) it is held and emitted right after that turn, keeping the call with
        its result."""
        if self._open is not None:
            self._held.append(("system", text, {"timestamp": timestamp, "error": error}))
        else:
            self._emit("system", text, timestamp=timestamp, error=error)

    def begin(self, timestamp: str | None, group: Any) -> None:
        """Open the step of model message ``group`` even before (or without) any content: a
        host that writes each model call as one message gets one step per call."""
        self._agent(_REASONING, timestamp, group)

    def reasoning(self, text: str, timestamp: str | None = None, *, group: Any = None) -> None:
        if text:
            self._agent(_REASONING, timestamp, group).reasoning.append(text)

    def message(self, text: str, timestamp: str | None = None, *, group: Any = None) -> None:
        if text:
            self._agent(_MESSAGE, timestamp, group).message.append(text)

    def call(self, call_id: str, name: str, arguments: Any, timestamp: str | None = None,
             *, kind: str | None = None, group: Any = None) -> None:
        draft = self._agent(_CALL, timestamp, group)
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
        call = self._open.calls[call_id]
        # an exit code reported earlier (Codex exec_command_end) survives a result without one
        if exit_code is None:
            exit_code = call.get("exit_code")
        if call.get("failed"):
            failed = True
        call.update(output=output, exit_code=exit_code, failed=failed, answered=True)

    def update_call(self, call_id: str, *, exit_code: int | None = None, failed: bool | None = None) -> bool:
        """Amend a call of the open step (an exit code reported apart from the output)."""
        if self._open is None or call_id not in self._open.calls:
            return False
        call = self._open.calls[call_id]
        if exit_code is not None:
            call["exit_code"] = exit_code
        if failed is not None:
            call["failed"] = bool(call.get("failed")) or failed
        return True

    def completed_call(self, call_id: str, name: str, arguments: Any, output: str | None, *,
                       exit_code: int | None = None, failed: bool | None = None,
                       timestamp: str | None = None, kind: str | None = None) -> None:
        """A call reported together with its result (Codex exec items)."""
        self.call(call_id, name, arguments, timestamp, kind=kind)
        self.result(call_id, output, exit_code=exit_code, failed=failed, timestamp=timestamp)

    def usage(self, usage: Usage, *, key: Any = None) -> None:
        """Per-step usage, added to the open agent step (dropped if none is open).

        ``key``: the model message it belongs to; a newer snapshot under the same key replaces
        the older (Claude repeats one message's usage on each of its records).
        """
        if self._open is None:
            return
        if key is None:
            self._usage_serial += 1
            key = ("serial", self._usage_serial)
        self._open.usage[key] = usage

    def agent_error(self, text: str, timestamp: str | None = None) -> None:
        if self._open is not None:
            self._open.error = text
        else:
            self.system("", timestamp, error=text)

    # -- output ---------------------------------------------------------------------------
    def close(self) -> None:
        draft, self._open = self._open, None
        if draft is None:
            return
        held, self._held = self._held, []
        calls = []
        unanswered = 0
        for c in draft.calls.values():
            fields = {"output": None, "exit_code": None, "failed": None, **c}
            if not fields.pop("answered", False):
                unanswered += 1
            calls.append(ToolCall(**fields))
        if self._state is not None:
            self._state.unanswered_calls += unanswered
            self._state.stopped_mid_call = unanswered > 0
        usage = None
        for part in draft.usage.values():
            usage = part if usage is None else usage + part
        self._emit("agent", "\n\n".join(draft.message), timestamp=draft.timestamp,
                   reasoning="\n\n".join(draft.reasoning) or None, tool_calls=tuple(calls),
                   usage=usage, error=draft.error)
        for source, message, fields in held:
            self._emit(source, message, **fields)

    def answered(self, output: str | None = None) -> None:
        """The open step's calls without a result will get none, knowingly (the model call
        errored or was aborted before they ran): marked failed with ``output``, not counted as
        a session cut off mid-call."""
        if self._open is not None:
            for call in self._open.calls.values():
                if not call.get("answered"):
                    call["answered"] = True
                    if output is not None:
                        call.update(output=output, failed=True)


    def drain(self) -> Iterator[Step]:
        while self._ready:
            yield self._ready.popleft()

    def _agent(self, rank: int, timestamp: str | None, group: Any = None) -> _Draft:
        same_message = group is not None and self._open is not None and self._open.group == group
        if self._open is None or (rank < self._open.rank and not same_message) \
                or (group is not None and self._open.group is not None and not same_message):
            self.close()
            self._open = _Draft(timestamp, group)
        if self._open.group is None:
            self._open.group = group
        self._open.rank = max(self._open.rank, rank)
        return self._open

    def _emit(self, source: str, message: str, **fields: Any) -> None:
        self._ready.append(Step(self._next_index, source, message, **fields))
        self._next_index += 1
