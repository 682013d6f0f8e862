"""Codex (``codex exec --json``): its binary, session config, deployment and hook wire.

Measured on Codex 0.164.0. A session's config is a private CODEX_HOME/config.toml; the
deployment's project-layer .codex/hooks.json runs under --dangerously-bypass-hook-trust.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from git_hermit.errors import ConfigError
from git_hermit.hosts.base import (ContextLimit, Fire, HookWire, Host, Layout, Login, SessionSpec, SubAgent,
                                   denied)

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


HOST = Codex()
