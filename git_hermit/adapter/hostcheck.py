"""check_spec's host part: deploy a copy of the adapter for each host into a temporary
directory, measure the context file each host reads, and run one synthetic session per host,
in that host's own payload shapes and event order, through the hook commands the deployment
installed (a shell per call, the host's environment), holding every output to what the host reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from git_hermit import errors, resources
from git_hermit.adapter import hookcall
from git_hermit.adapter.violations import ERROR, WARNING, Violation
from git_hermit.adapter.deploy import DeployRecord, deploy

# Codex reads at most this many bytes of AGENTS.md (project_doc_max_bytes); the rest is cut.
CODEX_CONTEXT_BYTES = 32_768
# Claude Code warns that a CLAUDE.md above this many characters slows every request.
CLAUDE_CONTEXT_CHARS = 40_000
HOST_HOOK_TIMEOUT_S = 30
SESSION_ID = "hermit-hostcheck-session"
TURN_ID = "hermit-hostcheck-turn-1"
PROMPT = "Fix the failing test in this repository and run the test suite."


def check_hosts(adapter_dir: Path) -> list[Violation]:
    """Deploy ADAPTER_DIR for every host and report what each host would not read or receive."""
    adapter_dir = Path(adapter_dir)
    violations: list[Violation] = []
    memory = memory_lines(adapter_dir / "MEMORY.md")
    with tempfile.TemporaryDirectory(prefix="hermit-hostcheck-") as tmp:
        for host in ("codex", "claude-code", "pi"):
            dest = Path(tmp) / host / "workspace"
            try:
                record = deploy(adapter_dir, dest, host)
            except errors.HermitError as exc:
                violations.append(Violation(".", 1, "host-deploy", f"{host}: {exc.message}"))
                continue
            violations += _context_size(host, dest, record)
            if host == "pi":
                violations += _pi_sub_agents(adapter_dir)
            if not (adapter_dir / "middleware.py").is_file():
                continue
            if host == "pi":
                violations += _pi_session(dest, record, memory)
            else:
                session = HostSession(host, dest, record, Path(tmp) / host)
                violations += session.run(memory)
    return violations


def _pi_sub_agents(adapter_dir: Path) -> list[Violation]:
    """Pi runs no sub-agents: say so for each one instead of dropping it silently."""
    from git_hermit.adapter.deploy import _sub_agent_name
    out = []
    for path in sorted(adapter_dir.rglob("*")):
        rel = path.relative_to(adapter_dir).as_posix()
        name = _sub_agent_name(rel) if path.is_file() else None
        if name:
            out.append(Violation(rel, 1, "host-subagents",
                                 f"pi has no sub-agents: {name!r} is not installed there (Codex gets an agent role, "
                                 "Claude Code a .claude/agents file); on pi the context file only points to "
                                 "its definition", WARNING))
    return out


def memory_lines(memory_file: Path) -> list[str]:
    """The first line of each MEMORY.md entry (a "- " line after the header)."""
    if not memory_file.is_file():
        return []
    lines = memory_file.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    return [line[2:].strip() for line in lines if line.startswith("- ") and line[2:].strip()]


def _context_size(host: str, dest: Path, record: DeployRecord) -> list[Violation]:
    data = (dest / record.context_file).read_bytes()
    if host == "codex" and len(data) > CODEX_CONTEXT_BYTES:
        return [Violation("AGENTS.md", 1, "host-context-size",
                          f"codex: the deployed AGENTS.md is {len(data):,} bytes; Codex reads only "
                          f"the first {CODEX_CONTEXT_BYTES:,} and drops the rest")]
    chars = len(data.decode("utf-8", errors="replace"))
    if host == "claude-code" and chars > CLAUDE_CONTEXT_CHARS:
        return [Violation("AGENTS.md", 1, "host-context-size",
                          f"claude-code: the deployed CLAUDE.md is {chars:,} characters; Claude "
                          f"Code warns above {CLAUDE_CONTEXT_CHARS:,} (every request pays for it)",
                          WARNING)]
    return []


@cache
def _shipped_wires() -> dict:
    """The shipped hook_hosts.WIRES: the reference for which fields each host reads."""
    agent_dir = str(resources.hooks_dir() / "agent")
    if agent_dir not in sys.path:
        sys.path.append(agent_dir)
    import hook_hosts  # stdlib-only; importable only from the shipped hooks/agent/

    return hook_hosts.WIRES


def output_paths(output: dict) -> set[str]:
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

    def __init__(self, host: str, dest: Path, record: DeployRecord, scratch: Path):
        self.host, self.dest, self.record = host, dest, record
        self.wire = _shipped_wires()[host]
        self.commands = hookcall.installed_commands(dest, record)
        self.env = self._host_env(scratch)
        self.violations: list[Violation] = []
        self.outputs: list[tuple[str, dict]] = []

    def _host_env(self, scratch: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("HERMIT_HOOK_TIMEOUT_S", None)
        if self.host == "codex":
            env.update(CODEX_HOME=str(scratch / "codex-home"), CODEX_MANAGED_BY_NPM="1")
        else:
            env.update(CLAUDE_PROJECT_DIR=str(self.dest), CLAUDECODE="1",
                       CLAUDE_CODE_ENTRYPOINT="sdk-cli", CLAUDE_CODE_SESSION_ID=SESSION_ID)
        return env

    # -- the session
    def run(self, memory: list[str]) -> list[Violation]:
        if self.host == "codex":
            self._codex_session()
        else:
            self._claude_session()
        self._check_memory(memory)
        self._check_log()
        return self.violations

    def _codex_session(self) -> None:
        common = {"session_id": SESSION_ID, "transcript_path": str(self.dest / "rollout.jsonl"),
                  "cwd": str(self.dest), "model": "gpt-5.6-luna"}
        turn = {"turn_id": TURN_ID, "permission_mode": "bypassPermissions"}
        self.fire("SessionStart", {**common, "permission_mode": "bypassPermissions", "source": "startup"})
        self.fire("UserPromptSubmit", {**common, **turn, "prompt": PROMPT})
        for index, (command, output) in enumerate(_TOOL_CALLS):
            self.fire("PreModelRequest", {**common, "turn_id": TURN_ID})
            call = {**common, **turn, "tool_name": "Bash", "tool_input": {"command": command},
                    "tool_use_id": f"call_{index}"}
            if not _denied(self.fire("PreToolUse", call)):
                self.fire("PostToolUse", {**call, "tool_response": output})
        self.fire("PreModelRequest", {**common, "turn_id": TURN_ID})
        stop = {**common, **turn, "stop_hook_active": False, "last_assistant_message": "Done."}
        if self.fire("Stop", stop).get("decision") == "block":
            self.fire("PreModelRequest", {**common, "turn_id": TURN_ID})
            self.fire("Stop", {**stop, "stop_hook_active": True})

    def _claude_session(self) -> None:
        common = {"session_id": SESSION_ID, "transcript_path": str(self.dest / "session.jsonl"),
                  "cwd": str(self.dest)}
        turn = {"prompt_id": TURN_ID, "permission_mode": "bypassPermissions"}
        self.fire("SessionStart", {**common, "source": "startup"})
        self.fire("UserPromptSubmit", {**common, **turn, "prompt": PROMPT})
        for index, (command, output) in enumerate(_TOOL_CALLS):
            call = {**common, **turn, "effort": {"level": "medium"}, "tool_name": "Bash",
                    "tool_input": {"command": command, "description": "run a command"},
                    "tool_use_id": f"toolu_{index}"}
            response = None
            if _denied(self.fire("PreToolUse", call)):
                response = "PreToolUse:Bash hook error: denied"
            elif output.startswith("Exit code"):
                self.fire("PostToolUseFailure", {**call, "error": output, "is_interrupt": False})
                response = output
            else:
                self.fire("PostToolUse", {**call, "duration_ms": 12, "tool_response": {
                    "stdout": output, "stderr": "", "interrupted": False, "isImage": False,
                    "noOutputExpected": False}})
                response = output
            self.fire("PostToolBatch", {**common, **turn, "effort": {"level": "medium"}, "tool_calls": [
                {"tool_name": "Bash", "tool_input": call["tool_input"],
                 "tool_use_id": call["tool_use_id"], "tool_response": response}]})
        stop = {**common, **turn, "effort": {"level": "medium"}, "stop_hook_active": False,
                "last_assistant_message": "Done.", "background_tasks": [], "session_crons": []}
        if self.fire("Stop", stop).get("decision") == "block":
            self.fire("Stop", {**stop, "stop_hook_active": True})

    def fire(self, event: str, payload: dict) -> dict:
        """Run every hook the deployment installed for EVENT, as the host does; the merged output."""
        merged: dict = {}
        for call in hookcall.fire(self.commands, event, payload, cwd=self.dest, env=self.env,
                                  timeout_s=HOST_HOOK_TIMEOUT_S):
            output = self._check_output(call)
            self.outputs.append((event, output))
            merged.update(output)
        return merged

    def _check_output(self, call: hookcall.HookCall) -> dict:
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


def _denied(output: dict) -> bool:
    specific = output.get("hookSpecificOutput") or {}
    return specific.get("permissionDecision") == "deny" or output.get("decision") == "block"


def _pi_session(dest: Path, record: DeployRecord, memory: list[str]) -> list[Violation]:
    """Pi runs no hooks: the context file's hand-run session_start command must print the memory."""
    command = next((line.strip("`") for line in (dest / record.context_file).read_text(
        encoding="utf-8").splitlines() if "hook_runner.py" in line and "SessionStart" in line), None)
    if command is None:
        return [Violation("AGENTS.md", 1, "host-pi-hooks",
                          "pi: the deployed AGENTS.md lists no session_start command")]
    done = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=dest,
                          timeout=HOST_HOOK_TIMEOUT_S)
    if memory and not any(line in done.stdout for line in memory):
        return [Violation("MEMORY.md", 1, "host-memory-handover",
                          "pi: the hand-run session_start printed no MEMORY.md entry")]
    return []
