"""Issue 27, item 2, on the real host CLIs (``-m hosts``): the trained demo adapter converted by
`git hermit convert`, installed the way each host installs plugins (Claude Code 2.1.317 and Codex
0.164.0 from a local marketplace, Pi 0.73.1 with `pi install`) into a fresh home, and used in one
session against the scripted model server: the adapter's skill is offered, its hooks fire (their
audit lines) and its memory reaches the model, as far as each format carries them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.card_support import demo_copy
from support.cli_helpers import hermit
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.hostkit.sessions import session_command
from support.conformance_helpers import require_cli

PROMPT = "Solve the task."
SKILL = "csv-column-total"
SKILL_DESCRIPTION = "Use when a task asks for the total or sum of a column in a CSV file."
SEED_RULE = "Work non-interactively and keep your replies short"
FAILED_NOTE = "The last command failed"


def _learned_memory(plugin_adapter: Path) -> str:
    """The memory entry a learner added at step 3 of the demo."""
    return next(line[2:] for line in (plugin_adapter / "MEMORY.md").read_text().splitlines()
                if line.startswith("- A date range"))


def _convert(demo_run: Path, tmp_path: Path, target: str, *extra: str) -> Path:
    demo = demo_copy(demo_run, tmp_path)
    out = tmp_path / f"{target}-plugin"
    r = hermit(demo, "convert", "--target", target, "-o", str(out), *extra)
    assert r.code == 0, r.err
    return out


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _audit(roots: list[Path]) -> list[dict]:
    logs = [p for root in roots for p in root.rglob("hook-calls.jsonl") if p.parent.name == ".hermit-hooks"]
    assert len(logs) == 1, logs
    return [json.loads(line) for line in logs[0].read_text().splitlines()]


def _session(host: str, tmp_path: Path, script: list[Turn], install: list[list[str]],
             drop_args: tuple[str, ...] = ()) -> tuple[list, Path]:
    """Install with the session's own environment (its private config dir), then run one session."""
    cli = require_cli(host)
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    with ScriptedModelServer(script) as server:
        argv, env = session_command(host, cli, project, server.base_url, PROMPT, home=home)
        for args in install:
            done = _run([str(cli), *args], project, env)
            assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        for flag in drop_args:          # e.g. Codex's `--disable plugins`, which rollouts pass
            i = argv.index(flag)
            del argv[i - 1:i + 1]
        done = _run(argv, project, env)
        requests = server.model_requests()
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert len(requests) >= 2, "the host did not go past the first model request"
    return requests, home


@pytest.mark.hosts
def test_claude_code_installs_the_converted_demo_and_uses_every_component(demo_run, tmp_path):
    require_cli("claude-code")
    out = _convert(demo_run, tmp_path, "claude-code")
    requests, home = _session("claude-code", tmp_path, [Turn.shell("false"), Turn.say("done")], [
        ["plugin", "marketplace", "add", str(out)], ["plugin", "install", "demo@hermit-demo"]])
    first, second = json.dumps(requests[0].body), json.dumps(requests[1].body)
    assert f"demo:{SKILL}" in first and SKILL_DESCRIPTION in first            # the skill is offered
    assert SEED_RULE in first and "Output Style: demo" in first                # the policy, as the output style
    assert "reviewer" in first                                                 # the sub-agent
    memory = _learned_memory(out / "plugins" / "demo" / "adapter")
    assert "SessionStart hook additional context" in first and memory in first  # the memory, at session start
    assert FAILED_NOTE in second                                               # after_tool's note on `false`
    log = _audit([out, home])
    events = [entry["event"] for entry in log]
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUseFailure", "Stop"):
        assert event in events, events
    assert all(entry["error"] is None for entry in log), [e for e in log if e["error"]]
    assert any(c["function"] == "after_tool" and c.get("result") for e in log for c in e["calls"])


@pytest.mark.hosts
def test_codex_installs_the_converted_demo_with_its_skills_hooks_and_memory(demo_run, tmp_path):
    require_cli("codex")
    out = _convert(demo_run, tmp_path, "codex", "--allow-lossy")      # Codex plugins carry no policy, no agents
    requests, home = _session("codex", tmp_path, [Turn.shell("false"), Turn.say("done")], [
        ["plugin", "marketplace", "add", str(out)], ["plugin", "add", "demo@hermit-demo"]], drop_args=("plugins",))
    first = json.dumps(requests[0].body)
    assert f"demo:{SKILL}" in first and SKILL_DESCRIPTION in first
    memory = _learned_memory(out / "plugins" / "demo" / "adapter")
    assert memory in first                                     # SessionStart's context, a developer message
    assert SEED_RULE not in first                              # dropped, as the conversion said
    log = _audit([home])                                       # Codex runs the plugin from its own cache
    events = [entry["event"] for entry in log]
    for event in ("SessionStart", "PreToolUse", "PostToolUse", "Stop"):
        assert event in events, events
    assert all(entry["error"] is None for entry in log), [e for e in log if e["error"]]
    # Codex tells a hook no exit status, so after_tool runs but cannot see that `false` failed
    assert any(c["function"] == "after_tool" for e in log for c in e["calls"])


@pytest.mark.hosts
def test_pi_installs_the_converted_demo_with_its_skills_policy_and_memory(demo_run, tmp_path):
    require_cli("pi")
    out = _convert(demo_run, tmp_path, "pi", "--allow-lossy")         # Pi has no sub-agents, no shell hooks
    requests, _ = _session("pi", tmp_path, [Turn(command="echo hi", tool="bash"), Turn.say("done")],
                           [["install", str(out)]])
    first = json.dumps(requests[0].body)
    assert SKILL in first and SKILL_DESCRIPTION in first
    assert SEED_RULE in first
    assert _learned_memory(out / "adapter") in first
    log = _audit([out])
    assert [entry["event"] for entry in log] == ["SessionStart"] and log[0]["error"] is None, log
