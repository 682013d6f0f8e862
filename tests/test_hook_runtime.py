"""The deployed hook runner end to end: a real deployment, one real subprocess per event (run
through a shell from the installed hook command, as the hosts do), and every kind of bad input
failing open with a logged error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from git_hermit import resources
from git_hermit.adapter.deploy import deploy

from support.hook_runtime_helpers import AGENT_DIR, CLAUDE_BASE, CODEX_BASE, MEMORY, MIDDLEWARE, deployed, fire, log_entries, make_adapter  # noqa: F401,E402

sys.path.insert(0, str(AGENT_DIR))
from hermit_hooks import HookInput, HookResult  # noqa: E402  (stdlib-only, shipped beside)


# -- the interface ---------------------------------------------------------------------------

def test_hook_records_are_frozen_keyword_only_and_comparable():
    result = HookResult(context="x", deny=True)
    assert result == HookResult(deny=True, context="x") and result != HookResult(context="x")
    with pytest.raises(AttributeError):
        result.context = "y"
    with pytest.raises(TypeError):
        HookResult(contxt="typo")
    assert result.replace(deny=False) == HookResult(context="x")
    assert HookInput(event="stop").task == "" and HookInput().failed is None
    assert "deny=True" in repr(result)


# -- normal calls ----------------------------------------------------------------------------

def test_session_start_hands_memory_and_logs_the_call(tmp_path):
    dest = deployed(tmp_path)
    out = json.loads(fire(dest, "SessionStart", {**CLAUDE_BASE, "source": "startup"}))
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "make check" in out["hookSpecificOutput"]["additionalContext"]
    [entry] = log_entries(dest)
    assert entry["event"] == "SessionStart" and entry["host"] == "claude-code"
    assert entry["error"] is None and entry["duration_ms"] > 0
    assert entry["calls"][0]["function"] == "session_start"
    assert entry["input"]["source"] == "startup"


def test_task_text_is_task_md_else_the_first_prompt(tmp_path):
    extra = "def before_tool(inp):\n    return HookResult(context='TASK=' + inp.task)\n"
    dest = deployed(tmp_path, extra=extra)
    pre = {**CLAUDE_BASE, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    fire(dest, "UserPromptSubmit", {**CLAUDE_BASE, "prompt": "first prompt", "prompt_id": "p1"})
    fire(dest, "UserPromptSubmit", {**CLAUDE_BASE, "prompt": "second prompt", "prompt_id": "p2"})
    ctx = json.loads(fire(dest, "PreToolUse", pre))["hookSpecificOutput"]["additionalContext"]
    assert ctx == "TASK=first prompt"
    (dest / "task.md").write_text("the task file")
    ctx = json.loads(fire(dest, "PreToolUse", pre))["hookSpecificOutput"]["additionalContext"]
    assert ctx == "TASK=the task file"


def test_codex_before_model_context_is_queued_then_handed_over_with_the_tool_result(tmp_path):
    extra = "def before_model(inp):\n    return HookResult(context='QUEUED ' + inp.turn_id, deny=True)\n"
    dest = deployed(tmp_path, host="codex", extra=extra)
    assert fire(dest, "PreModelRequest", {**CODEX_BASE, "turn_id": "t1"}) == ""  # output ignored
    call = {**CODEX_BASE, "turn_id": "t1", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert fire(dest, "PreToolUse", call) == ""
    out = json.loads(fire(dest, "PostToolUse", {**call, "tool_response": "a\nb"}))
    assert out == {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                          "additionalContext": "QUEUED t1"}}
    assert fire(dest, "PostToolUse", {**call, "tool_response": ""}) == ""  # the queue was emptied


def test_claude_before_model_is_emulated_after_prompt_batch_and_blocked_stop(tmp_path):
    extra = ("def before_model(inp):\n    return HookResult(context='BM@' + inp.host_event)\n"
             "def stop(inp):\n    return HookResult(block=True, reason='run the tests', context='S')\n")
    dest = deployed(tmp_path, extra=extra)
    turn = {**CLAUDE_BASE, "prompt_id": "p1"}
    out = json.loads(fire(dest, "UserPromptSubmit", {**turn, "prompt": "go"}))
    assert out["hookSpecificOutput"]["additionalContext"] == "BM@UserPromptSubmit"
    out = json.loads(fire(dest, "PostToolBatch", {**turn, "tool_calls": []}))
    assert out["hookSpecificOutput"]["additionalContext"] == "BM@PostToolBatch"
    out = json.loads(fire(dest, "Stop", {**turn, "stop_hook_active": False}))
    assert out["decision"] == "block" and out["reason"] == "run the tests"
    assert out["hookSpecificOutput"]["additionalContext"] == "S\n\nBM@Stop"
    # Once per turn: the host's second Stop (stop_hook_active) goes through, and with it no context.
    assert fire(dest, "Stop", {**turn, "stop_hook_active": True}) == ""
    assert "once per turn" in log_entries(dest)[-1]["note"]


def test_codex_stop_blocks_once_per_turn_even_without_stop_hook_active(tmp_path):
    extra = "def stop(inp):\n    return HookResult(block=True, reason='not yet', context='C')\n"
    dest = deployed(tmp_path, host="codex", extra=extra)
    stop = {**CODEX_BASE, "turn_id": "t1", "stop_hook_active": False}
    out = json.loads(fire(dest, "Stop", stop))
    assert out == {"decision": "block", "reason": "not yet\n\nC"}
    assert fire(dest, "Stop", stop) == ""
    assert json.loads(fire(dest, "Stop", {**stop, "turn_id": "t2"}))["decision"] == "block"


def test_pi_hand_run_session_start_prints_the_memory_without_reading_stdin(tmp_path):
    dest = deployed(tmp_path, host="pi")
    line = next(l for l in (dest / "AGENTS.md").read_text().splitlines() if "SessionStart" in l)
    done = subprocess.run(line.strip("`"), shell=True, capture_output=True, text=True, cwd=dest,
                          timeout=30)
    assert "make check" in done.stdout and done.returncode == 0


def test_runner_imports_no_heavy_modules(tmp_path):
    """json, re, dataclasses, typing, pathlib would double the runner's start-up."""
    dest = deployed(tmp_path)
    record = json.loads((dest / ".hermit-deploy.json").read_text())
    command = record["hook_command"].replace("EVENT", "PostToolUse").replace(" -S ", " -S -X importtime ", 1)
    payload = json.dumps({**CLAUDE_BASE, "tool_name": "Bash", "tool_input": {"command": "ls"},
                          "tool_response": {"stdout": "x", "stderr": ""}})
    done = subprocess.run(command, shell=True, input=payload, capture_output=True, text=True, cwd=dest)
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "hook_runner" in imported and "hook_wire" in imported
    assert not imported & {"json", "re", "dataclasses", "typing", "pathlib", "threading", "inspect"}


# -- bad input: the host always gets a valid no-op, the call is logged with its error ---------

BAD_MIDDLEWARE = {
    "raises": ("def session_start(inp):\n    raise RuntimeError('boom')\n", "RuntimeError: boom"),
    "exits": ("import sys\ndef session_start(inp):\n    sys.exit(3)\n", "exited with 3"),
    "prints": ("import os\ndef session_start(inp):\n    print('garbage')\n    os.system('echo shell-garbage')\n"
               "    return HookResult(context='x')\n", "printed to stdout"),
    "wrong type": ("def session_start(inp):\n    return 42\n", "not HookResult"),
    "bad field type": ("def session_start(inp):\n    return HookResult(context=['x'])\n", "must be str"),
    "syntax error": ("def session_start(inp:\n", "SyntaxError"),
    "missing function": ("del session_start\n", "defines no session_start"),
}


@pytest.mark.parametrize("case", sorted(BAD_MIDDLEWARE))
def test_a_broken_middleware_fails_open(tmp_path, case):
    extra, expected = BAD_MIDDLEWARE[case]
    dest = deployed(tmp_path, extra=extra)
    assert fire(dest, "SessionStart", {**CLAUDE_BASE, "source": "startup"}) == ""
    [entry] = log_entries(dest)
    assert expected in entry["error"] and entry["output"] is None


def test_a_hanging_middleware_is_cut_off_at_its_deadline(tmp_path):
    extra = "import time\ndef session_start(inp):\n    time.sleep(60)\n"
    dest = deployed(tmp_path, extra=extra)
    out = fire(dest, "SessionStart", {**CLAUDE_BASE, "source": "startup"},
               env={"HERMIT_HOOK_TIMEOUT_S": "0.5"})
    assert out == ""
    [entry] = log_entries(dest)
    assert entry["error"].startswith("timeout") and entry["duration_ms"] < 5000


@pytest.mark.parametrize("raw, expected", [
    (b"{not json", "ValueError"),
    (b"", "empty payload"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"a": 1} trailing', "extra data"),
    (b"\xff\xfe{", "ValueError"),
])
def test_malformed_payloads_fail_open(tmp_path, raw, expected):
    dest = deployed(tmp_path)
    assert fire(dest, "PreToolUse", None, raw=raw) == ""
    assert expected in log_entries(dest)[0]["error"]


def test_an_oversized_payload_fails_open(tmp_path):
    dest = deployed(tmp_path)
    raw = json.dumps({**CLAUDE_BASE, "tool_response": "x" * (17 * 1024 * 1024)}).encode()
    assert fire(dest, "PostToolUse", None, raw=raw) == ""
    assert "larger than" in log_entries(dest)[0]["error"]


def test_an_unknown_event_fails_open(tmp_path):
    dest = deployed(tmp_path, host="codex")
    assert fire(dest, "PostToolBatch", CODEX_BASE) == ""  # a Claude-only event on Codex
    assert "unknown event 'PostToolBatch'" in log_entries(dest)[0]["error"]


def test_a_missing_deploy_record_fails_open(tmp_path):
    dest = deployed(tmp_path)
    (dest / ".hermit-deploy.json").rename(dest / "record.json")
    command = json.loads((dest / "record.json").read_text())["hook_command"].replace("EVENT", "Stop")
    done = subprocess.run(command, shell=True, input=b"{}", capture_output=True, cwd=dest, timeout=30)
    assert done.returncode == 0 and done.stdout == b""
    assert "no .hermit-deploy.json" in log_entries(dest)[0]["error"]


def test_a_corrupt_state_file_is_ignored(tmp_path):
    dest = deployed(tmp_path, host="codex",
                    extra="def before_model(inp):\n    return HookResult(context='Q')\n")
    state = dest / ".hermit-hooks" / "state" / "s1.json"
    state.parent.mkdir(parents=True)
    state.write_text("{broken")
    fire(dest, "PreModelRequest", {**CODEX_BASE, "turn_id": "t"})
    out = json.loads(fire(dest, "UserPromptSubmit", {**CODEX_BASE, "turn_id": "t", "prompt": "p"}))
    assert out["hookSpecificOutput"]["additionalContext"] == "Q"


def test_credentials_in_tool_input_do_not_reach_the_log(tmp_path):
    extra = "def before_tool(inp):\n    return HookResult(context='saw ' + inp.tool_input['command'])\n"
    dest = deployed(tmp_path, extra=extra)
    command = "OPENAI_API_KEY=sk-live-0123456789abcdef curl -H 'Authorization: Bearer tok123' x"
    out = fire(dest, "PreToolUse", {**CLAUDE_BASE, "tool_name": "Bash", "tool_input": {"command": command}})
    assert "sk-live-0123456789abcdef" in out  # the model still gets what the middleware said
    log = (dest / ".hermit-hooks" / "hook-calls.jsonl").read_text()
    assert "0123456789abcdef" not in log and "tok123" not in log and "OPENAI_API_KEY=***" in log


def test_a_sub_agent_has_its_own_queue_but_the_session_task(tmp_path):
    extra = ("def before_model(inp):\n    return HookResult(context='Q:' + inp.task)\n")
    dest = deployed(tmp_path, extra=extra)
    turn = {**CLAUDE_BASE, "prompt_id": "p1"}
    fire(dest, "UserPromptSubmit", {**turn, "prompt": "main task"})
    sub = {**turn, "agent_id": "agent-7", "tool_calls": []}
    out = json.loads(fire(dest, "PostToolBatch", sub))
    assert out["hookSpecificOutput"]["additionalContext"] == "Q:main task"
    states = sorted(p.name for p in (dest / ".hermit-hooks" / "state").iterdir())
    assert states == ["s1-agent-7.json", "s1.json"]
