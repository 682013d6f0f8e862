"""Judges: answer modes, command verifiers (reward sources, crash, timeout), llm rubric."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from git_hermit.errors import ConfigError
from git_hermit.model.rollout import RolloutResult, scored
from git_hermit.rollouts.judges import (
    JudgeVerdict, check_judge_for_tasks, extract_final_answer, make_judge, normalise_text, numeric_match,
)
from git_hermit.accounting.ledger import Price
from git_hermit.rollouts.tasks import Task
from support.judges_helpers import FakeChatServer  # noqa: F401


def task(expected: str | None = "2,602", **metadata) -> Task:
    return Task("UID1", "How much?", expected, {}, None, metadata)


def judge_answer(spec: dict, expected: str | None, answer: str | None, tmp_path: Path) -> JudgeVerdict:
    return make_judge({"kind": "answer", **spec}).judge(task(expected), tmp_path, answer, timeout_s=5)


# --- answer --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, expected, answer, outcome", [
    ("exact", "2,602", "  2,602\n", "pass"),
    ("exact", "2,602", "2602", "fail"),
    ("normalised", "Federal Trust Fund.", "  federal   TRUST fund ", "pass"),
    ("normalised", "3.14", "314", "fail"),
    ("normalised", "Federal Trust Fund", "Federal Fund", "fail"),
    ("numeric", "2,602", "The total was $2602 million.", "pass"),
    ("numeric", "1608.80%", "<FINAL_ANSWER>1,608.8 %</FINAL_ANSWER>", "pass"),
    ("numeric", "[0.096, −184.143]", "[0.096, -184.143]", "pass"),
    ("numeric", "[0.096, −184.143]", "[0.096, 184.143]", "fail"),
    ("numeric", "507", "In 1934 it was 507.", "pass"),
    ("numeric", "507", "1934", "fail"),
    ("numeric", "(1,234)", "-1234", "pass"),
    ("numeric", "March 3, 1977", "march 3, 1977", "pass"),
    ("numeric", "March 3, 1977", "April 3, 1977", "fail"),
    ("numeric", "August 1986", "It was August 1986", "pass"),
])
def test_answer_modes(tmp_path, mode, expected, answer, outcome):
    verdict = judge_answer({"mode": mode}, expected, answer, tmp_path)
    assert verdict.outcome == outcome, verdict.output
    assert verdict.reward == (1.0 if outcome == "pass" else 0.0)


def test_numeric_tolerance_is_relative(tmp_path):
    assert judge_answer({"mode": "numeric", "tolerance": 0.01}, "1000", "1009", tmp_path).outcome == "pass"
    assert judge_answer({"mode": "numeric", "tolerance": 0.01}, "1000", "1011", tmp_path).outcome == "fail"
    assert judge_answer({"mode": "numeric"}, "1000", "1000.5", tmp_path).outcome == "fail"
    assert numeric_match("0", "0.0", 0.0)[0] and not numeric_match("0", "0.001", 0.5)[0]


def test_answer_helpers():
    assert extract_final_answer("blah <final_answer> 42 </FINAL_ANSWER> tail") == "42"
    assert extract_final_answer("no tags") == "no tags"
    assert normalise_text("  Héllo,   WORLD! 3.5 ") == "héllo world 3.5"


def test_answer_field_and_missing_expected(tmp_path):
    judge = make_judge({"kind": "answer", "field": "gold", "mode": "exact"})
    assert judge.judge(task(None, gold="7"), tmp_path, "7", timeout_s=5).outcome == "pass"
    verdict = judge.judge(task("7"), tmp_path, "7", timeout_s=5)   # no `gold` in this record
    assert verdict.outcome == "exception" and verdict.exception_type == "MissingExpectedAnswer"
    with pytest.raises(ConfigError, match="cannot judge 1 task"):
        check_judge_for_tasks(judge, {"UID1": task("7")})
    check_judge_for_tasks(judge, {"UID1": task(None, gold="7")})


def test_no_final_answer_fails(tmp_path):
    verdict = judge_answer({"mode": "numeric"}, "5", None, tmp_path)
    assert (verdict.outcome, verdict.reward, verdict.output) == ("fail", 0.0, "no final answer")


def test_bad_judge_config():
    with pytest.raises(ConfigError, match="kind"):
        make_judge({"kind": "oracle"})
    with pytest.raises(ConfigError, match="mode"):
        make_judge({"kind": "answer", "mode": "fuzzy"})
    with pytest.raises(ConfigError, match="unknown key"):
        make_judge({"kind": "answer", "tolerence": 0.1})
    with pytest.raises(ConfigError, match="tolerance"):
        make_judge({"kind": "answer", "mode": "numeric", "tolerance": 5})
    with pytest.raises(ConfigError, match="must be a number"):
        make_judge({"kind": "answer", "mode": "numeric", "tolerance": "1%"})
    with pytest.raises(ConfigError, match="non-empty"):
        make_judge({"kind": "command", "command": []})


# --- command -------------------------------------------------------------------------------

def run_command(tmp_path: Path, script: str, *, answer: str | None = "42", call_timeout: float = 20,
                **spec) -> tuple[JudgeVerdict, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    verifier_dir = tmp_path / "verifier"
    (tmp_path / "verify.py").write_text(script)
    judge = make_judge({"kind": "command", "command": [sys.executable, str(tmp_path / "verify.py")], **spec})
    return judge.judge(task("42"), workspace, answer, timeout_s=call_timeout, verifier_dir=verifier_dir), workspace


READ_ANSWER = "import os\nanswer = open(os.environ['HERMIT_FINAL_ANSWER_FILE']).read()\n"


def test_command_reward_file_in_verifier_dir(tmp_path):
    script = READ_ANSWER + (
        "print('checking', answer, 'in', os.getcwd())\n"
        "ok = answer == os.environ['HERMIT_EXPECTED_ANSWER']\n"
        "open(os.path.join(os.environ['HERMIT_VERIFIER_DIR'], 'reward.txt'), 'w').write('1' if ok else '0')\n")
    verdict, workspace = run_command(tmp_path, script)
    assert verdict.outcome == "pass" and verdict.reward == 1.0
    assert f"checking 42 in {workspace}" in verdict.output
    assert run_command(tmp_path, script, answer="41")[0].outcome == "fail"


def test_command_reward_in_workspace_and_json_line(tmp_path):
    verdict, _ = run_command(tmp_path, "open('reward.txt', 'w').write('0.5')\n")
    assert (verdict.outcome, verdict.reward) == ("fail", 0.5)
    verdict, _ = run_command(tmp_path, "print('log line')\nprint('{\"reward\": 1.0, \"why\": \"ok\"}')\n")
    assert (verdict.outcome, verdict.reward) == ("pass", 1.0) and "log line" in verdict.output


def test_agent_cannot_leave_its_own_reward(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "reward.txt").write_text("1")
    verdict, _ = run_command(tmp_path, "print('no reward written')\n")
    assert verdict.outcome == "exception" and verdict.exception_type == "RewardFileNotFoundError"
    assert "removed a reward.txt the agent left" in verdict.output


def test_unparseable_reward_file_is_fail(tmp_path):
    verdict, _ = run_command(tmp_path, "open('reward.txt', 'w').write('great job')\n")
    assert (verdict.outcome, verdict.reward) == ("fail", 0.0)


def test_crashing_command_judge_is_an_exception_with_its_type(tmp_path):
    judge = make_judge({"kind": "command", "command": "/nonexistent/verifier --check"})
    verdict = judge.judge(task(), tmp_path, "42", timeout_s=5)
    assert verdict.outcome == "exception" and verdict.exception_type == "FileNotFoundError"
    result = verdict.apply(RolloutResult("UID1", 1, "pass"))
    assert (result.outcome, result.exception_type) == ("exception", "FileNotFoundError")
    assert "FileNotFoundError" in result.error and result.verifier_output == verdict.output


def test_verifier_traceback_without_reward(tmp_path):
    verdict, _ = run_command(tmp_path, "raise RuntimeError('verifier bug')\n")
    assert verdict.exception_type == "RewardFileNotFoundError"
    assert "RuntimeError: verifier bug" in verdict.output


def test_timing_out_verifier_is_killed_with_its_children(tmp_path):
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "open('child.pid', 'w').write(str(child.pid))\n"
              "print('started', flush=True)\n"
              "time.sleep(60)\n")
    started = time.monotonic()
    verdict, workspace = run_command(tmp_path, script, call_timeout=1.5)
    assert time.monotonic() - started < 15
    assert verdict.outcome == "exception" and verdict.exception_type == "VerifierTimeoutError"
    assert "Timeout" in verdict.exception_type and "started" in verdict.output
    result = verdict.apply(RolloutResult("UID1", 1, "pass"))
    assert result.is_timeout and result.outcome == "exception"
    as_fail = scored(verdict.apply(RolloutResult("UID1", 1, "pass")), "fail")     # timeout_as: fail
    assert as_fail.outcome == "fail" and as_fail.is_timeout
    child = int((workspace / "child.pid").read_text())
    for _ in range(50):            # the kill is immediate; reaping by init may lag a little
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_config_timeout_overrides_call_timeout(tmp_path):
    verdict, _ = run_command(tmp_path, "import time\ntime.sleep(30)\n", call_timeout=60, timeout_s=0.5)
    assert verdict.exception_type == "VerifierTimeoutError" and "after 0.5s" in verdict.output


def test_harbor_verifier_runs_on_the_host(tmp_path):
    task_dir = tmp_path / "tasks" / "hello"
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "tests" / "test.sh").write_text(
        '#!/bin/bash\nif [ "$(cat hello.txt)" = "hello" ]; then r=1; else r=0; fi\n'
        'echo "tests in $HERMIT_TESTS_DIR"\necho $r > "$HERMIT_VERIFIER_DIR/reward.txt"\n')
    harbor = Task("hello", "Write hello.txt", None, {}, task_dir / "tests" / "test.sh",
                  {"task_dir": str(task_dir), "verifier_timeout_s": 30.0})
    judge = make_judge({"kind": "command"})
    check_judge_for_tasks(judge, {"hello": harbor})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert judge.judge(harbor, workspace, None, timeout_s=5).outcome == "fail"
    (workspace / "hello.txt").write_text("hello")
    verdict = judge.judge(harbor, workspace, None, timeout_s=5, verifier_dir=tmp_path / "v")
    assert verdict.outcome == "pass" and f"tests in {task_dir / 'tests'}" in verdict.output
    assert (tmp_path / "v" / "reward.txt").read_text().strip() == "1"
    with pytest.raises(ConfigError, match="cannot judge"):
        check_judge_for_tasks(judge, {"UID1": task()})


def test_container_harbor_verifier_on_the_host_says_why(tmp_path):
    script = tmp_path / "test.sh"
    script.write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    harbor = Task("t", "p", None, {}, script, {"task_dir": str(tmp_path)})
    verdict = make_judge({"kind": "command"}).judge(harbor, tmp_path, None, timeout_s=10)
    assert verdict.exception_type == "RewardFileNotFoundError"
    assert "$HERMIT_VERIFIER_DIR/reward.txt" in verdict.output


def test_command_placeholders(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    judge = make_judge({"kind": "command", "command": [
        sys.executable, "-c", "import sys, json; print(json.dumps({'reward': 1, 'args': sys.argv[1:]}))",
        "{workspace}", "{task_id}"]})
    verdict = judge.judge(task(), workspace, "x", timeout_s=10)
    assert verdict.outcome == "pass"
    assert json.loads(verdict.output.strip().splitlines()[-1])["args"] == [str(workspace), "UID1"]


# --- llm -----------------------------------------------------------------------------------


@pytest.fixture
def judge_key(monkeypatch):
    pytest.importorskip("openai", reason="the llm judge needs the optional openai extra")
    monkeypatch.setenv("JUDGE_KEY", "sk-test")


def llm_spec(server: FakeChatServer) -> dict:
    return {"kind": "llm", "model": "grader-1", "base_url": server.base_url, "env_key": "JUDGE_KEY",
            "rubric": "The answer must state 2,602.", "max_retries": 0}


def test_llm_judge_pass_with_priced_usage(tmp_path, judge_key):
    with FakeChatServer('The answer matches.\n{"reward": 1, "reason": "correct"}') as server:
        judge = make_judge(llm_spec(server), prices={"grader-1": Price(1.0, 0.1, 10.0)})
        verdict = judge.judge(task(), tmp_path, "<FINAL_ANSWER>2602</FINAL_ANSWER>", timeout_s=10)
    assert verdict.outcome == "pass" and "The answer matches." in verdict.output
    assert (verdict.usage.input_tokens, verdict.usage.cached_input_tokens) == (1000, 400)
    assert (verdict.usage.output_tokens, verdict.usage.reasoning_tokens) == (200, 50)
    assert verdict.usage.cost_usd == pytest.approx((600 * 1.0 + 400 * 0.1 + 200 * 10.0) / 1e6)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert "2,602" in request["body"]["messages"][0]["content"]
    assert "Agent's final answer:\n2602" in request["body"]["messages"][1]["content"]


def test_llm_judge_fail_and_unknown_cost(tmp_path, judge_key):
    with FakeChatServer('{"reward": 0, "reason": "wrong"}') as server:
        verdict = make_judge(llm_spec(server)).judge(task(), tmp_path, "17", timeout_s=10)
    assert (verdict.outcome, verdict.reward, verdict.usage.cost_usd) == ("fail", 0.0, None)


def test_llm_judge_errors_are_exceptions(tmp_path, judge_key):
    with FakeChatServer("no verdict here") as server:
        verdict = make_judge(llm_spec(server)).judge(task(), tmp_path, "17", timeout_s=10)
    assert verdict.exception_type == "JudgeReplyError" and verdict.usage.input_tokens == 1000
    with FakeChatServer("", status=500) as server:
        verdict = make_judge(llm_spec(server)).judge(task(), tmp_path, "17", timeout_s=10)
    assert verdict.outcome == "exception" and verdict.exception_type == "InternalServerError"


def test_llm_judge_needs_its_key(monkeypatch):
    monkeypatch.delenv("MISSING_JUDGE_KEY", raising=False)
    with pytest.raises(ConfigError, match="MISSING_JUDGE_KEY is not set"):
        make_judge({"kind": "llm", "model": "m", "rubric": "r", "env_key": "MISSING_JUDGE_KEY"})
    with pytest.raises(ConfigError, match="needs `rubric`"):
        make_judge({"kind": "llm", "model": "m"})
