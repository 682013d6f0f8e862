"""Each host's wire: its payload -> one HookInput, a HookResult -> exactly the output fields
that host reads (READS), plus CAPABILITIES, seed 000's Codex-vs-Claude-Code table as data.
Pure transforms, stdlib-only, no I/O: hook_runner.py does the reading, writing and queueing.
"""

from __future__ import annotations

from hermit_hooks import HookInput, HookResult

TYPE_CHECKING = False  # mypy reads the imports below; the hook never pays for `typing`
if TYPE_CHECKING:
    from typing import Any

# Every event hooks.json registers; each host fires the ones it has and skips the others.
HOST_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
    "PostToolBatch", "Stop", "PreModelRequest",
)

CAPABILITIES = {
    "codex": {
        "session_start": "SessionStart, before the prompt (again on a resumed session: inp.source); "
        "context is read before the first model request",
        "before_tool": "PreToolUse (none for a write_stdin poll): deny (not run; the model reads reason), "
        "allow, updated_input (run instead); context is read with the call's result, but dropped when "
        "given with allow and no updated_input",
        "after_tool": "PostToolUse after a call that ran, a failed command too (no exit code: failed is "
        "None); output_text may be the command's last output chunk only (always for one that outlives "
        "its first wait: its polls fire nothing); none after a denied call, a failed apply_patch or one "
        "run through the shell; block: the model reads reason instead of the output; context: beside "
        "it. With a code-mode model a block or a deny reaches the model as an error in its script",
        "stop": "Stop: block once per turn, the model going on with reason; a blocked stop's context "
        "and the queue go with the reason",
        "before_model": "PreModelRequest, before every model request; its output is ignored: only its "
        "context is queued",
        "queued_context": "handed over with the next prompt or tool result, or a blocked stop; a stop "
        "that goes through leaves it for the session's next prompt (a resumed session)",
        "stop_session": "ends the session at session_start only; elsewhere the session goes on (with a "
        "classic, not code-mode, model a stop at after_tool replaces the output with reason)",
        "system_message": "shown nowhere",
        "tool_kind": "shell (Bash: a code-mode script's exec_command too), patch (apply_patch), mcp, other",
        "cwd_model_turn": "inp.cwd: the session's directory (inp.workspace), even for a command run in "
        "another workdir; inp.model: the model; inp.turn_id: the turn",
    },
    "claude-code": {
        "session_start": "SessionStart, before the prompt (inp.source: startup, resume ...); context is "
        "read before the first model request",
        "before_tool": "PreToolUse (none for a call whose input the CLI refused): deny (not run; the "
        "model reads reason), allow, updated_input (run instead; without allow the session's permission "
        "mode decides); context is read with the call's result",
        "after_tool": "PostToolUse, or PostToolUseFailure after a call that failed (failed; exit_code and "
        "the error as output_text); output_text is None after a Write, Edit, MultiEdit or NotebookEdit; "
        "a command moved to the background at its timeout is a PostToolUse with the output so far; none "
        "after a denied call or one whose input the CLI refused; block: the output stays and the model "
        "also reads reason; context: beside it",
        "stop": "Stop: block once per turn, the model going on with reason; a stop's context goes out "
        "only with a block (alone, it would make the model go on); a sub-agent's end is no stop",
        "before_model": "no such event: the runner calls it after the prompt, after every model "
        "message's tool calls (PostToolBatch) and after a blocked stop, once per model request (none "
        "before a sub-agent's first); only its context is queued",
        "queued_context": "handed over with the agent's next prompt or tool result (a failed one too), "
        "or a blocked stop; a stop that goes through leaves it for the next prompt; a sub-agent's queue "
        "is its own",
        "stop_session": "ends the session at before_tool (once the call has run) and at after_tool of a "
        "call that succeeded; ignored at session_start and at after_tool of a failed call",
        "system_message": "shown to the person watching, not to the model",
        "tool_kind": "shell (Bash), read (Read), write (Write, Edit, MultiEdit, NotebookEdit), mcp, "
        "other (Grep, Glob, Agent ...)",
        "cwd_model_turn": "inp.cwd: the shell's current directory, which follows the agent's cd "
        "(inp.workspace is the project's); inp.model: None; inp.turn_id: the prompt's id",
    },
    "pi": {
        "session_start": "no hooks: the context file lists the hook commands; run by hand without a "
        "payload, session_start hands the memory over (its context is printed)",
        "before_tool": "not run (no payload)",
        "after_tool": "not run (no payload)",
        "stop": "not run (no payload)",
        "before_model": "not run (no payload)",
        "queued_context": "none",
        "stop_session": "ignored",
        "system_message": "printed with the context",
        "tool_kind": "none",
        "cwd_model_turn": "inp.cwd: the shell's directory; no model, no turn",
    },
}

_WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")


def _join(*parts: str | None) -> str | None:
    text = "\n\n".join(p for p in parts if p)
    return text or None


def _text(value: Any) -> str | None:
    """A tool response as text when the host sent text; structured responses stay in payload."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "stdout" in value or "stderr" in value:
            out, err = value.get("stdout") or "", value.get("stderr") or ""
            return out + ("\n" + err if out and err else err)
        file = value.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return file["content"]
    return None


def _exit_code_from(error: str | None) -> int | None:
    """Claude Code's failed Bash error starts 'Exit code N'; parsed without `re` (start-up cost)."""
    if not error:
        return None
    at = error.find("Exit code ")
    if at < 0:
        return None
    digits = ""
    for ch in error[at + len("Exit code "):]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


class Wire:
    """The common part; a host subclass fills the tables and the two transforms."""

    name = ""
    context_file = "AGENTS.md"
    reads_stdin = True
    # host event -> middleware function (None: the runner's own work, e.g. recording the prompt)
    CALLS: dict[str, str | None] = {}
    # events after which the runner calls before_model because the host has no such event
    BEFORE_MODEL_AFTER: frozenset[str] = frozenset()
    # events whose output hands the queued context over (Stop: only when it blocks)
    DELIVERS_QUEUE: frozenset[str] = frozenset()
    # host event -> the output fields (dotted paths) this host reads for it
    READS: dict[str, frozenset[str]] = {}

    def tool_kind(self, tool_name: str | None) -> str | None:
        if not tool_name:
            return None
        if tool_name.startswith("mcp__"):
            return "mcp"
        return self._TOOL_KINDS.get(tool_name, "other")

    _TOOL_KINDS: dict[str, str] = {}

    def to_input(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> HookInput:
        raise NotImplementedError

    def render(self, host_event: str, result: HookResult | None) -> dict[str, Any]:
        raise NotImplementedError

    def dropped(self, host_event: str, result: HookResult | None) -> list[str]:
        """Parts of `result` this host drops by design (logged; check_spec warns)."""
        return []

    def _common(self, host_event: str, payload: dict[str, Any], task: str, workspace: str) -> dict[str, Any]:
        tool_name = payload.get("tool_name")
        tool_input = payload.get("tool_input")
        return {
            "event": self.CALLS.get(host_event) or "",
            "task": task,
            "tool_name": tool_name,
            "tool_kind": self.tool_kind(tool_name),
            "tool_input": tool_input if isinstance(tool_input, dict) else None,
            "cwd": payload.get("cwd") or workspace,
            "workspace": workspace,
            "source": payload.get("source"),
            "host": self.name,
            "host_event": host_event,
            "session_id": payload.get("session_id"),
            "prompt": payload.get("prompt"),
            "payload": payload,
        }


class CodexWire(Wire):
    name = "codex"
    context_file = "AGENTS.md"
    CALLS = {
        "SessionStart": "session_start", "UserPromptSubmit": None, "PreToolUse": "before_tool",
        "PostToolUse": "after_tool", "Stop": "stop", "PreModelRequest": "before_model",
    }
    DELIVERS_QUEUE = frozenset(("UserPromptSubmit", "PostToolUse", "Stop"))
    READS = {
        "SessionStart": frozenset((
            "hookSpecificOutput.hookEventName", "hookSpecificOutput.additionalContext",
            "continue", "stopReason")),
        "UserPromptSubmit": frozenset((
            "hookSpecificOutput.hookEventName", "hookSpecificOutput.additionalContext")),
        "PreToolUse": frozenset((
            "hookSpecificOutput.hookEventName", "hookSpecificOutput.permissionDecision",
            "hookSpecificOutput.permissionDecisionReason", "hookSpecificOutput.updatedInput",
            "hookSpecificOutput.additionalContext")),
        "PostToolUse": frozenset((
            "decision", "reason", "hookSpecificOutput.hookEventName",
            "hookSpecificOutput.additionalContext", "continue", "stopReason")),
        "Stop": frozenset(("decision", "reason")),
        "PreModelRequest": frozenset(),
    }
    _TOOL_KINDS = {"Bash": "shell", "exec_command": "shell", "apply_patch": "patch"}

    def to_input(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> HookInput:
        fields = self._common(host_event, payload, task, workspace)
        fields.update(model=payload.get("model"), turn_id=payload.get("turn_id"))
        if host_event == "PostToolUse":
            # Codex reports no exit status to hooks: a failed command is a PostToolUse too.
            fields.update(output_text=_text(payload.get("tool_response")), failed=None)
        return HookInput(**fields)

    def render(self, host_event: str, result: HookResult | None) -> dict[str, Any]:
        if result is None:
            return {}
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        if host_event in ("SessionStart", "UserPromptSubmit"):
            if result.context:
                specific["additionalContext"] = result.context
            if host_event == "SessionStart" and result.stop_session:
                out.update({"continue": False, "stopReason": result.reason or "stopped by middleware"})
        elif host_event == "PreToolUse":
            if result.deny:
                specific["permissionDecision"] = "deny"
                specific["permissionDecisionReason"] = result.reason or "denied by middleware"
            elif result.updated_input is not None:
                specific["permissionDecision"] = "allow"
                specific["updatedInput"] = result.updated_input
            # Codex drops a context given with allow and no updated_input (CAPABILITIES).
            dropped = result.allow and not result.deny and result.updated_input is None
            if result.context and not dropped:
                specific["additionalContext"] = result.context
        elif host_event == "PostToolUse":
            if result.block:
                out.update({"decision": "block", "reason": result.reason or "blocked by middleware"})
            if result.context:
                specific["additionalContext"] = result.context
            if result.stop_session:
                out.update({"continue": False, "stopReason": result.reason or "stopped by middleware"})
        elif host_event == "Stop":
            if result.block:
                # Codex's Stop reads no context: a blocked stop's context rides with the reason.
                reason = _join(result.reason or "not done yet", result.context)
                out.update({"decision": "block", "reason": reason})
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": host_event, **specific}
        return out

    def dropped(self, host_event: str, result: HookResult | None) -> list[str]:
        if result is None or not result.context:
            return []
        if (host_event == "PreToolUse" and result.allow and not result.deny
                and result.updated_input is None):
            return ["context (given with allow and no updated_input)"]
        if host_event == "Stop" and not result.block:
            return ["context (a Stop context goes out only with a block)"]
        return []


class ClaudeCodeWire(Wire):
    name = "claude-code"
    context_file = "CLAUDE.md"
    CALLS = {
        "SessionStart": "session_start", "UserPromptSubmit": None, "PreToolUse": "before_tool",
        "PostToolUse": "after_tool", "PostToolUseFailure": "after_tool", "PostToolBatch": None,
        "Stop": "stop",
    }
    BEFORE_MODEL_AFTER = frozenset(("UserPromptSubmit", "PostToolBatch", "Stop"))
    DELIVERS_QUEUE = frozenset(
        ("UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Stop"))
    _CTX = ("hookSpecificOutput.hookEventName", "hookSpecificOutput.additionalContext")
    READS = {
        "SessionStart": frozenset(_CTX + ("systemMessage",)),
        "UserPromptSubmit": frozenset(_CTX + ("systemMessage",)),
        "PreToolUse": frozenset(_CTX + (
            "hookSpecificOutput.permissionDecision", "hookSpecificOutput.permissionDecisionReason",
            "hookSpecificOutput.updatedInput", "continue", "stopReason", "systemMessage")),
        "PostToolUse": frozenset(_CTX + (
            "decision", "reason", "continue", "stopReason", "systemMessage")),
        "PostToolUseFailure": frozenset(_CTX + ("decision", "reason", "systemMessage")),
        "PostToolBatch": frozenset(_CTX + ("systemMessage",)),
        "Stop": frozenset(_CTX + ("decision", "reason", "systemMessage")),
    }
    _TOOL_KINDS = {
        "Bash": "shell", "Read": "read", "Write": "write", "Edit": "write", "MultiEdit": "write",
        "NotebookEdit": "write",
    }

    def to_input(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> HookInput:
        fields = self._common(host_event, payload, task, workspace)
        fields.update(turn_id=payload.get("prompt_id"))
        if host_event == "PostToolUse":
            write = payload.get("tool_name") in _WRITE_TOOLS
            text = None if write else _text(payload.get("tool_response"))
            fields.update(output_text=text, failed=False)
        elif host_event == "PostToolUseFailure":
            error = payload.get("error")
            error = error if isinstance(error, str) else _text(error)
            fields.update(output_text=error, failed=True, exit_code=_exit_code_from(error))
        return HookInput(**fields)

    def render(self, host_event: str, result: HookResult | None) -> dict[str, Any]:
        if result is None:
            return {}
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        context = result.context
        if host_event == "PreToolUse":
            if result.deny:
                specific["permissionDecision"] = "deny"
                specific["permissionDecisionReason"] = result.reason or "denied by middleware"
            elif result.allow:
                specific["permissionDecision"] = "allow"
            if result.updated_input is not None and not result.deny:
                specific["updatedInput"] = result.updated_input
            if result.stop_session:
                out.update({"continue": False, "stopReason": result.reason or "stopped by middleware"})
        elif host_event in ("PostToolUse", "PostToolUseFailure"):
            if result.block:
                out.update({"decision": "block", "reason": result.reason or "blocked by middleware"})
            if result.stop_session and host_event == "PostToolUse":
                out.update({"continue": False, "stopReason": result.reason or "stopped by middleware"})
        elif host_event == "Stop":
            if result.block:
                out.update({"decision": "block", "reason": result.reason or "not done yet"})
            else:
                context = None  # alone, a Stop context would make the model go on
        elif host_event not in ("SessionStart", "UserPromptSubmit", "PostToolBatch"):
            return {}
        if context:
            specific["additionalContext"] = context
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": host_event, **specific}
        if result.system_message:
            out["systemMessage"] = result.system_message
        return out

    def dropped(self, host_event: str, result: HookResult | None) -> list[str]:
        if host_event == "Stop" and result is not None and result.context and not result.block:
            return ["context (a Stop context goes out only with a block)"]
        return []


class PiWire(Wire):
    """Pi runs no shell hooks: the agent runs the command by hand, without a payload."""

    name = "pi"
    context_file = "AGENTS.md"
    reads_stdin = False
    CALLS = {"SessionStart": "session_start"}
    READS = {"SessionStart": frozenset(("context",))}

    def to_input(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> HookInput:
        return HookInput(**self._common(host_event, payload, task, workspace))

    def render(self, host_event: str, result: HookResult | None) -> dict[str, Any]:
        if result is None or host_event != "SessionStart":
            return {}
        text = _join(result.context, result.system_message)
        return {"context": text} if text else {}


WIRES = {wire.name: wire for wire in (CodexWire(), ClaudeCodeWire(), PiWire())}
