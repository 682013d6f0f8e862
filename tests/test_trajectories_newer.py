"""Trajectory readers on session files of the newest CLIs (issue 25): real public files of
Claude Code 2.1.108/2.1.217 and Codex 0.126/0.140, and real output of the pinned Codex 0.164.0
and Claude Code 2.1.317 (tests/fixtures/trajectories/newer/, sources in its README.md). Every
figure is checked against the hand counts ``count.py`` makes from the raw fields (counts.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from git_hermit.trajectories import iter_steps, summarize

NEWER = Path(__file__).parent / "fixtures" / "trajectories" / "newer"
RECORDED = Path(__file__).parent / "fixtures" / "trajectories" / "recorded"
COUNTS = json.loads((NEWER / "counts.json").read_text())
SUBAGENTS = NEWER / "codex-0.164.0-subagents"
CODEX_MAIN = SUBAGENTS / "rollout-2026-12-01T22-30-28-01a233bb-1708-7710-a9d8-9e0c3460a8f7.jsonl"
CODEX_CHILD = SUBAGENTS / "rollout-2026-12-01T22-30-28-01a233bb-1779-7951-8938-1432b9d35b98.jsonl"


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def usage_of(summary) -> dict:
    u = summary.usage
    return {"input": u.input_tokens, "cached_input": u.cached_input_tokens, "output": u.output_tokens,
            "reasoning": u.reasoning_tokens}


def calls(path: Path) -> dict:
    return {c.call_id: c for s in iter_steps(path) for c in s.tool_calls}


def test_the_hand_counts_are_what_count_py_makes():
    """counts.json is count.py's output as committed (the counting method is in COUNTING.md)."""
    done = subprocess.run([sys.executable, str(NEWER / "count.py")], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == COUNTS


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_every_newer_file_reads_as_its_hand_count(name):
    want = COUNTS[name]
    summary = summarize(NEWER / name)
    got = {"tool_calls": summary.tool_calls, "failed_tool_calls": summary.failed_tool_calls,
           "user_turns": summary.user_turns, "usage": usage_of(summary), "usage_known": summary.usage_known,
           "final_answer": summary.final_answer, "version": summary.version,
           "parent_session_id": summary.parent_session_id}
    for key in got.keys() & want.keys():
        assert got[key] == want[key], key
    if want.get("errors"):
        assert [e for e in want["errors"] if e not in summary.errors] == []
    assert not [s for s in iter_steps(NEWER / name) if s.source == "tool"]      # no orphan results


# -- 1. Claude Code: the parentUuid chain --------------------------------------------------

def test_claude_result_written_before_its_call_joins_the_call():
    """Claude Code 2.1.108 wrote the Read result (line 8 here) before the record of the call
    that made it (line 9; its parentUuid names the call's uuid): one step, one call, answered."""
    path = NEWER / "claude-2.1.108-result-before-call.jsonl"
    raw = records(path)
    result, call = raw[7], raw[8]
    assert result["parentUuid"] == call["uuid"]
    call_id = call["message"]["content"][0]["id"]
    assert result["message"]["content"][0]["tool_use_id"] == call_id
    steps = list(iter_steps(path))
    hit = calls(path)[call_id]
    assert hit.output is not None and hit.name == "Read"
    message_ids = list(dict.fromkeys(r["message"]["id"] for r in raw if r.get("type") == "assistant"))
    assert len([s for s in steps if s.source == "agent"]) == len(message_ids)
    assert summarize(path).tool_calls == COUNTS[path.name]["tool_calls"]
    assert not any("never got a result" in w or "mid-call" in w for w in summarize(path).warnings)


def test_claude_prompt_after_a_late_written_call_is_not_a_rewind(tmp_path):
    """The same excerpt with the record after the call (an attachment chained to the result)
    made a prompt: it names the result, written before the call, so it abandons nothing."""
    rows = records(NEWER / "claude-2.1.108-result-before-call.jsonl")
    assert rows[9]["type"] == "attachment" and rows[9]["parentUuid"] == rows[7]["uuid"]
    rows[9] = {**{k: rows[9][k] for k in ("parentUuid", "uuid", "sessionId", "timestamp")},
               "type": "user", "message": {"role": "user", "content": "And the other skills?"}}
    path = write_jsonl(tmp_path / "session.jsonl", rows)
    steps = list(iter_steps(path))
    assert not [s for s in steps if s.message.startswith("rewound")]
    assert calls(path)[rows[8]["message"]["content"][0]["id"]].output is not None
    assert summarize(path).user_turns == 1


def test_claude_result_whose_call_never_comes_waits_a_bounded_while(tmp_path):
    """Without the call's record, the result is read as a result of an unseen call (a tool
    step), and the steps after it keep their order."""
    rows = records(NEWER / "claude-2.1.108-result-before-call.jsonl")
    del rows[8]
    path = write_jsonl(tmp_path / "session.jsonl", rows)
    steps = list(iter_steps(path))
    assert [s.source for s in steps].count("tool") == 1
    by_message: dict[str, list[str]] = {}
    for r in rows:
        if r.get("type") == "assistant":
            by_message.setdefault(r["message"]["id"], []).extend(
                b["text"] for b in r["message"]["content"] if b.get("type") == "text" and b["text"])
    expected = ["\n\n".join(texts) for texts in by_message.values() if texts]
    assert [s.message for s in steps if s.source == "agent" and s.message] == expected


def test_claude_manual_compaction_is_not_a_rewind():
    """Claude Code 2.1.217's /compact: the boundary (parentUuid null, logicalParentUuid the last
    record before it) and its summary, then the command's echo chained to that same last record.
    That is a compaction, not a branch the user abandoned."""
    path = NEWER / "claude-2.1.217-manual-compaction.jsonl"
    raw = records(path)
    boundary = next(r for r in raw if r.get("subtype") == "compact_boundary")
    echo = next(r for r in raw if r.get("parentUuid") == boundary["logicalParentUuid"] and r["type"] == "user")
    assert raw.index(echo) > raw.index(boundary)
    steps = list(iter_steps(path))
    assert not [s for s in steps if s.message.startswith("rewound")]
    assert [s for s in steps if s.source == "system" and s.message.startswith("compaction summary: ")]
    assert [s for s in steps if s.source == "system" and s.message.startswith("context compacted")]
    assert summarize(path).user_turns == COUNTS[path.name]["user_turns"] == 0


# -- 2. Codex: failures --------------------------------------------------------------------

@pytest.mark.parametrize("path, refusal", [
    (NEWER / "codex-0.164.0-poll-rollout.jsonl", "write_stdin failed: stdin is closed"),
    (NEWER / "codex-0.140.0-long-running.jsonl", "write_stdin failed: Unknown process id"),
    (NEWER / "codex-0.164.0-code-mode-rollout.jsonl", "Script failed"),
    (CODEX_MAIN, "collab spawn failed: agent thread limit reached"),
])
def test_codex_refusals_and_script_failures_are_failed_calls(path, refusal):
    hits = [c for c in calls(path).values() if c.output and refusal in (c.output or "")[:200]]
    assert hits and all(c.failed for c in hits)
    assert summarize(path).failed_tool_calls == COUNTS[str(path.relative_to(NEWER))]["failed_tool_calls"]


def test_codex_code_mode_success_is_not_a_failure():
    found = calls(NEWER / "codex-0.164.0-code-mode-rollout.jsonl")
    assert sorted((c.output or "").split("\n")[0] for c in found.values()) == ["Script completed", "Script failed"]
    assert [c.failed for c in found.values() if (c.output or "").startswith("Script completed")] == [False]


def test_codex_error_on_task_complete_is_an_error():
    """A usage limit: Codex 0.164 carries it on task_complete (``error.message``) only."""
    path = NEWER / "codex-0.164.0-usage-limit-rollout.jsonl"
    summary = summarize(path)
    assert COUNTS[path.name]["errors"] and set(COUNTS[path.name]["errors"]) <= set(summary.errors)
    assert any(s.error and "usage limit" in s.error for s in iter_steps(path))
    assert summary.final_answer is None


def test_codex_long_running_command_fails_once_on_the_poll_that_reports_its_exit():
    """Codex 0.164: `sleep 2; exit 3` outlives its first wait; the poll that sees it exit says
    "Process exited with code 3", and an item_completed event gives the start call's exit code
    3 (structured). One failed command: counted on the poll, not on the start as well."""
    path = NEWER / "codex-0.164.0-poll-rollout.jsonl"
    found = calls(path)
    start = next(c for c in found.values() if "session ID" in (c.output or ""))
    exited = next(c for c in found.values() if "Process exited" in (c.output or ""))
    assert not start.failed
    assert (exited.exit_code, exited.failed) == (3, True)


def test_codex_exec_command_end_on_a_running_start_does_not_fail_it_twice(tmp_path):
    """Codex 0.126 wrote exec_command_end under the start call's id after its output said the
    process was still running; its exit is reported again by the poll. Both commands of the real
    excerpt exit 0; here one is made to exit 1 (its exec_command_end ``exit_code`` and its poll's
    header), and it counts as one failed call."""
    rows = records(NEWER / "codex-0.126.0-exec-command-end.jsonl")
    end = next(r for r in rows if r["payload"].get("type") == "exec_command_end")
    end["payload"]["exit_code"] = 1
    process = end["payload"]["process_id"]
    poll_call = next(r for r in rows if r["payload"].get("name") == "write_stdin"
                     and json.loads(r["payload"]["arguments"])["session_id"] == int(process))
    poll = next(r for r in rows if r["payload"].get("type") == "function_call_output"
                and r["payload"]["call_id"] == poll_call["payload"]["call_id"])
    poll["payload"]["output"] = poll["payload"]["output"].replace("Process exited with code 0",
                                                                  "Process exited with code 1")
    path = write_jsonl(tmp_path / "rollout.jsonl", rows)
    found = calls(path)
    assert [c.call_id for c in found.values() if c.failed] == [poll_call["payload"]["call_id"]]
    assert found[poll_call["payload"]["call_id"]].exit_code == 1


# -- 3. Codex: token totals ----------------------------------------------------------------

def test_codex_rollout_tokens_survive_a_total_that_falls(tmp_path):
    """The resumed rollout's second task, its running total restarted from zero (what the issue
    saw in resumed and compacted sessions: the last total then under-counts): the sum of
    per-turn deltas is still the hand count of the real file."""
    path = NEWER / "codex-0.164.0-resumed-rollout.jsonl"
    rows = records(path)
    counts = [r for r in rows if r["payload"].get("type") == "token_count" and r["payload"].get("info")]
    second_task = next(i for i, r in enumerate(rows) if r["payload"].get("type") == "task_started" and i > 5)
    before = [r for r in counts if rows.index(r) < second_task][-1]["payload"]["info"]["total_token_usage"]
    for r in counts:
        if rows.index(r) > second_task:
            total = r["payload"]["info"]["total_token_usage"]
            for key, value in before.items():
                total[key] -= value
    edited = summarize(write_jsonl(tmp_path / "rollout.jsonl", rows))
    assert usage_of(edited) == COUNTS[path.name]["usage"] == usage_of(summarize(path))


def test_codex_exec_resume_stream_is_not_double_counted(tmp_path):
    """`codex exec resume` reports the thread's running total on turn.completed: the first run's
    stream and the resume's stream, appended as one file, used the resume's last total."""
    first, resume = NEWER / "codex-0.164.0-exec-first.jsonl", NEWER / "codex-0.164.0-exec-resume.jsonl"
    both = tmp_path / "streams.jsonl"
    both.write_text(first.read_text() + resume.read_text())
    assert usage_of(summarize(both)) == COUNTS[resume.name]["usage"]
    assert summarize(both).usage.input_tokens < (summarize(first).usage.input_tokens
                                                 + summarize(resume).usage.input_tokens)


# -- 4. injected turns ---------------------------------------------------------------------

def test_claude_interrupt_marker_is_not_a_user_turn():
    path = NEWER / "claude-2.1.217-interrupted.jsonl"
    steps = list(iter_steps(path))
    assert summarize(path).user_turns == COUNTS[path.name]["user_turns"] == 1
    assert [s for s in steps if s.source == "system" and "[Request interrupted by user]" in s.message]


def test_codex_subagent_notification_is_not_a_user_turn():
    assert summarize(CODEX_MAIN).user_turns == COUNTS[str(CODEX_MAIN.relative_to(NEWER))]["user_turns"] == 1


def test_codex_recommended_plugins_message_is_not_a_user_turn(tmp_path):
    """Codex 0.145 injects a user-role ``<recommended_plugins>`` message at a task's start; no
    public file holds one, so it is inserted into the real poll rollout before its prompt."""
    rows = records(NEWER / "codex-0.164.0-poll-rollout.jsonl")
    prompt = next(r for r in rows if r["payload"].get("role") == "user"
                  and "Run the slow check." in json.dumps(r["payload"]["content"]))
    injected = json.loads(json.dumps(prompt))
    injected["payload"]["content"] = [{"type": "input_text", "text": "<recommended_plugins>\nPlugins that are "
                                       "available but not installed:\n- Box\n</recommended_plugins>"}]
    rows.insert(rows.index(prompt), injected)
    assert summarize(write_jsonl(tmp_path / "rollout.jsonl", rows)).user_turns == 1


# -- 5. usage_known ------------------------------------------------------------------------

@pytest.mark.parametrize("path", [RECORDED / "pi-0.73.1-model-error.jsonl",
                                  NEWER / "codex-0.164.0-usage-limit-exec.jsonl"])
def test_a_file_that_records_no_usage_has_usage_unknown(path):
    """Pi's stream of a session whose model never answered (its usage all zeros), Codex's exec
    stream of a turn that failed on a usage limit (no turn.completed)."""
    assert summarize(path).usage_known is False


def test_a_file_that_records_usage_has_it_known():
    assert summarize(NEWER / "codex-0.164.0-usage-limit-rollout.jsonl").usage_known is True
