"""deploy(): what each host reads lands where it reads it, the record names every file written,
a redeploy is idempotent, and files it did not write are never overwritten unless forced."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from git_hermit import errors
from git_hermit.adapter.deploy import RECORD_NAME, DeployRecord, deploy, read_record
from git_hermit.hosts import registry
from support.deploy_helpers import ahe_adapter  # noqa: F401

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
          "PostToolBatch", "Stop", "PreModelRequest")


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_codex_deployment_layout_and_record(tmp_path):
    record = deploy(ahe_adapter(tmp_path), tmp_path / "ws", "codex")
    ws = tmp_path / "ws"
    assert {"AGENTS.md", ".codex/hooks.json", ".agents/skills/fix-tests/SKILL.md",
            ".agents/skills/fix-tests/scripts/run.sh", ".hermit-adapter/middleware.py",
            ".hermit-adapter/MEMORY.md", ".hermit-adapter/hook_runner.py",
            ".hermit-adapter/hook_wire.py", ".hermit-adapter/hermit_hooks.py",
            ".hermit-adapter/hooks.json", ".hermit-adapter/scripts/check.py", RECORD_NAME} <= files_under(ws)
    assert not (ws / "CLAUDE.md").exists() and not (ws / ".claude").exists()
    assert (ws / "AGENTS.md").read_text().startswith("# Rules\n\nRun `scripts/check.py`.\n")
    assert record == read_record(ws)
    assert record.host == "codex" and record.hooks and record.hooks_config == ".codex/hooks.json"
    assert "--dangerously-bypass-hook-trust" in record.host_args
    assert set(record.files) == files_under(ws) - {RECORD_NAME}


def test_hook_command_is_the_absolute_real_interpreter_with_dash_s_for_every_event(tmp_path):
    record = deploy(ahe_adapter(tmp_path), tmp_path / "ws", "claude-code")
    hooks = json.loads((tmp_path / "ws/.claude/settings.json").read_text())["hooks"]
    assert tuple(hooks) == EVENTS
    for event, groups in hooks.items():
        [hook] = groups[0]["hooks"]
        argv = shlex.split(hook["command"])
        assert argv[0] == os.path.realpath(sys.executable) and os.path.isabs(argv[0])
        assert argv[1] == "-S" and argv[-1] == event and hook["timeout"] == 30
        assert argv[-2] == str(tmp_path / "ws" / ".hermit-adapter")
        assert hook["command"] == record.command_for(event)


def test_claude_code_layout(tmp_path):
    deploy(ahe_adapter(tmp_path), tmp_path / "ws", "claude-code")
    ws = tmp_path / "ws"
    assert {"CLAUDE.md", ".claude/settings.json", ".claude/skills/fix-tests/SKILL.md",
            ".claude/agents/reviewer.md"} <= files_under(ws)
    assert not (ws / "AGENTS.md").exists() and not (ws / ".codex").exists()


def test_pi_gets_no_hooks_but_a_hand_run_session_start_command(tmp_path):
    record = deploy(ahe_adapter(tmp_path), tmp_path / "ws", "pi")
    text = (tmp_path / "ws/AGENTS.md").read_text()
    assert not record.hooks and record.hooks_config is None
    assert "hook_runner.py SessionStart" in text and os.path.realpath(sys.executable) in text


def test_interpreter_is_resolved_and_checked(tmp_path):
    link = tmp_path / "python-link"
    link.symlink_to(sys.executable)
    record = deploy(ahe_adapter(tmp_path), tmp_path / "ws", "codex", interpreter=str(link))
    assert record.interpreter == os.path.realpath(sys.executable)
    with pytest.raises(errors.InputError, match="not an executable"):
        deploy(ahe_adapter(tmp_path / "b"), tmp_path / "ws2", "codex", interpreter="/no/such/python")


def test_bytecode_is_precompiled_for_the_hook_interpreter(tmp_path):
    deploy(ahe_adapter(tmp_path), tmp_path / "ws", "codex")
    compiled = {p.name.split(".")[0] for p in (tmp_path / "ws/.hermit-adapter/__pycache__").iterdir()}
    assert {"hook_runner", "hook_wire", "hermit_hooks", "middleware"} <= compiled


def test_redeploy_is_idempotent(tmp_path):
    adapter = ahe_adapter(tmp_path)
    first = deploy(adapter, tmp_path / "ws", "codex")
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "ws").rglob("*") if p.is_file()
              and p.name != RECORD_NAME and "__pycache__" not in p.parts}
    second = deploy(adapter, tmp_path / "ws", "codex")
    assert first == second
    assert stamps == {p: p.stat().st_mtime_ns for p in stamps}


def test_a_changed_adapter_redeploys_and_drops_files_it_no_longer_has(tmp_path):
    adapter = ahe_adapter(tmp_path)
    deploy(adapter, tmp_path / "ws", "codex")
    (adapter / "scripts/check.py").unlink()
    (adapter / "MEMORY.md").write_text("# Memory\n\n- new lesson\n")
    record = deploy(adapter, tmp_path / "ws", "codex")
    assert not (tmp_path / "ws/.hermit-adapter/scripts").exists()
    assert "new lesson" in (tmp_path / "ws/.hermit-adapter/MEMORY.md").read_text()
    assert ".hermit-adapter/scripts/check.py" not in record.files


def test_switching_host_removes_the_other_hosts_files(tmp_path):
    adapter = ahe_adapter(tmp_path)
    deploy(adapter, tmp_path / "ws", "codex")
    deploy(adapter, tmp_path / "ws", "claude-code")
    ws = tmp_path / "ws"
    assert (ws / "CLAUDE.md").is_file() and not (ws / "AGENTS.md").exists()
    assert not (ws / ".codex").exists() and not (ws / ".agents").exists()
    assert read_record(ws).host == "claude-code"


def test_refuses_to_overwrite_files_it_did_not_write_unless_forced(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".claude").mkdir(parents=True)
    (ws / ".claude/settings.json").write_text('{"theme": "dark"}')
    (ws / "README.md").write_text("the task's own file\n")
    adapter = ahe_adapter(tmp_path)
    with pytest.raises(errors.InputError, match=r"\.claude/settings\.json") as exc:
        deploy(adapter, ws, "claude-code")
    assert exc.value.hint and "force" in exc.value.hint
    assert (ws / ".claude/settings.json").read_text() == '{"theme": "dark"}'
    assert not (ws / RECORD_NAME).exists() and not (ws / "CLAUDE.md").exists()
    deploy(adapter, ws, "claude-code", force=True)
    assert "hooks" in json.loads((ws / ".claude/settings.json").read_text())
    assert (ws / "README.md").read_text() == "the task's own file\n"


def test_refuses_a_deployed_file_edited_since_and_keeps_it(tmp_path):
    adapter = ahe_adapter(tmp_path)
    deploy(adapter, tmp_path / "ws", "codex")
    (tmp_path / "ws/AGENTS.md").write_text("edited by hand\n")
    (adapter / "AGENTS.md").write_text("# Rules v2\n")
    with pytest.raises(errors.InputError, match="AGENTS.md"):
        deploy(adapter, tmp_path / "ws", "codex")
    assert (tmp_path / "ws/AGENTS.md").read_text() == "edited by hand\n"


@pytest.mark.parametrize("host", ["cursor", "", "Codex"])
def test_unknown_host(tmp_path, host):
    with pytest.raises(errors.InputError, match="unknown host"):
        deploy(ahe_adapter(tmp_path), tmp_path / "ws", host)


def test_bad_adapters_and_records(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(errors.InputError, match="no AGENTS.md"):
        deploy(tmp_path / "empty", tmp_path / "ws", "codex")
    with pytest.raises(errors.InputError, match="does not exist"):
        deploy(tmp_path / "missing", tmp_path / "ws", "codex")
    adapter = ahe_adapter(tmp_path)
    with pytest.raises(errors.InputError, match="into itself"):
        deploy(adapter, adapter / "deploy", "codex")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / RECORD_NAME).write_text("{garbage")
    with pytest.raises(errors.InputError, match="deploy record"):
        deploy(adapter, tmp_path / "ws", "codex")
    assert deploy(adapter, tmp_path / "ws", "codex", force=True).host == "codex"
    (adapter / "hooks.json").write_text("{not json")
    with pytest.raises(errors.InputError, match="hooks.json"):
        deploy(adapter, tmp_path / "ws3", "codex")


def test_templates_without_middleware_get_context_and_skills_but_no_hooks(tmp_path):
    ch = tmp_path / "ch"
    for rel in ("AGENTS.md", "sub_agents/planner/AGENT.md", ".agents/skills/plan/SKILL.md",
                "memory/NOTES.md"):
        (ch / rel).parent.mkdir(parents=True, exist_ok=True)
        (ch / rel).write_text(f"{rel}\n")
    record = deploy(ch, tmp_path / "ws", "claude-code")
    ws = tmp_path / "ws"
    assert not record.hooks and record.hook_command is None and record.interpreter is None
    assert not (ws / ".claude/settings.json").exists()
    assert (ws / ".claude/agents/planner.md").read_text() == "sub_agents/planner/AGENT.md\n"
    assert (ws / ".claude/skills/plan/SKILL.md").is_file()
    assert (ws / ".hermit-adapter/memory/NOTES.md").is_file()
    evo = tmp_path / "evo"
    (evo / "skills/topic-a").mkdir(parents=True)
    (evo / "AGENTS.md").write_text("# evo\n")
    (evo / "skills/topic-a/SKILL.md").write_text("---\nname: topic-a\n---\n")
    deploy(evo, tmp_path / "ws-evo", "codex")
    assert (tmp_path / "ws-evo/.agents/skills/topic-a/SKILL.md").is_file()
    assert not (tmp_path / "ws-evo/.codex").exists()


def test_record_round_trips(tmp_path):
    record = deploy(ahe_adapter(tmp_path), tmp_path / "ws", "codex")
    assert DeployRecord.from_json(record.to_json()) == record
    assert DeployRecord.from_json((tmp_path / "ws" / RECORD_NAME).read_text()) == record


def test_the_seed_template_deploys_for_every_host(tmp_path):
    from git_hermit.resources import templates_dir

    seed = templates_dir() / "ahe"
    if not (seed / "middleware.py").is_file():
        pytest.skip("templates/ahe is not there yet")
    for host in registry.names():
        record = deploy(seed, tmp_path / host, host)
        assert (tmp_path / host / record.context_file).is_file()


def test_sub_agents_and_memory_land_where_each_host_reads_them(tmp_path):
    """Issue 9: the policy tells the agent to read memory/NOTES.md, so it is at the workspace root
    on every host; sub-agents become Codex agent roles (.codex/agents/<name>.toml, what Codex
    0.164 discovers) and Claude Code agents; Pi has none, so its context file points to them."""
    import tomllib
    ch = tmp_path / "ch"
    for rel, text in {"AGENTS.md": "# Policy\n\nRead `memory/NOTES.md` first.\n",
                      "sub_agents/planner/AGENT.md": '---\nname: planner\ndescription: Plans "first"\n---\n\nList\\n steps.\n',
                      "memory/NOTES.md": "# Notes\n\n## Ports\n\n8123\n"}.items():
        (ch / rel).parent.mkdir(parents=True, exist_ok=True)
        (ch / rel).write_text(text)
    for host in registry.names():
        ws = tmp_path / f"ws-{host}"
        deploy(ch, ws, host)
        assert (ws / "memory/NOTES.md").read_text() == "# Notes\n\n## Ports\n\n8123\n", host
    role = tomllib.loads((tmp_path / "ws-codex/.codex/agents/planner.toml").read_text())
    assert role == {"name": "planner", "description": 'Plans "first"', "developer_instructions": "List\\n steps."}
    assert "Sub-agent definitions" not in (tmp_path / "ws-codex/AGENTS.md").read_text()
    assert (tmp_path / "ws-claude-code/.claude/agents/planner.md").is_file()
    assert "Sub-agent definitions: `.hermit-adapter/sub_agents/`" in (tmp_path / "ws-pi/AGENTS.md").read_text()
    assert not (tmp_path / "ws-pi/.codex").exists() and not (tmp_path / "ws-pi/.claude").exists()
