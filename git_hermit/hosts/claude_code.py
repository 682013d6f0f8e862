"""Claude Code (``claude -p``, stream-json): its binary, session config, deployment and hook wire.

Measured on Claude Code 2.1.317. A session's config is a private CLAUDE_CONFIG_DIR; the
deployment's hooks are the project's .claude/settings.json, its sub-agents .claude/agents/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from git_hermit.hosts.base import (ContextLimit, Fire, HookWire, Host, Layout, Login, SessionSpec, SubAgent,
                                   denied)

FLAGS = ("--output-format", "stream-json", "--verbose", "--include-hook-events",
         "--dangerously-skip-permissions")
ENV = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
       "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
       "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1"}


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


HOST = ClaudeCode()
