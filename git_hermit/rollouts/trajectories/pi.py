"""Reader for the Pi coding agent's ``pi --mode json`` event stream (and its session files,
whose ``message`` entries hold the same messages).

Only finished messages (``message_end``) are read: they carry the whole user, assistant or
toolResult message, so the streaming deltas and the ``agent_end`` recap are skipped.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator

from git_hermit.model.rollout import Usage

from ._stream import ReadState, StepAssembler, as_int, content_text
from .model import Step

_EXIT_CODE = re.compile(r"(?:Command exited with code|exit code:?)\s+(-?\d+)", re.IGNORECASE)


def pi_usage(raw: Any) -> Usage:
    """Pi's usage (input excludes cache reads/writes; cost broken down) as a Usage."""
    raw = raw if isinstance(raw, dict) else {}
    cache_read = as_int(raw.get("cacheRead"))
    cost = raw.get("cost", {}).get("total") if isinstance(raw.get("cost"), dict) else None
    return Usage(as_int(raw.get("input")) + cache_read + as_int(raw.get("cacheWrite")), cache_read,
                 as_int(raw.get("output")), 0,
                 float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None)


def read_pi(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    asm = StepAssembler()
    for record in records:
        kind = record.get("type")
        if kind == "session":
            state.session_id = record.get("id") or state.session_id
        elif kind == "turn_start":
            state.open_turn = True
        elif kind == "turn_end":
            state.open_turn = False
        elif kind in ("message_end", "message") and isinstance(record.get("message"), dict):
            _message(record["message"], asm, state)
        elif kind == "auto_retry_start":
            state.add_warning(f"retry {record.get('attempt')}: {record.get('errorMessage', '')}")
        elif kind == "auto_retry_end" and record.get("success") is False:
            error = str(record.get("finalError") or "retries exhausted")
            state.add_error(error)
            asm.system("retries exhausted", error=error)
        elif kind in ("auto_compaction_start", "compaction_start"):
            asm.system(f"context compaction ({record.get('reason', '')})")
        yield from asm.drain()
    asm.close()
    yield from asm.drain()


def _message(message: dict[str, Any], asm: StepAssembler, state: ReadState) -> None:
    role = message.get("role")
    timestamp = message.get("timestamp")
    timestamp = str(timestamp) if timestamp is not None else None
    content = message.get("content")
    if role == "user":
        asm.user(content_text(content), timestamp)
    elif role == "assistant":
        state.model = message.get("model") or state.model
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "thinking":
                asm.reasoning(str(block.get("thinking") or ""), timestamp)
            elif block.get("type") == "text":
                text = str(block.get("text") or "")
                asm.message(text, timestamp)
                state.final_answer = text or state.final_answer
            elif block.get("type") == "toolCall":
                asm.call(str(block.get("id")), str(block.get("name")), block.get("arguments"), timestamp)
        if message.get("usage") is not None:
            usage = pi_usage(message["usage"])
            state.usage += usage
            asm.usage(usage)
        if message.get("stopReason") in ("error", "aborted"):
            error = str(message.get("errorMessage") or message["stopReason"])
            state.add_error(error)
            asm.agent_error(error)
    elif role == "toolResult":
        output = content_text(content)
        failed = bool(message.get("isError"))
        match = _EXIT_CODE.search(output[-500:]) if failed else None
        asm.result(str(message.get("toolCallId")), output, failed=failed, timestamp=timestamp,
                   exit_code=int(match.group(1)) if match else None)
    else:                                   # extension / custom messages
        asm.system(f"{role}: {content_text(content)}", timestamp)
