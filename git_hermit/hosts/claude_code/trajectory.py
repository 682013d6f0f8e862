"""Readers for Claude Code: the ``claude -p --output-format stream-json`` stream and the
session file ``~/.claude/projects/<slug>/<session>.jsonl`` (entries linked by uuid/parentUuid).

Claude splits one model call into several lines (one per content block) that repeat its
usage, so usage is counted once per message id and the lines form one step (their tool results,
which may arrive between them, matched by ``tool_use_id``); a stream's last ``result`` line
holds the total: its ``modelUsage`` (every call of the session, sub-agents' too), else its
``usage`` (the main agent's calls of that query only). A session a background sub-agent woke
again prints one ``init`` … ``result`` per query: the last ``result`` is the session's answer
(empty or an error: none). A sub-agent's own transcript (every record ``isSidechain``) is read
as its conversation. A session file is read in file order along its ``parentUuid`` chain: a
record written before its parent (a tool result before its call) waits for it, a rewind's
abandoned branch is left out, a compaction boundary starts the chain again.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from git_hermit.model.rollout import Usage
from git_hermit.model.trajectory import ReadState, Step

from git_hermit.trajectories._stream import StepAssembler, as_int, content_text, iter_records

_EXIT_CODE = re.compile(r"^Exit code (-?\d+)")
# records that carry no conversation: skipped on purpose (progress ticks of running tools and
# sub-agents, title summaries, file snapshots for rewind, the prompt queue, metadata)
_SKIPPED_RECORDS = frozenset({"progress", "summary", "file-history-snapshot", "queue-operation",
                              "custom-title", "tag", "agent-name", "last-prompt", "pr-link",
                              # Claude Code 2.1.3xx bookkeeping: request shapes, cost, tool use
                              "attachment", "api-request", "api-request-shape", "api-request-blob",
                              "atis-latch", "tools-used", "cost-state"})
# user text the harness injects (not the human typing): a sub-agent's completion notice, a
# reminder, a slash command's echo
_INJECTED_PREFIXES = ("<task-notification>", "<system-reminder>", "<local-command-stdout>",
                      "<local-command-stderr>", "<command-name>", "<command-message>",
                      "<local-command-caveat>", "Caveat: The messages below were generated",
                      # the CLI's marker where the user stopped a turn (Esc), not words typed
                      "[Request interrupted by user")
_RECENT_MESSAGES = 256     # message ids remembered for usage dedup (bounded memory)
_KEEP_UUIDS = 4096         # uuids remembered to find a rewind's branch point
_WAIT_RECORDS = 64         # lines a result written before its call waits for that call


def claude_usage(raw: Any, cost_usd: Any = None) -> Usage:
    """Anthropic usage (input excludes cache reads/writes) as a Usage (input includes them)."""
    raw = raw if isinstance(raw, dict) else {}
    cache_read = as_int(raw.get("cache_read_input_tokens"))
    prompt = as_int(raw.get("input_tokens")) + as_int(raw.get("cache_creation_input_tokens")) + cache_read
    cost = float(cost_usd) if isinstance(cost_usd, (int, float)) and not isinstance(cost_usd, bool) else None
    return Usage(prompt, cache_read, as_int(raw.get("output_tokens")), 0, cost)


def claude_model_usage(raw: Any, cost_usd: Any = None) -> Usage | None:
    """A ``result`` line's ``modelUsage`` (camelCase, per model, the session so far) summed as a
    Usage (input includes cache reads/writes); None when the line has none."""
    if not isinstance(raw, dict) or not raw:
        return None
    total = Usage()
    for model in raw.values():
        model = model if isinstance(model, dict) else {}
        total += claude_usage({"input_tokens": model.get("inputTokens"),
                               "cache_creation_input_tokens": model.get("cacheCreationInputTokens"),
                               "cache_read_input_tokens": model.get("cacheReadInputTokens"),
                               "output_tokens": model.get("outputTokens")})
    return replace(total, cost_usd=claude_usage({}, cost_usd).cost_usd)


class _UsagePerMessage:
    """Sums usage over distinct message ids, keeping the newest snapshot of each; the ids of
    the last few hundred messages are remembered (main and sidechain records interleave)."""

    def __init__(self) -> None:
        self.closed = Usage()
        self.recent: OrderedDict[Any, Usage] = OrderedDict()
        self.anonymous = 0

    def see(self, message_id: Any, usage: Usage) -> bool:
        """Record ``usage`` for ``message_id``; True when it replaces an earlier snapshot."""
        if message_id is None:
            self.anonymous += 1
            message_id = ("anonymous", self.anonymous)
        repeat = message_id in self.recent
        self.recent[message_id] = usage
        self.recent.move_to_end(message_id)
        while len(self.recent) > _RECENT_MESSAGES:
            self.closed += self.recent.popitem(last=False)[1]
        return repeat

    @property
    def total(self) -> Usage:
        total = self.closed
        for usage in self.recent.values():
            total += usage
        return total


def read_claude_stream(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    yield from _read_claude(records, state, session_file=False)


def read_claude_session(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[Step]:
    yield from _read_claude(in_chain_order(records, state), state, session_file=True)


def in_chain_order(records: Iterable[dict[str, Any]], state: ReadState) -> Iterator[dict[str, Any]]:
    """The records in file order, except that a tool result written before the record of the
    call it answers (its ``parentUuid`` names a record not read yet) waits for that record
    and follows it, and so do records that descend from it meanwhile. A wait lasts at most
    ``_WAIT_RECORDS`` lines (then it is read there, a result of a call not seen); ``state.line_number``
    is each record's own line when it is yielded."""
    seen: OrderedDict[str, None] = OrderedDict()
    calls_seen: OrderedDict[str, None] = OrderedDict()   # tool_use ids read (a result for one waits not)
    waiting: dict[str, list[tuple[int, dict[str, Any]]]] = {}   # missing parent -> its records
    held: dict[str, str] = {}              # uuid of a waiting record -> the parent its group waits for
    by_call: dict[str, str] = {}           # tool_use id a waiting result answers -> that parent

    def release(key: str) -> Iterator[tuple[int, dict[str, Any]]]:
        for line, record in sorted(waiting.pop(key, ()), key=lambda pair: pair[0]):
            held.pop(str(record.get("uuid")), None)
            for call_id in _tool_result_ids(record):
                by_call.pop(call_id, None)
            yield from emit(line, record)

    def note(record: dict[str, Any]) -> None:
        """Remember a record read (bounded): its uuid, and the calls it makes."""
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            seen[uuid] = None
            if len(seen) > _KEEP_UUIDS:
                seen.popitem(last=False)
        if record.get("type") == "assistant":
            for call_id in _tool_use_ids(record):
                calls_seen[call_id] = None
            while len(calls_seen) > _KEEP_UUIDS:
                calls_seen.popitem(last=False)

    def emit(line: int, record: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        yield line, record
        note(record)
        if record.get("uuid") in waiting:
            yield from release(str(record["uuid"]))
        for call_id in _tool_use_ids(record):
            if call_id in by_call:
                yield from release(by_call.pop(call_id))

    for record in records:
        parent = record.get("parentUuid")
        if not waiting and (parent is None or parent in seen):    # the usual case: in order
            note(record)
            yield record
            continue
        line = state.line_number
        key: str | None = None
        if isinstance(parent, str) and parent not in seen:
            if parent in held:
                key = held[parent]                          # it descends from a waiting record
            elif (answered := _tool_result_ids(record)) and not any(c in calls_seen for c in answered):
                key = parent
                for call_id in answered:
                    by_call[call_id] = parent
        ready: list[tuple[int, dict[str, Any]]] = []
        if key is not None:
            waiting.setdefault(key, []).append((line, record))
            if isinstance(record.get("uuid"), str):
                held[record["uuid"]] = key
        else:
            ready.extend(emit(line, record))
        for stale in [k for k, group in waiting.items() if line - group[0][0] >= _WAIT_RECORDS]:
            ready.extend(release(stale))                    # its call never came: read it now
        for ready_line, ready_record in ready:
            state.line_number = ready_line
            yield ready_record
    for key in sorted(waiting, key=lambda k: waiting[k][0][0]):
        for ready_line, ready_record in list(release(key)):
            state.line_number = ready_line
            yield ready_record


def _tool_use_ids(record: dict[str, Any]) -> list[str]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [str(b.get("id")) for b in content or [] if isinstance(content, list) and isinstance(b, dict)
            and b.get("type") in ("tool_use", "server_tool_use")]


def _tool_result_ids(record: dict[str, Any]) -> list[str]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if record.get("type") != "user" or not isinstance(content, list):
        return []
    return [str(b.get("tool_use_id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _read_claude(records: Iterable[dict[str, Any]], state: ReadState, *, session_file: bool) -> Iterator[Step]:
    asm = StepAssembler(state)
    per_message = _UsagePerMessage()
    result_usage: Usage | None = None
    transcript_is_sidechain: bool | None = None     # decided by the first conversation record
    unknown: dict[str, int] = {}
    abandoned = iter(state.abandoned)
    skip = next(abandoned, None)
    announced: tuple[int, int] | None = None
    # the result lines read so far (a session woken again prints one per query; 2.1.317 may
    # print them together at the end) and how many `init`s began a query
    results: list[dict[str, Any]] = []
    queries = announced_results = 0
    for record in records:
        # a rewound branch: its tokens were spent (usage below), its turns are not the
        # conversation; one system step says where it was
        while skip is not None and state.line_number > skip[1]:
            skip = next(abandoned, None)
        in_branch = skip is not None and skip[0] <= state.line_number <= skip[1]
        if in_branch and skip is not None and announced != skip:
            announced = skip
            asm.close()
            asm.system(f"rewound: lines {skip[0]}–{skip[1]} are a branch the user abandoned "
                       "(skipped; the conversation goes on from the line before them)",
                       record.get("timestamp"))
        kind = record.get("type")
        timestamp = record.get("timestamp")
        state.session_id = record.get("session_id") or record.get("sessionId") or state.session_id
        if isinstance(record.get("version"), str):
            state.version = state.version or record["version"]
        if kind in _SKIPPED_RECORDS:
            continue
        # a subagent's own conversation (session: isSidechain; stream: parent_tool_use_id set):
        # its tokens count, its turns are not the main agent's steps — unless this file is
        # the sub-agent's own transcript (subagents/agent-*.jsonl: every record a sidechain)
        sidechain = bool(record.get("isSidechain") or record.get("parent_tool_use_id"))
        if transcript_is_sidechain is None and kind in ("user", "assistant"):
            transcript_is_sidechain = sidechain and session_file
            if transcript_is_sidechain:
                state.add_warning("sub-agent transcript (every record isSidechain): read as its own conversation")
        if transcript_is_sidechain:
            sidechain = False
        message = got if isinstance(got := record.get("message"), dict) else {}
        if in_branch:
            if kind == "assistant" and message.get("usage") is not None:
                per_message.see(message.get("id"), claude_usage(message["usage"]))
            continue
        if kind == "assistant":
            if not sidechain:
                state.model = message.get("model") or state.model
                _assistant(message, record, timestamp, asm, state)
            if message.get("usage") is not None:
                usage = claude_usage(message["usage"])
                per_message.see(message.get("id"), usage)
                if not sidechain:      # after the blocks: the step they opened gets it, once
                    asm.usage(usage, key=message.get("id"))
        elif sidechain:
            continue
        elif kind == "user":
            _user(message, record, timestamp, asm)
        elif kind == "system":
            if record.get("subtype") == "init":
                queries += 1
                if queries > 1:      # a background task's end woke the session: a new query
                    asm.close()
                    if announced_results < len(results):      # the query before it ended here
                        announced_results = len(results)
                        asm.system(_query_ended(len(results), results[-1], last=False), timestamp)
                    asm.system(f"query {queries}: the session woke again (e.g. a background task ended)",
                               timestamp)
            _system(record, timestamp, asm, state, session_file=session_file)
        elif kind == "result":
            state.open_turn = False
            if announced_results < len(results):   # an earlier query's: the session went on
                announced_results = len(results)
                asm.close()
                asm.system(_query_ended(len(results), results[-1], last=False), timestamp)
            results.append(record)
            # the last result line is the session's answer, even an empty one (a session woken
            # again ends on a second one); an error result's text is the CLI's message, no answer
            text = record.get("result")
            failed = bool(record.get("is_error")) or record.get("subtype") not in (None, "success")
            state.final_answer = text if isinstance(text, str) and text and not failed else None
            # Claude Code 2.1's result.usage counts only the main agent's calls of this query;
            # modelUsage counts the session's every call so far (sub-agents, earlier queries)
            whole = claude_model_usage(record.get("modelUsage"), record.get("total_cost_usd"))
            if whole is not None:
                result_usage = whole
            elif record.get("usage") is not None:
                result_usage = claude_usage(record["usage"], record.get("total_cost_usd"))
            if failed:
                detail = record.get("result") or "; ".join(map(str, record.get("errors") or []))
                state.add_error(f"{_outcome(record)}: {detail}".rstrip(": "))
        elif kind not in (None, "assistant", "user", "system", "result"):
            unknown[kind] = unknown.get(kind, 0) + 1
        yield from asm.drain()
    asm.close()
    if len(results) > 1:             # several queries: say which result is the session's answer
        asm.system(_query_ended(len(results), results[-1], last=True), results[-1].get("timestamp"))
    yield from asm.drain()
    for kind, count in unknown.items():
        state.add_warning(f"{count} record(s) of unknown type {kind!r} skipped")
    state.usage = result_usage if result_usage is not None else per_message.total
    state.usage_known = result_usage is not None or bool(per_message.recent) or per_message.closed != Usage()


def _outcome(result: dict[str, Any]) -> str:
    """A result line's outcome: its subtype, or for an error the CLI still labels ``success``
    (2.1.317 on an API error: ``is_error`` true, ``terminal_reason: api_error``) that reason."""
    subtype = result.get("subtype") or "error"
    if result.get("is_error") and subtype == "success":
        return str(result.get("terminal_reason") or "error")
    return str(subtype)


def _query_ended(number: int, result: dict[str, Any], *, last: bool) -> str:
    """A system step's text for one query's ``result`` line of a session woken again."""
    answered = result.get("result") and not result.get("is_error") and result.get("subtype") in (None, "success")
    said = ("not the session's answer: a later query's result is" if not last
            else "the session's answer" if answered else "the session's last result: no answer")
    return (f"query {number} ended ({_outcome(result)}, {result.get('num_turns')} turns, "
            f"{result.get('duration_ms')} ms): {result.get('result')!r} ({said})")


def abandoned_branches(path: Path) -> list[tuple[int, int]]:
    """Line ranges of a session file that a rewind abandoned, from one pass over its records.

    Claude Code appends a rewound conversation to the same file: the new prompt's
    ``parentUuid`` names an earlier record instead of the last one, and the lines between
    that record and the new prompt are the abandoned branch. Only the last few thousand uuids
    are remembered (bounded memory; rewinds go back a few turns).
    """
    last: str | None = None
    line_of: OrderedDict[str, int] = OrderedDict()
    parent_of: dict[str, str] = {}               # the same uuids' parents (or compaction bases)
    boundaries: set[str] = set()                 # compaction boundaries among them
    ranges: list[tuple[int, int]] = []
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            if b'"uuid"' not in raw:            # no uuid, no link: skip without parsing
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("isSidechain"):
                continue
            uuid, parent = record.get("uuid"), record.get("parentUuid")
            message = got if isinstance(got := record.get("message"), dict) else {}
            if (record.get("type") == "user" and parent and parent != last and parent in line_of
                    and not record.get("isMeta") and not record.get("isCompactSummary")
                    and not _has_tool_result(message)):
                first = line_of[parent] + 1
                if first < number and not _only_late_or_compacted(parent, first, line_of, parent_of, boundaries):
                    ranges.append((first, number - 1))
            if isinstance(uuid, str):
                last = uuid
                line_of[uuid] = number
                # a compaction boundary hangs off nothing (parentUuid null) but continues its
                # logical parent's conversation: a /compact echo chained to that parent is no rewind
                base = parent or (record.get("logicalParentUuid") if record.get("subtype") == "compact_boundary"
                                  else None)
                if isinstance(base, str):
                    parent_of[uuid] = base
                if record.get("subtype") == "compact_boundary":
                    boundaries.add(uuid)
                if len(line_of) > _KEEP_UUIDS:
                    old = line_of.popitem(last=False)[0]
                    parent_of.pop(old, None)
                    boundaries.discard(old)
    merged: list[tuple[int, int]] = []       # a later rewind may reach further back: merge
    for first, last_line in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last_line))
        else:
            merged.append((first, last_line))
    return merged


def _only_late_or_compacted(parent: str, first: int, line_of: OrderedDict[str, int],
                            parent_of: dict[str, str], boundaries: set[str]) -> bool:
    """True when every linked record from line ``first`` on is an ancestor of ``parent``
    written after it (a call recorded after its result) or continues ``parent``'s own
    conversation through a compaction boundary: then the prompt that names ``parent`` abandons
    nothing."""
    ancestors: set[str] = set()
    node: str | None = parent
    for _ in range(64):                       # bounded walks: rewinds go back a few turns
        node = parent_of.get(node) if node else None
        if node is None:
            break
        ancestors.add(node)
    for uuid, line in reversed(line_of.items()):
        if line < first:
            break
        if uuid in ancestors:
            continue
        step: str | None = uuid
        for _ in range(64):                   # up to a boundary that continues ``parent``
            if step is None or (step in boundaries and parent_of.get(step) == parent):
                break
            step = parent_of.get(step)
        if step is None or step not in boundaries:
            return False
    return True


def _has_tool_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def _assistant(message: dict[str, Any], record: dict[str, Any], timestamp: str | None,
               asm: StepAssembler, state: ReadState) -> None:
    content = message.get("content")
    group = message.get("id")          # one model message = one step, however many records
    api_error = bool(record.get("error") or record.get("isApiErrorMessage"))
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        block_type = block.get("type")
        if block_type == "thinking":
            asm.reasoning(str(block.get("thinking") or ""), timestamp, group=group)
        elif block_type == "text":
            text = str(block.get("text") or "")
            asm.message(text, timestamp, group=group)
            if not api_error:   # the CLI's own error text is no answer; an empty text ends on none
                state.final_answer = text or None
        elif block_type in ("tool_use", "server_tool_use"):
            asm.call(str(block.get("id")), str(block.get("name")), block.get("input"), timestamp,
                     group=group)
    if api_error:
        error = str(record.get("error") or content_text(content) or "API error")
        state.add_error(error)
        asm.agent_error(error)


def _user(message: dict[str, Any], record: dict[str, Any], timestamp: str | None,
          asm: StepAssembler) -> None:
    content = message.get("content")
    if record.get("isCompactSummary"):
        # the summary Claude writes when it compacts the context: not the human speaking
        asm.system("compaction summary: " + content_text(content), timestamp)
        return
    if isinstance(content, str):
        _user_text(content, record, timestamp, asm)
        return
    texts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "image":
            texts.append(content_text([block]))
        elif block.get("type") == "tool_result":
            output = content_text(block.get("content"))
            failed = bool(block.get("is_error"))
            match = _EXIT_CODE.match(output) if failed else None
            asm.result(str(block.get("tool_use_id")), output, failed=failed, timestamp=timestamp,
                       exit_code=int(match.group(1)) if match else None)
        elif block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
    if texts:
        _user_text("\n".join(texts), record, timestamp, asm)


def _user_text(text: str, record: dict[str, Any], timestamp: str | None, asm: StepAssembler) -> None:
    """A user record's text: the human's turn, or context the harness injected (a meta record,
    a sub-agent's task notification, a system reminder), marked as such."""
    stripped = text.lstrip()
    # isSynthetic: the stream's copy of a CLI nudge ("[Your previous response had no visible output…")
    if record.get("isMeta") or record.get("isSynthetic") or stripped.startswith(_INJECTED_PREFIXES):
        asm.system("injected context: " + text, timestamp)
    else:
        asm.user(text, timestamp)


def _system(record: dict[str, Any], timestamp: str | None, asm: StepAssembler, state: ReadState,
            *, session_file: bool) -> None:
    subtype = record.get("subtype") or ""
    if subtype == "init":
        state.open_turn = not session_file       # a stream ends with its `result` line
        state.model = record.get("model") or state.model
        tools = record.get("tools") or []
        asm.system(f"init: model {record.get('model')}, {len(tools)} tools, cwd {record.get('cwd')}", timestamp)
    elif subtype == "compact_boundary":
        meta = got if isinstance(got := record.get("compactMetadata"), dict) else {}
        before = f", {meta['preTokens']} tokens before" if meta.get("preTokens") is not None else ""
        asm.system(f"context compacted ({meta.get('trigger') or 'unknown trigger'}{before})", timestamp)
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


# -- what the generic reader (trajectories/reader.py) asks of Claude Code, through its Host -----

def sniff(record: dict[str, Any], weak: bool = False) -> str | None:
    """The Claude Code format a line of this shape comes from (a session file or stream-json)."""
    kind = record.get("type")
    if weak:
        return None
    if "parentUuid" in record or ("uuid" in record and "sessionId" in record) \
            or kind in ("summary", "file-history-snapshot"):
        return "claude-session"
    if kind in ("system", "assistant", "user", "result") and "session_id" in record:
        return "claude-stream"
    return None


def read(fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
    if fmt == "claude-session":
        state.abandoned = abandoned_branches(path)      # a pre-pass: rewinds point backwards
        return read_claude_session(iter_records(path, state), state)
    return read_claude_stream(iter_records(path, state), state)


# -- a session's relatives: its sub-agents' transcripts and, for one of those, its session
def subagent_files(path: Path, session_id: str | None) -> list[Path]:
    """Sub-agent transcripts of this session: ``<session>/subagents/**/agent-*.jsonl`` beside
    it (Claude Code 2.1+), or older flat ``agent-*.jsonl`` files carrying its sessionId."""
    if path.name.startswith("agent-"):
        return []
    found = sorted((path.parent / path.stem / "subagents").glob("**/agent-*.jsonl"))
    if session_id:
        found += [p for p in sorted(path.parent.glob("agent-*.jsonl")) if _first_session_id(p) == session_id]
    return found


def parent_session_file(path: Path, session_id: str | None) -> Path | None:
    """A sub-agent transcript's session file: ``<session>.jsonl`` beside the ``<session>/``
    folder whose ``subagents/`` holds it, else (older flat files) ``<sessionId>.jsonl``."""
    if not path.name.startswith("agent-"):
        return None
    for folder in path.parents:
        if folder.name == "subagents":
            session = folder.parent.with_name(folder.parent.name + ".jsonl")
            return session if session.is_file() else None
    flat = path.with_name(f"{session_id}.jsonl") if session_id else None
    return flat if flat is not None and flat.is_file() and flat != path else None


def _first_session_id(path: Path) -> str | None:
    with open(path, "rb") as lines:
        for raw in lines:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("sessionId"):
                return str(record["sessionId"])
    return None
