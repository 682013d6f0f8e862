"""Codex (``codex exec --json``): its binary, session config, deployment and hook wire.

Measured on Codex 0.164.0. A session's config is a private CODEX_HOME/config.toml; the
deployment's project-layer .codex/hooks.json runs under --dangerously-bypass-hook-trust.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from git_hermit.errors import ConfigError
from git_hermit.hosts.base import (ContextLimit, Fire, HookWire, Host, Layout, Login, SessionSpec, SubAgent,
                                   denied)
from git_hermit.hosts.wire import Wire, _join, _text

if TYPE_CHECKING:
    from hermit_hooks import HookResult

    from git_hermit.model.plugin_format import PluginFormat
    from git_hermit.model.trajectory import ReadState, Step

EXEC_FLAGS = ("exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
              "--dangerously-bypass-approvals-and-sandbox",
              "--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps")
# Codex runs no un-reviewed hooks unless told to: with this flag the project's .codex/hooks.json
# runs even in an untrusted project, without it no hook runs. (Do not also copy the hooks into
# CODEX_HOME: Codex then runs both layers, every hook twice.)
HOOK_ARGS = ("--dangerously-bypass-hook-trust", "-c", "features.hooks=true")


def _toml_str(value: str) -> str:
    # a JSON string is a TOML basic string, but for DEL, which TOML wants escaped
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


class CodexWire(Wire):
    name = "codex"
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

    def fields(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> dict[str, Any]:
        fields = self._common(host_event, payload, task, workspace)
        fields.update(model=payload.get("model"), turn_id=payload.get("turn_id"))
        if host_event == "PostToolUse":
            # Codex reports no exit status to hooks: a failed command is a PostToolUse too.
            fields.update(output_text=_text(payload.get("tool_response")), failed=None)
        return fields

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


class Codex(Host):
    name = "codex"
    binary = "codex"
    package = "@openai/codex@0.164.0"
    family = "codex"
    trajectory_formats = ("codex-rollout", "codex-exec")   # the stored session first (trace reads an unknown head as it)
    stored_sessions = "sessions/**/*.jsonl"   # measured on 0.164: sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl
    default_endpoint = "https://api.openai.com"
    api_path = "/v1"
    home_env = ("CODEX_HOME",)
    layout = Layout(context_file="AGENTS.md", skills_dir=".agents/skills", hooks_config=".codex/hooks.json",
                    hook_args=HOOK_ARGS, native_sub_agents=True)
    wire = HookWire(
        events=("SessionStart", "UserPromptSubmit", "PreModelRequest", "PostModelRequest",
                "PreToolUse", "PostToolUse", "Stop", "SessionEnd"),
        failed_tool_event="PostToolUse", before_model_event="PreModelRequest",
        capabilities={
            "memory": True, "note_after_call": True, "note_after_failed_call": True,
            "before_model_channel": True, "hook_cwd_follows_cd": False, "deny": True,
            "context_with_allow_reaches_model": False, "updated_input": True,
            "block_replaces_output": True, "block_reason_reaches_model": True,
            "system_message_reaches_model": False, "stop_block": True,
            "stop_session_after_call_ends": False, "stop_session_at_start_ends": True,
            "stop_session_before_tool_ends_after_call": None,
        })
    hook_wire = CodexWire()
    # seed 000's Codex-vs-Claude-Code table, this host's rows (the ahe learner reads them)
    capability_notes = {
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
    }
    login = Login(".codex", ("auth.json",), value="chatgpt", command="codex login")
    learner = True
    # Codex reads at most this many bytes of AGENTS.md (project_doc_max_bytes); the rest is cut.
    context_limit = ContextLimit(32_768, "bytes", "error", "Codex reads only the first 32,768 and drops the rest")

    def config_dir(self, home: Path) -> Path:
        return home / ".codex"

    def config_toml(self, spec: SessionSpec) -> str:
        lines = ['approval_policy = "never"', 'sandbox_mode = "danger-full-access"',
                 "check_for_update_on_startup = false"]
        if spec.model:
            lines.insert(0, f"model = {_toml_str(spec.model)}")
        if spec.effort:
            lines.append(f"model_reasoning_effort = {_toml_str(spec.effort)}")
        if spec.web_search is False:
            lines.append('web_search = "disabled"')   # seed 000: hosted search runs past the sandbox
        if spec.base_url:
            lines.append('model_provider = "hermit"')
        lines += ["", "[features]", "hooks = true", "", "[analytics]", "enabled = false"]
        if spec.base_url:
            wire = spec.wire_api or "responses"
            if wire != "responses":
                raise ConfigError(f"agent.provider.wire_api {wire!r} is not supported by Codex",
                                  hint="Codex 0.164 refuses wire_api = chat; use a server's Responses endpoint "
                                       "(wire_api: responses), or a chat-only server as evolver.base: llm")
            lines += ["", "[model_providers.hermit]", f"name = {_toml_str(spec.provider_name)}",
                      f"base_url = {_toml_str(spec.base_url)}", f'wire_api = "{wire}"',
                      f"request_max_retries = {spec.retries}", f"stream_max_retries = {spec.retries}"]
            if spec.env_key:
                lines.append(f"env_key = {_toml_str(spec.env_key)}")
        return "\n".join(lines) + "\n"

    def session(self, binary: Path | str, spec: SessionSpec, prompt: str, home: Path,
                base_env: Mapping[str, str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        codex_home = self.config_dir(home)
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(self.config_toml(spec))
        env = dict(base_env) | {"CODEX_HOME": str(codex_home), "RUST_LOG": "warn"}
        if spec.env_key and spec.env_key in environ:
            env[spec.env_key] = environ[spec.env_key]
        return [str(binary), *EXEC_FLAGS, *spec.args, prompt], env

    def sub_agent_file(self, agent: SubAgent) -> tuple[str, bytes] | None:
        """An agent role file (Codex lists a project's roles in spawn_agent's ``agent_type``)."""
        lines = [f"name = {_toml_str(agent.name)}",
                 f"description = {_toml_str(agent.description or f'The {agent.name} sub-agent.')}",
                 f"developer_instructions = {_toml_str(agent.body or agent.description or agent.name)}"]
        return f".codex/agents/{agent.name}.toml", ("\n".join(lines) + "\n").encode()

    def hook_env(self, dest: Path, scratch: Path, session_id: str) -> dict[str, str]:
        return {"CODEX_HOME": str(scratch / "codex-home"), "CODEX_MANAGED_BY_NPM": "1"}

    def synthetic_session(self, fire: Fire, dest: Path, prompt: str,
                          tool_calls: tuple[tuple[str, str], ...], session_id: str, turn_id: str) -> None:
        common = {"session_id": session_id, "transcript_path": str(dest / "rollout.jsonl"),
                  "cwd": str(dest), "model": "gpt-5.6-luna"}
        turn = {"turn_id": turn_id, "permission_mode": "bypassPermissions"}
        fire("SessionStart", {**common, "permission_mode": "bypassPermissions", "source": "startup"})
        fire("UserPromptSubmit", {**common, **turn, "prompt": prompt})
        for index, (command, output) in enumerate(tool_calls):
            fire("PreModelRequest", {**common, "turn_id": turn_id})
            call = {**common, **turn, "tool_name": "Bash", "tool_input": {"command": command},
                    "tool_use_id": f"call_{index}"}
            if not denied(fire("PreToolUse", call)):
                fire("PostToolUse", {**call, "tool_response": output})
        fire("PreModelRequest", {**common, "turn_id": turn_id})
        stop = {**common, **turn, "stop_hook_active": False, "last_assistant_message": "Done."}
        if fire("Stop", stop).get("decision") == "block":
            fire("PreModelRequest", {**common, "turn_id": turn_id})
            fire("Stop", {**stop, "stop_hook_active": True})

    # -- its trajectory reader and plugin layout, the package's other modules (imported when asked)
    def sniff_format(self, record: dict[str, Any], weak: bool = False) -> str | None:
        from git_hermit.hosts.codex import trajectory
        return trajectory.sniff(record, weak)

    def read_trajectory(self, fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
        from git_hermit.hosts.codex import trajectory
        return trajectory.read(fmt, path, state)

    def plugin_format(self) -> PluginFormat:
        from git_hermit.hosts.codex import layout
        return layout.FORMAT

    def sub_sessions(self, fmt: str, path: Path, session_id: str | None) -> list[Path]:
        from git_hermit.hosts.codex import trajectory     # only its stored sessions have relatives on disk
        return trajectory.child_rollouts(path, session_id) if fmt == "codex-rollout" else []

    def parent_file(self, fmt: str, path: Path, session_id: str | None,
                    parent_session_id: str | None) -> Path | None:
        from git_hermit.hosts.codex import trajectory
        return trajectory.parent_rollout(path, parent_session_id) if fmt == "codex-rollout" else None


HOST = Codex()
