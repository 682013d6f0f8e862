"""A rate-limited model (429 / overloaded) is an infrastructure error, never a task failure.

The host CLIs retry a 429 a few times themselves and then give up: Codex 0.164 exits 1 after
``turn.failed`` "exceeded retry limit, last status: 429 Too Many Requests"; Claude Code 2.1
emits ``system/api_retry`` events (``error_status: 429``, ``error: rate_limit``) and waits up to
10 retries with growing delays. git-hermit classifies such a rollout as an exception
(``RateLimited``), backs that host off with jitter and reruns the rollout, up to
``executor.rate_limit.retries`` times.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from support.rollouts_e2e_helpers import make_project, result_files, scores_note

from git_hermit.hosts.registry import find_host_cli
from support.rate_limits_helpers import ANSWER_TOKENS, FAKE_CODEX, FAKE_CODEX_BILLED, LIMITED_TOKENS, _billed_codex_step, _calls, _real_host_run  # noqa: F401


def _fake_codex_project(repo: Path, limited: int, retries: int, n_tasks: int = 2, script: str = FAKE_CODEX) -> Path:
    make_project(repo, "print('unused')\n", n_tasks=n_tasks, k=1)
    control = repo.parent / "control"
    control.mkdir()
    fake = control / "codex"
    fake.write_text(script.format(python=sys.executable, control=str(control)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (control / "limited").write_text(str(limited))
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["agent"] = {"backend": "codex", "bin": str(fake), "timeout_s": 30,
                    # a keyless local endpoint (the fake ignores it): the preflight's credentials check passes
                    "provider": {"base_url": "http://127.0.0.1:9/v1"}}
    cfg["trainer"]["concurrency"] = 1
    cfg["executor"] = {"kind": "local", "rate_limit": {"retries": retries, "backoff_s": 0.3, "max_backoff_s": 2}}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return control


def test_a_rate_limited_rollout_backs_off_with_jitter_and_reruns(repo):
    control = _fake_codex_project(repo, limited=2, retries=3)
    r = hermit(repo, "rollout", "--json", timeout=120)
    assert r.code == 0, r.err
    note = scores_note(repo)
    assert {t: s["outcome"] for t, s in note["tasks"].items()} == {"t0": "pass", "t1": "pass"}
    calls = _calls(control)
    assert [kind for _, kind in calls] == ["429", "429", "ok", "ok"]
    # backoff 0.3 s then 0.6 s, each with jitter in [half, full]: the host waited before each rerun
    gaps = [later - earlier for (earlier, _), (later, _) in zip(calls, calls[1:])]
    assert gaps[0] >= 0.15 and gaps[1] >= 0.3, gaps
    assert all(json.loads(p.read_text())["outcome"] == "pass" for p in result_files(repo))


def test_a_rollout_still_rate_limited_after_its_retries_is_an_infra_exception_not_a_fail(repo):
    control = _fake_codex_project(repo, limited=99, retries=1, n_tasks=1)
    r = hermit(repo, "rollout", "--json", timeout=120)
    assert r.code == 17, r.err            # its one row is an exception: no score (issue 24)
    assert [kind for _, kind in _calls(control)] == ["429", "429"]          # once, then one retry
    [path] = result_files(repo)
    result = json.loads(path.read_text())
    assert result["outcome"] == "exception" and result["exception_type"] == "RateLimited", result
    assert "429" in result["error"] and "RateLimited 1" in json.loads(r.out)["error"]


@pytest.mark.hosts
def test_real_codex_giving_up_on_429_is_rerun_after_a_backoff(repo):
    if find_host_cli("codex") is None:
        pytest.skip("the codex CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault, ScriptedModelServer, Turn
    from support.agents_helpers import _agent_block
    make_project(repo, "print('unused')\n", n_tasks=1, k=1, host="codex")
    with open(repo / "tasks.jsonl", "w") as handle:
        handle.write(json.dumps({"id": "t0", "prompt": "Answer 42.", "answer": "42"}) + "\n")
    # Codex retries twice (request_max_retries = 2), so three 429s make it give up once
    with ScriptedModelServer([Turn.say("42")], faults=[Fault(status=429, retry_after=0)] * 3) as server:
        cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
        cfg["agent"], env = _agent_block("codex", server.base_url)
        cfg["executor"] = {"kind": "local", "rate_limit": {"retries": 2, "backoff_s": 0.2}}
        (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        r = hermit(repo, "rollout", "--json", env=env, timeout=300)
        answered = len(server.requests)
    assert r.code == 0, r.err
    assert answered >= 4
    result = json.loads(result_files(repo)[0].read_text())
    assert result["outcome"] == "pass", result


def _stream(tmp_path: Path, events: list[dict], stderr: str = "") -> tuple[Path, Path]:
    trajectory, err = tmp_path / "trajectory.jsonl", tmp_path / "agent.stderr"
    trajectory.write_text("".join(json.dumps(e) + "\n" for e in events))
    err.write_text(stderr)
    return trajectory, err


def test_the_hosts_rate_limit_reports_are_recognised_and_a_tool_printing_429_is_not(tmp_path):
    from git_hermit.agents.hosts import rate_limit_report
    # Claude Code still waiting out the limit when the timeout hit (as measured with 2.1.317)
    claude = [{"type": "system", "subtype": "init"},
              {"type": "system", "subtype": "api_retry", "attempt": 8, "max_retries": 10,
               "retry_delay_ms": 35464, "error_status": 429, "error": "rate_limit"}]
    assert "429" in rate_limit_report(*_stream(tmp_path, claude))
    overloaded = [{"type": "result", "subtype": "error_during_execution", "is_error": True,
                   "result": "API Error: 529 overloaded_error"}]
    assert rate_limit_report(*_stream(tmp_path, overloaded))
    # a rate limit that was retried and then got through is not how the session ended
    recovered = claude + [{"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}}]
    assert rate_limit_report(*_stream(tmp_path, recovered)) is None
    # what a tool printed is the task's business, not the model's answer
    tool = [{"type": "item.completed", "item": {"type": "command_execution",
                                                "aggregated_output": "HTTP 429 Too Many Requests"}},
            {"type": "turn.failed", "error": {"message": "stream disconnected before completion"}}]
    assert rate_limit_report(*_stream(tmp_path, tool)) is None
    # no stream at all: the host's stderr
    assert rate_limit_report(*_stream(tmp_path, [], "Error: 429 rate limit exceeded\n"))


def _acting_tokens(entries: list[dict]) -> int:
    return sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"] for e in entries if e["role"] == "acting")


def _spent(repo: Path, env: dict) -> int:
    r = hermit(repo, "estimate", "--json", env=env)
    assert r.code == 0, r.err
    return json.loads(r.out)["spent"]["tokens"]


def test_a_rate_limited_attempts_tokens_are_in_the_steps_ledger_note_and_estimate_once(repo):
    from support.step_support import RUN, env_for, step_dir
    control = _billed_codex_step(repo, limited=1)
    env = env_for(control)
    r = hermit(repo, "step", env=env, timeout=120)
    assert r.code == 0, r.out + r.err
    assert [kind for _, kind in _calls(control)] == ["429", "ok", "ok"]
    billed = LIMITED_TOKENS + 2 * ANSWER_TOKENS
    ledger = json.loads((step_dir(repo, 1) / "ledger.json").read_text())["entries"]
    assert _acting_tokens(ledger) == billed, ledger
    # an infrastructure error, not a trial: the scored attempts are the two that answered
    note = scores_note(repo, f"hermit/{RUN}/step-0000")
    assert [a["outcome"] for t in note["tasks"].values() for a in t["attempts"]] == ["pass", "pass"]
    acting = note["usage_by_role"]["acting"]
    assert acting["input_tokens"] + acting["output_tokens"] == billed, note
    learners = sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"] for e in ledger if e["role"] != "acting")
    assert _spent(repo, env) == billed + learners


def test_a_rate_limited_attempt_that_crosses_the_budget_stops_the_step_and_resume_bills_it_once(repo):
    from support.step_support import env_for, step_dir
    control = _billed_codex_step(repo, limited=1, budget={"max_tokens": 100})
    env = env_for(control)
    r = hermit(repo, "step", env=env, timeout=120)
    assert r.code == 16, r.out + r.err          # the 120 tokens of the 429'd attempt crossed it
    assert "budget reached" in r.err, r.err
    answered = [kind for _, kind in _calls(control)].count("ok")
    assert answered <= 1                         # at most the rollout already in flight finished
    stopped = json.loads(hermit(repo, "estimate", "--json", env=env).out)
    assert stopped["spent"]["tokens"] == LIMITED_TOKENS + answered * ANSWER_TOKENS
    # the 429'd attempt is spending, not a finished rollout
    assert stopped["unfinished"] == ({"step": 1, "rollouts": answered} if answered else None)
    (repo / "hermit.yaml").write_text((repo / "hermit.yaml").read_text().replace("max_tokens: 100",
                                                                                 "max_tokens: 100000"))
    r = hermit(repo, "step", env=env, timeout=120)
    assert r.code == 0, r.out + r.err
    assert [kind for _, kind in _calls(control)] == ["429", "ok", "ok"]   # nothing ran twice
    ledger = json.loads((step_dir(repo, 1) / "ledger.json").read_text())["entries"]
    assert _acting_tokens(ledger) == LIMITED_TOKENS + 2 * ANSWER_TOKENS, ledger


def test_a_rerun_rollout_bills_the_rate_limited_attempt_once_in_its_note_and_ledger(repo):
    control = _fake_codex_project(repo, limited=2, retries=3, script=FAKE_CODEX_BILLED)
    billed = 2 * LIMITED_TOKENS + 2 * ANSWER_TOKENS
    for _ in range(2):                       # the second run reuses every row: it bills nothing more
        r = hermit(repo, "rollout", "--json", timeout=120)
        assert r.code == 0, r.err
        acting = scores_note(repo)["usage_by_role"]["acting"]
        assert acting["input_tokens"] + acting["output_tokens"] == billed
        [ledger] = (repo / ".hermit" / "runs" / "ahe" / "evals").glob("*/ledger.json")
        assert _acting_tokens(json.loads(ledger.read_text())["entries"]) == billed
        assert _spent(repo, {}) == billed
    assert [kind for _, kind in _calls(control)] == ["429", "429", "ok", "ok"]


def test_a_killed_step_resumes_and_bills_the_rate_limited_attempt_it_recorded_once(repo):
    from support.step_support import env_for, kill_group, rollouts_dir, start_step, step_dir, wait_for
    control = _billed_codex_step(repo, limited=1)
    fake = control / "codex"          # answering sessions wait while control/hold exists
    fake.write_text(fake.read_text().replace('answer = prompt', 'while (control / "hold").exists():\n'
                                             '    time.sleep(0.05)\nanswer = prompt'))
    (control / "hold").write_text("")
    proc = start_step(repo, control)
    try:
        # the 429'd attempt recorded, and an answering session (held) under way: then killed
        wait_for(lambda: any(rollouts_dir(repo, 1).glob("*/*/rate-limited.jsonl"))
                 and "ok" in [kind for _, kind in _calls(control)], "the re-queued attempt to start", proc)
    finally:
        kill_group(proc)
    (control / "hold").unlink()
    env = env_for(control)
    r = hermit(repo, "step", env=env, timeout=120)
    assert r.code == 0, r.out + r.err
    ledger = json.loads((step_dir(repo, 1) / "ledger.json").read_text())["entries"]
    assert _acting_tokens(ledger) == LIMITED_TOKENS + 2 * ANSWER_TOKENS, ledger


@pytest.mark.hosts
def test_real_codex_rate_limited_after_a_billed_turn_is_billed_once_and_run_again(repo):
    """The first model call (a shell call) is answered and billed; the next one gets 429s until
    Codex gives up (it retries twice); the attempt run again gets through. Codex's stream reports
    a turn's usage only when the turn completes: the billed call is read from its stored session."""
    if find_host_cli("codex") is None:
        pytest.skip("the codex CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault, Turn
    faults = [Fault(status=429, retry_after=0, after_tool_results=1)] * 3
    result, entries, billed = _real_host_run(
        repo, "codex", [Turn.shell("echo ran"), Turn.say("42")], faults, {"timeout_s": 120})
    assert len(billed) == 3, billed       # the limited attempt's shell call; run again: shell call, 42
    _assert_billed_once(repo, result, entries, billed, limited_calls=1)


def _tokens(calls: list[tuple[int, int]]) -> tuple[int, int]:
    return sum(i for i, _ in calls), sum(o for _, o in calls)


def _assert_billed_once(repo: Path, result: dict, entries: list[dict], billed: list[tuple[int, int]],
                        limited_calls: int) -> None:
    """The 429'd attempt's answered calls (the server's first ``limited_calls``) are in the
    ledger once, as the row's retry entry; the attempt run again bills the rest; the note's
    acting usage and ``estimate``'s spending are every token the server billed."""
    assert result["outcome"] == "pass", result
    retried = [e for e in entries if "~rate-limited-" in e["key"]]
    assert len(retried) == 1, entries
    usage = retried[0]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == _tokens(billed[:limited_calls]), (entries, billed)
    again = result["usage"]["input_tokens"], result["usage"]["output_tokens"]
    assert again == _tokens(billed[limited_calls:]), (result["usage"], billed)
    acting = scores_note(repo)["usage_by_role"]["acting"]
    assert (acting["input_tokens"], acting["output_tokens"]) == _tokens(billed), (acting, billed)
    assert _spent(repo, {}) == sum(_tokens(billed))          # what `estimate` and the budget count


def _claude_with_a_sub_agent(body: dict, tool_results: int):
    """The main agent hands the check to a sub-agent (Claude Code's Agent tool, in the
    foreground), which answers "done"; then the main agent answers 42."""
    from git_hermit.hostkit.model_server import Turn
    first = (body.get("messages") or [{}])[0].get("content")
    first_text = first if isinstance(first, str) else " ".join(
        b.get("text", "") for b in first or [] if isinstance(b, dict))
    if "Say done." in first_text:                  # the sub-agent's own conversation
        return Turn.say("done")
    if tool_results == 0:
        return Turn(tool="Agent", tool_input={"description": "check", "prompt": "Say done.",
                                              "subagent_type": "general-purpose", "run_in_background": False})
    return Turn.say("42")


# Claude Code 2.1.317 waits out a 429 itself, honouring Retry-After, up to 10 retries (or
# CLAUDE_CODE_MAX_RETRIES). When it gives up, its stream's `result` line says so; that line's
# `usage` counts only the main agent's calls, its `modelUsage` every call, sub-agents' too.
# When hermit's timeout ends it while it waits, the stream holds only each call's first usage
# snapshot (output_tokens 1), and only some of a sub-agent's: the billed calls are in the
# sessions it stores under CLAUDE_CONFIG_DIR/projects/<cwd>/, the main agent's in
# <session>.jsonl, each sub-agent's in <session>/subagents/agent-<id>.jsonl (all measured
# against the scripted server).
CLAUDE_LIMITS = {
    "gives-up": ([{"status": 429, "retry_after": 0}] * 2, {"timeout_s": 120, "env": {"CLAUDE_CODE_MAX_RETRIES": "1"}}),
    # it waits out a Retry-After of 60 s (a much longer one, 600 s, it gives up on at once)
    "killed-while-waiting": ([{"status": 429, "retry_after": 60}], {"timeout_s": 20}),
}


@pytest.mark.hosts
@pytest.mark.parametrize("how", sorted(CLAUDE_LIMITS))
def test_real_claude_code_rate_limited_after_a_sub_agent_ran_is_billed_once_and_run_again(repo, how):
    if find_host_cli("claude-code") is None:
        pytest.skip("the claude CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault
    faults, agent = CLAUDE_LIMITS[how]
    result, entries, billed = _real_host_run(
        repo, "claude-code", _claude_with_a_sub_agent, [Fault(**f, after_tool_results=1) for f in faults], agent)
    # the limited attempt: the main agent's Agent call and the sub-agent's answer; run again: those and 42
    assert len(billed) == 5, billed
    _assert_billed_once(repo, result, entries, billed, limited_calls=2)


@pytest.mark.hosts
def test_real_pi_rate_limited_after_a_billed_turn_is_billed_once_and_run_again(repo):
    """Pi 0.73.1 (run with --no-session: it stores no session) reports each call's usage in its
    stream's ``message_end`` as the call ends, so the call billed before the 429 is there: its
    SDK tries a request 3 times and Pi retries the turn 3 times (2, 4, 8 s), then ends on an
    assistant error (measured against the scripted server)."""
    if find_host_cli("pi") is None:
        pytest.skip("the pi CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault, Turn
    faults = [Fault(status=429, retry_after=0, after_tool_results=1)] * 12
    result, entries, billed = _real_host_run(
        repo, "pi", [Turn(command="echo ran", tool="bash"), Turn.say("42")], faults, {"timeout_s": 120})
    assert len(billed) == 3, billed
    _assert_billed_once(repo, result, entries, billed, limited_calls=1)


@pytest.mark.hosts
@pytest.mark.parametrize("host", ["codex", "claude-code"])
def test_a_real_host_session_its_timeout_ended_bills_the_calls_it_made(repo, host):
    """Budgets need every billed token, a timed-out session's too: the model answers a shell
    call, then takes longer than the rollout's timeout. Codex's stream had reported nothing
    (a turn's usage comes with ``turn.completed``), Claude Code's only a first usage snapshot
    (1 output token); their stored sessions hold what the call billed."""
    if find_host_cli(host) is None:
        pytest.skip(f"the {host} CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault, Turn
    faults = [Fault(delay_s=60, after_tool_results=1)]
    # its one row timed out: no score (exit 17), but what it billed is in the ledger
    result, entries, billed = _real_host_run(repo, host, [Turn.shell("echo ran"), Turn.say("42")], faults,
                                             {"timeout_s": 15}, code=17)
    assert result["exception_type"] == "AgentTimeout" or result.get("timed_out"), result
    assert len(billed) == 1, billed
    assert (result["usage"]["input_tokens"], result["usage"]["output_tokens"]) == billed[0], (result, billed)
    [entry] = entries
    assert (entry["usage"]["input_tokens"], entry["usage"]["output_tokens"]) == billed[0], entries


def test_a_claude_session_woken_after_a_429_that_then_answers_nothing_is_no_rate_limit(tmp_path):
    """Claude Code 2.1.317: the first query gave up on a 429 (an ``is_error`` result), a
    background sub-agent's end woke the session and its second query finished (the CLI prints
    both result lines at the end, exit 0). The session went on past that 429: if the woken
    query answered nothing, that is the agent's failure, not a rate limit to run again."""
    from git_hermit.agents.hosts import rate_limit_report
    recorded = Path(__file__).parent / "fixtures" / "trajectories" / "recorded" / "claude-2.1.317-woken-after-429-stream.jsonl"
    events = [json.loads(line) for line in recorded.read_text().splitlines() if line.strip()]
    assert [(e["is_error"], e["result"][:9]) for e in events if e["type"] == "result"] == [(True, "API Error"), (False, "42")]
    events[-1] |= {"result": ""}
    assert rate_limit_report(*_stream(tmp_path, events)) is None
    # had the woken query given up on a 429 too, that is how the session ended
    events[-1] |= {"is_error": True, "result": "API Error: Request rejected (429)"}
    assert "429" in rate_limit_report(*_stream(tmp_path, events))
