"""Readers for OpenAI Codex: the ``codex exec --json`` event stream and the stored session
("rollout") file ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Usage: exec reports each turn's usage (summed); a rollout's ``token_count`` carries the
cumulative ``total_token_usage`` (the last one wins) and the call's own ``last_token_usage``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator

from git_hermit.model.rollout import Usage

from ._stream import ReadState, StepAssembler, as_int, content_text, parse_arguments
from .model import Step

# Early rollout files wrote response items bare (no timestamp/type/payload envelope).
LEGACY_ROLLOUT_ITEMS = frozenset({"message", "reasoning", "function_call", "function_call_output",
                                  "custom_tool_call", "custom_tool_call_output", "local_shell_call"})
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:?)\s+(-?\d+)")
_FAILED_STATUSES = ("failed", "declined")


def codex_usage(raw: Any) -> Usage:
    """Codex's usage object (input includes cached; output includes reasoning) as a Usage."""
    raw = raw if isinstance(raw, dict) else {}
    return Usage(as_int(raw.get("input_tokens")), as_int(raw.get("cached_input_tokens")),
                 as_int(raw.get("output_tokens")), as_int(raw.get("reasoning_output_tokens")))


def read_codex_exec(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    asm = StepAssembler()
    unfinished: dict[str, dict[str, Any]] = {}     # started, not yet completed items (in flight)
    for record in records:
        kind = record.get("type")
        if kind == "thread.started":
            state.session_id = record.get("thread_id") or state.session_id
        elif kind == "turn.started":
            state.open_turn = True
            asm.close()
        elif kind == "turn.completed":
            state.open_turn = False
            _unfinished_calls(unfinished, asm)
            usage = codex_usage(record.get("usage"))
            state.usage += usage
            asm.usage(usage)        # the turn's usage goes on its last step
            asm.close()
        elif kind == "turn.failed":
            state.open_turn = False
            _unfinished_calls(unfinished, asm)
            message = _error_message(record.get("error")) or "turn failed"
            state.add_error(message)
            asm.system("turn failed", error=message)
        elif kind == "error":
            message = _error_message(record) or "error"
            state.add_error(message)
            asm.system("error", error=message)
        elif kind in ("item.started", "item.updated") and isinstance(record.get("item"), dict):
            item = record["item"]
            if item.get("type") in _TOOL_ITEMS:
                unfinished[str(item.get("id"))] = item
        elif kind == "item.completed" and isinstance(record.get("item"), dict):
            item = record["item"]
            unfinished.pop(str(item.get("id")), None)
            _exec_item(item, asm, state)
        yield from asm.drain()
    _unfinished_calls(unfinished, asm)
    asm.close()
    yield from asm.drain()


def _unfinished_calls(unfinished: dict[str, dict[str, Any]], asm: StepAssembler) -> None:
    """Calls that started but never completed (turn ended or stream stopped): no result."""
    for item in unfinished.values():
        name, kind, arguments = _TOOL_ITEMS[item["type"]](item)
        asm.call(str(item.get("id")), name, arguments, kind=kind)
    unfinished.clear()


def _mcp_name(item: dict[str, Any]) -> str:
    return f"mcp__{item.get('server', '')}__{item.get('tool', '')}"


# item type -> (tool name, kind, input) for the items that are tool calls
_TOOL_ITEMS = {
    "command_execution": lambda i: ("exec_command", "shell", {"command": i.get("command")}),
    "file_change": lambda i: ("apply_patch", "patch", {"changes": i.get("changes")}),
    "mcp_tool_call": lambda i: (_mcp_name(i), "mcp", i.get("arguments")),
    "web_search": lambda i: ("web_search", "other", {"query": i.get("query")}),
    "todo_list": lambda i: ("update_plan", "other", {"items": i.get("items")}),
}


def _exec_item(item: dict[str, Any], asm: StepAssembler, state: ReadState) -> None:
    item_type = item.get("type")
    item_id = str(item.get("id"))
    status = item.get("status")
    if item_type == "agent_message":
        text = str(item.get("text") or "")
        asm.message(text)
        state.final_answer = text
    elif item_type == "reasoning":
        asm.reasoning(str(item.get("text") or ""))
    elif item_type == "error":
        # Codex reports warnings (hook-trust bypass, clamped timeouts) as error items
        message = str(item.get("message") or "")
        state.add_warning(message)
        asm.system(message)
    elif item_type == "command_execution":
        exit_code = item.get("exit_code") if isinstance(item.get("exit_code"), int) else None
        failed = status in _FAILED_STATUSES or (exit_code is not None and exit_code != 0)
        asm.completed_call(item_id, "exec_command", {"command": item.get("command")},
                           item.get("aggregated_output"), exit_code=exit_code, failed=failed, kind="shell")
    elif item_type == "mcp_tool_call":
        error = _error_message(item.get("error"))
        result = item.get("result") if isinstance(item.get("result"), dict) else {}
        output = error or content_text(result.get("content")) or None
        asm.completed_call(item_id, _mcp_name(item), item.get("arguments"), output,
                           failed=bool(error) or status in _FAILED_STATUSES, kind="mcp")
    elif item_type in _TOOL_ITEMS:
        name, kind, arguments = _TOOL_ITEMS[item_type](item)
        failed = status in _FAILED_STATUSES if status else None
        changes = item.get("changes") if item_type == "file_change" else None
        output = "\n".join(f"{c.get('kind')} {c.get('path')}" for c in changes
                           if isinstance(c, dict)) if isinstance(changes, list) else None
        asm.completed_call(item_id, name, arguments, output, failed=failed, kind=kind)


def _error_message(raw: Any) -> str | None:
    if isinstance(raw, dict):
        message = raw.get("message")
        return str(message) if message else None
    return str(raw) if raw else None


def read_codex_rollout(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    asm = StepAssembler()
    last_total: Any = None
    for record in records:
        kind, payload, timestamp = record.get("type"), record.get("payload"), record.get("timestamp")
        if kind in LEGACY_ROLLOUT_ITEMS and "payload" not in record:
            kind, payload = "response_item", record        # 2025 rollouts: items without envelope
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            state.session_id = payload.get("id") or state.session_id
        elif kind == "turn_context":
            state.model = payload.get("model") or state.model
        elif kind == "compacted":
            asm.system("context compacted: " + str(payload.get("message") or ""), timestamp)
        elif kind == "response_item":
            _rollout_item(payload, timestamp, asm, state)
        elif kind == "event_msg":
            event = payload.get("type")
            if event == "token_count" and isinstance(payload.get("info"), dict):
                info = payload["info"]
                total = info.get("total_token_usage")
                if total is not None and total != last_total:   # Codex repeats the same count
                    last_total = total
                    state.usage = codex_usage(total)
                    if info.get("last_token_usage") is not None:
                        asm.usage(codex_usage(info["last_token_usage"]))
            elif event == "task_complete" and payload.get("last_agent_message"):
                state.final_answer = str(payload["last_agent_message"])
            elif event in ("error", "stream_error"):
                message = str(payload.get("message") or event)
                state.add_error(message)
                asm.system(event, timestamp, error=message)
            elif event == "turn_aborted":
                message = f"turn aborted: {payload.get('reason', '')}".strip()
                state.add_error(message)
                asm.system("turn aborted", timestamp, error=message)
        yield from asm.drain()
    asm.close()
    yield from asm.drain()


def _rollout_item(payload: dict[str, Any], timestamp: str | None, asm: StepAssembler,
                  state: ReadState) -> None:
    item_type = payload.get("type")
    if item_type == "message":
        text = content_text(payload.get("content"))
        role = payload.get("role")
        if role == "assistant":
            asm.message(text, timestamp)
            state.final_answer = text or state.final_answer
        elif role == "user":
            asm.user(text, timestamp)
        else:                                       # developer / system instructions
            asm.system(text, timestamp)
    elif item_type == "reasoning":
        parts = [content_text(payload.get("summary"), types=("summary_text",)),
                 content_text(payload.get("content"), types=("reasoning_text", "text"))]
        asm.reasoning("\n".join(part for part in parts if part), timestamp)
    elif item_type in ("function_call", "custom_tool_call"):
        arguments = payload.get("arguments") if item_type == "function_call" else payload.get("input")
        asm.call(str(payload.get("call_id")), str(payload.get("name")), parse_arguments(arguments), timestamp)
    elif item_type == "local_shell_call":
        asm.call(str(payload.get("call_id")), "local_shell", payload.get("action"), timestamp)
    elif item_type in ("function_call_output", "custom_tool_call_output"):
        output, exit_code, failed = codex_tool_output(payload.get("output"))
        asm.result(str(payload.get("call_id")), output, exit_code=exit_code, failed=failed,
                   timestamp=timestamp)


def codex_tool_output(raw: Any) -> tuple[str | None, int | None, bool | None]:
    """(text, exit code, failed) from a function_call_output, whichever shape Codex used.

    Shapes: a JSON string ``{"output", "metadata": {"exit_code"}}`` (shell, apply_patch), plain
    text with "Process exited with code N" (exec_command), or ``{"content", "success"}``.
    """
    success: Any = None
    exit_code: int | None = None
    text: Any = raw
    if isinstance(raw, str) and raw.startswith("{"):
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and "output" in decoded:
            text = decoded["output"]
            metadata = decoded.get("metadata")
            if isinstance(metadata, dict) and isinstance(metadata.get("exit_code"), int):
                exit_code = metadata["exit_code"]
    elif isinstance(raw, dict):
        text = raw.get("content", raw.get("output"))
        success = raw.get("success")
    if text is not None and not isinstance(text, str):
        text = content_text(text)
    if exit_code is None and isinstance(text, str):
        header = text.split("\nOutput:", 1)[0][:2000]    # not the command's own output
        match = _EXIT_CODE.search(header)
        exit_code = int(match.group(1)) if match else None
    if exit_code is not None:
        return text, exit_code, exit_code != 0
    return text, None, (not success) if isinstance(success, bool) else None
