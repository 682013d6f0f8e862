"""A Claude Code session a background sub-agent wakes again ends on a second ``result`` line.

Measured with the real Claude Code 2.1.317 CLI against the scripted model server: the main
agent starts a sub-agent with ``run_in_background``, answers (the first query ends: ``init``
… ``result``), and when the sub-agent finishes the CLI wakes the main agent (a second
``system/init`` … ``result``, whose ``result``, ``num_turns``, ``duration_ms`` and ``usage``
cover that query alone). The session's real final answer is the last ``result`` line's,
even an empty one (2.1.317 ends on ``result: ""`` after nudging the model once) or an error
(``is_error: true``, exit 1: its ``result`` is the CLI's error text, not an answer).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from support.rate_limits_helpers import _real_host_run

from git_hermit.hosts.registry import find_host_cli
from git_hermit.trajectories import iter_steps, summarize

INTERIM = "WAITING"


def _woken(first_answer: str, second: str):
    """The main agent starts a background sub-agent (which answers "done"), answers
    ``first_answer``; woken by the sub-agent's notification it runs ``echo ran`` and then
    answers ``second`` (a fault scripted at two tool results hits that last call instead)."""
    from git_hermit.hostkit.model_server import Turn

    def script(body: dict, tool_results: int):
        messages = body.get("messages") or [{}]
        first = messages[0].get("content")
        first_text = first if isinstance(first, str) else " ".join(
            b.get("text", "") for b in first or [] if isinstance(b, dict))
        if "Say done." in first_text:                  # the sub-agent's own conversation
            time.sleep(1.5)     # it ends after the main agent's first answer, so it wakes it
            return Turn.say("done")
        if "<task-notification>" in json.dumps(messages):   # the second query
            return Turn.shell("echo ran") if tool_results < 2 else Turn.say(second)
        if tool_results == 0:
            return Turn(tool="Agent", tool_input={"description": "check", "prompt": "Say done.",
                                                  "subagent_type": "general-purpose", "run_in_background": True})
        return Turn.say(first_answer)
    return script


def _run(repo: Path, first_answer: str, second: str, faults: list | None = None,
         after_tool_results: int = 2, code: int = 0) -> tuple[dict, Path]:
    if find_host_cli("claude-code") is None:
        pytest.skip("the claude CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault
    # the rate-limit test's set-up: one task "Run the check, then answer." whose answer is 42
    faults = [Fault(**f, after_tool_results=after_tool_results) for f in faults or []]
    result, _, _ = _real_host_run(repo, "claude-code", _woken(first_answer, second), faults,
                                  {"timeout_s": 120, "env": {"CLAUDE_CODE_MAX_RETRIES": "1"}}, code=code)
    [directory] = {p.parent for p in (repo / ".hermit" / "runs" / "ahe" / "evals").glob("*/rollouts/*/*/result.json")}
    return result, directory / result["trajectory"]


def _results(stream: Path) -> list[dict]:
    records = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("type") == "result"]


@pytest.mark.hosts
def test_real_claude_code_woken_again_is_scored_on_its_last_result_and_keeps_both_queries_steps(repo):
    result, stream = _run(repo, INTERIM, "42")
    first, last = _results(stream)                  # the CLI printed two result lines
    assert (first["result"], last["result"]) == (INTERIM, "42")
    assert result["final_answer"] == "42" and result["outcome"] == "pass", result
    steps = list(iter_steps(stream))
    agent_says = [s.message for s in steps if s.source == "agent" and s.message]
    assert agent_says == [INTERIM, "42"]
    calls = [c.name for s in steps for c in s.tool_calls]
    assert calls == ["Agent", "Bash"]               # the woken query's call is a step too
    # the steps say that the session woke again, and which query's result is the answer
    # (2.1.317 prints both result lines at the end here, after the second query's steps)
    said = [s.message for s in steps if s.source == "system" and s.message.startswith("query ")]
    assert said[0].startswith("query 2: the session woke again"), said
    assert said[1:] == [
        f"query 1 ended (success, {first['num_turns']} turns, {first['duration_ms']} ms): {INTERIM!r} "
        "(not the session's answer: a later query's result is)",
        f"query 2 ended (success, {last['num_turns']} turns, {last['duration_ms']} ms): '42' (the session's answer)"]
    summary = summarize(stream)
    assert summary.final_answer == "42" and not summary.errors and not summary.truncated
    # each result's duration_ms is its query's alone; the rollout's is the process's, both queries
    assert result["duration_s"] * 1000 >= first["duration_ms"] + last["duration_ms"]


@pytest.mark.hosts
def test_real_claude_code_whose_woken_query_answers_nothing_is_not_scored_on_the_earlier_answer(repo):
    """The first query says 42 (the task's answer), the woken one ends on an empty answer:
    the session's answer is empty, so the judge must not see the stale 42."""
    result, stream = _run(repo, "42", "")
    assert [r["result"] for r in _results(stream)] == ["42", ""]
    # before the fix: final_answer "42" and outcome "pass", the judge scored the stale answer
    assert (result["outcome"], result["final_answer"]) == ("fail", None), result
    assert summarize(stream).user_turns == 0        # the CLI's nudge (isSynthetic) is not the human


@pytest.mark.hosts
def test_real_claude_code_whose_woken_query_ends_on_a_model_error_has_no_answer(repo):
    """The woken query's model call fails (500, retried once): the CLI exits 1 on an
    ``is_error`` result whose text is its own error message; that is not the agent's answer,
    and neither is the first query's stale 42."""
    # its one row ended without an answer: an exception (AgentExitError), no score: exit 17 (issue 24)
    result, stream = _run(repo, "42", "42", faults=[{"status": 500}] * 2, code=17)
    last = _results(stream)[-1]
    assert last["is_error"] and last["result"].startswith("API Error"), last
    assert result["final_answer"] is None, result
    assert (result["outcome"], result["exception_type"]) == ("exception", "AgentExitError"), result
    assert "exited with status 1" in result["error"], result
    assert any("api_error" in e for e in summarize(stream).errors), summarize(stream).errors


@pytest.mark.hosts
def test_real_claude_code_rate_limited_in_its_woken_query_is_run_again(repo):
    """A 429 in the woken query (after the first query answered 42) is the rate limit it is:
    the attempt is re-queued, never scored on the first query's answer."""
    result, _ = _run(repo, "42", "42", faults=[{"status": 429, "retry_after": 0}] * 2)
    assert result["outcome"] == "pass" and result["final_answer"] == "42", result
    [ledger] = (repo / ".hermit" / "runs" / "ahe" / "evals").glob("*/ledger.json")
    entries = json.loads(ledger.read_text())["entries"]
    assert len([e for e in entries if "~rate-limited-" in e["key"]]) == 1, entries


def _ledger(repo: Path) -> list[dict]:
    [ledger] = (repo / ".hermit" / "runs" / "ahe" / "evals").glob("*/ledger.json")
    return json.loads(ledger.read_text())["entries"]


@pytest.mark.hosts
@pytest.mark.parametrize("second, outcome", [("42", "pass"), ("", "fail")])
def test_real_claude_code_woken_after_its_first_query_gave_up_on_a_429_is_scored_on_the_woken_query(
        repo, second, outcome):
    """The first query gives up on a 429 (an error result); the sub-agent's end wakes the
    session, which goes on and ends (exit 0; both result lines printed at the end). That 429
    is not how the session ended: it is scored on the woken query, and an empty answer there
    is a fail, not a rate limit run again."""
    result, stream = _run(repo, "unused", second, faults=[{"status": 429, "retry_after": 0}] * 2,
                          after_tool_results=1)
    # before the fix, the empty answer made the earlier 429 look like the end: run again
    assert not [e for e in _ledger(repo) if "~rate-limited-" in e["key"]], _ledger(repo)
    assert [r["is_error"] for r in _results(stream)] == [True, False]
    assert (result["outcome"], result["final_answer"]) == (outcome, second or None), result
