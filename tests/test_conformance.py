"""Real host CLIs against the scripted model: the seed host table, row by row.

The `hosts` tests run Codex and Claude Code (skipped, with the reason, when a CLI or node is
missing). The fast tests hold the recorded payloads (tests/fixtures/hosts/) to the fields
spec/hosts.md lists, and check the probe hook's plan logic without any host.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from git_hermit.hostkit import conformance
from git_hermit.hosts import registry
from git_hermit.hosts.locate import cli_version, find_node
from git_hermit.hosts.registry import find_host_cli
from git_hermit.trajectories import summarize
from support.conformance_helpers import require_cli  # noqa: F401

FIXTURES = Path(__file__).parent / "fixtures" / "hosts"
HOSTS = tuple(h.name for h in registry.hook_hosts())


@pytest.mark.hosts
@pytest.mark.parametrize("host", HOSTS)
def test_seed_table_holds_on_the_installed_cli(host, tmp_path):
    cli = require_cli(host)
    report, records = conformance.run_conformance(host, cli, tmp_path)
    assert not report.errors, report.errors
    failing = [f"{c.row}: observed {c.observed}, table says {c.expected} ({c.detail})"
               for c in report.checks if not c.holds]
    assert not failing, "\n".join(failing)
    rows = {c.row for c in report.checks}
    assert rows == {row for row, by_host in conformance.seed_table().items() if by_host[host] is not None}
    # Every session drove the real shell: the flow session's first call left its directory.
    assert (records[0].workspace / "sub").is_dir()
    # The recorded payloads still describe this version's hooks.
    recorded = FIXTURES / host / cli_version(cli)
    if recorded.is_dir():
        live = conformance.payload_fixtures(records)
        for fixture in recorded.glob("[A-Z]*.json"):
            fields = set().union(*(p.keys() for p in json.loads(fixture.read_text())))
            assert fixture.stem in live, f"{host} no longer fires {fixture.stem}"
            assert set().union(*(p.keys() for p in live[fixture.stem])) == fields, fixture.stem
    # Recording writes each session's output stream, a trajectory rollouts can read, with the
    # session's private paths replaced.
    written = conformance.write_payload_fixtures(report, records, tmp_path / "recorded")
    streams = [p for p in written if p.name.endswith(".stream.jsonl")]
    assert {p.name.split(".")[0] for p in streams} == {r.name for r in records}
    for stream in streams:
        assert str(tmp_path) not in stream.read_text()
        assert summarize(stream).steps > 0 and summarize(stream).malformed_lines == 0


# -- recorded payloads against spec/hosts.md ------------------------------------------------
SPEC_FIELDS = {
    "codex": {
        "SessionStart": {"session_id", "transcript_path", "cwd", "model", "permission_mode", "source"},
        "UserPromptSubmit": {"turn_id", "permission_mode", "prompt", "model"},
        "PreModelRequest": {"turn_id", "model"},
        "PostModelRequest": {"turn_id", "status", "error", "token_usage"},
        "PreToolUse": {"turn_id", "permission_mode", "tool_name", "tool_input", "tool_use_id"},
        "PostToolUse": {"turn_id", "tool_name", "tool_input", "tool_use_id", "tool_response"},
        "Stop": {"turn_id", "stop_hook_active", "last_assistant_message"},
        "SessionEnd": {"reason"},
    },
    "claude-code": {
        "SessionStart": {"session_id", "transcript_path", "cwd", "source"},
        "UserPromptSubmit": {"prompt_id", "permission_mode", "prompt"},
        "PreToolUse": {"prompt_id", "permission_mode", "effort", "tool_name", "tool_input", "tool_use_id"},
        "PostToolUse": {"tool_name", "tool_input", "tool_use_id", "tool_response", "duration_ms"},
        "PostToolUseFailure": {"tool_name", "tool_input", "tool_use_id", "error"},
        "PostToolBatch": {"prompt_id", "tool_calls"},
        "Stop": {"prompt_id", "stop_hook_active", "last_assistant_message"},
        "SessionEnd": {"prompt_id", "reason"},
    },
}


def recorded(host: str) -> dict[str, list[dict]]:
    folders = sorted((FIXTURES / host).glob("*/"))
    assert folders, f"no recorded payloads for {host}"
    return {p.stem: json.loads(p.read_text()) for p in folders[-1].glob("[A-Z]*.json")}


@pytest.mark.parametrize("host", HOSTS)
def test_recorded_payloads_carry_the_spec_fields(host):
    payloads = recorded(host)
    assert set(payloads) == set(SPEC_FIELDS[host])
    for event, wanted in SPEC_FIELDS[host].items():
        for payload in payloads[event]:
            assert payload["hook_event_name"] == event
            assert wanted <= payload.keys(), (event, wanted - payload.keys())


def test_recorded_payloads_show_the_host_differences():
    codex, claude = recorded("codex"), recorded("claude-code")
    # Codex maps exec_command to Claude's names; its tool_response is a string, Claude's an object.
    assert {p["tool_name"] for p in codex["PreToolUse"]} == {"Bash"}
    assert all(isinstance(p["tool_response"], str) for p in codex["PostToolUse"])
    assert all(isinstance(p["tool_response"], dict) for p in claude["PostToolUse"])
    assert "model" not in codex["SessionEnd"][0]
    # A failed command: Codex fires PostToolUse; Claude Code fires PostToolUseFailure with the exit code.
    assert any(p["tool_input"]["command"] == "false" for p in codex["PostToolUse"])
    assert claude["PostToolUseFailure"][0]["error"].startswith("Exit code 1")
    # Claude's hook cwd follows the agent's cd, Codex's stays the session's directory.
    assert claude["PostToolUseFailure"][0]["cwd"].endswith("/sub")
    assert all(p["cwd"].endswith("/ws") for p in codex["PostToolUse"])
    # A blocked stop comes back with stop_hook_active on both hosts.
    for payloads in (codex, claude):
        assert [p["stop_hook_active"] for p in payloads["Stop"] if p["_session"] == "flow"] == [False, True]


def test_recorded_conformance_summaries_hold():
    for host in HOSTS:
        for summary in (FIXTURES / host).glob("*/conformance.json"):
            data = json.loads(summary.read_text())
            assert data["all_hold"] and all(c["holds"] for c in data["checks"]), summary


# -- the probe hook -------------------------------------------------------------------------
def run_probe(plan_path: Path, log_path: Path, payload: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", str(conformance.PROBE_HOOK), str(plan_path), str(log_path)],
                          input=json.dumps(payload), capture_output=True, text=True, check=False)


def test_probe_answers_the_first_matching_rule_once(tmp_path):
    plan = [
        {"event": "Stop", "once": True, "output": {"decision": "block", "reason": "r"}},
        {"event": "PreToolUse", "match": "rm -rf", "exit": 2, "stderr": "no"},
        {"event": "PreToolUse", "output": {"ok": 1}},
    ]
    plan_path, log_path = tmp_path / "plan.json", tmp_path / "log.jsonl"
    plan_path.write_text(json.dumps(plan))
    stop = {"hook_event_name": "Stop"}
    assert json.loads(run_probe(plan_path, log_path, stop).stdout)["decision"] == "block"
    assert run_probe(plan_path, log_path, stop).stdout == ""  # once: the second stop goes through
    denied = run_probe(plan_path, log_path, {"hook_event_name": "PreToolUse", "tool_input": {"command": "rm -rf /x"}})
    assert denied.returncode == 2 and denied.stderr == "no"
    other = run_probe(plan_path, log_path, {"hook_event_name": "PreToolUse", "tool_input": {"command": "ls"}})
    assert json.loads(other.stdout) == {"ok": 1}
    assert [json.loads(line)["hook_event_name"] for line in log_path.read_text().splitlines()] == \
        ["Stop", "Stop", "PreToolUse", "PreToolUse"]


@pytest.mark.parametrize("host", HOSTS)
def test_probe_hooks_config_registers_the_host_events(host, tmp_path):
    config = conformance.probe_hooks_config(host, tmp_path / "plan.json", tmp_path / "log.jsonl")
    assert tuple(config["hooks"]) == conformance.host_events(host)
    command = config["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert " -S " in command and str(conformance.PROBE_HOOK) in command


# -- the seed adapter through the hook runner, deployed as the framework does ---------------
@pytest.mark.hosts
@pytest.mark.parametrize("host", HOSTS)
def test_seed_list_through_the_deployed_adapter(host, tmp_path):
    cli = require_cli(host)
    from git_hermit.adapter.templates import load_template, write_seed

    adapter = tmp_path / "adapter"
    write_seed(load_template("ahe@1.0"), adapter)
    report, records = conformance.run_adapter_conformance(host, adapter, cli, tmp_path / "runs")
    assert not report.errors, report.errors
    failing = [f"{c.row}: observed {c.observed}, expected {c.expected} ({c.detail})"
               for c in report.checks if not c.holds]
    assert not failing, "\n".join(failing)
    assert len(report.checks) == (11 if host == "claude-code" else 10)
    # Every call the runner logged came back without an error (it fails open, so look).
    assert all(not call.get("error") for record in records for call in record.payloads)


# -- replaying the recorded payloads through the hook runtime's wires -----------------------
@pytest.fixture(scope="module")
def wires():
    """(the hosts' wires by name, as the host modules define them; hermit_hooks)."""
    from types import SimpleNamespace

    from git_hermit.hosts import registry
    from git_hermit.resources import hook_wire_module

    hermit_hooks = hook_wire_module("hermit_hooks")
    wires = {h.name: h.hook_wire for h in registry.hosts() if h.hook_wire is not None}
    return SimpleNamespace(WIRES=wires), hermit_hooks


def replay(wires, host: str, event: str) -> list:
    hook_hosts, _ = wires
    return [hook_hosts.WIRES[host].to_input(event, p, task="t", workspace="/SESSION/ws")
            for p in recorded(host)[event]]


def test_wires_read_the_recorded_codex_payloads(wires):
    hook_hosts, _ = wires
    wire = hook_hosts.WIRES["codex"]
    assert set(recorded("codex")) - {"SessionEnd", "PostModelRequest"} <= set(wire.CALLS)
    for inp in replay(wires, "codex", "PreToolUse"):
        assert inp.event == "before_tool" and inp.tool_kind == "shell"
        assert isinstance(inp.tool_input["command"], str) and inp.model == "scripted-model" and inp.turn_id
    after = replay(wires, "codex", "PostToolUse")
    assert all(inp.failed is None and inp.exit_code is None for inp in after)  # Codex tells no exit status
    assert any(inp.output_text == "alpha-ran\n" for inp in after)
    assert all(inp.cwd == "/SESSION/ws" for inp in after)  # the session's directory, after a cd too
    assert {inp.source for inp in replay(wires, "codex", "SessionStart")} == {"startup"}
    assert all(inp.event == "before_model" for inp in replay(wires, "codex", "PreModelRequest"))


def test_wires_read_the_recorded_claude_payloads(wires):
    hook_hosts, _ = wires
    wire = hook_hosts.WIRES["claude-code"]
    assert set(recorded("claude-code")) - {"SessionEnd"} <= set(wire.CALLS) | set(wire.BEFORE_MODEL_AFTER)
    failed = replay(wires, "claude-code", "PostToolUseFailure")[0]
    assert failed.event == "after_tool" and failed.failed is True and failed.exit_code == 1
    assert failed.cwd.endswith("/sub") and failed.workspace == "/SESSION/ws"
    after = replay(wires, "claude-code", "PostToolUse")
    assert all(inp.failed is False for inp in after)
    assert any(inp.output_text == "alpha-ran" for inp in after)
    assert all(inp.model is None and inp.turn_id for inp in after)


# What the probe answered, which the real hosts honoured (test_seed_table_holds_on_the_installed_cli);
# the wire must render the same HookResult to the same fields.
HONOURED = [
    ("codex", "SessionStart", {"context": "M"}, conformance._context("SessionStart", "M")),
    ("codex", "SessionStart", {"stop_session": True, "reason": "R"}, {"continue": False, "stopReason": "R"}),
    ("codex", "PreToolUse", {"deny": True, "reason": "R"},
     conformance._pre_tool(permissionDecision="deny", permissionDecisionReason="R")),
    ("codex", "PreToolUse", {"allow": True, "updated_input": {"command": "x"}},
     conformance._pre_tool(permissionDecision="allow", updatedInput={"command": "x"})),
    ("codex", "PostToolUse", {"context": "N"}, conformance._context("PostToolUse", "N")),
    ("codex", "PostToolUse", {"block": True, "reason": "B"}, {"decision": "block", "reason": "B"}),
    ("codex", "Stop", {"block": True, "reason": "S"}, {"decision": "block", "reason": "S"}),
    ("claude-code", "SessionStart", {"context": "M"}, conformance._context("SessionStart", "M")),
    ("claude-code", "PreToolUse", {"deny": True, "reason": "R"},
     conformance._pre_tool(permissionDecision="deny", permissionDecisionReason="R")),
    ("claude-code", "PreToolUse", {"allow": True, "context": "A"},
     conformance._pre_tool(permissionDecision="allow", additionalContext="A")),
    ("claude-code", "PreToolUse", {"allow": True, "updated_input": {"command": "x", "description": "d"}},
     conformance._pre_tool(permissionDecision="allow", updatedInput={"command": "x", "description": "d"})),
    ("claude-code", "PostToolUse", {"context": "N"}, conformance._context("PostToolUse", "N")),
    ("claude-code", "PostToolUseFailure", {"context": "F"}, conformance._context("PostToolUseFailure", "F")),
    ("claude-code", "PostToolUse", {"block": True, "reason": "B", "system_message": "Y"},
     {"decision": "block", "reason": "B", "systemMessage": "Y"}),
    ("claude-code", "PostToolUse", {"stop_session": True, "reason": "X"}, {"continue": False, "stopReason": "X"}),
    ("claude-code", "PostToolBatch", {"context": "Q"}, conformance._context("PostToolBatch", "Q")),
    ("claude-code", "Stop", {"block": True, "reason": "S"}, {"decision": "block", "reason": "S"}),
]


@pytest.mark.parametrize("host,event,result,honoured", HONOURED)
def test_wires_render_what_the_hosts_honoured(wires, host, event, result, honoured):
    hook_hosts, hermit_hooks = wires
    assert hook_hosts.WIRES[host].render(event, hermit_hooks.HookResult(**result)) == honoured
