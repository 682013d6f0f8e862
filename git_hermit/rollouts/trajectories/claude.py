"""Readers for Claude Code: the ``claude -p --output-format stream-json`` stream and the
session file ``~/.claude/projects/<slug>/<session>.jsonl`` (entries linked by uuid/parentUuid).

Claude splits one model call into several lines (one per content block) that repeat its
usage, so usage is counted once per message id; a stream's ``result.usage`` is the total.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator

from git_hermit.model.rollout import Usage

from ._stream import ReadState, StepAssembler, as_int, content_text
from .model import Step

_EXIT_CODE = re.compile(r"^Exit code (-?\d+)")


def claude_usage(raw: Any, cost_usd: Any = None) -> Usage:
    """Anthropic usage (input excludes cache reads/writes) as a Usage (input includes them)."""
    raw = raw if isinstance(raw, dict) else {}
    cache_read = as_int(raw.get("cache_read_input_tokens"))
    prompt = as_int(raw.get("input_tokens")) + as_int(raw.get("cache_creation_input_tokens")) + cache_read
    cost = float(cost_usd) if isinstance(cost_usd, (int, float)) and not isinstance(cost_usd, bool) else None
    return Usage(prompt, cache_read, as_int(raw.get("output_tokens")), 0, cost)


class _UsagePerMessage:
    """Sums usage over distinct message ids, keeping the newest snapshot of the current one."""

    def __init__(self) -> None:
        self.closed = Usage()
        self.current = Usage()
        self.message_id: Any = None

    def see(self, message_id: Any, usage: Usage) -> bool:
        """Record ``usage`` for ``message_id``; True when it replaces an earlier snapshot."""
        repeat = message_id is not None and message_id == self.message_id
        if not repeat:
            self.closed += self.current
            self.message_id = message_id
        self.current = usage
        return repeat

    @property
    def total(self) -> Usage:
        return self.closed + self.current


def read_claude_stream(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    yield from _read_claude(records, state, session_file=False)


def read_claude_session(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    yield from _read_claude(records, state, session_file=True)


def _read_claude(records: Iterable[dict[str, Any]], state: ReadState, *, session_file: bool) -> Iterator[Step]:
    asm = StepAssembler()
    per_message = _UsagePerMessage()
    result_usage: Usage | None = None
    for record in records:
        kind = record.get("type")
        timestamp = record.get("timestamp")
        state.session_id = record.get("session_id") or record.get("sessionId") or state.session_id
        # a subagent's own conversation (session: isSidechain; stream: parent_tool_use_id set):
        # its tokens count, its turns are not the main agent's steps
        sidechain = bool(record.get("isSidechain") or record.get("parent_tool_use_id"))
        message = record.get("message") if isinstance(record.get("message"), dict) else {}
        if kind == "assistant":
            if not sidechain:
                state.model = message.get("model") or state.model
                _assistant(message, record, timestamp, asm, state)
            if message.get("usage") is not None:
                usage = claude_usage(message["usage"])
                repeat = per_message.see(message.get("id"), usage)
                if not sidechain:      # after the blocks: the step they opened gets it
                    asm.usage(usage, replace=repeat)
        elif sidechain:
            continue
        elif kind == "user":
            _user(message, record, timestamp, asm)
        elif kind == "system":
            _system(record, timestamp, asm, state, session_file=session_file)
        elif kind == "result":
            state.open_turn = False
            if isinstance(record.get("result"), str) and record["result"]:
                state.final_answer = record["result"]
            if record.get("usage") is not None:
                result_usage = claude_usage(record["usage"], record.get("total_cost_usd"))
            if record.get("is_error") or record.get("subtype") not in (None, "success"):
                detail = record.get("result") or "; ".join(map(str, record.get("errors") or []))
                state.add_error(f"{record.get('subtype', 'error')}: {detail}".rstrip(": "))
        yield from asm.drain()
    asm.close()
    yield from asm.drain()
    state.usage = result_usage if result_usage is not None else per_message.total


def _assistant(message: dict[str, Any], record: dict[str, Any], timestamp: str | None,
               asm: StepAssembler, state: ReadState) -> None:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        block_type = block.get("type")
        if block_type == "thinking":
            asm.reasoning(str(block.get("thinking") or ""), timestamp)
        elif block_type == "text":
            text = str(block.get("text") or "")
            asm.message(text, timestamp)
            if text:
                state.final_answer = text
        elif block_type in ("tool_use", "server_tool_use"):
            asm.call(str(block.get("id")), str(block.get("name")), block.get("input"), timestamp)
    if record.get("error") or record.get("isApiErrorMessage"):
        error = str(record.get("error") or content_text(content) or "API error")
        state.add_error(error)
        asm.agent_error(error)


def _user(message: dict[str, Any], record: dict[str, Any], timestamp: str | None,
          asm: StepAssembler) -> None:
    content = message.get("content")
    if isinstance(content, str):
        asm.user(content, timestamp)
        return
    texts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            output = content_text(block.get("content"))
            failed = bool(block.get("is_error"))
            match = _EXIT_CODE.match(output) if failed else None
            asm.result(str(block.get("tool_use_id")), output, failed=failed, timestamp=timestamp,
                       exit_code=int(match.group(1)) if match else None)
        elif block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
    if texts:
        asm.user("\n".join(texts), timestamp)


def _system(record: dict[str, Any], timestamp: str | None, asm: StepAssembler, state: ReadState,
            *, session_file: bool) -> None:
    subtype = record.get("subtype") or ""
    if subtype == "init":
        state.open_turn = not session_file       # a stream ends with its `result` line
        state.model = record.get("model") or state.model
        tools = record.get("tools") or []
        asm.system(f"init: model {record.get('model')}, {len(tools)} tools, cwd {record.get('cwd')}", timestamp)
    elif subtype in ("hook_started", "hook_response"):
        # hook runs are the harness's own activity: context for a learner, not agent errors
        name = record.get("hook_name") or record.get("hook_event") or "hook"
        if subtype == "hook_started":
            asm.system(f"hook started: {name}", timestamp)
        else:
            detail = "\n".join(str(record[key]) for key in ("output", "stdout", "stderr") if record.get(key))
            head = f"hook {name}: {record.get('outcome', '')} (exit {record.get('exit_code')})"
            asm.system(f"{head}\n{detail}".rstrip(), timestamp)
    else:
        text = record.get("content")
        if not isinstance(text, str):
            rest = {k: v for k, v in record.items() if k not in ("type", "subtype", "session_id", "uuid")}
            text = json.dumps(rest, ensure_ascii=False, default=str)[:2000]
        if subtype == "permission_denied":
            state.add_warning(f"permission denied: {text}")
        asm.system(f"{subtype}: {text}" if subtype else text, timestamp)
