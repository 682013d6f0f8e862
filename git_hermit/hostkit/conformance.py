"""Conformance of a real host CLI to the seed host table (seed 000), on the scripted model.

Two layers: a probe hook answering each raw host event (run_conformance: does the host honour
the fields the wires rely on?), and the seed adapter deployed as the framework does, run by the
real hook runner with test middlewares (run_adapter_conformance: the seed's list end to end).
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from git_hermit.hosts import registry
from git_hermit.hosts.base import HookWire
from git_hermit.hosts.locate import cli_version
from git_hermit.hostkit.model_server import RecordedRequest, ScriptedModelServer, Turn
from git_hermit.hostkit.sessions import SessionResult, run_session

PROBE_HOOK = Path(__file__).with_name("probe_hook.py")

# Markers the hooks hand to the model; each is unique so a substring test is exact.
MEMORY = "HERMIT-MEMORY-ENTRY-5c1e"
NOTE = "HERMIT-NOTE-AFTER-CALL-81aa"
NOTE_FAILED = "HERMIT-NOTE-AFTER-FAILURE-3b7d"
BATCH_CONTEXT = "HERMIT-QUEUED-BEFORE-MODEL-0d4f"
ALLOW_CONTEXT = "HERMIT-CONTEXT-WITH-ALLOW-9e21"
DENY_REASON = "HERMIT-DENY-REASON-44c0"
BLOCK_REASON = "HERMIT-BLOCK-REASON-7a65"
SYSTEM_MESSAGE = "HERMIT-SYSTEM-MESSAGE-2f90"
STOP_REASON = "HERMIT-STOP-REASON-c3d8"
UPDATED_OUTPUT = "RAN-UPDATED-42"  # what the new input prints; the command text reads $((40+2))



def _wire(host: str) -> HookWire:
    wire = registry.get(host).wire
    if wire is None:
        raise ValueError(f"{host} runs no hooks: it has no conformance rows")
    return wire


def host_events(host: str) -> tuple[str, ...]:
    """The events the host's deployment registers (its host module's hook wire)."""
    return _wire(host).events


def seed_table() -> dict[str, dict[str, bool | None]]:
    """What the seed table says each row does on each hook host (True: observed), from the
    host modules' capability rows."""
    table: dict[str, dict[str, bool | None]] = {}
    for host in registry.hook_hosts():
        for row, value in _wire(host.name).capabilities.items():
            table.setdefault(row, {})[host.name] = value
    return table


@dataclass(frozen=True)
class CheckResult:
    """One seed-table row on one host: what was observed against what the table says."""

    row: str
    host: str
    observed: bool
    expected: bool
    detail: str

    @property
    def holds(self) -> bool:
        return self.observed == self.expected


@dataclass(frozen=True)
class ProbeSession:
    name: str
    prompt: str
    script: tuple[Turn, ...]
    plan: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class SessionRecord:
    """One probe session: the host's result, what reached the model, what the hooks got."""

    name: str
    result: SessionResult
    requests: tuple[RecordedRequest, ...]
    payloads: tuple[dict[str, Any], ...]
    workspace: Path

    def model_text(self) -> str:
        return "\n".join(r.text() for r in self.requests if r.turn_index >= 0)

    def model_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.turn_index >= 0]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.payloads if p.get("hook_event_name") == name]

    def exists(self, filename: str) -> bool:
        return any(self.workspace.rglob(filename))


@dataclass(frozen=True)
class ConformanceReport:
    host: str
    cli: str
    version: str
    checks: tuple[CheckResult, ...]
    session_seconds: tuple[float, ...]
    errors: tuple[str, ...] = field(default=())

    @property
    def all_hold(self) -> bool:
        return not self.errors and all(c.holds for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "cli": self.cli, "version": self.version, "all_hold": self.all_hold,
                "checks": [{**asdict(c), "holds": c.holds} for c in self.checks],
                "session_seconds": list(self.session_seconds), "errors": list(self.errors)}


# -- hook outputs in the hosts' shape -------------------------------------------------------
def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _pre_tool(**fields: object) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **fields}}


def _updated_input(host: str) -> dict[str, Any]:
    command = "echo RAN-UPDATED-$((40+2)) | tee updated.txt"
    return {"command": command, **_wire(host).updated_input_extra}


# -- the sessions ---------------------------------------------------------------------------
def flow_session(host: str) -> ProbeSession:
    """Memory, notes (after a call, after a failed one past a cd), the before_model channel,
    allow with context, deny, a new input, a block with a system message, a blocked stop."""
    failed_event = _wire(host).failed_tool_event
    plan: list[dict[str, Any]] = [
        {"event": "SessionStart", "output": _context("SessionStart", MEMORY)},
        {"event": "PreToolUse", "match": "alpha", "output": _pre_tool(permissionDecision="allow",
                                                                      additionalContext=ALLOW_CONTEXT)},
        {"event": "PostToolUse", "match": "alpha", "output": _context("PostToolUse", NOTE)},
        {"event": failed_event, "match": "false", "output": _context(failed_event, NOTE_FAILED)},
        {"event": "PreToolUse", "match": "denied.txt",
         "output": _pre_tool(permissionDecision="deny", permissionDecisionReason=DENY_REASON)},
        {"event": "PreToolUse", "match": "original.txt",
         "output": _pre_tool(permissionDecision="allow", updatedInput=_updated_input(host))},
        {"event": "PostToolUse", "match": "updated.txt", "once": True,
         "output": {"decision": "block", "reason": BLOCK_REASON, "systemMessage": SYSTEM_MESSAGE}},
        {"event": "PostToolUse", "match": "original.txt", "once": True,
         "output": {"decision": "block", "reason": BLOCK_REASON, "systemMessage": SYSTEM_MESSAGE}},
        {"event": "PostToolBatch", "once": True, "output": _context("PostToolBatch", BATCH_CONTEXT)},
        # Codex has no cap on Stop continuations: block exactly once.
        {"event": "Stop", "once": True, "output": {"decision": "block", "reason": STOP_REASON}},
    ]
    # The first call moves into sub/; the failed one after it shows whose cwd the hook gets.
    script = (Turn.shell("mkdir -p sub && cd sub && echo alpha-ran"), Turn.shell("false"),
              Turn.shell("echo denied > denied.txt"), Turn.shell("echo original > original.txt"),
              Turn.say("FINAL-ANSWER"))
    return ProbeSession("flow", "Run the steps.", script, tuple(plan))


def stop_after_call_session(host: str) -> ProbeSession:
    """stop_session given after a call that succeeded (continue: false at PostToolUse)."""
    plan = [{"event": "PostToolUse", "match": "first.txt",
             "output": {"continue": False, "stopReason": "HERMIT-STOP-SESSION"}}]
    script = (Turn.shell("echo first > first.txt"), Turn.shell("echo second > second.txt"), Turn.say("done"))
    return ProbeSession("stop_after_call", "Run the steps.", script, tuple(plan))


def stop_at_start_session(host: str) -> ProbeSession:
    """stop_session at session start; on Claude Code also at PreToolUse (ends once the call ran)."""
    plan = [{"event": "SessionStart", "output": {"continue": False, "stopReason": "HERMIT-STOP-SESSION"}}]
    if _wire(host).capabilities.get("stop_session_before_tool_ends_after_call") is not None:
        plan.append({"event": "PreToolUse", "match": "first.txt",
                     "output": {"continue": False, "stopReason": "HERMIT-STOP-SESSION"}})
    script = (Turn.shell("echo first > first.txt"), Turn.shell("echo second > second.txt"), Turn.say("done"))
    return ProbeSession("stop_at_start", "Run the steps.", script, tuple(plan))


def probe_hooks_config(host: str, plan_path: Path, log_path: Path) -> dict[str, Any]:
    """The hooks config that runs the probe on every event the host's deployment registers."""
    command = " ".join(shlex.quote(p) for p in (sys.executable, "-S", str(PROBE_HOOK), str(plan_path), str(log_path)))
    entry = [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}]
    return {"hooks": {event: entry for event in host_events(host)}}


def install_probe(host: str, workspace: Path, plan: tuple[dict[str, Any], ...], log_dir: Path) -> Path:
    """Write the plan and the host's project hooks file; return the payload log's path."""
    log_dir.mkdir(parents=True, exist_ok=True)
    plan_path, log_path = log_dir / "plan.json", log_dir / "hooks.jsonl"
    plan_path.write_text(json.dumps(list(plan)))
    config = probe_hooks_config(host, plan_path, log_path)
    target = workspace / str(registry.get(host).layout.hooks_config)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(config, indent=1))
    return log_path


def run_probe_session(host: str, cli: Path, session: ProbeSession, work_dir: Path,
                      timeout_s: float = 90.0) -> SessionRecord:
    root = work_dir / host / session.name
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    log_path = install_probe(host, workspace, session.plan, root / "probe")
    with ScriptedModelServer(session.script) as server:
        result = run_session(host, cli, workspace, server.base_url, session.prompt, home=root / "home",
                             timeout_s=timeout_s)
        requests = tuple(server.requests)
    payloads = tuple(json.loads(line) for line in log_path.read_text().splitlines()) if log_path.exists() else ()
    return SessionRecord(session.name, result, requests, payloads, workspace)


# -- the checks -----------------------------------------------------------------------------
def _after_tool_results(record: SessionRecord, marker: str) -> bool:
    """The marker reached the model in a request that already held a tool result."""
    return any(marker in r.text() for r in record.model_requests() if r.tool_results > 0)


def check_flow(host: str, rec: SessionRecord) -> list[CheckResult]:
    requests = rec.model_requests()
    first = requests[0].text() if requests else ""
    text = rec.model_text()
    failed_event = _wire(host).failed_tool_event
    failed_calls = [p for p in rec.events(failed_event) if "false" in json.dumps(p.get("tool_input"))]
    before_event = _wire(host).before_model_event
    if before_event == "PreModelRequest":      # fires before every model request
        pre_model = len(rec.events(before_event))
        before_model = (pre_model == len(requests) and pre_model > 0, f"{pre_model} {before_event} for {len(requests)} model requests")
    else:                                       # fires after a batch of tool calls
        batches = len(rec.events(before_event))
        before_model = (batches > 0 and _after_tool_results(rec, BATCH_CONTEXT), f"{batches} {before_event}; context reached the model: {BATCH_CONTEXT in text}")
    denied_post = [p for p in rec.events("PostToolUse") + rec.events("PostToolUseFailure")
                   if "denied.txt" in json.dumps(p.get("tool_input"))]
    stops = rec.events("Stop")
    observed = {
        "memory": (MEMORY in first, "in the first model request" if MEMORY in first else "not in the first model request"),
        "note_after_call": (_after_tool_results(rec, NOTE), "PostToolUse additionalContext beside the result"),
        "note_after_failed_call": (bool(failed_calls) and _after_tool_results(rec, NOTE_FAILED),
                                   f"{failed_event} fired {len(failed_calls)}x"),
        "hook_cwd_follows_cd": (bool(failed_calls) and all(p.get("cwd", "").endswith("/sub") for p in failed_calls),
                                f"hook cwd after a cd: {[p.get('cwd', '').rsplit('/', 1)[-1] for p in failed_calls]}"),
        "before_model_channel": before_model,
        "deny": (DENY_REASON in text and not rec.exists("denied.txt") and not denied_post,
                 f"reason reached model: {DENY_REASON in text}; ran: {rec.exists('denied.txt')}; after-hook fired: {bool(denied_post)}"),
        "context_with_allow_reaches_model": (ALLOW_CONTEXT in text, "PreToolUse allow + additionalContext"),
        "updated_input": (rec.exists("updated.txt") and not rec.exists("original.txt"),
                          f"new input ran: {rec.exists('updated.txt')}; original ran: {rec.exists('original.txt')}"),
        "block_replaces_output": (BLOCK_REASON in text and UPDATED_OUTPUT not in text,
                                  f"the call's output still reaches the model: {UPDATED_OUTPUT in text}"),
        "block_reason_reaches_model": (_after_tool_results(rec, BLOCK_REASON), "PostToolUse decision block + reason"),
        "system_message_reaches_model": (SYSTEM_MESSAGE in text, "PostToolUse systemMessage"),
        "stop_block": (len(stops) == 2 and bool(requests) and STOP_REASON in requests[-1].text()
                       and bool(stops[-1].get("stop_hook_active")),
                       f"{len(stops)} Stop calls; reason in the last request: {bool(requests) and STOP_REASON in requests[-1].text()}"),
    }
    return [_result(row, host, *observed[row]) for row in observed]


def check_stop_after_call(host: str, rec: SessionRecord) -> list[CheckResult]:
    requests = rec.model_requests()
    ended = rec.exists("first.txt") and len(requests) == 1 and not rec.exists("second.txt")
    return [_result("stop_session_after_call_ends", host, ended,
                    f"{len(requests)} model requests; the next call ran: {rec.exists('second.txt')}")]


def check_stop_at_start(host: str, rec: SessionRecord) -> list[CheckResult]:
    requests = rec.model_requests()
    results = [_result("stop_session_at_start_ends", host, not requests, f"{len(requests)} model requests")]
    if _wire(host).capabilities.get("stop_session_before_tool_ends_after_call") is not None:
        ended = rec.exists("first.txt") and len(requests) == 1
        results.append(_result("stop_session_before_tool_ends_after_call", host, ended,
                               f"call ran: {rec.exists('first.txt')}; {len(requests)} model requests"))
    return results


def _result(row: str, host: str, observed: bool, detail: str) -> CheckResult:
    return CheckResult(row, host, bool(observed), _wire(host).can(row), detail)


# Each probe session and the check of its record.
Probe = tuple[Callable[[str], ProbeSession], Callable[[str, SessionRecord], list[CheckResult]]]
SESSIONS: tuple[Probe, ...] = (
    (flow_session, check_flow),
    (stop_after_call_session, check_stop_after_call),
    (stop_at_start_session, check_stop_at_start),
)


def run_conformance(host: str, cli: Path | None = None, work_dir: Path | None = None,
                    sessions: tuple[Probe, ...] = SESSIONS) -> tuple[ConformanceReport, list[SessionRecord]]:
    """Run the probe sessions of ``host``; return the report and the raw session records."""
    cli = cli or registry.get(host).find()
    if cli is None:
        return ConformanceReport(host, "", "", (), (), (f"{host} CLI is not installed",)), []
    with tempfile.TemporaryDirectory(prefix="hermit-conformance-") as tmp:
        base = Path(work_dir) if work_dir else Path(tmp)
        checks: list[CheckResult] = []
        records: list[SessionRecord] = []
        errors: list[str] = []
        for make_session, check in sessions:
            record = run_probe_session(host, cli, make_session(host), base)
            records.append(record)
            # Only the flow session must reach the model; a stop session may end before it.
            if record.result.timed_out or (make_session is flow_session and not record.model_requests()):
                errors.append(f"{record.name}: session failed (exit {record.result.exit_code}, "
                              f"timed out: {record.result.timed_out}): {record.result.stderr[-300:]}")
                continue
            checks.extend(check(host, record))
        report = ConformanceReport(host, str(cli), cli_version(cli), tuple(checks),
                                   tuple(round(r.result.duration_s, 3) for r in records), tuple(errors))
        return report, records


def payload_fixtures(records: list[SessionRecord]) -> dict[str, list[dict[str, Any]]]:
    """The hook payloads of ``records`` grouped by event, with session paths made stable."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        session_root = str(record.workspace.parent)
        for payload in record.payloads:
            stable = json.loads(json.dumps(payload).replace(session_root, "/SESSION"))
            stable["_session"] = record.name
            grouped.setdefault(payload.get("hook_event_name", "unknown"), []).append(stable)
    return grouped


def _stable_stream(record: SessionRecord) -> str:
    """The JSON lines of the session's stdout, with its private paths made stable."""
    session_root = str(record.workspace.parent)
    lines = [line for line in record.result.stdout.splitlines() if line.startswith("{")]
    return "".join(line.replace(session_root, "/SESSION") + "\n" for line in lines)


def write_payload_fixtures(report: ConformanceReport, records: list[SessionRecord], dest: Path) -> list[Path]:
    """Write ``<dest>/<host>/<version>/<Event>.json`` (a list of payloads each), each session's
    output stream as ``<session>.stream.jsonl``, and conformance.json."""
    folder = dest / report.host / report.version
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for event, payloads in sorted(payload_fixtures(records).items()):
        path = folder / f"{event}.json"
        path.write_text(json.dumps(payloads, indent=1, sort_keys=True) + "\n")
        written.append(path)
    for record in records:
        # the host's own output stream of each session, the trajectory format rollouts read
        stream = _stable_stream(record)
        if stream:
            path = folder / f"{record.name}.stream.jsonl"
            path.write_text(stream)
            written.append(path)
    summary = {k: v for k, v in report.to_json().items() if k not in ("cli", "session_seconds")}
    (folder / "conformance.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return written


# -- the adapter: the hook runner and a middleware, deployed as the framework does ----------
SEED_MEMORY_ENTRY = "Look for the project's own test command"
SEED_FAILURE_NOTE = "The last command failed"
QUEUED_PREFIX = "HERMIT-QUEUED-"

# A middleware that asks for every behaviour of the seed list; written over the runtime
# copy's middleware.py (the seed's own functions stay reachable as seed_middleware).
VARIANT_MIDDLEWARE = '''\
"""Conformance middleware: each shell command names the behaviour it wants."""
from pathlib import Path
from hermit_hooks import HookResult
from seed_middleware import session_start  # the seed's memory hand-over

MARKERS = {markers!r}
UPDATED_INPUT_EXTRA = {extras!r}


def _command(inp):
    return (inp.tool_input or {{}}).get("command", "") if isinstance(inp.tool_input, dict) else ""


def before_tool(inp):
    command = _command(inp)
    if "denied.txt" in command:
        return HookResult(deny=True, reason=MARKERS["deny"])
    if "original.txt" in command:
        new = "echo RAN-UPDATED-$((40+2)) | tee updated.txt"
        shape = {{"command": new, **UPDATED_INPUT_EXTRA.get(inp.host, {{}})}}
        return HookResult(allow=True, updated_input=shape)
    if "alpha" in command:
        return HookResult(allow=True, context=MARKERS["allow"])
    return None


def after_tool(inp):
    command = _command(inp)
    if "stop-here" in command:
        return HookResult(stop_session=True, reason="HERMIT-STOP-SESSION")
    if "updated.txt" in command or "original.txt" in command:
        return HookResult(block=True, reason=MARKERS["block"], system_message=MARKERS["system"])
    if "alpha" in command:
        return HookResult(context=MARKERS["note"])
    return None


def before_model(inp):
    counter = Path(inp.workspace) / ".before-model-count"
    count = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(count))
    return HookResult(context=f"{{MARKERS['queued']}}{{count}}")


def stop(inp):
    return HookResult(block=True, reason=MARKERS["stop"])
'''

STOP_AT_START_MIDDLEWARE = '''\
from hermit_hooks import HookResult


def session_start(inp):
    return HookResult(stop_session=True, reason="HERMIT-STOP-SESSION")
'''


def deploy_adapter(adapter_dir: Path, workspace: Path, host: str) -> Path:
    """Deploy ``adapter_dir`` into ``workspace`` as the framework does; return the runtime copy."""
    from git_hermit.adapter.deploy import deploy

    record = deploy(adapter_dir, workspace, host)
    return Path(record.dest) / record.runtime_dir


def hook_calls(workspace: Path) -> list[dict[str, Any]]:
    """The runner's log of the session (.hermit-hooks/hook-calls.jsonl)."""
    logs = list(workspace.rglob("hook-calls.jsonl"))
    return [json.loads(line) for log in logs for line in log.read_text().splitlines() if line.strip()]


def run_adapter_session(host: str, cli: Path, adapter_dir: Path, name: str, script: tuple[Turn, ...],
                        work_dir: Path, middleware: str | None = None, timeout_s: float = 90.0) -> SessionRecord:
    root = work_dir / host / name
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    deployed = deploy_adapter(adapter_dir, workspace, host)
    if middleware is not None:
        (deployed / "seed_middleware.py").write_text((deployed / "middleware.py").read_text())
        (deployed / "middleware.py").write_text(middleware)
    with ScriptedModelServer(script) as server:
        result = run_session(host, cli, workspace, server.base_url, "Run the steps.", home=root / "home",
                             timeout_s=timeout_s)
        requests = tuple(server.requests)
    return SessionRecord(name, result, requests, tuple(hook_calls(workspace)), workspace)


def check_adapter_seed(host: str, rec: SessionRecord) -> list[CheckResult]:
    requests = rec.model_requests()
    first = requests[0].text() if requests else ""
    failures = [c for c in rec.payloads if (c.get("input") or {}).get("tool_input")
                and "false" in json.dumps(c["input"]["tool_input"]) and c["event"] != "PreToolUse"]
    errors = [c["error"] for c in rec.payloads if c.get("error")]
    checks = [
        _adapter_result("adapter_memory", host, True, SEED_MEMORY_ENTRY in first, "a MEMORY.md entry in the first request"),
        _adapter_result("adapter_runner_logs_every_call", host, True, bool(rec.payloads) and not errors,
                        f"{len(rec.payloads)} calls logged; errors: {errors[:2]}"),
    ]
    if _wire(host).can("hook_cwd_follows_cd"):
        cwd = [(c.get("input") or {}).get("cwd", "") for c in failures]
        checks.append(_adapter_result(
            "adapter_note_after_failed_call_after_cd", host, True,
            _after_tool_results(rec, SEED_FAILURE_NOTE) and bool(cwd) and all(c.endswith("/sub") for c in cwd),
            f"seed failure note reached the model: {_after_tool_results(rec, SEED_FAILURE_NOTE)}; inp.cwd: {cwd}"))
    return checks


def check_adapter_variants(host: str, rec: SessionRecord) -> list[CheckResult]:
    requests = rec.model_requests()
    text = rec.model_text()
    last = requests[-1].text() if requests else ""
    earlier = "\n".join(r.text() for r in requests[:-1])
    queued_now = [m for m in _markers(last, QUEUED_PREFIX) if m not in earlier]
    return [
        _adapter_result("adapter_note_after_call", host, True, _after_tool_results(rec, NOTE), "after_tool context"),
        _adapter_result("adapter_queued_before_model", host, True, _after_tool_results(rec, QUEUED_PREFIX),
                        f"queued contexts seen: {sorted(set(_markers(text, QUEUED_PREFIX)))}"),
        _adapter_result("adapter_deny", host, True, DENY_REASON in text and not rec.exists("denied.txt"),
                        f"reason reached the model: {DENY_REASON in text}; ran: {rec.exists('denied.txt')}"),
        _adapter_result("adapter_context_with_allow", host, _wire(host).can("context_with_allow_reaches_model"), ALLOW_CONTEXT in text,
                        "before_tool allow + context (Codex drops it)"),
        _adapter_result("adapter_updated_input", host, True, rec.exists("updated.txt") and not rec.exists("original.txt"),
                        f"new input ran: {rec.exists('updated.txt')}"),
        _adapter_result("adapter_block_with_system_message", host, True,
                        BLOCK_REASON in text and SYSTEM_MESSAGE not in text
                        and (UPDATED_OUTPUT in text) != _wire(host).can("block_replaces_output"),
                        f"reason: {BLOCK_REASON in text}; output kept: {UPDATED_OUTPUT in text}; "
                        f"system message to the model: {SYSTEM_MESSAGE in text}"),
        _adapter_result("adapter_blocked_stop_with_queue", host, True,
                        STOP_REASON in last and bool(queued_now) and STOP_REASON not in earlier,
                        f"reason in the last request: {STOP_REASON in last}; queue handed over with it: {queued_now}"),
    ]


def check_adapter_stop_session(host: str, rec: SessionRecord) -> list[CheckResult]:
    requests = rec.model_requests()
    if _wire(host).can("stop_session_at_start_ends"):
        return [_adapter_result("adapter_stop_session", host, True, not requests,
                                f"at session_start: {len(requests)} model requests")]
    ended = rec.exists("first.txt") and len(requests) == 1 and not rec.exists("second.txt")
    return [_adapter_result("adapter_stop_session", host, True, ended,
                            f"after a call: {len(requests)} model requests; next call ran: {rec.exists('second.txt')}")]


def _updated_input_extras() -> dict[str, dict[str, str]]:
    """Each hook host's extra fields of a new tool input (the test middleware's table)."""
    return {h.name: dict(_wire(h.name).updated_input_extra) for h in registry.hook_hosts()}


def _markers(text: str, prefix: str) -> list[str]:
    found, start = [], text.find(prefix)
    while start >= 0:
        end = start + len(prefix)
        while end < len(text) and text[end].isdigit():
            end += 1
        found.append(text[start:end])
        start = text.find(prefix, end)
    return found


def _adapter_result(row: str, host: str, expected: bool, observed: bool, detail: str) -> CheckResult:
    return CheckResult(row, host, bool(observed), expected, detail)


def run_adapter_conformance(host: str, adapter_dir: Path, cli: Path, work_dir: Path) -> tuple[ConformanceReport, list[SessionRecord]]:
    """The seed list on a real host through the hook runner: the seed adapter, then test middlewares."""
    markers = {"deny": DENY_REASON, "allow": ALLOW_CONTEXT, "block": BLOCK_REASON, "system": SYSTEM_MESSAGE,
               "note": NOTE, "queued": QUEUED_PREFIX, "stop": STOP_REASON}
    seed_script = (Turn.shell("mkdir -p sub && cd sub && echo moved"), Turn.shell("false"), Turn.say("done"))
    variant_script = (Turn.shell("echo alpha-ran"), Turn.shell("echo denied > denied.txt"),
                      Turn.shell("echo original > original.txt"), Turn.say("FINAL-ANSWER"))
    stop_script = (Turn.shell("echo stop-here > first.txt"), Turn.shell("echo second > second.txt"), Turn.say("done"))
    variant_middleware = VARIANT_MIDDLEWARE.format(markers=markers, extras=_updated_input_extras())
    stop_middleware = STOP_AT_START_MIDDLEWARE if _wire(host).can("stop_session_at_start_ends") else variant_middleware
    plan = (
        ("adapter_seed", seed_script, None, check_adapter_seed),
        ("adapter_variants", variant_script, variant_middleware, check_adapter_variants),
        ("adapter_stop_session", stop_script, stop_middleware, check_adapter_stop_session),
    )
    checks: list[CheckResult] = []
    records: list[SessionRecord] = []
    errors: list[str] = []
    for name, script, middleware, check in plan:
        record = run_adapter_session(host, cli, adapter_dir, name, script, work_dir, middleware)
        records.append(record)
        if record.result.timed_out:
            errors.append(f"{name}: timed out: {record.result.stderr[-300:]}")
            continue
        checks.extend(check(host, record))
    report = ConformanceReport(host, str(cli), cli_version(cli), tuple(checks),
                               tuple(round(r.result.duration_s, 3) for r in records), tuple(errors))
    return report, records


def main(argv: list[str] | None = None) -> int:
    """``python -m git_hermit.hostkit.conformance [DEST]``: run the probe sessions of each installed
    host, print the rows, and with DEST record the payloads as fixtures (a new host version)."""
    args = sys.argv[1:] if argv is None else argv
    failures = 0
    for host in (h.name for h in registry.hook_hosts()):
        report, records = run_conformance(host)
        print(f"{host} {report.version or '(not installed)'}: " + ("all rows hold" if report.all_hold else "DEPARTS"))
        for line in report.errors:
            print(f"  !! {line}")
        for check in report.checks:
            print(f"  {'ok' if check.holds else '!!'} {check.row}: {check.detail}")
        failures += not report.all_hold
        if args and records:
            write_payload_fixtures(report, records, Path(args[0]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
