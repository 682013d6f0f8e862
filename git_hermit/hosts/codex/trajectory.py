"""Readers for OpenAI Codex: the ``codex exec --json`` event stream and the stored session
("rollout") file ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Usage: a rollout's ``token_count`` carries the running ``total_token_usage``; exec's
``turn.completed`` carries the thread's running total too (a ``codex exec resume`` stream
starts from the earlier runs'). Both are read as the sum of per-turn deltas, so a total that
falls (a counter that restarted) adds that call's own usage instead of losing what came before.
Failures are read from structured fields first (exit codes in metadata, exec_command_end,
item_completed events, ``success``), from the output's head last.
"""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from git_hermit.model.rollout import Usage
from git_hermit.model.trajectory import ReadState, Step

from git_hermit.trajectories._stream import (StepAssembler, as_int, content_text, image_placeholder,
                                            iter_records, parse_arguments)

# Early rollout files wrote response items bare (no timestamp/type/payload envelope).
LEGACY_ROLLOUT_ITEMS = frozenset({"message", "reasoning", "function_call", "function_call_output",
                                  "custom_tool_call", "custom_tool_call_output", "local_shell_call"})
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:?)\s+(-?\d+)")
# a command that outlived its wait: its exit comes later, on the write_stdin poll that sees it
_RUNNING = re.compile(r"Process running with session ID (\d+)")
_FAILED_STATUSES = ("failed", "declined")
# failures Codex reports as plain text instead of an exit code (sandbox denials, a rejected
# patch, a refused poll or sub-agent, a code-mode script that threw, a tool that could not
# run): an output that starts with one, or names one in its first 300 characters (never deep
# inside a command's own output)
_FAILURE_TEXT = re.compile(r"\s*(?:execution error:|exec command rejected|error: |apply_patch verification failed"
                           r"|write_stdin failed:|collab spawn failed:|unsupported call:|Script failed"
                           r"|aborted by user)"
                           r"|.{0,300}?(?:failed in sandbox|sandbox denied|patch rejected|rejected by user)",
                           re.IGNORECASE | re.DOTALL)
_SUCCESS_TEXT = ("Script completed",)          # code mode's own verdict on a script that ran
# user-role messages Codex injects (environment, AGENTS.md / user instructions, turn notices,
# plugin suggestions, a sub-agent's report): context for the model, not the user speaking
_INJECTED_USER = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                  "<INSTRUCTIONS>", "<turn_aborted>", "<user_shell_command>", "<skill>",
                  "<recommended_plugins>", "<subagent_notification>")
_KEEP_CALLS = 256          # calls remembered for late exit codes and polls (bounded memory)
# call items that carry their own result (no separate *_output item)
_SELF_CONTAINED_CALLS = {"web_search_call": "web_search", "image_generation_call": "image_generation",
                         "tool_search_call": "tool_search"}


def codex_usage(raw: Any) -> Usage:
    """Codex's usage object (input includes cached; output includes reasoning) as a Usage."""
    raw = raw if isinstance(raw, dict) else {}
    return Usage(as_int(raw.get("input_tokens")), as_int(raw.get("cached_input_tokens")),
                 as_int(raw.get("output_tokens")), as_int(raw.get("reasoning_output_tokens")))


def running_delta(previous: Usage | None, total: Usage, own: Usage | None = None) -> Usage:
    """What a running total added since ``previous``; when it fell (the counter restarted: a
    resumed or compacted session, another thread), the new count's own usage (``own``, else the
    new total itself)."""
    if previous is None:
        return total
    if (total.input_tokens < previous.input_tokens or total.cached_input_tokens < previous.cached_input_tokens
            or total.output_tokens < previous.output_tokens or total.reasoning_tokens < previous.reasoning_tokens):
        return own if own is not None else total
    return Usage(total.input_tokens - previous.input_tokens, total.cached_input_tokens - previous.cached_input_tokens,
                 total.output_tokens - previous.output_tokens, total.reasoning_tokens - previous.reasoning_tokens)


def _remember(into: dict[str, Any], key: str, value: Any) -> None:
    into[key] = value
    if len(into) > _KEEP_CALLS:                     # bounded: drop the oldest
        into.pop(next(iter(into)))


def read_codex_exec(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    asm = StepAssembler(state)
    unfinished: dict[str, dict[str, Any]] = {}     # started, not yet completed items (in flight)
    thread_total: Usage | None = None             # the thread's running total so far
    for record in records:
        kind = record.get("type")
        if kind == "thread.started":
            if record.get("thread_id") != state.session_id:
                thread_total = None                 # another thread: its own running total
            state.session_id = record.get("thread_id") or state.session_id
        elif kind == "turn.started":
            state.open_turn = True
            asm.close()
        elif kind == "turn.completed":
            state.open_turn = False
            _unfinished_calls(unfinished, asm)
            asm.answered()          # the turn ended: a call left unfinished is not a cut-off stream
            total = codex_usage(record.get("usage"))
            usage = running_delta(thread_total, total)
            thread_total = total
            state.usage += usage
            asm.usage(usage)        # the turn's usage goes on its last step
            asm.close()
        elif kind == "turn.failed":
            state.open_turn = False
            _unfinished_calls(unfinished, asm)
            asm.answered()
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
_TOOL_ITEMS: dict[str, Callable[[dict[str, Any]], tuple[str, str, Any]]] = {
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
        exit_code = got if isinstance(got := item.get("exit_code"), int) else None
        failed: bool | None = status in _FAILED_STATUSES or (exit_code is not None and exit_code != 0)
        asm.completed_call(item_id, "exec_command", {"command": item.get("command")},
                           item.get("aggregated_output"), exit_code=exit_code, failed=failed, kind="shell")
    elif item_type == "mcp_tool_call":
        error = _error_message(item.get("error"))
        result = got if isinstance(got := item.get("result"), dict) else {}
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
    asm = StepAssembler(state)
    last_total: Usage | None = None
    seen_total: Any = None
    turn = _Turn()
    saw_token_count = False
    calls = _Calls()
    for record in records:
        kind, payload, timestamp = record.get("type"), record.get("payload"), record.get("timestamp")
        if kind in LEGACY_ROLLOUT_ITEMS and "payload" not in record:
            kind, payload = "response_item", record        # 2025 rollouts: items without envelope
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            state.session_id = payload.get("id") or state.session_id
            state.version = payload.get("cli_version") or state.version
            state.parent_session_id = parent_thread(payload) or state.parent_session_id
        elif kind == "turn_context":
            state.model = payload.get("model") or state.model
        elif kind == "compacted":
            asm.system("context compacted: " + str(payload.get("message") or ""), timestamp)
        elif kind == "response_item":
            _rollout_item(payload, timestamp, asm, state, turn, calls)
        elif kind == "event_msg":
            event = payload.get("type")
            if event == "token_count" and isinstance(payload.get("info"), dict):
                info = payload["info"]
                total = info.get("total_token_usage")
                saw_token_count = True
                if total is not None and total != seen_total:   # Codex repeats the same count
                    seen_total = total
                    own = info.get("last_token_usage")
                    current = codex_usage(total)
                    usage = running_delta(last_total, current, codex_usage(own) if own else None)
                    last_total = current
                    state.usage += usage
                    asm.usage(usage)
            elif event == "task_started":
                state.open_turn = True
                turn.reset()
            elif event == "task_complete":
                state.open_turn = False
                if payload.get("error"):        # e.g. a usage limit: the turn ended on it
                    message = _error_message(payload["error"]) or "task failed"
                    state.add_error(message, repeat=True)
                    asm.system("task ended on an error", timestamp, error=message)
                if payload.get("last_agent_message"):
                    state.final_answer = str(payload["last_agent_message"])
            elif event == "user_message":
                # some files carry the prompt only here; others also as a response item
                if not turn.user_item:
                    text = str(payload.get("message") or "")
                    if not _injected(text):
                        asm.user(text + _event_images(payload), timestamp)
                        turn.user_event = True
            elif event in ("exec_command_end", "item_completed"):
                calls.exit_reported(payload, asm)
            elif event in ("error", "stream_error"):
                message = str(payload.get("message") or event)
                state.add_error(message)
                asm.system(event, timestamp, error=message)
            elif event == "turn_aborted":
                state.open_turn = False
                asm.answered("(no output: the turn was aborted)")
                message = f"turn aborted: {payload.get('reason', '')}".strip()
                state.add_error(message, repeat=True)      # each abort is its own event
                asm.system("turn aborted", timestamp, error=message)
        yield from asm.drain()
    asm.close()
    yield from asm.drain()
    if not saw_token_count:
        state.usage_known = False
        state.add_warning("no token_count events: token usage unknown")
    if state.open_turn:
        state.add_warning("the last turn has no task_complete: the session stopped mid-turn")


def parent_thread(meta: dict[str, Any]) -> str | None:
    """The thread that spawned this one (a sub-agent's rollout), from its session_meta."""
    if meta.get("parent_thread_id"):
        return str(meta["parent_thread_id"])
    source = meta.get("source")
    spawn = source.get("subagent") if isinstance(source, dict) else None
    spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return str(parent) if parent else None


class _Calls:
    """What the rollout said of calls beyond their own output: exit codes reported apart from
    it (exec_command_end, item_completed), and the commands still running after their first
    wait, whose exit a later write_stdin poll reports. A command's exit is counted once, on
    the call whose output carries it: the start that said "still running" never fails."""

    def __init__(self) -> None:
        self.exit_codes: dict[str, int] = {}       # reported before the call's output
        self.running: dict[str, str] = {}          # start call id -> session id
        self.session_exit: dict[str, int] = {}     # session id -> exit code reported by an event
        self.polls: dict[str, str] = {}            # write_stdin call id -> the session it polls

    def called(self, name: str, call_id: str, arguments: Any) -> None:
        if name == "write_stdin" and isinstance(arguments, dict) and arguments.get("session_id") is not None:
            _remember(self.polls, call_id, str(arguments["session_id"]))

    def exit_reported(self, payload: dict[str, Any], asm: StepAssembler) -> None:
        """An exec_command_end (≤ 0.126) or a CommandExecution item_completed (0.164) event."""
        item = payload.get("item") if payload.get("type") == "item_completed" else payload
        if not isinstance(item, dict) or (payload.get("type") == "item_completed"
                                          and item.get("type") != "CommandExecution"):
            return
        call_id = item.get("call_id") if payload.get("type") == "exec_command_end" else item.get("id")
        code = item.get("exit_code")
        if call_id is None or not isinstance(code, int):
            return
        call_id = str(call_id)
        if call_id in self.running:                # its exit belongs to the poll that sees it
            _remember(self.session_exit, self.running[call_id], code)
        elif not asm.update_call(call_id, exit_code=code, failed=code != 0 or None):
            _remember(self.exit_codes, call_id, code)

    def output(self, call_id: str, text: str | None, exit_code: int | None,
               failed: bool | None) -> tuple[int | None, bool | None]:
        """The verdict on a call from its output and what events reported of it."""
        session = _RUNNING.search(text[:2000].split("\nOutput:", 1)[0]) \
            if exit_code is None and isinstance(text, str) else None
        if session:                                 # still running: its exit comes on a poll
            _remember(self.running, call_id, session.group(1))
            if call_id in self.exit_codes:          # an event already said how it ended
                _remember(self.session_exit, session.group(1), self.exit_codes.pop(call_id))
            return None, False
        if call_id in self.exit_codes:              # structured: an event gave its exit code
            exit_code = self.exit_codes.pop(call_id)
            return exit_code, bool(failed) or exit_code != 0
        polled = self.polls.pop(call_id, None)
        if polled is not None and exit_code is not None and polled in self.session_exit:
            exit_code = self.session_exit.pop(polled)     # the event's code over the poll's text
            return exit_code, exit_code != 0
        return exit_code, failed


class _Turn:
    """Where the user's words of the current turn came from (item, event, or both)."""
    __slots__ = ("user_item", "user_event")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.user_item = False
        self.user_event = False


def _injected(text: str) -> bool:
    return text.lstrip().startswith(_INJECTED_USER)


def _event_images(payload: dict[str, Any]) -> str:
    images = [i for i in payload.get("images") or [] if isinstance(i, str)]
    return "".join("\n" + image_placeholder({"type": "input_image", "image_url": i}) for i in images)


def _rollout_item(payload: dict[str, Any], timestamp: str | None, asm: StepAssembler,
                  state: ReadState, turn: _Turn, calls: _Calls) -> None:
    item_type = payload.get("type")
    if item_type == "message":
        text = content_text(payload.get("content"))
        role = payload.get("role")
        if role == "assistant":
            asm.message(text, timestamp)
            # a commentary message (progress narration) is never the final answer
            if text and payload.get("phase") in (None, "final_answer", "final"):
                state.final_answer = text
        elif role == "user":
            if _injected(text):
                asm.system("injected context: " + text, timestamp)
            elif not turn.user_event:
                asm.user(text, timestamp)
                turn.user_item = True
        else:                                       # developer / system instructions
            asm.system(text, timestamp)
    elif item_type == "reasoning":
        parts = [content_text(payload.get("summary"), types=("summary_text",)),
                 content_text(payload.get("content"), types=("reasoning_text", "text"))]
        asm.reasoning("\n".join(part for part in parts if part), timestamp)
    elif item_type in ("function_call", "custom_tool_call"):
        arguments = parse_arguments(payload.get("arguments") if item_type == "function_call" else payload.get("input"))
        call_id, name = str(payload.get("call_id")), str(payload.get("name"))
        calls.called(name, call_id, arguments)
        asm.call(call_id, name, arguments, timestamp)
    elif item_type == "local_shell_call":
        asm.call(str(payload.get("call_id")), "local_shell", payload.get("action"), timestamp)
    elif item_type in ("function_call_output", "custom_tool_call_output"):
        call_id = str(payload.get("call_id"))
        output, exit_code, failed = codex_tool_output(payload.get("output"))
        exit_code, failed = calls.output(call_id, output, exit_code, failed)
        asm.result(call_id, output, exit_code=exit_code, failed=failed, timestamp=timestamp)
    elif isinstance(item_type, str) and item_type.endswith("_call"):
        # web_search_call and any other hosted call: one item holds the call and its outcome
        name = _SELF_CONTAINED_CALLS.get(item_type, item_type[: -len("_call")])
        status = payload.get("status")
        call_id = str(payload.get("id") or payload.get("call_id") or f"{item_type}@{timestamp}")
        arguments = payload.get("action", payload.get("arguments", payload.get("input")))
        asm.completed_call(call_id, name, arguments, str(status) if status else None,
                           failed=(status in _FAILED_STATUSES) if status else None,
                           timestamp=timestamp, kind="other")
    elif isinstance(item_type, str) and item_type.endswith("_call_output"):
        call_id = str(payload.get("call_id"))
        output, exit_code, failed = codex_tool_output(payload.get("output"))
        asm.result(call_id, output, exit_code=exit_code, failed=failed, timestamp=timestamp)


def codex_tool_output(raw: Any) -> tuple[str | None, int | None, bool | None]:
    """(text, exit code, failed) from a function_call_output, whichever shape Codex used:
    structured fields first, then the output's head.

    Shapes: a JSON string ``{"output", "metadata": {"exit_code"}}`` (shell, apply_patch), a
    ``{"content", "success"}`` object, plain text with "Process exited with code N"
    (exec_command, write_stdin), content blocks (code mode: "Script failed" / "Script
    completed"), or a refusal the harness wrote instead of running the tool ("write_stdin
    failed: …", "collab spawn failed: …", "unsupported call: …").
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
    if exit_code is not None:
        return text, exit_code, exit_code != 0
    if isinstance(success, bool):
        return text, None, not success
    if isinstance(text, str):
        header = text.split("\nOutput:", 1)[0][:2000]    # not the command's own output
        match = _EXIT_CODE.search(header)
        if match:
            exit_code = int(match.group(1))
            return text, exit_code, exit_code != 0
        if _FAILURE_TEXT.match(text):                   # anchored: the output's head
            return text, None, True
        if text.startswith(_SUCCESS_TEXT):
            return text, None, False
    return text, None, None


# -- what the generic reader (trajectories/reader.py) asks of Codex, through its Host ----------

_EXEC_TYPES = {"thread.started", "turn.started", "turn.completed", "turn.failed",
               "item.started", "item.updated", "item.completed"}
_ROLLOUT_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}


def sniff(record: dict[str, Any], weak: bool = False) -> str | None:
    """The Codex format a line of this shape comes from; ``weak``: the second pass, for an early
    rollout's bare items (their types are common words other hosts use too)."""
    kind = record.get("type")
    if weak:
        return "codex-rollout" if kind in LEGACY_ROLLOUT_ITEMS and "payload" not in record else None
    if kind in _EXEC_TYPES:
        return "codex-exec"
    if kind in _ROLLOUT_TYPES and "payload" in record:
        return "codex-rollout"
    return None


def read(fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
    reader = read_codex_exec if fmt == "codex-exec" else read_codex_rollout
    return reader(iter_records(path, state), state)


def rollout_parent(path: Path) -> str | None:
    """The parent thread a rollout's first line (its session_meta) names, read alone."""
    with open(path, "rb") as lines:
        first = lines.readline(1 << 24)
    try:
        record = json.loads(first)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "session_meta" or not isinstance(record.get("payload"), dict):
        return None
    return parent_thread(record["payload"])


# -- a rollout's relatives: the sub-agents it spawned and the thread that spawned it
_DAY_DIR = re.compile(r"\d{4}/\d{2}/\d{2}$")


def _session_dirs(path: Path, *days: int) -> list[Path]:
    """Where a rollout's relatives are: its own folder and, when the folder is Codex's
    ``sessions/YYYY/MM/DD``, the folders ``days`` away (a child spawned past midnight)."""
    folders = [path.parent]
    if not _DAY_DIR.search(path.parent.as_posix()):
        return folders
    sessions = path.parent.parent.parent.parent
    try:
        day = date(int(path.parent.parent.parent.name), int(path.parent.parent.name), int(path.parent.name))
    except ValueError:
        return folders
    for offset in days:
        other = day + timedelta(days=offset)
        folder = sessions / f"{other:%Y}" / f"{other:%m}" / f"{other:%d}"
        if folder.is_dir():
            folders.append(folder)
    return folders


def child_rollouts(path: Path, thread_id: str | None) -> list[Path]:
    """Rollouts beside this one (or in the next day's folder) whose session_meta names
    ``thread_id`` as their parent."""
    if not thread_id:
        return []
    return [candidate for folder in _session_dirs(path, 1) for candidate in sorted(folder.glob("rollout-*.jsonl"))
            if candidate != path and rollout_parent(candidate) == thread_id]


def parent_rollout(path: Path, parent_thread_id: str | None) -> Path | None:
    """A sub-agent rollout's parent: the rollout file named after the parent thread's id."""
    if not parent_thread_id:
        return None
    for folder in _session_dirs(path, -1):
        for candidate in sorted(folder.glob(f"rollout-*-{parent_thread_id}.jsonl")):
            return candidate
    return None
