"""check_spec's host part: deploy a copy of the adapter for each host into a temporary
directory, measure the context file each host reads, and run one synthetic session per host,
in that host's own payload shapes and event order, through the hook commands the deployment
installed (a shell per call, the host's environment), holding every output to what the host reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from git_hermit import errors, resources
from git_hermit.adapter import hookcall
from git_hermit.adapter.violations import ERROR, WARNING, Violation
from git_hermit.adapter.deploy import DeployRecord, deploy
from git_hermit.hosts import registry
from git_hermit.hosts.base import Host

HOST_HOOK_TIMEOUT_S = 30
SESSION_ID = "hermit-hostcheck-session"
TURN_ID = "hermit-hostcheck-turn-1"
PROMPT = "Fix the failing test in this repository and run the test suite."


def check_hosts(adapter_dir: Path, run_host: str | None = None) -> list[Violation]:
    """Deploy ADAPTER_DIR for every host and report what each host would not read or receive.
    ``run_host`` (the run's ``host:``): what a host lacks by design (sub-agents) is said for it
    alone, not for hosts the run never deploys to."""
    adapter_dir = Path(adapter_dir)
    violations: list[Violation] = []
    memory = memory_lines(adapter_dir / "MEMORY.md")
    with tempfile.TemporaryDirectory(prefix="hermit-hostcheck-") as tmp:
        for host in registry.hosts():
            dest = Path(tmp) / host.name / "workspace"
            try:
                record = deploy(adapter_dir, dest, host.name)
            except errors.HermitError as exc:
                violations.append(Violation(".", 1, "host-deploy", f"{host.name}: {exc.message}"))
                continue
            violations += _context_size(host, dest, record)
            if not host.layout.native_sub_agents and run_host in (None, host.name):
                violations += _missing_sub_agents(host, adapter_dir)
            if not (adapter_dir / "middleware.py").is_file():
                continue
            if host.wire is None:
                violations += _hand_run_session(host, dest, record, memory)
            else:
                session = HostSession(host, dest, record, Path(tmp) / host.name)
                violations += session.run(memory)
    return violations


def _missing_sub_agents(host: Host, adapter_dir: Path) -> list[Violation]:
    """A host without sub-agents: say so for each one instead of dropping it silently."""
    from git_hermit.adapter.deploy import _sub_agent_name
    out = []
    for path in sorted(adapter_dir.rglob("*")):
        rel = path.relative_to(adapter_dir).as_posix()
        name = _sub_agent_name(rel) if path.is_file() else None
        if name:
            out.append(Violation(rel, 1, "host-subagents",
                                 f"{host.name} has no sub-agents: {name!r} is not installed there (hosts with "
                                 f"sub-agents get a native file); on {host.name} the context file only points to "
                                 "its definition", WARNING))
    return out


def memory_lines(memory_file: Path) -> list[str]:
    """The first line of each MEMORY.md entry (a "- " line after the header)."""
    if not memory_file.is_file():
        return []
    lines = memory_file.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    return [line[2:].strip() for line in lines if line.startswith("- ") and line[2:].strip()]


def _context_size(host: Host, dest: Path, record: DeployRecord) -> list[Violation]:
    limit = host.context_limit
    if limit is None:
        return []
    size = limit.measure((dest / record.context_file).read_bytes())
    if size <= limit.limit:
        return []
    unit = "bytes" if limit.unit == "bytes" else "characters"
    return [Violation("AGENTS.md", 1, "host-context-size",
                      f"{host.name}: the deployed {record.context_file} is {size:,} {unit}; {limit.consequence}",
                      ERROR if limit.severity == "error" else WARNING)]


@cache
def _shipped_wires() -> dict[str, Any]:
    """Each hook host's wire (its host module's): the reference for which fields each host reads."""
    resources.hook_wire_module("hermit_hooks")   # the wires build hermit_hooks' HookInput
    return {h.name: h.hook_wire for h in registry.hosts() if h.hook_wire is not None}


def output_paths(output: dict[str, Any]) -> set[str]:
    """The dotted field paths of a hook output: hookSpecificOutput's members one level down."""
    paths = set()
    for key, value in output.items():
        if key == "hookSpecificOutput" and isinstance(value, dict):
            paths |= {f"{key}.{inner}" for inner in value}
        else:
            paths.add(key)
    return paths


class HostSession:
    """One synthetic session of one host: its events in the order the host fires them."""

    def __init__(self, host: Host, dest: Path, record: DeployRecord, scratch: Path):
        self.impl, self.host, self.dest, self.record = host, host.name, dest, record
        self.wire = _shipped_wires()[host.name]
        self.commands = hookcall.installed_commands(dest, record)
        self.env = self._host_env(scratch)
        self.violations: list[Violation] = []
        self.outputs: list[tuple[str, dict[str, Any]]] = []

    def _host_env(self, scratch: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("HERMIT_HOOK_TIMEOUT_S", None)
        env.update(self.impl.hook_env(self.dest, scratch, SESSION_ID))
        return env

    # -- the session
    def run(self, memory: list[str]) -> list[Violation]:
        self.impl.synthetic_session(self.fire, self.dest, PROMPT, _TOOL_CALLS, SESSION_ID, TURN_ID)
        self._check_memory(memory)
        self._check_log()
        return self.violations

    def fire(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run every hook the deployment installed for EVENT, as the host does; the merged output."""
        merged: dict[str, Any] = {}
        for call in hookcall.fire(self.commands, event, payload, cwd=self.dest, env=self.env,
                                  timeout_s=HOST_HOOK_TIMEOUT_S):
            output = self._check_output(call)
            self.outputs.append((event, output))
            merged.update(output)
        return merged

    def _check_output(self, call: hookcall.HookCall) -> dict[str, Any]:
        event = call.event
        if call.returncode is None:
            self._violate("host-hook-timeout", f"{event}: no answer within {HOST_HOOK_TIMEOUT_S} s")
            return {}
        if call.returncode != 0:
            self._violate("host-hook-exit", f"{event}: the hook exited {call.returncode} "
                          f"(exit 2 blocks on this host): {call.stderr.strip()[-200:]}")
        text = call.stdout.strip()
        if not text:
            return {}
        try:
            output = json.loads(text)
        except json.JSONDecodeError:
            self._violate("host-hook-output", f"{event}: the hook printed non-JSON: {text[:120]!r}")
            return {}
        if not isinstance(output, dict):
            self._violate("host-hook-output", f"{event}: the hook printed JSON that is not an object")
            return {}
        unread = output_paths(output) - self.wire.READS.get(event, frozenset())
        if unread:
            self._violate("host-output-fields", f"{event}: {self.host} does not read "
                          f"{', '.join(sorted(unread))}")
        specific = output.get("hookSpecificOutput")
        if isinstance(specific, dict) and specific.get("hookEventName") != event:
            self._violate("host-output-fields", f"{event}: hookSpecificOutput.hookEventName is "
                          f"{specific.get('hookEventName')!r}")
        return output

    def _check_memory(self, memory: list[str]) -> None:
        if not memory:
            return
        context = "\n".join(
            str(output.get("hookSpecificOutput", {}).get("additionalContext") or "")
            for event, output in self.outputs if event == "SessionStart")
        if not any(line in context for line in memory):
            self._violate("host-memory-handover", "session_start handed no MEMORY.md entry to the "
                          "model (its context holds none of MEMORY.md's entries)", path="MEMORY.md")

    def _check_log(self) -> None:
        log = self.dest / ".hermit-hooks" / "hook-calls.jsonl"
        if not log.is_file():
            self._violate("host-hook-log", "the hooks wrote no .hermit-hooks/hook-calls.jsonl")
            return
        for line in log.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry.get("error"):
                self._violate("host-hook-error", f"{entry.get('event')}: {entry['error']} "
                              "(the hook failed open: the host got a no-op)")
            for part in entry.get("dropped") or []:
                self._violate("host-context-dropped", f"{entry.get('event')}: {self.host} drops the "
                              f"{part}", severity=WARNING)

    def _violate(self, rule: str, message: str, *, path: str = "middleware.py",
                 severity: str = ERROR) -> None:
        self.violations.append(Violation(path, 1, rule, f"{self.host}: {message}", severity))


# A tool call that succeeds, one that fails, and one any sane middleware may refuse.
_TOOL_CALLS = (
    ("ls", "README.md\nsrc\ntests\n"),
    ("python -m pytest -q", "Exit code 1\n1 failed, 3 passed in 0.12s"),
    ("rm -rf ~/", "removed"),
)


def _hand_run_session(host: Host, dest: Path, record: DeployRecord, memory: list[str]) -> list[Violation]:
    """A host without hooks: the context file's hand-run session_start command must print the memory."""
    command = next((line.strip("`") for line in (dest / record.context_file).read_text(
        encoding="utf-8").splitlines() if "hook_runner.py" in line and "SessionStart" in line), None)
    if command is None:
        return [Violation("AGENTS.md", 1, "host-pi-hooks",
                          f"{host.name}: the deployed {record.context_file} lists no session_start command")]
    done = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=dest,
                          timeout=HOST_HOOK_TIMEOUT_S)
    if memory and not any(line in done.stdout for line in memory):
        return [Violation("MEMORY.md", 1, "host-memory-handover",
                          f"{host.name}: the hand-run session_start printed no MEMORY.md entry")]
    return []
