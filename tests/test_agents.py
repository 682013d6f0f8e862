"""Acting-agent backends: process groups and timeouts, the command backend, and real CLIs.

The ``hosts`` tests run the installed Codex and Claude Code against the scripted model
server through `git hermit rollout` (one shell call, then the answer; judge ``answer``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from support.rollouts_e2e_helpers import make_project, result_files, scores_note

from git_hermit.errors import AgentError, ConfigError
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.hosts.registry import find_host_cli
from git_hermit.agents import AgentContext, make_agent
from git_hermit.supervise.process import KILL_GRACE_S, run_process
from support.agents_helpers import SECRET, _agent_block  # noqa: F401


def run(argv: list[str], tmp_path: Path, timeout_s: float):
    return run_process(argv, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout_s=timeout_s,
                       stdout_path=tmp_path / "out", stderr_path=tmp_path / "err")


def test_run_process_timeout_kills_children_that_ignore_sigterm(tmp_path):
    # both the leader and its background child ignore SIGTERM: after the grace period the
    # group's SIGKILL must reach the child too, before it wakes up at 3 s
    marker = tmp_path / "marker"
    script = f"(trap '' TERM; sleep 3; touch {marker}) & trap '' TERM; sleep 30"
    started = time.monotonic()
    outcome = run(["sh", "-c", script], tmp_path, timeout_s=0.5)
    assert outcome.timed_out and outcome.returncode is None
    assert KILL_GRACE_S <= time.monotonic() - started < 0.5 + KILL_GRACE_S + 2
    time.sleep(max(0.0, started + 3.5 - time.monotonic()))
    assert not marker.exists()


def test_run_process_reaps_background_children_of_a_finished_leader(tmp_path):
    marker = tmp_path / "marker"
    outcome = run(["sh", "-c", f"(sleep 0.5; touch {marker}) & echo done"], tmp_path, timeout_s=10)
    assert not outcome.timed_out and outcome.returncode == 0
    assert (tmp_path / "out").read_text() == "done\n"
    time.sleep(1.0)
    assert not marker.exists()


def context(tmp_path: Path, timeout_s: float = 10) -> AgentContext:
    for name in ("out", "ws", "home"):
        (tmp_path / name).mkdir(exist_ok=True)
    return AgentContext(rollout_dir=tmp_path / "out", workspace=tmp_path / "ws", home=tmp_path / "home",
                        prompt="What is 6 times 7?", timeout_s=timeout_s, attempt=2, task_id="t/1", host="codex",
                        extra_env={"HERMIT_EXTRA": "x"})


def test_command_agent_substitutes_and_prefers_answer_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_SECRET_TOKEN", "do-not-leak")
    agent = make_agent({"backend": "command", "command": [
        sys.executable, "-c",
        "import os, sys, json; print(json.dumps([open(sys.argv[1]).read(), sys.argv[2:], "
        "os.environ.get('SOME_SECRET_TOKEN'), os.environ['HOME'], os.environ['HERMIT_EXTRA']])); "
        "open('answer.txt', 'w').write(' 42 \\n') if sys.argv[3] == '2' else None",
        "{prompt_file}", "{task_id}", "{attempt}"]})
    agent.check_available()
    ctx = context(tmp_path)
    result = agent.run(ctx)
    assert result.error is None and result.final_answer == "42" and result.trajectory == "trajectory.txt"
    prompt, args, secret, home, extra = json.loads((tmp_path / "out" / "trajectory.txt").read_text())
    assert prompt == ctx.prompt and args == ["t/1", "2"] and home == str(ctx.home) and extra == "x"
    assert secret is None                        # the user's environment is not passed through


def test_command_agent_timeout_and_nonzero_exit(tmp_path):
    agent = make_agent({"backend": "command", "command": ["sh", "-c", "echo partial; sleep 30"]})
    result = agent.run(context(tmp_path, timeout_s=0.5))
    assert result.timed_out and result.exception_type == "AgentTimeout" and result.final_answer == "partial"
    agent = make_agent({"backend": "command", "command": ["sh", "-c", "echo 7; exit 3"]})
    result = agent.run(context(tmp_path))
    assert not result.timed_out and result.returncode == 3 and "status 3" in result.error


def test_unknown_backend_and_missing_binaries_are_agent_errors():
    with pytest.raises(AgentError) as err:
        make_agent({"backend": "gemini"})
    assert err.value.hint and "command" in err.value.hint
    with pytest.raises(AgentError):
        make_agent({"backend": "command", "command": ["no-such-binary-xyz"]}).check_available()
    with pytest.raises(ConfigError):
        make_agent({"backend": "command"})
    with pytest.raises(AgentError):
        make_agent({"backend": "codex", "bin": "no-such-codex-xyz"}).check_available()


# --- real host CLIs against the scripted model server ------------------------------------


@pytest.mark.hosts
@pytest.mark.parametrize("host", ["codex", "claude-code"])
def test_real_cli_rollout_against_scripted_model(repo, tmp_path, host):
    if find_host_cli(host) is None:
        pytest.skip(f"the {host} CLI is not installed (git hermit hosts install)")
    shell_marker = tmp_path / "shell-ran.txt"
    make_project(repo, "print('unused')\n", n_tasks=1, k=1, host=host)
    with open(repo / "tasks.jsonl", "w") as handle:
        handle.write(json.dumps({"id": "t0", "prompt": "Run the check, then answer.", "answer": "42"}) + "\n")
    script = [Turn.shell(f"echo ran > {shell_marker}"), Turn.say("42")]
    with ScriptedModelServer(script) as server:
        cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
        cfg["agent"], env = _agent_block(host, server.base_url)
        (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        r = hermit(repo, "rollout", "--json", env=env, timeout=300)
        requests = list(server.requests)
    assert r.code == 0, r.err
    assert shell_marker.read_text() == "ran\n"                      # the model's shell call ran
    assert [q.tool_results for q in requests][-1] == 1 and len(requests) >= 2
    note = scores_note(repo)
    assert note["tasks"]["t0"]["outcome"] == "pass", json.loads(result_files(repo)[0].read_text())
    assert note["usage"]["input_tokens"] > 0
    result = json.loads(result_files(repo)[0].read_text())
    assert result["agent"] == host and result["final_answer"] == "42"
    rollout = result_files(repo)[0].parent
    assert (rollout / result["trajectory"]).stat().st_size > 0
    for path in rollout.rglob("*"):                                # the key never reaches a file
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path.name
