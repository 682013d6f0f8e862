"""Reader for the Pi coding agent's ``pi --mode json`` event stream (and its session files,
whose ``message`` entries hold the same messages).

Only finished messages (``message_end``) are read: they carry the whole user, assistant or
toolResult message, so the streaming deltas and the ``agent_end`` recap are skipped.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from git_hermit.model.rollout import Usage
from git_hermit.model.trajectory import ReadState, Step

from git_hermit.trajectories._stream import StepAssembler, as_int, content_text, iter_records

FORMAT = "pi"    # the format's name, as Pi's host module lists it
_EXIT_CODE = re.compile(r"(?:Command exited with code|exit code:?)\s+(-?\d+)", re.IGNORECASE)


def pi_usage(raw: Any) -> Usage:
    """Pi's usage (input excludes cache reads/writes; cost broken down) as a Usage."""
    raw = raw if isinstance(raw, dict) else {}
    cache_read = as_int(raw.get("cacheRead"))
    cost = raw.get("cost", {}).get("total") if isinstance(raw.get("cost"), dict) else None
    reasoning = as_int(raw.get("reasoning")) or as_int(raw.get("reasoningTokens"))
    return Usage(as_int(raw.get("input")) + cache_read + as_int(raw.get("cacheWrite")), cache_read,
                 as_int(raw.get("output")), reasoning,
                 float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None)


def read_pi(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    asm = StepAssembler(state)
    saw_usage = False
    for record in records:
        kind = record.get("type")
        # the entry's ISO time (session files); a message's own timestamp is epoch milliseconds
        timestamp = got if isinstance(got := record.get("timestamp"), str) else None
        if kind == "session":
            state.session_id = record.get("id") or state.session_id
            state.version = f"session v{record.get('version', 1)}"
            state.model = record.get("modelId") or record.get("model") or state.model
        elif kind == "model_change":
            state.model = record.get("modelId") or state.model
        elif kind == "turn_start":
            state.open_turn = True
        elif kind == "turn_end":
            state.open_turn = False
        elif kind in ("message_end", "message") and isinstance(record.get("message"), dict):
            saw_usage = saw_usage or record["message"].get("usage") is not None
            _message(record["message"], asm, state, timestamp)
        elif kind == "compaction":
            # the session file's record of a compaction: its summary replaced the older context
            before = record.get("tokensBefore")
            asm.system(f"context compaction ({before} tokens before): {record.get('summary', '')}", timestamp)
        elif kind == "auto_retry_start":
            state.add_warning(f"retry {record.get('attempt')}: {record.get('errorMessage', '')}")
        elif kind == "auto_retry_end" and record.get("success") is False:
            error = str(record.get("finalError") or "retries exhausted")
            state.add_error(error)
            asm.system("retries exhausted", error=error)
        elif kind in ("auto_compaction_start", "compaction_start"):
            asm.system(f"context compaction ({record.get('reason', '')})", timestamp)
        yield from asm.drain()
    asm.close()
    yield from asm.drain()
    if not saw_usage:
        state.usage_known = False


def _iso(epoch_ms: Any) -> str | None:
    if isinstance(epoch_ms, (int, float)) and not isinstance(epoch_ms, bool):
        stamp = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(epoch_ms) if epoch_ms is not None else None


def _message(message: dict[str, Any], asm: StepAssembler, state: ReadState,
             timestamp: str | None = None) -> None:
    role = message.get("role")
    timestamp = timestamp or _iso(message.get("timestamp"))
    content = message.get("content")
    if role == "user":
        asm.user(content_text(content), timestamp)
    elif role == "assistant":
        state.model = message.get("model") or state.model
        group = object()          # each assistant message is one model call: one step
        asm.begin(timestamp, group)
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "thinking":
                asm.reasoning(str(block.get("thinking") or ""), timestamp, group=group)
            elif block.get("type") == "text":
                text = str(block.get("text") or "")
                asm.message(text, timestamp, group=group)
                state.final_answer = text or state.final_answer
            elif block.get("type") == "toolCall":
                asm.call(str(block.get("id")), str(block.get("name")), block.get("arguments"), timestamp,
                         group=group)
        if message.get("usage") is not None:
            usage = pi_usage(message["usage"])
            state.usage += usage
            asm.usage(usage)
        if message.get("stopReason") in ("error", "aborted"):
            error = str(message.get("errorMessage") or message["stopReason"])
            state.add_error(error)
            asm.agent_error(error, timestamp)
            asm.answered(f"(not run: the model call {message['stopReason']})")
    elif role == "toolResult":
        output = content_text(content)
        failed = bool(message.get("isError"))
        match = _EXIT_CODE.search(output[-500:]) if failed else None
        asm.result(str(message.get("toolCallId")), output, failed=failed, timestamp=timestamp,
                   exit_code=int(match.group(1)) if match else None)
    elif role == "bashExecution":          # a command the user ran with `!` in the TUI
        asm.system(f"user ran: {message.get('command')} (exit {message.get('exitCode')})\n"
                   f"{message.get('output') or ''}".rstrip(), timestamp)
    else:                                   # extension / custom messages
        asm.system(f"{role}: {content_text(content)}", timestamp)


# -- what the generic reader (trajectories/reader.py) asks of Pi, through its Host --------------

_TYPES = {"session", "agent_start", "agent_end", "turn_start", "turn_end", "message_start",
          "message_update", "message_end", "tool_execution_start", "tool_execution_update",
          "tool_execution_end", "auto_retry_start", "auto_compaction_start"}


def sniff(record: dict[str, Any], weak: bool = False) -> str | None:
    kind = record.get("type")
    if not weak and (kind in _TYPES or (kind == "message" and isinstance(record.get("message"), dict))):
        return FORMAT
    return None


def read(fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
    return read_pi(iter_records(path, state), state)
