"""Trajectory readers on real public session files (tests/fixtures/trajectories/real/, sources
in its SOURCES.md): one test per case of issue 12, each counted against the raw records by hand.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from git_hermit.model.rollout import Usage
from git_hermit.trajectories import explode, iter_steps, summarize
from git_hermit.hosts.claude_code.trajectory import claude_usage
from support.trajectories_real_helpers import _web_search_rollout, write_jsonl  # noqa: F401

REAL = Path(__file__).parent / "fixtures" / "trajectories" / "real"
RECORDED = Path(__file__).parent / "fixtures" / "trajectories" / "recorded"
SHAPES = Path(__file__).parent / "fixtures" / "trajectories" / "shapes"     # written by its make.py


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_use_ids(rows: list[dict]) -> list[str]:
    return [block["id"] for r in rows if r.get("type") == "assistant"
            for block in r["message"]["content"] if block.get("type") == "tool_use"]


# -- Claude Code ---------------------------------------------------------------------------

def test_claude_parallel_calls_stay_in_their_message_step():
    """#1: msg_01P5CV… is written as three tool_use records with results in between
    (A, B, result A, C, result B, result C): one step, each call with its own result."""
    path = REAL / "claude-2.1.39-parallel-calls.jsonl"
    raw = records(path)
    steps = list(iter_steps(path))
    assert not [s for s in steps if s.source == "tool"]          # no stray "unknown" steps
    calls = [c for s in steps for c in s.tool_calls]
    assert [c.call_id for c in calls] == tool_use_ids(raw)
    results = {b["tool_use_id"]: b for r in raw if r.get("type") == "user"
               and isinstance(r["message"]["content"], list)
               for b in r["message"]["content"] if b.get("type") == "tool_result"}
    assert all(c.output is not None and c.name != "unknown" for c in calls)
    assert {c.call_id for c in calls} == set(results)
    # one agent step per distinct message id
    message_ids = list(dict.fromkeys(r["message"]["id"] for r in raw if r.get("type") == "assistant"))
    agent_steps = [s for s in steps if s.source == "agent"]
    assert len(agent_steps) == len(message_ids)
    parallel = next(s for s in agent_steps if any(c.call_id == "toolu_01CBevthT8P1Xo9f9tfV53RS" for c in s.tool_calls))
    assert [c.call_id for c in parallel.tool_calls] == [
        "toolu_01CBevthT8P1Xo9f9tfV53RS", "toolu_017RojS4MxMsfVkFtTmifv6N", "toolu_012w5qBPfp5aDXt8TFhjv8w5"]


@pytest.mark.parametrize("name", ["claude-2.1.39-parallel-calls.jsonl", "claude-2.1.38-short.jsonl",
                                  "claude-2.1.39-subagent-agent-aac57f5.jsonl"])
def test_claude_step_usage_counts_each_message_once(name):
    """#2: the steps' usage adds up to the per-message total (the last snapshot of each id)."""
    path = REAL / name
    last_by_id: dict[str, Usage] = {}
    for r in records(path):
        if r.get("type") == "assistant" and r["message"].get("usage"):
            last_by_id[r["message"]["id"]] = claude_usage(r["message"]["usage"])
    by_hand = sum(last_by_id.values(), Usage())
    per_step = sum((s.usage or Usage() for s in iter_steps(path)), Usage())
    assert per_step == by_hand == summarize(path).usage


def test_claude_subagent_transcript_is_read():
    """#3: a subagents/agent-*.jsonl file (every record isSidechain) is a conversation."""
    path = REAL / "claude-2.1.39-subagent-agent-aac57f5.jsonl"
    raw = records(path)
    assert all(r.get("isSidechain") for r in raw if "isSidechain" in r)
    summary = summarize(path)
    assert summary.tool_calls == len(tool_use_ids(raw)) > 0
    assert summary.steps > 0 and summary.user_turns >= 1
    assert any("sub-agent transcript" in w for w in summary.warnings)
    assert summary.model == next(r["message"]["model"] for r in raw if r.get("type") == "assistant")


def test_claude_compaction_summary_and_notifications_are_not_user_turns():
    """#4: the isCompactSummary record and an injected <task-notification> are system steps."""
    compaction = list(iter_steps(REAL / "claude-2.1.39-compaction.jsonl"))
    summary_text = next(r for r in records(REAL / "claude-2.1.39-compaction.jsonl") if r.get("isCompactSummary"))
    head = summary_text["message"]["content"][:40] if isinstance(summary_text["message"]["content"], str) \
        else summary_text["message"]["content"][0]["text"][:40]
    assert not [s for s in compaction if s.source == "user" and s.message.startswith(head)]
    assert [s for s in compaction if s.source == "system" and s.message.startswith("compaction summary: " + head)]
    parallel = list(iter_steps(REAL / "claude-2.1.39-parallel-calls.jsonl"))
    assert parallel[0].source == "system" and "<task-notification>" in parallel[0].message
    assert summarize(REAL / "claude-2.1.39-parallel-calls.jsonl").user_turns == 0


def test_claude_progress_skipped_knowingly_and_rewound_branch_left_out(tmp_path):
    """#5: progress records are skipped without a word; an unknown record type is warned
    about; a prompt whose parentUuid is an earlier record leaves the abandoned branch out of
    the conversation (one system step says which lines), its tokens still counted."""
    path = REAL / "claude-2.1.39-parallel-calls.jsonl"
    raw = records(path)
    assert sum(r.get("type") == "progress" for r in raw) > 40
    assert summarize(path).warnings == ()
    odd = write_jsonl(tmp_path / "odd.jsonl", raw[:5] + [{"type": "brand-new-kind", "uuid": "x", "sessionId": "s"}])
    assert any("brand-new-kind" in w for w in summarize(odd).warnings)
    rewind = REAL / "claude-code-log-dag-compact-after-rewind.jsonl"
    steps = list(iter_steps(rewind))
    texts = [s.message for s in steps]
    assert "First attempt" not in texts and "First answer" not in texts
    marker = next(s for s in steps if s.message.startswith("rewound"))
    assert "lines 3–4" in marker.message
    assert texts[marker.index - 1] == "Ready" and texts[marker.index + 1] == "Second attempt"
    assert summarize(rewind).usage.output_tokens == 5 * 5          # the abandoned answer's too


# -- Codex ---------------------------------------------------------------------------------


def test_codex_web_search_call_is_a_tool_call(tmp_path):
    """#6: a response_item web_search_call is a tool call (kind other)."""
    path = _web_search_rollout(tmp_path)
    raw = records(path)
    expected = sum(r["payload"].get("type", "").endswith("_call") for r in raw if r["type"] == "response_item")
    calls = [c for s in iter_steps(path) for c in s.tool_calls]
    assert len(calls) == expected == summarize(path).tool_calls
    search = next(c for c in calls if c.name == "web_search")
    assert (search.kind, search.output, search.failed) == ("other", "completed", False)


def _recorded_rollout() -> list[dict]:
    return records(RECORDED / "codex-0.164.0-rollout.jsonl")


@pytest.mark.parametrize("text", [
    "exec_command failed in sandbox: bwrap: Can't mount proc on /newroot/proc",
    "sandbox denied write access to /etc/hosts",
    "patch rejected by user",
    "execution error: Io(Os { code: 2, kind: NotFound })",
])
def test_codex_failures_reported_as_text_are_failed_calls(text, tmp_path):
    """#7: the recorded rollout's failing call, its output replaced by each plain-text failure."""
    rows = _recorded_rollout()
    output = next(r for r in rows if r["type"] == "response_item" and r["payload"].get("type") == "function_call_output")
    output["payload"]["output"] = text
    summary = summarize(write_jsonl(tmp_path / "r.jsonl", rows))
    assert summary.failed_tool_calls == 2          # this one, and `cat missing.txt` (exit 1)


def test_codex_exec_command_end_exit_code_fails_the_call(tmp_path):
    """#7: a non-zero exit code reported only in an exec_command_end event."""
    rows = _recorded_rollout()
    first = next(r for r in rows if r["type"] == "response_item" and r["payload"].get("type") == "function_call_output")
    first["payload"]["output"] = "Output:\nsomething"           # no exit code in the text
    end = {"timestamp": first["timestamp"], "type": "event_msg",
           "payload": {"type": "exec_command_end", "call_id": first["payload"]["call_id"], "exit_code": 3}}
    rows.insert(rows.index(first), end)
    calls = [c for s in iter_steps(write_jsonl(tmp_path / "r.jsonl", rows)) for c in s.tool_calls]
    hit = next(c for c in calls if c.call_id == first["payload"]["call_id"])
    assert (hit.exit_code, hit.failed) == (3, True)


def test_codex_unfinished_turn_is_truncated_and_commentary_is_not_the_answer():
    """#8: a rollout shaped as the small real one stops after a function_call with no output and
    no task_complete; its only assistant message is commentary."""
    path = SHAPES / "codex-0.104-cut-short.jsonl"
    raw = records(path)
    assert not any(r["payload"].get("type") == "task_complete" for r in raw)
    assert [r["payload"].get("phase") for r in raw if r["payload"].get("role") == "assistant"] == ["commentary"]
    summary = summarize(path)
    assert summary.truncated
    assert summary.final_answer is None
    assert any("mid-turn" in w or "mid-call" in w for w in summary.warnings)


def test_codex_final_answer_skips_commentary_in_excerpt(tmp_path):
    """#8 on a committed excerpt: a commentary message after the final one is not the answer."""
    path = _web_search_rollout(tmp_path)
    phases = [r["payload"].get("phase") for r in records(path) if r["payload"].get("role") == "assistant"]
    assert "commentary" in phases
    assert summarize(path).final_answer is None


def test_codex_user_message_event_and_missing_token_count(tmp_path):
    """#9: prompts carried only by event_msg/user_message are read; without token_count the
    usage is unknown (warned), not 0."""
    rows = [r for r in _recorded_rollout() if not (r["type"] == "response_item" and r["payload"].get("role") == "user")
            and r["payload"].get("type") != "token_count"]
    task = next(i for i, r in enumerate(rows) if r["payload"].get("type") == "task_started")
    rows.insert(task + 1, {"timestamp": rows[task]["timestamp"], "type": "event_msg",
                           "payload": {"type": "user_message", "message": "Create out.txt containing hi using the shell.",
                                       "images": []}})
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    steps = list(iter_steps(path))
    assert [s.message for s in steps if s.source == "user"] == ["Create out.txt containing hi using the shell."]
    summary = summarize(path)
    assert not summary.usage_known
    assert any("token usage unknown" in w for w in summary.warnings)


def test_codex_user_message_event_is_not_a_second_user_turn():
    """#9 guard: files carrying the prompt both as an item and as an event count it once."""
    path = SHAPES / "codex-0.104-118-calls.jsonl"
    raw = records(path)
    items = sum(r["payload"].get("role") == "user" for r in raw if r["type"] == "response_item")
    assert sum(r["payload"].get("type") == "user_message" for r in raw if r["type"] == "event_msg") == 1
    assert sum(s.source == "user" for s in iter_steps(path)) == items == summarize(path).user_turns


def test_codex_environment_context_is_not_a_user_turn_and_aborts_each_recorded(tmp_path):
    """#10: the real 0.164 rollout's <environment_context> message is context; two
    turn_aborted events are two errors."""
    path = RECORDED / "codex-0.164.0-rollout.jsonl"
    steps = list(iter_steps(path))
    assert [s.message for s in steps if s.source == "user"] == ["Create out.txt containing hi using the shell."]
    assert any(s.source == "system" and "<environment_context>" in s.message for s in steps)
    rows = _recorded_rollout()
    abort = {"timestamp": rows[-1]["timestamp"], "type": "event_msg",
             "payload": {"type": "turn_aborted", "reason": "interrupted"}}
    summary = summarize(write_jsonl(tmp_path / "r.jsonl", rows + [abort, abort]))
    assert summary.errors == ("turn aborted: interrupted", "turn aborted: interrupted")


# -- Pi and all ----------------------------------------------------------------------------

def test_pi_compaction_kept_times_iso_and_aborted_calls_not_run():
    """#11: the compaction entry is a step; step times are the entries' ISO timestamps."""
    path = REAL / "pi-session-v1-compaction.jsonl"
    raw = records(path)
    steps = list(iter_steps(path))
    compaction = next(r for r in raw if r["type"] == "compaction")
    kept = [s for s in steps if s.message.startswith("context compaction")]
    assert len(kept) == 1 and compaction["summary"][:50] in kept[0].message
    assert kept[0].timestamp == compaction["timestamp"]
    message_times = {r["timestamp"] for r in raw if r["type"] == "message"} | {compaction["timestamp"]}
    assert all(s.timestamp in message_times for s in steps)
    summary = summarize(path)
    assert summary.model == "claude-opus-4-5"
    assert not summary.truncated


def test_pi_usage_reasoning_is_read(tmp_path):
    """#11: usage.reasoning (and reasoningTokens) reach the totals."""
    rows = records(RECORDED / "pi-0.73.1-session.jsonl")
    for row in rows:
        usage = (row.get("message") or {}).get("usage")
        if usage:
            usage["reasoning"] = 5
    n = sum(1 for row in rows if (row.get("message") or {}).get("usage"))
    assert summarize(write_jsonl(tmp_path / "p.jsonl", rows)).usage.reasoning_tokens == 5 * n > 0


def test_images_leave_a_placeholder(tmp_path):
    """#12: an image in a tool result (Claude) or user content (Pi) is a placeholder."""
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    rows = records(REAL / "claude-2.1.38-short.jsonl")
    result = next(r for r in rows if r.get("type") == "user" and isinstance(r["message"]["content"], list)
                  and r["message"]["content"][0].get("type") == "tool_result")
    result["message"]["content"][0]["content"] = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]
    calls = [c for s in iter_steps(write_jsonl(tmp_path / "c.jsonl", rows)) for c in s.tool_calls]
    assert "[image: image/png, 100 bytes]" in [c.output for c in calls]
    pi = records(RECORDED / "pi-0.73.1-session.jsonl")
    user = next(r for r in pi if (r.get("message") or {}).get("role") == "user")
    user["message"]["content"] = [{"type": "text", "text": "look"}, {"type": "image", "data": png, "mimeType": "image/png"}]
    first = next(s for s in iter_steps(write_jsonl(tmp_path / "p.jsonl", pi)) if s.source == "user")
    assert first.message == "look\n[image: image/png, 100 bytes]"


def test_malformed_line_is_warned_with_its_number_and_empty_file_is_empty(tmp_path):
    """#13: a bad line names its line number; an empty file is an empty trajectory."""
    lines = (REAL / "claude-2.1.38-short.jsonl").read_text().splitlines()
    lines.insert(3, "{not json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    summary = summarize(bad)
    assert summary.malformed_lines == 1
    assert "line 4: not valid JSON (skipped)" in summary.warnings
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    summary = summarize(empty)
    assert (summary.steps, summary.format, summary.usage_known) == (0, "empty", False)
    assert summary.warnings == ("empty file: no records",)


def test_explode_names_sort_in_step_order_past_999(tmp_path):
    """#13: 1001 steps: every name has the same zero-padded width, so a sort is step order."""
    rows = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z"}]
    for n in range(1001):
        rows.append({"type": "message", "timestamp": "2026-01-01T00:00:00.000Z",
                     "message": {"role": "user", "content": f"turn {n}"}})
    written = explode(write_jsonl(tmp_path / "long.jsonl", rows), tmp_path / "steps")
    names = sorted(p.name for p in written if p.name != "INDEX.md")
    assert names[0] == "0000-user.md" and names[-1] == "1000-user.md"
    assert [int(n.split("-")[0]) for n in names] == list(range(1001))
    index = (tmp_path / "steps" / "INDEX.md").read_text()
    assert "[0999-user.md](0999-user.md)" in index and "[1000-user.md](1000-user.md)" in index
