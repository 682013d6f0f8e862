"""The Pi coding agent (0.73.1) as a host: its event stream, its backend, its deployment.

Fast tests read the recorded Pi stream and session file, check the backend's models.json and
run a Pi deployment's session-start command by hand. The ``hosts`` tests run the installed
Pi (git hermit hosts install pi) against the scripted model server through `git hermit rollout`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from support.rollouts_e2e_helpers import make_project, result_files, scores_note
from support.trajectories_helpers import RECORDED, check_scripted_session, records

from git_hermit import resources
from git_hermit.adapter.deploy import deploy
from git_hermit.errors import ConfigError
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.hosts.locate import find_node
from git_hermit.hosts.registry import find_host_cli
from git_hermit.agents import AgentContext, make_agent
from git_hermit.supervise.process import ProcessOutcome
from git_hermit.trajectories import iter_steps, summarize

STREAM = RECORDED / "pi-0.73.1-stream.jsonl"
SESSION = RECORDED / "pi-0.73.1-session.jsonl"
MODEL_ERROR = RECORDED / "pi-0.73.1-model-error.jsonl"   # Pi pointed at a closed port; it exited 0
SECRET = "dummy-key-must-not-leak-4711"
# The line of a Pi deployment's AGENTS.md that names the session-start command to run by hand.
SESSION_START_LINE = re.compile(r"`([^`\n]*hook_runner\.py'? SessionStart </dev/null)`")


def ahe_template() -> Path:
    return resources.templates_dir() / "ahe"


def memory_entries(adapter: Path) -> list[str]:
    """MEMORY.md's entries ("- " lines, continuation lines joined), as session_start hands them over."""
    entries: list[str] = []
    for line in (adapter / "MEMORY.md").read_text().splitlines():
        if line.startswith("- "):
            entries.append(line[2:].strip())
        elif line.startswith("  ") and entries:
            entries[-1] += " " + line.strip()
    return entries


# --- the recorded stream (no Pi needed) ------------------------------------------------------

def test_recorded_pi_stream_and_session_agree():
    stream_calls = check_scripted_session(STREAM, "pi", "bash")
    session_calls = check_scripted_session(SESSION, "pi", "bash")
    assert [(c.call_id, c.input, c.output) for c in stream_calls] == [
        (c.call_id, c.input, c.output) for c in session_calls]
    assert [c.input for c in stream_calls] == [{"command": "echo hi > out.txt"}, {"command": "cat missing.txt"}]
    # Pi reports no exit code for a command that succeeded, only "Command exited with code N"
    assert [c.exit_code for c in stream_calls] == [None, 1]
    for path in (STREAM, SESSION):      # both records of Pi's output repeat the prompt
        assert [s.message for s in iter_steps(path) if s.source == "user"] == [
            "Create out.txt containing hi using the shell."]
    stream_summary, session_summary = summarize(STREAM), summarize(SESSION)
    finished = [r["message"]["usage"] for r in records(STREAM)
                if r.get("type") == "message_end" and r["message"]["role"] == "assistant"]
    assert len(finished) == 3
    assert stream_summary.usage.input_tokens == sum(u["input"] + u["cacheRead"] + u["cacheWrite"] for u in finished)
    assert stream_summary.usage.output_tokens == sum(u["output"] for u in finished)
    assert stream_summary.usage == session_summary.usage
    assert stream_summary.session_id == session_summary.session_id
    assert stream_summary.model == session_summary.model == "scripted-model"
    assert stream_summary.errors == () and stream_summary.warnings == ()


def test_pi_stream_cut_before_the_answer_has_no_final_answer(tmp_path):
    lines = STREAM.read_text().splitlines()
    last_tool_result = max(i for i, line in enumerate(lines)
                           if json.loads(line)["type"] == "message_end"
                           and json.loads(line)["message"]["role"] == "toolResult")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[: last_tool_result + 1]) + "\n")
    summary = summarize(cut)
    assert summary.final_answer is None
    assert (summary.tool_calls, summary.failed_tool_calls) == (2, 1)
    assert 0 < summary.usage.input_tokens < summarize(STREAM).usage.input_tokens


def test_recorded_pi_model_error_is_read_as_an_error():
    summary = summarize(MODEL_ERROR)
    assert (summary.final_answer, summary.tool_calls) == (None, 0)
    assert summary.errors == ("Connection error.",)
    assert summary.warnings == tuple(f"retry {n}: Connection error." for n in (1, 2, 3))


# --- the backend (no Pi needed: `true` stands in for the binary) ------------------------------

def pi_context(tmp_path: Path) -> AgentContext:
    for name in ("out", "ws", "home"):
        (tmp_path / name).mkdir(exist_ok=True)
    return AgentContext(rollout_dir=tmp_path / "out", workspace=tmp_path / "ws", home=tmp_path / "home",
                        prompt="What is 6 times 7?", timeout_s=10, attempt=1, task_id="t/1", host="pi")


def test_pi_agent_reports_a_model_error_that_pi_exits_0_on(tmp_path):
    agent = make_agent({"backend": "pi", "bin": "true", "model": "scripted-model"})
    agent.check_available()
    ctx = pi_context(tmp_path)
    ctx.trajectory_path.write_bytes(MODEL_ERROR.read_bytes())
    run = agent._finish(ctx, ProcessOutcome(0, False, 20.0), ctx.trajectory_path)
    # no answer: an exception (it measured nothing), with Pi's own last word (issue 24)
    assert (run.returncode, run.final_answer, run.exception_type) == (0, None, "ModelError")
    assert run.error == "pi ended on a model error: Connection error."
    ctx.trajectory_path.write_bytes(STREAM.read_bytes())     # an answered session is no error
    assert agent._finish(ctx, ProcessOutcome(0, False, 1.0), ctx.trajectory_path).error is None


def test_pi_agent_names_the_key_variable_in_models_json(tmp_path, monkeypatch):
    monkeypatch.setenv("SCRIPTED_API_KEY", SECRET)
    agent = make_agent({"backend": "pi", "bin": "true", "model": "scripted-model",
                        "provider": {"base_url": "http://127.0.0.1:9", "env_key": "SCRIPTED_API_KEY"}})
    agent.check_available()
    argv, env = agent._command(pi_context(tmp_path))
    models_json = tmp_path / "home" / ".pi" / "agent" / "models.json"
    provider = json.loads(models_json.read_text())["providers"]["hermit"]
    # Pi reads an apiKey that names a variable from its environment: the key stays out of the file
    assert provider == {"baseUrl": "http://127.0.0.1:9", "api": "anthropic-messages",
                        "apiKey": "SCRIPTED_API_KEY", "models": [{"id": "scripted-model"}]}
    assert SECRET not in models_json.read_text()
    assert env["SCRIPTED_API_KEY"] == SECRET and env["PI_CODING_AGENT_DIR"] == str(models_json.parent)
    assert argv[1:] == ["--mode", "json", "--no-session", "--model", "hermit/scripted-model", "What is 6 times 7?"]


def test_pi_agent_wire_api(tmp_path):
    def api_for(wire: str | None) -> str:
        provider = {"base_url": "http://127.0.0.1:9/v1"} | ({"wire_api": wire} if wire else {})
        agent = make_agent({"backend": "pi", "bin": "true", "model": "m", "provider": provider})
        agent.check_available()
        agent._command(pi_context(tmp_path))
        config = json.loads((tmp_path / "home" / ".pi" / "agent" / "models.json").read_text())
        return config["providers"]["hermit"]["api"], config["providers"]["hermit"]["apiKey"]

    assert api_for(None) == ("anthropic-messages", "none")
    assert api_for("chat")[0] == "openai-completions"
    assert api_for("responses")[0] == "openai-responses"
    with pytest.raises(ConfigError) as err:
        api_for("grpc")
    assert "grpc" in str(err.value) and err.value.hint


# --- the deployment's memory handover, by hand (no Pi needed) ---------------------------------

def test_pi_deployment_session_start_command_prints_the_memory(tmp_path):
    workspace = tmp_path / "ws"
    record = deploy(ahe_template(), workspace, "pi")
    assert (record.context_file, record.hooks, record.hooks_config) == ("AGENTS.md", False, None)
    context = (workspace / "AGENTS.md").read_text()
    commands = SESSION_START_LINE.findall(context)
    assert len(commands) == 1, context[-800:]
    # run as the agent would: through a shell, from the workspace, with no event payload
    proc = subprocess.run(["bash", "-c", commands[0]], cwd=workspace, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    entries = memory_entries(ahe_template())
    assert entries and all(entry in proc.stdout for entry in entries)
    calls = [json.loads(line) for line in (workspace / ".hermit-hooks" / "hook-calls.jsonl").read_text().splitlines()]
    assert [(c["event"], c["host"], c["error"]) for c in calls] == [("SessionStart", "pi", None)]


# --- the installed Pi against the scripted model server ---------------------------------------

def require_pi() -> Path:
    if find_node() is None:
        pytest.skip("node is not installed (Pi runs on Node 20+)")
    cli = find_host_cli("pi")
    if cli is None:
        pytest.skip("the pi CLI is not installed (git hermit hosts install pi)")
    return cli


def session_start_then_answer(marker: Path, answer: str):
    """The model runs the session-start command its context file names, then a shell call, then answers."""
    def script(body: dict, tool_results: int) -> Turn:
        if tool_results == 0:
            found = SESSION_START_LINE.findall(json.dumps(body.get("system")))
            if not found:
                return Turn.say("the context file named no session-start command")
            return Turn(command=json.loads(f'"{found[0]}"'), tool="bash")
        if tool_results == 1:
            return Turn(command=f"echo ran > {shlex.quote(str(marker))}", tool="bash")
        return Turn.say(answer)
    return script


@pytest.fixture
def api_keys_seen(monkeypatch) -> list[str]:
    """The x-api-key of every request the scripted server reads (it records no credentials)."""
    seen: list[str] = []
    parse = BaseHTTPRequestHandler.parse_request

    def recording_parse(handler: BaseHTTPRequestHandler) -> bool:
        ok = parse(handler)
        if ok and handler.command == "POST":
            seen.append(handler.headers.get("x-api-key", ""))
        return ok
    monkeypatch.setattr(BaseHTTPRequestHandler, "parse_request", recording_parse)
    return seen


@pytest.mark.hosts
def test_real_pi_rollout_against_scripted_model(repo, tmp_path, api_keys_seen):
    require_pi()
    marker = tmp_path / "shell-ran.txt"
    make_project(repo, "print('unused')\n", n_tasks=1, k=1, host="pi")
    with open(repo / "tasks.jsonl", "w") as handle:
        handle.write(json.dumps({"id": "t0", "prompt": "Run the check, then answer.", "answer": "42"}) + "\n")
    with ScriptedModelServer(session_start_then_answer(marker, "42")) as server:
        cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
        cfg["agent"] = {"backend": "pi", "model": "scripted-model", "timeout_s": 120,
                        "provider": {"base_url": server.base_url, "env_key": "SCRIPTED_API_KEY"}}
        (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        r = hermit(repo, "rollout", "--json", env={"SCRIPTED_API_KEY": SECRET}, timeout=300)
        requests = server.model_requests()
    assert r.code == 0, r.err
    assert [q.path for q in requests] == ["/v1/messages"] * 3        # the SDK appends /v1/messages
    assert api_keys_seen and set(api_keys_seen) == {SECRET}          # models.json's apiKey named the variable
    # the deployment's AGENTS.md reached the model, and so did the memory the command printed
    assert "run the adapter's session-start hook yourself" in requests[0].text()
    assert all(entry in requests[1].text() for entry in memory_entries(ahe_template()))
    assert marker.read_text() == "ran\n"
    result = json.loads(result_files(repo)[0].read_text())
    assert result["agent"] == "pi" and result["final_answer"] == "42"
    note = scores_note(repo)
    assert note["tasks"]["t0"]["outcome"] == "pass", result
    rollout = result_files(repo)[0].parent
    summary = summarize(rollout / result["trajectory"])
    assert (summary.format, summary.tool_calls, summary.failed_tool_calls) == ("pi", 2, 0)
    assert note["usage"]["input_tokens"] == summary.usage.input_tokens > 0
    for path in rollout.rglob("*"):                                  # the key never reaches a file
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


@pytest.mark.hosts
def test_real_pi_reads_the_deployed_context_file_and_skills(tmp_path):
    require_pi()
    workspace = tmp_path / "ws"
    deploy(ahe_template(), workspace, "pi")
    skills = sorted(p.parent.name for p in (workspace / ".agents" / "skills").glob("*/SKILL.md"))
    assert skills, "the ahe template ships a skill"
    for name in ("out", "home"):
        (tmp_path / name).mkdir()
    with ScriptedModelServer([Turn.say("done")]) as server:
        agent = make_agent({"backend": "pi", "model": "scripted-model", "provider": {"base_url": server.base_url}})
        agent.check_available()
        run = agent.run(AgentContext(rollout_dir=tmp_path / "out", workspace=workspace, home=tmp_path / "home",
                                     prompt="hello", timeout_s=120, attempt=1, task_id="t", host="pi"))
        requests = server.model_requests()
    assert run.error is None and run.final_answer == "done", (tmp_path / "out" / "agent.stderr").read_text()
    text = requests[0].text()
    adapter_context = (ahe_template() / "AGENTS.md").read_text().strip()
    assert adapter_context.splitlines()[0] in text and adapter_context.splitlines()[-1] in text
    for skill in skills:                       # Pi lists the skills it found under .agents/skills
        assert f"<name>{skill}</name>" in text
        assert str(workspace / ".agents" / "skills" / skill / "SKILL.md") in text
