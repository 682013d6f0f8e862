"""Each host's wire: payload -> HookInput, HookResult -> only the fields the host reads, and the
recorded real payloads (tests/fixtures/hosts/<host>/<version>/) replayed through the runner."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from git_hermit import resources
from git_hermit.adapter.deploy import deploy
from git_hermit.hosts import registry
from git_hermit.hosts.wire import HOST_EVENTS, deployed_source

sys.path.insert(0, str(resources.hooks_dir() / "agent"))
from hermit_hooks import EVENTS, HookResult  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "hosts"
# Each host's wire is its host module's; the tests run over the registry, not a list of names.
WIRES = {h.name: h.hook_wire for h in registry.hosts() if h.hook_wire is not None}
CAPABILITIES = {h.name: dict(h.capability_notes) for h in registry.hosts()}
HOOK_HOSTS = tuple(h.name for h in registry.hook_hosts())


def paths(output: dict) -> set[str]:
    found = set()
    for key, value in output.items():
        found |= {f"{key}.{k}" for k in value} if key == "hookSpecificOutput" else {key}
    return found


# Every combination of the HookResult's parts, so no combination can emit an unread field.
ALL_RESULTS = [
    HookResult(context=c, deny=d, allow=a, updated_input=u, block=b, reason=r, stop_session=s,
               system_message=m)
    for c, d, a, u, b, r, s, m in itertools.product(
        (None, "ctx"), (False, True), (False, True), (None, {"command": "ls"}), (False, True),
        (None, "why"), (False, True), (None, "msg"))
]


@pytest.mark.parametrize("host", HOOK_HOSTS)
def test_render_emits_only_fields_the_host_reads(host):
    wire = WIRES[host]
    for event in wire.READS:
        for result in ALL_RESULTS:
            out = wire.render(event, result)
            assert paths(out) <= wire.READS[event], (event, result, out)
            if "hookSpecificOutput" in out:
                assert out["hookSpecificOutput"]["hookEventName"] == event
        assert wire.render(event, None) == {} and wire.render(event, HookResult()) == {}


def test_every_registered_event_is_known_to_a_host_and_capabilities_cover_the_table():
    handled = set().union(*(WIRES[host].CALLS for host in HOOK_HOSTS))
    assert handled <= set(HOST_EVENTS)
    assert set(WIRES["codex"].CALLS) | set(WIRES["claude-code"].CALLS) == set(HOST_EVENTS)
    assert "PreModelRequest" not in WIRES["claude-code"].CALLS  # Claude Code has none
    rows = set(EVENTS) | {"queued_context", "stop_session", "system_message", "tool_kind",
                          "cwd_model_turn"}
    for host in HOOK_HOSTS:
        assert set(CAPABILITIES[host]) == rows
    hooks_json = json.loads((resources.hooks_dir() / "agent" / "hooks.json").read_text())
    assert tuple(hooks_json["hooks"]) == HOST_EVENTS


def test_codex_drops_context_given_with_allow_and_no_updated_input():
    wire = WIRES["codex"]
    dropped = HookResult(allow=True, context="note")
    assert wire.render("PreToolUse", dropped) == {}
    assert wire.dropped("PreToolUse", dropped)
    kept = wire.render("PreToolUse", HookResult(allow=True, updated_input={"command": "ls"},
                                                context="note"))["hookSpecificOutput"]
    assert kept == {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                    "updatedInput": {"command": "ls"}, "additionalContext": "note"}
    assert wire.render("PreModelRequest", HookResult(context="x", block=True)) == {}


def test_deny_and_block_carry_the_reason_on_both_hosts():
    for host in HOOK_HOSTS:
        out = WIRES[host].render("PreToolUse", HookResult(deny=True, reason="no"))
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert out["hookSpecificOutput"]["permissionDecisionReason"] == "no"
        out = WIRES[host].render("PostToolUse", HookResult(block=True, reason="look"))
        assert out["decision"] == "block" and out["reason"] == "look"


def test_stop_context_goes_out_only_with_a_block():
    claude, codex = WIRES["claude-code"], WIRES["codex"]
    assert claude.render("Stop", HookResult(context="c")) == {}
    assert claude.dropped("Stop", HookResult(context="c"))
    out = claude.render("Stop", HookResult(context="c", block=True, reason="r"))
    assert out["hookSpecificOutput"]["additionalContext"] == "c" and out["reason"] == "r"
    assert codex.render("Stop", HookResult(context="c", block=True, reason="r")) == {
        "decision": "block", "reason": "r\n\nc"}


def test_stop_session_only_where_the_host_honours_it():
    stop = HookResult(stop_session=True, reason="enough")
    codex, claude = WIRES["codex"], WIRES["claude-code"]
    assert codex.render("SessionStart", stop)["continue"] is False
    assert "continue" not in codex.render("PreToolUse", stop)
    assert claude.render("SessionStart", stop) == {}
    assert claude.render("PreToolUse", stop)["continue"] is False
    assert claude.render("PostToolUse", stop)["continue"] is False
    assert "continue" not in claude.render("PostToolUseFailure", stop)


def test_system_message_reaches_claude_code_only():
    assert WIRES["claude-code"].render("SessionStart", HookResult(system_message="hi")) == {
        "systemMessage": "hi"}
    assert WIRES["codex"].render("SessionStart", HookResult(system_message="hi")) == {}


@pytest.mark.parametrize("host, tool, kind", [
    ("codex", "Bash", "shell"), ("codex", "apply_patch", "patch"), ("codex", "mcp__fs__read", "mcp"),
    ("codex", "view_image", "other"), ("claude-code", "Bash", "shell"), ("claude-code", "Read", "read"),
    ("claude-code", "Edit", "write"), ("claude-code", "NotebookEdit", "write"),
    ("claude-code", "mcp__x__y", "mcp"), ("claude-code", "Grep", "other"),
])
def test_tool_kinds(host, tool, kind):
    inp = WIRES[host].to_input("PreToolUse", {"tool_name": tool, "tool_input": {}}, task="", workspace="/w")
    assert inp.tool_kind == kind and inp.tool_name == tool and inp.event == "before_tool"


def test_codex_after_tool_has_no_failure_flag_and_its_cwd_is_the_session_dir():
    inp = WIRES["codex"].to_input("PostToolUse", {
        "cwd": "/w", "model": "m", "turn_id": "t", "tool_name": "Bash",
        "tool_input": {"command": "false"}, "tool_response": "boom"}, task="T", workspace="/w")
    assert (inp.event, inp.output_text, inp.failed, inp.exit_code) == ("after_tool", "boom", None, None)
    assert (inp.cwd, inp.workspace, inp.model, inp.turn_id, inp.task) == ("/w", "/w", "m", "t", "T")


def test_claude_after_tool_success_failure_and_write():
    wire = WIRES["claude-code"]
    ok = wire.to_input("PostToolUse", {"tool_name": "Bash", "prompt_id": "p", "cwd": "/w/sub",
                                       "tool_response": {"stdout": "out", "stderr": "err"}},
                       task="", workspace="/w")
    assert (ok.output_text, ok.failed, ok.turn_id, ok.cwd, ok.workspace, ok.model) == (
        "out\nerr", False, "p", "/w/sub", "/w", None)
    bad = wire.to_input("PostToolUseFailure", {"tool_name": "Bash", "error": "Exit code 127\nnot found"},
                        task="", workspace="/w")
    assert (bad.failed, bad.exit_code, bad.output_text) == (True, 127, "Exit code 127\nnot found")
    write = wire.to_input("PostToolUse", {"tool_name": "Write", "tool_response": {"filePath": "x"}},
                          task="", workspace="/w")
    assert write.output_text is None and write.tool_kind == "write"


# -- recorded payloads of the real CLIs, replayed through the deployed runner ---------------

def _recorded(host: str) -> list[tuple[str, dict]]:
    """(event, payload) pairs from fixture files: a JSON payload (with hook_event_name), a list
    of them, or JSONL lines of them; {"payload": {...}} wrappers are unwrapped."""
    found = []
    for path in sorted((FIXTURES / host).glob("*/*.json*")):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            loaded = json.loads(text)
            docs = loaded if isinstance(loaded, list) else [loaded]
        for doc in docs:
            payload = doc.get("payload", doc) if isinstance(doc, dict) else None
            if isinstance(payload, dict) and payload.get("hook_event_name"):
                found.append((payload["hook_event_name"], payload))
    return found


@pytest.mark.parametrize("host", HOOK_HOSTS)
def test_recorded_payloads_replay_through_the_wire(tmp_path, host):
    recorded = _recorded(host)
    if not recorded:
        pytest.skip(f"no recorded {host} payloads in {FIXTURES / host} yet")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "AGENTS.md").write_text("# rules\n")
    (adapter / "middleware.py").write_text(
        "from hermit_hooks import HookResult\n"
        "def _note(inp):\n    return HookResult(context=f'{inp.event}:{inp.tool_kind}', reason='r')\n"
        "session_start = before_tool = after_tool = stop = before_model = _note\n")
    record = deploy(adapter, tmp_path / "ws", host)
    wire = WIRES[host]
    for event, payload in recorded:
        if event not in wire.CALLS:
            continue  # an event hooks.json does not register
        done = subprocess.run(record.command_for(event), shell=True, input=json.dumps(payload),
                              capture_output=True, text=True, cwd=tmp_path / "ws", timeout=30)
        assert done.returncode == 0
        out = json.loads(done.stdout) if done.stdout else {}
        assert paths(out) <= wire.READS[event], (event, out)
    errors = [json.loads(l) for l in (tmp_path / "ws/.hermit-hooks/hook-calls.jsonl").read_text().splitlines()]
    assert not [e for e in errors if e["error"]], errors


@pytest.mark.parametrize("host", sorted(WIRES))
def test_the_deployed_wire_is_the_host_modules_and_stdlib_only(tmp_path, host):
    """hook_wire.py (what deploy writes from the host module) runs on its own, beside the
    shipped hermit_hooks only, and behaves as the host module's wire."""
    (tmp_path / "hook_wire.py").write_text(deployed_source(WIRES[host]))
    agent = resources.hooks_dir() / "agent"
    probe = (
        "import sys, json; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "before = set(sys.modules)\n"
        "from hook_wire import WIRE\n"
        "from hermit_hooks import HookResult\n"
        "new = sorted(m for m in set(sys.modules) - before if not m.startswith('_'))\n"
        "out = {e: WIRE.render(e, HookResult(context='c', block=True, reason='r')) for e in WIRE.READS}\n"
        "print(json.dumps({'name': WIRE.name, 'new': new, 'out': out}))\n")
    done = subprocess.run([sys.executable, "-S", "-c", probe, str(tmp_path), str(agent)],
                          capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    assert seen["name"] == host
    assert set(seen["new"]) <= {"hook_wire", "hermit_hooks", "json", "json.decoder", "json.scanner",
                                "json.encoder", "re", "enum", "functools", "operator", "keyword",
                                "collections", "itertools", "reprlib", "types", "copyreg"} | set(sys.builtin_module_names)
    assert "git_hermit" not in " ".join(seen["new"])
    expected = {e: WIRES[host].render(e, HookResult(context="c", block=True, reason="r")) for e in WIRES[host].READS}
    assert seen["out"] == json.loads(json.dumps(expected))


def test_the_runtime_names_no_host():
    """hook_runner.py and hermit_hooks.py work from the deployed wire, never from a host's name."""
    agent = resources.hooks_dir() / "agent"
    assert not (agent / "hook_hosts.py").exists()
    for name in ("hook_runner.py", "hermit_hooks.py"):
        text = (agent / name).read_text()
        for host in registry.names():
            assert f'"{host}"' not in text and f"'{host}'" not in text, (name, host)


def test_a_wire_for_another_host_than_the_record_fails_open(tmp_path):
    """hook_wire.py serves one host; a record naming another (a half-redone deployment) is logged
    as an error and answered with nothing (the runner fails open), never served with the wrong wire."""
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "AGENTS.md").write_text("# Rules\n")
    (adapter / "middleware.py").write_text(
        "from hermit_hooks import HookResult\n"
        "def session_start(inp):\n    return HookResult(context='memory')\n")
    dest = tmp_path / "ws"
    record = deploy(adapter, dest, "codex")
    path = dest / ".hermit-deploy.json"
    path.write_text(path.read_text().replace('"host": "codex"', '"host": "claude-code"'))
    done = subprocess.run(record.command_for("SessionStart"), shell=True, cwd=dest, capture_output=True, text=True,
                          input=json.dumps({"session_id": "s", "hook_event_name": "SessionStart"}), timeout=60)
    assert done.returncode == 0 and done.stdout == ""
    [line] = (dest / ".hermit-hooks" / "hook-calls.jsonl").read_text().splitlines()
    error = json.loads(line)["error"]
    assert "hook_wire.py serves 'codex'" in error and "'claude-code'" in error, error


def test_a_wire_defined_outside_a_file_is_an_installation_error_not_a_traceback(tmp_path):
    from git_hermit import errors
    from git_hermit.adapter.deploy import wire_source
    from git_hermit.hosts.codex import Codex
    from git_hermit.hosts.wire import Wire

    namespace: dict = {"Wire": Wire}
    exec("class Nowhere(Wire):\n    name = 'nowhere'\n", namespace)

    class Odd(Codex):
        hook_wire = namespace["Nowhere"]()

    with pytest.raises(errors.HermitError, match="cannot read the source"):
        wire_source(Odd())
