"""Trajectory readers: each host format on small hand-written fixtures (field-level), bad and
cut lines, explode's files, ATIF output, and Codex rollout files shaped as real ones (fixtures/trajectories/shapes/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_hermit.errors import InputError
from git_hermit.model.rollout import Usage
from git_hermit.trajectories import (
    Step, detect_format, explode, iter_steps, summarize, to_atif, tool_kind,
)
from support.trajectories_helpers import FIXTURES, RECORDED, SCRIPTED_ANSWER, calls_of, check_scripted_session, records  # noqa: F401

HOST_FIXTURES = Path(__file__).parent / "fixtures" / "hosts"
# Codex 0.104 rollouts with the shapes of real sanitised ones (written by shapes/make.py: the real
# files' licence is unknown, so they are not in the repository)
SHAPES = FIXTURES / "shapes"
SMALL, MEDIUM, LARGE = (SHAPES / f"codex-0.104-{n}.jsonl" for n in ("cut-short", "mcp-calls", "118-calls"))


def steps_of(name: str) -> list[Step]:
    return list(iter_steps(FIXTURES / name))


# -- format detection and tool kinds ---------------------------------------------------------

@pytest.mark.parametrize("name, fmt", [
    ("codex-exec.jsonl", "codex-exec"), ("codex-rollout.jsonl", "codex-rollout"),
    ("claude-stream.jsonl", "claude-stream"), ("claude-session.jsonl", "claude-session"),
    ("pi.jsonl", "pi"), ("harbor-trial", "atif"), ("harbor-trial/agent/trajectory.json", "atif"),
])
def test_detect_format(name, fmt):
    assert detect_format(FIXTURES / name) == fmt


def test_detect_format_rejects_unknown_and_missing(tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(InputError, match="cannot tell"):
        detect_format(other)
    with pytest.raises(InputError, match="not found"):
        summarize(tmp_path / "absent.jsonl")
    with pytest.raises(InputError, match="no trajectory.json"):
        summarize(tmp_path)
    with pytest.raises(InputError, match="unknown trajectory format"):
        summarize(FIXTURES / "pi.jsonl", "nope")


@pytest.mark.parametrize("name, kind", [
    ("exec_command", "shell"), ("Bash", "shell"), ("bash", "shell"), ("apply_patch", "patch"),
    ("Read", "read"), ("Write", "write"), ("Edit", "write"), ("MultiEdit", "write"),
    ("NotebookEdit", "write"), ("mcp__docs__search", "mcp"), ("Grep", "other"), ("Glob", "other"),
])
def test_tool_kind_follows_the_seed_table(name, kind):
    assert tool_kind(name) == kind


# -- Codex ---------------------------------------------------------------------------------

def test_codex_exec_steps_and_calls():
    steps = steps_of("codex-exec.jsonl")
    assert [s.source for s in steps] == ["system", "agent", "agent", "agent", "agent", "agent", "agent"]
    assert steps[0].message.startswith("Hook trust was bypassed")
    assert steps[1].reasoning == "**Planning the file creation**"
    calls = calls_of(steps)
    assert [(c.call_id, c.name, c.kind) for c in calls] == [
        ("item_2", "exec_command", "shell"), ("item_3", "exec_command", "shell"),
        ("item_4", "apply_patch", "patch"), ("item_5", "mcp__docs__search", "mcp")]
    ok, bad, patch, mcp = calls
    assert ok.input == {"command": "/bin/bash -lc 'echo hi > out.txt'"}
    assert (ok.exit_code, ok.failed, ok.output) == (0, False, "")
    assert (bad.exit_code, bad.failed) == (1, True)
    assert bad.output == "cat: missing.txt: No such file or directory\n"
    assert patch.output == "add /ws/notes.md" and patch.failed is False
    assert mcp.input == {"q": "hi"} and mcp.output == "found 2 pages" and mcp.failed is False
    # each turn's usage sits on its last step
    assert steps[5].message == "Created out.txt." and steps[5].usage == Usage(2000, 500, 120, 40)
    assert steps[6].usage == Usage(2500, 1800, 30, 0)


def test_codex_exec_summary_sums_turn_usage():
    summary = summarize(FIXTURES / "codex-exec.jsonl")
    assert summary.format == "codex-exec"
    assert summary.usage == Usage(4500, 2300, 150, 40)
    assert summary.final_answer == "Done: out.txt contains hi."
    assert (summary.steps, summary.tool_calls, summary.failed_tool_calls) == (7, 4, 1)
    assert summary.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert summary.warnings == ("Hook trust was bypassed by --dangerously-bypass-hook-trust",)
    assert summary.errors == () and not summary.truncated and summary.malformed_lines == 0


def test_codex_exec_failed_turn():
    steps = steps_of("codex-exec-failed.jsonl")
    summary = summarize(FIXTURES / "codex-exec-failed.jsonl")
    assert summary.errors == ("stream disconnected before completion: connection reset",)
    assert summary.final_answer is None and summary.usage == Usage()
    make = calls_of(steps)[0]       # started, never completed
    assert (make.name, make.input, make.output, make.failed) == ("exec_command", {"command": "make"}, None, None)
    assert steps[-1].error == "stream disconnected before completion: connection reset"


def test_codex_rollout_fixture():
    steps = steps_of("codex-rollout.jsonl")
    assert [s.source for s in steps] == ["system", "user", "agent", "agent", "system", "agent", "system", "agent"]
    assert steps[1].message == "Fix the failing test."
    first, patch, rerun = calls_of(steps)
    assert first.input == {"cmd": "pytest -q"} and first.kind == "shell"
    assert (first.exit_code, first.failed) == (1, True)
    assert "FAILED test_x.py::test_add" in first.output
    assert patch.kind == "patch" and patch.input.startswith("*** Begin Patch")
    assert (patch.exit_code, patch.failed) == (0, False)
    assert patch.output == "Success. Updated the following files:\nM calc.py\n"
    assert (rerun.exit_code, rerun.failed) == (0, False)
    # the hook's developer message came between the patch call and its output: kept after that step
    assert steps[4].message.startswith("PostToolUse hook additional context")
    assert steps[6].error == "unexpected status 429 Too Many Requests; retrying"
    # a repeated token_count is counted once; each call carries its own last_token_usage
    assert [s.usage for s in steps if s.usage] == [Usage(1000, 0, 50, 20), Usage(1200, 900, 80, 0),
                                                  Usage(1300, 1100, 30, 0)]
    summary = summarize(FIXTURES / "codex-rollout.jsonl")
    assert summary.usage == Usage(3500, 2000, 160, 20)      # the last total, not a sum
    assert summary.model == "scripted-model"
    assert summary.session_id == "019ad000-0000-7000-8000-00000000abcd"
    assert summary.final_answer == "Fixed: add() now adds; 1 test passes."
    assert summary.failed_tool_calls == 1


# -- Claude Code ---------------------------------------------------------------------------

def test_claude_stream_steps():
    steps = steps_of("claude-stream.jsonl")
    sources = [s.source for s in steps]
    assert sources == ["system"] * 3 + ["agent", "system", "system", "agent", "agent", "agent", "agent"]
    assert steps[1].message == "hook SessionStart:startup: success (exit 0)"
    assert steps[2].message == "init: model claude-opus-5-5, 7 tools, cwd /ws"
    first = steps[3]
    assert first.reasoning == "The user wants out.txt with hi."
    assert first.message == "I'll create the file."
    # the three lines of msg_01 repeat its usage: the last snapshot counts, once
    assert first.usage == Usage(1010, 0, 40, 0)
    # hook runs between the call and its result follow the step, not split it
    assert steps[4].message == "hook started: PreToolUse:Bash" and steps[4].error is None
    bash, read, failing, edit, mcp = calls_of(steps)
    assert (bash.kind, bash.input["command"], bash.output, bash.failed) == ("shell", "echo hi > out.txt", "", False)
    assert (read.kind, read.output) == ("read", "     1\thi\n")
    assert (failing.failed, failing.exit_code) == (True, 1)
    assert failing.output.endswith("No such file or directory")
    assert (edit.kind, mcp.kind, mcp.output) == ("write", "mcp", "found 2 pages")
    assert steps[8].tool_calls == (edit, mcp)
    assert steps[-1].message == "Created out.txt containing hi."


def test_claude_stream_summary_uses_result():
    summary = summarize(FIXTURES / "claude-stream.jsonl")
    assert summary.usage == Usage(40 + 1020 + 4300, 4300, 150, 0, 0.0123)
    assert summary.final_answer == "Created out.txt containing hi."
    assert summary.model == "claude-opus-5-5"
    assert summary.session_id == "5e551on0-0000-4000-8000-00000000c1a0"
    assert (summary.tool_calls, summary.failed_tool_calls) == (5, 1)
    assert summary.errors == () and not summary.truncated   # hook events are not errors


def test_claude_stream_without_result_is_truncated_and_sums_messages(tmp_path):
    lines = (FIXTURES / "claude-stream.jsonl").read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-1]))
    summary = summarize(cut, "claude-stream")
    assert summary.truncated
    # per message id, the last usage snapshot (computed here from the fixture itself)
    last: dict[str, dict] = {}
    for record in records(cut):
        if record["type"] == "assistant":
            last[record["message"]["id"]] = record["message"]["usage"]
    expected = Usage()
    for usage in last.values():
        expected += Usage(usage["input_tokens"] + usage["cache_creation_input_tokens"]
                          + usage["cache_read_input_tokens"], usage["cache_read_input_tokens"],
                          usage["output_tokens"])
    assert summary.usage == expected


def test_claude_stream_error_result(tmp_path):
    path = tmp_path / "err.jsonl"
    lines = (FIXTURES / "claude-stream.jsonl").read_text().splitlines()[:4]
    lines.append(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True,
                             "session_id": "s", "errors": ["max turns reached"], "usage": {}}))
    path.write_text("\n".join(lines) + "\n")
    assert summarize(path).errors == ("error_max_turns: max turns reached",)


def test_claude_session_file():
    steps = steps_of("claude-session.jsonl")
    assert [s.source for s in steps] == ["user", "agent", "system", "agent"]
    assert steps[0].message == "Create out.txt containing hi."
    assert steps[0].timestamp == "2026-11-30T05:00:00.000Z"
    call = steps[1].tool_calls[0]
    assert (call.name, call.kind, call.failed, call.exit_code) == ("Bash", "shell", True, 1)
    assert all("subagent" not in s.message for s in steps)          # sidechain turns skipped
    summary = summarize(FIXTURES / "claude-session.jsonl")
    # ...but their tokens count: msg_a (last snapshot) + sidechain + msg_b
    assert summary.usage == Usage(510 + 100 + 512, 500, 30 + 10 + 9, 0)
    assert summary.session_id == "c1a0de00-0000-4000-8000-000000005e55"
    assert summary.final_answer == "Done: out.txt contains hi."
    assert not summary.truncated


# -- Pi and ATIF ---------------------------------------------------------------------------

def test_pi_stream():
    steps = steps_of("pi.jsonl")
    assert [s.source for s in steps] == ["user", "agent", "agent", "agent"]
    assert steps[1].reasoning == "Use the bash tool." and steps[1].message == "I'll write the file."
    ok, bad = calls_of(steps)
    assert (ok.name, ok.kind, ok.input, ok.output, ok.failed) == (
        "bash", "shell", {"command": "echo hi > out.txt"}, "(no output)", False)
    assert (bad.failed, bad.exit_code) == (True, 1)
    summary = summarize(FIXTURES / "pi.jsonl")
    assert (summary.usage.input_tokens, summary.usage.cached_input_tokens, summary.usage.output_tokens) == (
        100 + 130 + 155, 0 + 120 + 150, 20 + 15 + 8)
    assert summary.usage.cost_usd == pytest.approx(0.0006)
    assert summary.final_answer == "Done: out.txt contains hi."
    assert summary.model == "scripted-model" and summary.session_id.startswith("9f1e0000")
    assert not summary.truncated


def test_atif_trial_dir():
    steps = list(iter_steps(FIXTURES / "harbor-trial"))
    assert [s.source for s in steps] == ["system", "user", "agent", "agent"]
    assert steps[2].reasoning == "Write it with the shell."
    shell, patch = steps[2].tool_calls
    assert (shell.kind, shell.input, shell.output) == ("shell", {"cmd": "echo hi > out.txt"}, "Process exited with code 0")
    assert (patch.kind, patch.output) == ("patch", "Success.")
    assert steps[2].usage == Usage(1000, 200, 50, 0)
    summary = summarize(FIXTURES / "harbor-trial")
    assert summary.usage == Usage(2100, 1200, 60, 0, 0.002)
    assert (summary.session_id, summary.model) == ("atif-session-1", "gpt-5.3-codex")
    assert summary.final_answer == "Done: out.txt contains hi."


@pytest.mark.parametrize("name", ["codex-exec.jsonl", "codex-rollout.jsonl", "claude-stream.jsonl", "pi.jsonl"])
def test_to_atif_round_trips(name, tmp_path):
    document = to_atif(FIXTURES / name)
    assert document["schema_version"].startswith("ATIF-v")
    assert [s["step_id"] for s in document["steps"]] == list(range(1, len(document["steps"]) + 1))
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(document))
    original, again = list(iter_steps(FIXTURES / name)), list(iter_steps(path))
    assert [(c.call_id, c.name, c.output) for c in calls_of(again)] == [
        (c.call_id, c.name, c.output) for c in calls_of(original)]
    assert summarize(path).usage.input_tokens == summarize(FIXTURES / name).usage.input_tokens


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["codex-exec.jsonl", "codex-rollout.jsonl", "claude-stream.jsonl",
                                  "claude-session.jsonl", "pi.jsonl"])
def test_malformed_and_cut_lines_are_counted_not_fatal(name, tmp_path):
    lines = (FIXTURES / name).read_text().splitlines(keepends=True)
    clean = summarize(FIXTURES / name)
    damaged = tmp_path / name
    garbage = ["this is not json\n", "[1, 2]\n", "\xff\xfe{\n"]
    damaged.write_text(lines[0] + "".join(garbage) + "".join(lines[1:]) + lines[-1][: len(lines[-1]) // 2],
                       encoding="latin-1")
    summary = summarize(damaged, clean.format)
    assert summary.malformed_lines == len(garbage) + 1
    assert summary.truncated
    assert summary.steps == clean.steps
    assert summary.tool_calls == clean.tool_calls


def test_cut_atif_document_is_counted(tmp_path):
    text = (FIXTURES / "harbor-trial" / "agent" / "trajectory.json").read_text()
    cut = tmp_path / "trajectory.json"
    cut.write_text(text[: len(text) // 2])
    summary = summarize(cut, "atif")
    assert (summary.malformed_lines, summary.truncated, summary.steps) == (1, True, 0)


# -- explode -------------------------------------------------------------------------------

def test_explode_writes_one_file_per_step_and_an_index(tmp_path):
    dest = tmp_path / "steps"
    dest.mkdir()
    (dest / "042-agent-stale.md").write_text("left over")
    files = explode(FIXTURES / "claude-stream.jsonl", dest)
    names = [f.name for f in files]
    assert names[:4] == ["000-system.md", "001-system.md", "002-system.md", "003-agent-shell.md"]
    assert "008-agent-write-mcp.md" in names and names[-1] == "INDEX.md"
    assert sorted(p.name for p in dest.iterdir()) == sorted(names)        # stale file removed
    failing = (dest / "007-agent-shell.md").read_text()
    assert "## Tool call 1: Bash (shell) — FAILED, exit 1" in failing
    assert '"command": "cat missing.txt"' in failing and "No such file or directory" in failing
    index = (dest / "INDEX.md").read_text()
    assert "failed tool calls: 1" in index and "cost $0.0123" in index
    flagged = [line for line in index.splitlines() if "FAILED" in line and line.startswith("- [")]
    assert flagged == ["- [007-agent-shell.md](007-agent-shell.md) agent: Bash: cat missing.txt → FAILED (exit 1)"]
    assert sum(1 for line in index.splitlines() if line.startswith("- [")) == len(files) - 1


def test_explode_clips_long_output_keeping_head_and_tail(tmp_path):
    huge = "HEAD" + "x" * 200_000 + "TAIL-error: boom"
    lines = [
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "c1", "type": "command_execution", "command": "build",
                                            "aggregated_output": huge, "exit_code": 2, "status": "failed"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]
    source = tmp_path / "big.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    files = explode(source, tmp_path / "out", max_chars_per_step=5000)
    text = files[0].read_text()
    assert len(text) < 7000
    assert "HEAD" in text and "TAIL-error: boom" in text and "chars omitted" in text


def test_explode_fences_output_containing_backticks(tmp_path):
    lines = [{"type": "item.completed", "item": {"id": "c1", "type": "command_execution", "command": "cat README.md",
                                                 "aggregated_output": "```\ncode\n```\n", "exit_code": 0,
                                                 "status": "completed"}}]
    source = tmp_path / "s.jsonl"
    source.write_text(json.dumps(lines[0]) + "\n")
    text = explode(source, tmp_path / "out")[0].read_text()
    assert "````\n```\ncode\n```\n\n````" in text


# -- Codex rollout files shaped as real ones (fixtures/trajectories/shapes/) ------------------

def test_real_large_rollout_pairs_every_call_with_its_output():
    raw = records(LARGE)
    calls_in_file = [r["payload"] for r in raw if r["type"] == "response_item"
                     and r["payload"].get("type") == "function_call"]
    outputs = {r["payload"]["call_id"]: r["payload"]["output"] for r in raw if r["type"] == "response_item"
               and r["payload"].get("type") == "function_call_output"}
    assert len(calls_in_file) == 118
    steps = list(iter_steps(LARGE))
    calls = calls_of(steps)
    assert [c.call_id for c in calls] == [c["call_id"] for c in calls_in_file]
    assert all(c.output == outputs[c.call_id] for c in calls)
    assert [c.name for c in calls] == [c["name"] for c in calls_in_file]
    assert [c.kind for c in calls] == ["shell" if c["name"] == "exec_command" else "other" for c in calls_in_file]
    messages = [r["payload"] for r in raw if r["type"] == "response_item" and r["payload"].get("type") == "message"]
    assert sum(s.source == "user" for s in steps) == sum(m["role"] == "user" for m in messages)
    assert sum(s.source == "system" for s in steps) == sum(m["role"] == "developer" for m in messages)
    assert [s.index for s in steps] == list(range(len(steps)))


@pytest.mark.parametrize("path", [SMALL, MEDIUM, LARGE], ids=lambda p: p.name)
def test_real_rollout_usage_is_the_last_token_count(path):
    raw = records(path)
    totals = [r["payload"]["info"]["total_token_usage"] for r in raw if r["type"] == "event_msg"
              and r["payload"].get("type") == "token_count" and r["payload"].get("info")]
    last = totals[-1]
    summary = summarize(path)
    assert detect_format(path) == "codex-rollout"
    assert summary.usage == Usage(last["input_tokens"], last["cached_input_tokens"], last["output_tokens"],
                                  last["reasoning_output_tokens"])
    # the per-call usages attached to steps add up to the same total
    per_step = Usage()
    for step in iter_steps(path):
        per_step += step.usage or Usage()
    assert per_step == summary.usage
    meta = next(r["payload"] for r in raw if r["type"] == "session_meta")
    assert summary.session_id == meta["id"]
    assert summary.model == next(r["payload"]["model"] for r in raw if r["type"] == "turn_context")
    # the small file stops after a function_call with no output and no task_complete (issue 12 #8)
    cut_short = not any(r["payload"].get("type") == "task_complete" for r in raw if r["type"] == "event_msg")
    assert (summary.malformed_lines, summary.truncated) == (0, cut_short)


def test_real_medium_rollout_mcp_calls_and_explode(tmp_path):
    path = MEDIUM
    raw = records(path)
    names = [r["payload"]["name"] for r in raw if r["type"] == "response_item"
             and r["payload"].get("type") == "function_call"]
    calls = calls_of(list(iter_steps(path)))
    assert [c.name for c in calls] == names
    assert [c.kind for c in calls] == ["mcp" if n.startswith("mcp__") else "other" for n in names]
    final = next(r["payload"]["last_agent_message"] for r in raw if r["payload"].get("type") == "task_complete")
    assert summarize(path).final_answer == final
    files = explode(path, tmp_path / "steps")
    assert len(files) == summarize(path).steps + 1


# -- older and sibling layouts -------------------------------------------------------------

def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_legacy_rollout_without_envelope(tmp_path):
    path = write_lines(tmp_path / "rollout-2025.jsonl", [
        {"id": "legacy-1", "timestamp": "2025-05-01T10:00:00Z", "instructions": ""},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"ls\"]}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1",
         "output": "{\"output\": \"a.py\\n\", \"metadata\": {\"exit_code\": 0, \"duration_seconds\": 0.1}}"},
        {"record_type": "state"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One file: a.py"}]},
    ])
    assert detect_format(path) == "codex-rollout"
    steps = list(iter_steps(path))
    assert [s.source for s in steps] == ["user", "agent", "agent"]
    call = steps[1].tool_calls[0]
    assert (call.name, call.kind, call.input, call.output, call.exit_code) == (
        "shell", "shell", {"command": ["ls"]}, "a.py\n", 0)
    assert summarize(path).final_answer == "One file: a.py"


def test_pi_session_file_messages(tmp_path):
    path = write_lines(tmp_path / "pi-session.jsonl", [
        {"type": "message", "id": "m1", "parentId": None,
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "message", "id": "m2", "parentId": "m1",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "model": "m",
                     "usage": {"input": 3, "output": 2, "cacheRead": 0, "cacheWrite": 0}}},
    ])
    assert detect_format(path) == "pi"
    summary = summarize(path)
    assert (summary.steps, summary.final_answer, summary.usage.input_tokens) == (2, "hello", 3)


def test_result_without_its_call_is_a_tool_step(tmp_path):
    path = write_lines(tmp_path / "cut-head.jsonl", [
        {"timestamp": "t", "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "lost", "output": "Process exited with code 3\nOutput:\n"}},
        {"timestamp": "t", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}},
    ])
    orphan, answer = iter_steps(path)
    assert orphan.source == "tool"
    assert (orphan.tool_calls[0].call_id, orphan.tool_calls[0].exit_code, orphan.tool_calls[0].failed) == ("lost", 3, True)
    assert answer.message == "ok"


# -- real host output (recorded; see fixtures/trajectories/README.md) ------------------------


def test_recorded_codex_exec_and_its_rollout_agree():
    exec_path, rollout_path = RECORDED / "codex-0.164.0-exec.jsonl", RECORDED / "codex-0.164.0-rollout.jsonl"
    exec_calls = check_scripted_session(exec_path, "codex-exec", "exec_command")
    rollout_calls = check_scripted_session(rollout_path, "codex-rollout", "exec_command")
    assert [c.input for c in exec_calls] == [{"command": "/bin/bash -lc 'echo hi > out.txt'"},
                                             {"command": "/bin/bash -lc 'cat missing.txt'"}]
    assert [c.input["cmd"] for c in rollout_calls] == ["echo hi > out.txt", "cat missing.txt"]
    assert [c.exit_code for c in exec_calls] == [c.exit_code for c in rollout_calls] == [0, 1]
    exec_summary, rollout_summary = summarize(exec_path), summarize(rollout_path)
    turn_usage = [r["usage"] for r in records(exec_path) if r["type"] == "turn.completed"]
    assert exec_summary.usage.input_tokens == sum(u["input_tokens"] for u in turn_usage)
    # one session, two records of it: the same tokens and the same thread id
    assert exec_summary.usage == rollout_summary.usage
    assert exec_summary.session_id == rollout_summary.session_id
    assert rollout_summary.model == "scripted-model"
    assert len(exec_summary.warnings) == 3          # hook-trust bypass (x2), unknown model metadata


def test_recorded_claude_stream_and_its_session_agree():
    stream_path = RECORDED / "claude-code-2.1.317-stream.jsonl"
    session_path = RECORDED / "claude-code-2.1.317-session.jsonl"
    stream_calls = check_scripted_session(stream_path, "claude-stream", "Bash")
    session_calls = check_scripted_session(session_path, "claude-session", "Bash")
    assert [(c.call_id, c.input, c.output) for c in stream_calls] == [
        (c.call_id, c.input, c.output) for c in session_calls]
    assert stream_calls[0].input["command"] == "echo hi > out.txt"
    result = next(r for r in records(stream_path) if r["type"] == "result")
    stream_summary, session_summary = summarize(stream_path), summarize(session_path)
    assert stream_summary.usage.input_tokens == result["usage"]["input_tokens"]
    assert stream_summary.usage.cost_usd == pytest.approx(result["total_cost_usd"])
    # the session file has no result line: its per-message usage adds up to the same input
    assert session_summary.usage.input_tokens == stream_summary.usage.input_tokens
    assert session_summary.session_id == stream_summary.session_id


HOST_STREAMS = sorted(HOST_FIXTURES.glob("*/*/*.jsonl")) if HOST_FIXTURES.is_dir() else []


@pytest.mark.skipif(not HOST_STREAMS, reason="no recorded host streams in tests/fixtures/hosts (python -m git_hermit.hostkit.conformance tests/fixtures/hosts)")
@pytest.mark.parametrize("path", HOST_STREAMS, ids=lambda p: "/".join(p.parts[-3:]))
def test_conformance_recordings_read_cleanly(path):
    try:
        fmt = detect_format(path)
    except InputError:
        pytest.skip(f"{path.name} is not a trajectory (e.g. a hook log)")
    host = path.parts[-3]
    assert fmt.split("-")[0] == {"codex": "codex", "claude-code": "claude", "pi": "pi"}.get(host, fmt.split("-")[0])
    summary = summarize(path)
    assert summary.malformed_lines == 0
    assert summary.steps == len(list(iter_steps(path))) > 0


@pytest.mark.hosts
@pytest.mark.parametrize("host, fmt, shell_name", [("codex", "codex-exec", "exec_command"),
                                                   ("claude-code", "claude-stream", "Bash")])
def test_live_host_stream_reads(host, fmt, shell_name, tmp_path):
    from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
    from git_hermit.hostkit.sessions import run_session
    from git_hermit.hosts.registry import find_host_cli

    cli = find_host_cli(host)
    if cli is None:
        pytest.skip(f"{host} CLI is not installed")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [Turn.shell("echo hi > out.txt"), Turn.shell("cat missing.txt"), Turn.say(SCRIPTED_ANSWER)]
    with ScriptedModelServer(script) as server:
        result = run_session(host, cli, workspace, server.base_url,
                             "Create out.txt containing hi using the shell.", home=tmp_path / "home")
    assert result.ok, result.stderr[-2000:]
    stream = tmp_path / "stream.jsonl"
    stream.write_text(result.stdout)
    check_scripted_session(stream, fmt, shell_name)
    stored = sorted((tmp_path / "home").rglob("*.jsonl"))
    assert stored, "the host stored no session file"
    check_scripted_session(stored[0], {"codex-exec": "codex-rollout", "claude-stream": "claude-session"}[fmt],
                           shell_name)


def test_claude_stream_subagent_lines_count_tokens_but_not_steps(tmp_path):
    lines = (FIXTURES / "claude-stream.jsonl").read_text().splitlines()
    subagent = {"type": "assistant", "parent_tool_use_id": "toolu_task", "session_id": "s",
                "message": {"id": "msg_sub", "model": "claude-haiku-5", "content": [{"type": "text", "text": "sub says"}],
                            "usage": {"input_tokens": 7, "output_tokens": 3}}}
    path = tmp_path / "with-subagent.jsonl"
    path.write_text("\n".join(lines[:-1] + [json.dumps(subagent)]) + "\n")   # no result: usage summed
    steps = list(iter_steps(path))
    assert all("sub says" not in s.message for s in steps)
    without = tmp_path / "without.jsonl"
    without.write_text("\n".join(lines[:-1]) + "\n")
    assert summarize(path).usage.input_tokens == summarize(without).usage.input_tokens + 7
    assert summarize(path).model == "claude-opus-5-5"


def test_claude_stream_bills_every_call_of_the_session_from_its_model_usage(tmp_path):
    """Claude Code 2.1.317's ``result.usage`` counts the main agent's calls of that query only;
    ``modelUsage`` counts every call of the session so far, sub-agents' and earlier queries'
    (measured: a sub-agent's 7,724 input tokens were in modelUsage, not in usage). A session a
    background sub-agent woke again ends on a second result line, for the last query alone."""
    lines = (FIXTURES / "claude-stream.jsonl").read_text().splitlines()[:-1]
    main = {"inputTokens": 1040, "outputTokens": 150, "cacheReadInputTokens": 4300,
            "cacheCreationInputTokens": 20, "costUSD": 0.01}
    sub = {"inputTokens": 300, "outputTokens": 7, "cacheReadInputTokens": 100,
           "cacheCreationInputTokens": 0, "costUSD": 0.001}
    first = {"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": "s",
             "total_cost_usd": 0.011, "usage": {"input_tokens": 40, "cache_creation_input_tokens": 20,
                                                "cache_read_input_tokens": 4300, "output_tokens": 150},
             "modelUsage": {"claude-opus-5-5": main, "claude-haiku-5": sub}}
    path = tmp_path / "stream.jsonl"
    path.write_text("\n".join(lines + [json.dumps(first)]) + "\n")
    everything = Usage(1040 + 20 + 4300 + 300 + 100, 4300 + 100, 150 + 7, 0, 0.011)
    assert summarize(path).usage == everything
    # woken again: the last result's modelUsage holds the whole session, its usage the last query
    main_later = {**main, "inputTokens": 2040, "outputTokens": 160}
    later = {**first, "total_cost_usd": 0.015, "usage": {"input_tokens": 1000, "output_tokens": 10},
             "modelUsage": {"claude-opus-5-5": main_later, "claude-haiku-5": sub}}
    path.write_text("\n".join(lines + [json.dumps(first), json.dumps(later)]) + "\n")
    assert summarize(path).usage == Usage(everything.input_tokens + 1000, 4400, 167, 0, 0.015)

def test_detect_format_past_a_huge_first_line(tmp_path):
    rollout = (FIXTURES / "codex-rollout.jsonl").read_text().splitlines(keepends=True)
    meta = json.loads(rollout[0])
    meta["payload"]["base_instructions"] = {"text": "x" * 300_000}      # far beyond a 64 KB sniff
    path = tmp_path / "rollout.jsonl"
    path.write_text(json.dumps(meta) + "\n" + "".join(rollout[1:]))
    assert detect_format(path) == "codex-rollout"
    assert summarize(path).session_id == meta["payload"]["id"]


def _recorded_lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (RECORDED / name).read_text().splitlines() if line.strip()]


def _write(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "stream.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_claude_stream_woken_again_answers_with_its_last_result_and_keeps_both_queries():
    """Claude Code 2.1.317, woken by a background sub-agent: two init … result queries; the
    session's answer is the last result's, every step of both queries is there, and system
    steps say where each query ended and which result is the answer."""
    path = RECORDED / "claude-2.1.317-woken-stream.jsonl"
    assert [r["result"] for r in _recorded_lines(path.name) if r["type"] == "result"] == ["WAITING", "42"]
    summary = summarize(path)
    assert summary.final_answer == "42" and not summary.errors and not summary.truncated
    steps = list(iter_steps(path))
    assert [c.name for s in steps for c in s.tool_calls] == ["Agent"]
    assert [s.message for s in steps if s.source == "agent" and s.message] == ["WAITING", "42"]
    said = [s.message for s in steps if s.source == "system" and s.message.startswith("query ")]
    assert said == ["query 1 ended (success, 2 turns, 271 ms): 'WAITING' "
                    "(not the session's answer: a later query's result is)",
                    "query 2: the session woke again (e.g. a background task ended)",
                    "query 2 ended (success, 1 turns, 30 ms): '42' (the session's answer)"]
    # the "woke again" step comes right before the second query's init, after WAITING
    messages = [s.message for s in steps]
    assert messages.index("WAITING") < messages.index(said[0]) < messages.index(said[1]) < messages.index("42")
    atif = to_atif(path)               # the ATIF export keeps the second query's steps too
    assert atif["final_metrics"]["total_steps"] == len(steps) == len(atif["steps"])
    assert [s.get("message") for s in atif["steps"] if s.get("source") == "agent" and s.get("message")] \
        == ["WAITING", "42"]


def test_claude_stream_woken_again_that_ends_on_an_empty_answer_has_none_not_the_earlier_one():
    """The woken query answered nothing (2.1.317 nudged once, then ended on ``result: ""``):
    the first query's WAITING is stale, never the session's answer; the nudge is the CLI's."""
    path = RECORDED / "claude-2.1.317-woken-empty-stream.jsonl"
    assert [r["result"] for r in _recorded_lines(path.name) if r["type"] == "result"] == ["WAITING", ""]
    summary = summarize(path)
    assert summary.final_answer is None
    assert summary.user_turns == 0
    nudge = [s for s in iter_steps(path) if "no visible output" in s.message]
    assert [s.source for s in nudge] == ["system"]


def test_claude_stream_whose_last_result_is_an_error_has_no_answer(tmp_path):
    """2.1.317 on an API error: an assistant line carrying ``error`` with the CLI's message as
    its text, then ``result`` with ``is_error: true`` (subtype still "success") and that text.
    Neither is the agent's answer, and the first query's is stale."""
    records = _recorded_lines("claude-2.1.317-woken-stream.jsonl")
    text = "API Error: 500 scripted fault 500."
    for record in records:
        if record["type"] == "assistant" and record["message"]["content"][0].get("text") == "42":
            record["error"] = "server_error"
            record["message"]["content"][0]["text"] = text
    records[-1] |= {"is_error": True, "result": text, "terminal_reason": "api_error"}
    summary = summarize(_write(tmp_path, records))
    assert summary.final_answer is None
    assert summary.errors == ("server_error", f"api_error: {text}")


def test_claude_stream_answer_is_its_result_line_and_a_cut_stream_keeps_the_last_text(tmp_path):
    """A single query: an empty result ends on no answer, though the agent said something
    before a tool call; a cut stream (no result line) keeps the last text said."""
    records = [r for r in _recorded_lines("claude-2.1.317-woken-stream.jsonl")]
    first_result = next(i for i, r in enumerate(records) if r["type"] == "result")
    single = records[:first_result + 1]
    single[-1] = {**single[-1], "result": ""}
    assert summarize(_write(tmp_path, single)).final_answer is None
    cut = records[:first_result]
    summary = summarize(_write(tmp_path, cut))
    assert summary.final_answer == "WAITING" and summary.truncated


def test_claude_session_woken_again_that_ends_on_an_empty_answer_has_none():
    """The session file of the same run: the woken query's last assistant text is empty, so
    the stored session's answer is none too, not the first query's WAITING; the prompt is the
    one human turn (the task notification and the nudge are injected)."""
    path = RECORDED / "claude-2.1.317-woken-empty-session.jsonl"
    summary = summarize(path)
    assert summary.format == "claude-session"
    assert summary.final_answer is None and summary.user_turns == 1
    assert [s.message for s in iter_steps(path) if s.source == "agent" and s.message] == ["WAITING"]
