"""Claude Code (``claude -p``, stream-json): its binary, session config, deployment and hook wire.

Measured on Claude Code 2.1.317. A session's config is a private CLAUDE_CONFIG_DIR; the
deployment's hooks are the project's .claude/settings.json, its sub-agents .claude/agents/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from git_hermit.hosts.base import (ContextLimit, Fire, HookWire, Host, Layout, Login, SessionSpec, SubAgent,
                                   denied)
from git_hermit.hosts.wire import Wire, _exit_code_from, _text

if TYPE_CHECKING:
    from hermit_hooks import HookResult

    from git_hermit.model.plugin_format import PluginFormat
    from git_hermit.model.trajectory import ReadState, Step

FLAGS = ("--output-format", "stream-json", "--verbose", "--include-hook-events",
         "--dangerously-skip-permissions")
ENV = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
       "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
       "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1"}


class ClaudeCodeWire(Wire):
    name = "claude-code"
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
    _WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
    _TOOL_KINDS = {
        "Bash": "shell", "Read": "read", "Write": "write", "Edit": "write", "MultiEdit": "write",
        "NotebookEdit": "write",
    }

    def fields(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> dict[str, Any]:
        fields = self._common(host_event, payload, task, workspace)
        fields.update(turn_id=payload.get("prompt_id"))
        if host_event == "PostToolUse":
            write = payload.get("tool_name") in self._WRITE_TOOLS
            text = None if write else _text(payload.get("tool_response"))
            fields.update(output_text=text, failed=False)
        elif host_event == "PostToolUseFailure":
            error = payload.get("error")
            error = error if isinstance(error, str) else _text(error)
            fields.update(output_text=error, failed=True, exit_code=_exit_code_from(error))
        return fields

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


class ClaudeCode(Host):
    name = "claude-code"
    binary = "claude"
    package = "@anthropic-ai/claude-code@2.1.317"
    aliases = ("claude",)
    family = "claude"
    trajectory_formats = ("claude-session", "claude-stream")   # the stored session first
    # measured on 2.1.317: projects/<cwd>/<session>.jsonl (the main agent's calls only) and
    # projects/<cwd>/<session>/subagents/agent-<id>.jsonl (each sub-agent's)
    stored_sessions = "projects/**/*.jsonl"
    default_endpoint = "https://api.anthropic.com"
    scripted_model = None   # measured: with --model naming an unknown model, 2.1.317 lists no skills
    home_env = ("CLAUDE_CONFIG_DIR",)
    layout = Layout(context_file="CLAUDE.md", skills_dir=".claude/skills", hooks_config=".claude/settings.json",
                    native_sub_agents=True)
    wire = HookWire(
        events=("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                "PostToolUseFailure", "PostToolBatch", "Stop", "SessionEnd"),
        failed_tool_event="PostToolUseFailure", before_model_event="PostToolBatch",
        updated_input_extra={"description": "rewritten"},
        capabilities={
            "memory": True, "note_after_call": True, "note_after_failed_call": True,
            "before_model_channel": True, "hook_cwd_follows_cd": True, "deny": True,
            "context_with_allow_reaches_model": True, "updated_input": True,
            "block_replaces_output": False, "block_reason_reaches_model": True,
            "system_message_reaches_model": False, "stop_block": True,
            "stop_session_after_call_ends": True, "stop_session_at_start_ends": False,
            "stop_session_before_tool_ends_after_call": True,
        })
    hook_wire = ClaudeCodeWire()
    # seed 000's Codex-vs-Claude-Code table, this host's rows (the ahe learner reads them)
    capability_notes = {
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
    }
    login = Login(".claude", (".credentials.json",), value="claude", command="claude /login")
    key_var = "ANTHROPIC_API_KEY"
    learner = True
    # Claude Code warns that a CLAUDE.md above this many characters slows every request.
    context_limit = ContextLimit(40_000, "chars", "warning",
                                 "Claude Code warns above 40,000 (every request pays for it)")

    def config_dir(self, home: Path) -> Path:
        return home / ".claude"

    def session(self, binary: Path | str, spec: SessionSpec, prompt: str, home: Path,
                base_env: Mapping[str, str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        config_dir = self.config_dir(home)
        config_dir.mkdir(parents=True, exist_ok=True)
        env = dict(base_env) | ENV | {"CLAUDE_CONFIG_DIR": str(config_dir)}
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"   # the CLI refuses bypass mode as root otherwise
        if spec.base_url:
            env["ANTHROPIC_BASE_URL"] = spec.base_url
        env_key = spec.env_key or self.key_var
        if env_key in environ:
            env[self.key_var] = environ[env_key]   # whichever variable holds it, the CLI reads its own
        argv = [str(binary), "-p", prompt, *FLAGS, *spec.args]
        if spec.web_search is False:
            argv += ["--disallowedTools", "WebSearch,WebFetch"]
        if spec.model:
            argv += ["--model", spec.model]
        return argv, env

    def sub_agent_file(self, agent: SubAgent) -> tuple[str, bytes] | None:
        return f".claude/agents/{agent.name}.md", agent.source

    def hook_env(self, dest: Path, scratch: Path, session_id: str) -> dict[str, str]:
        return {"CLAUDE_PROJECT_DIR": str(dest), "CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "sdk-cli",
                "CLAUDE_CODE_SESSION_ID": session_id}

    def synthetic_session(self, fire: Fire, dest: Path, prompt: str,
                          tool_calls: tuple[tuple[str, str], ...], session_id: str, turn_id: str) -> None:
        common = {"session_id": session_id, "transcript_path": str(dest / "session.jsonl"), "cwd": str(dest)}
        turn = {"prompt_id": turn_id, "permission_mode": "bypassPermissions"}
        fire("SessionStart", {**common, "source": "startup"})
        fire("UserPromptSubmit", {**common, **turn, "prompt": prompt})
        for index, (command, output) in enumerate(tool_calls):
            call = {**common, **turn, "effort": {"level": "medium"}, "tool_name": "Bash",
                    "tool_input": {"command": command, "description": "run a command"},
                    "tool_use_id": f"toolu_{index}"}
            if denied(fire("PreToolUse", call)):
                response = "PreToolUse:Bash hook error: denied"
            elif output.startswith("Exit code"):
                fire("PostToolUseFailure", {**call, "error": output, "is_interrupt": False})
                response = output
            else:
                fire("PostToolUse", {**call, "duration_ms": 12, "tool_response": {
                    "stdout": output, "stderr": "", "interrupted": False, "isImage": False,
                    "noOutputExpected": False}})
                response = output
            fire("PostToolBatch", {**common, **turn, "effort": {"level": "medium"}, "tool_calls": [
                {"tool_name": "Bash", "tool_input": call["tool_input"],
                 "tool_use_id": call["tool_use_id"], "tool_response": response}]})
        stop = {**common, **turn, "effort": {"level": "medium"}, "stop_hook_active": False,
                "last_assistant_message": "Done.", "background_tasks": [], "session_crons": []}
        if fire("Stop", stop).get("decision") == "block":
            fire("Stop", {**stop, "stop_hook_active": True})

    # -- its trajectory reader and plugin layout, the package's other modules (imported when asked)
    def sniff_format(self, record: dict[str, Any], weak: bool = False) -> str | None:
        from git_hermit.hosts.claude_code import trajectory
        return trajectory.sniff(record, weak)

    def read_trajectory(self, fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
        from git_hermit.hosts.claude_code import trajectory
        return trajectory.read(fmt, path, state)

    def sub_sessions(self, fmt: str, path: Path, session_id: str | None) -> list[Path]:
        from git_hermit.hosts.claude_code import trajectory     # only its stored sessions have relatives on disk
        return trajectory.subagent_files(path, session_id) if fmt == "claude-session" else []

    def parent_file(self, fmt: str, path: Path, session_id: str | None,
                    parent_session_id: str | None) -> Path | None:
        from git_hermit.hosts.claude_code import trajectory
        return trajectory.parent_session_file(path, session_id) if fmt == "claude-session" else None

    def plugin_format(self) -> PluginFormat:
        from git_hermit.hosts.claude_code import layout
        return layout.FORMAT


HOST = ClaudeCode()
