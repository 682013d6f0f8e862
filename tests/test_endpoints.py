"""One-shot learners and the llm judge through the official OpenAI and Anthropic SDKs.

The scripted model server speaks OpenAI Chat Completions (what vLLM, Ollama and llama.cpp
serve) and Anthropic Messages, streamed and not, and can answer first with a 429 carrying
Retry-After, a 500, a malformed body or a late answer. Each is retried by the SDK or
reported as the call's error — a judge's failure is an exception outcome, never a fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the openai extra is not installed")
pytest.importorskip("anthropic", reason="the anthropic extra is not installed")

from git_hermit.hostkit.model_server import CHAT_API, MESSAGES_API, Fault, ScriptedModelServer, Turn  # noqa: E402
from git_hermit.learners import OneShotLearner  # noqa: E402
from git_hermit.rollouts.judges import make_judge  # noqa: E402
from git_hermit.rollouts.tasks import Task  # noqa: E402

KEY_ENV = "HERMIT_TEST_ENDPOINT_KEY"


def _learner(server: ScriptedModelServer, api: str, role: str = "debugger", **extra) -> OneShotLearner:
    base = server.base_url + ("/v1" if api == "openai" else "")
    return OneShotLearner(role, api, {"name": "scripted-model", "provider": {"base_url": base, "env_key": KEY_ENV},
                                      **extra})


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "not-a-real-key")


@pytest.mark.parametrize("api, wire", [("openai", CHAT_API), ("anthropic", MESSAGES_API)])
@pytest.mark.parametrize("stream", [False, True])
def test_answer_and_usage_streamed_or_not(tmp_path, api, wire, stream):
    with ScriptedModelServer([Turn.say("ROOT CAUSE: the agent mixed units.")]) as server:
        result = _learner(server, api, stream=stream).ask(tmp_path, "why did t1 fail?", timeout_s=10, key="t1")
        requests = server.model_requests()
    assert result.ok, result.error
    assert result.text == "ROOT CAUSE: the agent mixed units."
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert [r.api for r in requests] == [wire] and bool(requests[0].body.get("stream")) == stream
    assert "why did t1 fail?" in requests[0].text()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("fault", [Fault(status=429, retry_after=0.2), Fault(status=500),
                                   Fault(status=529), Fault(delay_s=3.0)], ids=["429", "500", "529", "timeout"])
def test_transient_failures_are_retried(tmp_path, api, fault):
    with ScriptedModelServer([Turn.say("fine")], faults=[fault]) as server:
        result = _learner(server, api).ask(tmp_path, "q", timeout_s=1.5, key="k")
        seen = len(server.requests)
    assert result.ok and result.text == "fine", result.error
    assert seen == 2          # the failed request, then the retry


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_failures_that_outlast_the_retries_are_reported(tmp_path, api):
    faults = [Fault(status=500)] * 3
    with ScriptedModelServer([Turn.say("never")], faults=faults) as server:
        result = _learner(server, api, max_retries=1).ask(tmp_path, "q", timeout_s=5, key="k")
        seen = len(server.requests)
    assert not result.ok and "500" in result.error and result.text == ""
    assert seen == 2


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_malformed_answer_is_a_clear_error(tmp_path, api):
    with ScriptedModelServer([Turn.say("never")], faults=[Fault(malformed=True)]) as server:
        result = _learner(server, api, max_retries=0).ask(tmp_path, "q", timeout_s=5, key="k")
    assert not result.ok and result.error


EDITS = {"files": {"MEMORY.md": "# Memory\n- convert units first\n"},
         "manifest": {"iteration": 1, "changes": [{
             "id": "chg-1", "description": "remember to convert units", "files": ["MEMORY.md"],
             "failure_pattern": "mixed units", "predicted_fixes": ["t1"], "risk_tasks": [], "component": "memory"}]}}


@pytest.mark.parametrize("stream", [False, True])
def test_one_shot_evolve_agent_edits_through_chat_completions(tmp_path, stream):
    ws = tmp_path / "ws"
    (ws / "adapter").mkdir(parents=True)
    (ws / "state").mkdir()
    (ws / "adapter" / "MEMORY.md").write_text("# Memory\n")
    reply = "Added a memory entry.\n```json\n" + json.dumps(EDITS) + "\n```\n"
    with ScriptedModelServer([Turn.say(reply)], faults=[Fault(status=429, retry_after=0.1)]) as server:
        result = _learner(server, "openai", role="evolve", stream=stream).ask(ws, "Iteration 1", timeout_s=10,
                                                                              key="step-1")
        prompt = server.model_requests()[0].text()
    assert result.ok, result.error
    assert "# Memory" in prompt            # the adapter's files went into the prompt
    assert (ws / "adapter" / "MEMORY.md").read_text() == "# Memory\n- convert units first\n"
    assert json.loads((ws / "state" / "change_manifest.json").read_text()) == EDITS["manifest"]


def _judge(server: ScriptedModelServer, **extra):
    return make_judge({"kind": "llm", "model": "scripted-model", "base_url": server.base_url + "/v1",
                       "env_key": KEY_ENV, "rubric": "the answer is 42", **extra})


TASK = Task("t1", "What is six times seven?", "42", {}, None, {})


def test_llm_judge_retries_then_grades(tmp_path):
    answer = 'It says 42.\n{"reward": 1, "reason": "matches"}'
    with ScriptedModelServer([Turn.say(answer)], faults=[Fault(status=429, retry_after=0.1)]) as server:
        verdict = _judge(server).judge(TASK, tmp_path, "42", timeout_s=5)
    assert verdict.outcome == "pass", verdict


@pytest.mark.parametrize("fault", [Fault(malformed=True), Fault(status=500)], ids=["malformed", "500"])
def test_llm_judge_failure_is_an_exception_never_a_fail(tmp_path, fault):
    with ScriptedModelServer([Turn.say('{"reward": 0}')], faults=[fault] * 3) as server:
        verdict = _judge(server, max_retries=0).judge(TASK, tmp_path, "42", timeout_s=5)
    assert verdict.outcome == "exception", verdict


def test_llm_judge_reply_without_a_reward_is_an_exception(tmp_path):
    with ScriptedModelServer([Turn.say("I think it is fine.")]) as server:
        verdict = _judge(server).judge(TASK, tmp_path, "42", timeout_s=5)
    assert verdict.outcome == "exception"


def _use_streamed_chat_learners(repo: Path, server: ScriptedModelServer) -> None:
    """Point the run's learners at the scripted server as one-shot, streamed chat calls."""
    import yaml
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"]["base"] = "llm"
    config["evolver"].pop("scripted")
    config["evolver"]["model"] = {"name": "scripted-model", "stream": True,
                                  "provider": {"base_url": server.base_url + "/v1", "env_key": KEY_ENV}}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def test_ahe_step_with_one_shot_learners_on_a_chat_completions_server(repo_with_history, monkeypatch):
    """`git hermit step` with `evolver.base: llm`: the Debugger and the Evolve Agent are chat calls to
    the scripted server (streamed), through a 429 and a 500; the Evolve Agent's edit is committed."""
    from support.cli_helpers import hermit
    from conftest import git
    from support.step_support import RUN, make_run

    repo = repo_with_history
    make_run(repo, {"t1": "42", "t2": "7"}, k=1)
    memory = (repo / "adapter" / "MEMORY.md").read_text() + "- answer t1: 42\n- answer t2: 7\n"
    edits = {"files": {"MEMORY.md": memory}, "manifest": {"iteration": 1, "changes": [{
        "id": "chg-1", "description": "remember the answers", "files": ["MEMORY.md"],
        "failure_pattern": "the agent does not know the answer", "predicted_fixes": ["t1", "t2"],
        "risk_tasks": [], "component": "memory"}]}}

    def script(body: dict, tool_results: int) -> Turn:
        prompt = json.dumps(body.get("messages"))
        if "exactly one fenced" in prompt:      # the one-shot Evolve Agent's answer format
            return Turn.say("Remembered the answers.\n```json\n" + json.dumps(edits) + "\n```\n")
        return Turn.say("## Root cause\nThe agent did not know the answer.\n")

    with ScriptedModelServer(script, faults=[Fault(status=429, retry_after=0.1), Fault(status=500)]) as server:
        _use_streamed_chat_learners(repo, server)
        done = hermit(repo, "step", "--run", RUN)
        chat_calls = [r for r in server.model_requests() if r.api == CHAT_API]
    assert done.code == 0, done.err
    assert len(chat_calls) == 3            # two Debugger sessions and one Evolve Agent, after the faults
    tip = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0001").strip()
    assert "- answer t1: 42" in git(repo, "show", f"{tip}:adapter/MEMORY.md")
    assert "chg-1" in git(repo, "log", "-1", "--format=%B", tip)


def test_continual_harness_refiner_passes_on_a_chat_completions_server(repo_with_history):
    """The Refiner's four passes are one-shot chat calls (`evolver.base: llm`), streamed, through a
    500; each pass's answer is applied and committed on its own."""
    from support.cli_helpers import hermit
    from conftest import git
    from support.continual_harness_helpers import make_continual_run

    repo = repo_with_history
    make_continual_run(repo, tasks=3)
    policy = (repo / "adapter" / "AGENTS.md").read_text() + "\n- Lesson from the chat server: answer tersely.\n"
    answers = {
        "prompt optimisation": "```markdown\n" + policy + "```",
        "library of sub-agents": json.dumps({"analysis": "a planner helps", "create": [
            {"name": "planner", "description": "Plans the task before any edit.", "instructions": "List the steps."}]}),
        "reusable procedures": json.dumps({"analysis": "none yet", "add": []}),
        "curator of an autonomous agent's memory": json.dumps({"analysis": "record it", "add": [
            {"topic": "Chat server", "note": "The Refiner ran through Chat Completions."}]}),
    }

    def script(body: dict, tool_results: int) -> Turn:
        prompt = json.dumps(body.get("messages"))
        return Turn.say(next(answer for marker, answer in answers.items() if marker in prompt))

    with ScriptedModelServer(script, faults=[Fault(status=500)]) as server:
        _use_streamed_chat_learners(repo, server)
        done = hermit(repo, "step")
        calls = [r for r in server.model_requests() if r.api == CHAT_API]
    assert done.code == 0, done.err
    assert len(calls) == 4 and all(r.body.get("stream") for r in calls)
    tip = "refs/heads/hermit/r/step-0001"
    subjects = git(repo, "log", "--format=%s", f"refs/heads/hermit/r/step-0000..{tip}")
    assert "policy" in subjects and "subagents" in subjects and "memory" in subjects
    assert "Lesson from the chat server" in git(repo, "show", f"{tip}:adapter/AGENTS.md")
    assert "The Refiner ran through Chat Completions." in git(repo, "show", f"{tip}:adapter/memory/NOTES.md")
