"""Backends for the real host CLIs: ``codex exec --json``, ``claude -p`` (stream-json), ``pi``.

Each rollout gets a private HOME (and CODEX_HOME / CLAUDE_CONFIG_DIR) holding the provider
config from hermit.yaml; auth is an API key from the variable ``env_key`` names, or a copy
of the user's own login files (``login:``) — never written to git, notes or logs. The
final answer and token usage come from the agent's own event stream.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from git_hermit.errors import AgentError, ConfigError
from git_hermit.hosts.locate import find_host_cli
from git_hermit.model.rollout import Usage
from git_hermit.rollouts.agents.base import AgentContext, AgentRun, copy_login_files, in_sandbox, real_home
from git_hermit.rollouts.process import run_process
from git_hermit.rollouts.trajectories import summarize

CODEX_EXEC_FLAGS = ("exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps")
CLAUDE_FLAGS = ("--output-format", "stream-json", "--verbose", "--include-hook-events",
                "--dangerously-skip-permissions")
CLAUDE_ENV = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
              "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
              "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1"}
CODEX_LOGIN_FILES = ("auth.json",)
RATE_LIMITED = "RateLimited"    # the exception_type of a rollout the model's rate limit ended
# How the hosts say the model refused for load (measured with the scripted server's 429s):
# Codex 0.164 ends on "exceeded retry limit, last status: 429 Too Many Requests" and exits 1;
# Claude Code 2.1 logs system/api_retry events (error_status 429, error "rate_limit") while it
# waits, up to 10 retries; Pi 0.73 ends on an assistant error. 529 is Anthropic's "overloaded".
_RATE_LIMIT_TEXT = re.compile(r"\b(429|529)\b|too many requests|rate[ _-]?limit|overloaded", re.IGNORECASE)
_RATE_LIMIT_STATUS = (429, 529)
_TAIL_BYTES = 16_384
_PROGRESS = ("assistant", "user", "item.started", "item.completed", "turn.completed",
             "tool_execution_start", "tool_execution_end")
CLAUDE_LOGIN_FILES = (".credentials.json",)


def _toml_str(value: str) -> str:
    return json.dumps(value)   # a JSON string is a valid TOML basic string


def _resolve_bin(cfg: Mapping[str, Any], host: str) -> Path | None:
    if cfg.get("bin"):
        found = shutil.which(str(cfg["bin"]))
        return Path(found) if found else None
    return find_host_cli(host)


@dataclass
class HostCLIAgent:
    """Shared plumbing of the three CLI backends; subclasses say how to start each."""

    cfg: dict[str, Any]
    host: str = "codex"
    name: str = "codex"
    binary: Path | None = field(default=None, init=False)

    def check_available(self) -> None:
        self.binary = _resolve_bin(self.cfg, self.host)
        if self.binary is None:
            raise AgentError(f"the {self.host} CLI was not found",
                             hint="install it (`git hermit hosts install`) or set agent.bin in hermit.yaml")
        provider = self.cfg.get("provider") or {}
        env_key = provider.get("env_key")
        if env_key and env_key not in os.environ and not self.cfg.get("login"):
            raise AgentError(f"agent.provider.env_key names {env_key}, which is not set",
                             hint=f"export {env_key}=… or use login: to run on your own login")

    def _auth_env(self) -> dict[str, str]:
        provider = self.cfg.get("provider") or {}
        env_key = provider.get("env_key")
        return {env_key: os.environ[env_key]} if env_key and env_key in os.environ else {}

    def _copy_login(self, default_dir: str, dest: Path, names: tuple[str, ...]) -> None:
        """With ``login:`` (or ``home:``), the user's own login files go into the private home."""
        if self.cfg.get("login") or self.cfg.get("home"):
            source = Path(os.path.expanduser(self.cfg.get("home") or str(real_home() / default_dir)))
            copy_login_files(source, dest, names)

    def _command(self, ctx: AgentContext) -> tuple[list[str], dict[str, str]]:
        """The host's argv and environment for one run (config written into ``ctx.home``)."""
        raise NotImplementedError

    def run(self, ctx: AgentContext) -> AgentRun:
        argv, env = self._command(ctx)
        if ctx.sandbox is not None:
            from git_hermit.rollouts.sandbox import install_dir
            provider = self.cfg.get("provider") or {}
            ctx = replace(ctx, sandbox=ctx.sandbox.with_endpoint(provider.get("base_url")))
            argv, env = in_sandbox(ctx, argv, env, readable=(install_dir(self.binary or argv[0]),))
        outcome = run_process(argv, cwd=ctx.workspace, env=env, timeout_s=ctx.timeout_s,
                              stdout_path=ctx.trajectory_path, stderr_path=ctx.stderr_path)
        return self._finish(ctx, outcome, ctx.trajectory_path)

    def _finish(self, ctx: AgentContext, outcome, trajectory: Path) -> AgentRun:
        run = self._finish_run(ctx, outcome, trajectory)
        failed = run.timed_out or run.returncode != 0 or run.final_answer is None
        limit = rate_limit_report(trajectory, ctx.stderr_path) if failed else None
        if limit is None:
            return run
        # the host gave up on (or was still waiting out) the model's rate limit: infrastructure
        return replace(run, exception_type=RATE_LIMITED, error=f"{self.host} was rate limited: {limit[:200]}")

    def _finish_run(self, ctx: AgentContext, outcome, trajectory: Path) -> AgentRun:
        summary = summarize(trajectory) if trajectory.is_file() and trajectory.stat().st_size else None
        answer = summary.final_answer if summary else None
        usage = summary.usage if summary else Usage()
        model = (summary.model if summary else None) or self.cfg.get("model")
        if outcome.timed_out:
            return AgentRun(answer, usage, None, True, outcome.duration_s,
                            f"agent timed out after {ctx.timeout_s:g}s", "AgentTimeout", trajectory.name, model)
        error = None
        if outcome.returncode != 0:
            tail = ctx.stderr_path.read_text(errors="replace").strip().splitlines()[-1:] if ctx.stderr_path.is_file() else []
            error = f"{self.host} exited with status {outcome.returncode}" + (f": {tail[0][:200]}" if tail else "")
        return AgentRun(answer, usage, outcome.returncode, False, outcome.duration_s, error, None,
                        trajectory.name, model)


def _tail_lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - _TAIL_BYTES))
        return handle.read().decode("utf-8", errors="replace").splitlines()[-40:]


def rate_limit_report(trajectory: Path, stderr: Path) -> str | None:
    """The host's last word on a rate limit or overload, if that is how its stream ends; else None.

    Only error reports count (an error event, a failed turn or result, an API retry), never
    what a tool printed, so a task about HTTP 429 is not mistaken for one."""
    last_error = None
    for line in _tail_lines(trajectory):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        text = None
        if kind in ("error", "turn.failed"):                                   # Codex
            error = event.get("error")
            text = event.get("message") or (error.get("message") if isinstance(error, dict) else error)
        elif kind == "system" and event.get("subtype") == "api_retry":       # Claude Code
            status = event.get("error_status")
            text = f"{status} {event.get('error', '')}".strip() if status in _RATE_LIMIT_STATUS else str(event.get("error"))
        elif kind == "result" and event.get("is_error"):
            text = str(event.get("result") or event.get("errors") or "")
        elif isinstance(event.get("error"), str):                              # an assistant's API error
            text = event["error"]
        elif kind in ("message_end", "turn_end") and isinstance(event.get("message"), dict):   # Pi
            message = event["message"]
            if message.get("stopReason") == "error":
                text = str(message.get("errorMessage") or "")
        if text:
            last_error = str(text)
        elif kind in _PROGRESS:      # the session went on after that error: it is not the end
            last_error = None
    if last_error is None:          # no stream (the host failed early): its stderr's last lines
        tail = [line for line in _tail_lines(stderr) if line.strip()][-3:]
        last_error = "\n".join(tail) if tail else None
    if last_error and _RATE_LIMIT_TEXT.search(last_error):
        return last_error.strip().splitlines()[-1]
    return None


@dataclass
class CodexAgent(HostCLIAgent):
    host: str = "codex"
    name: str = "codex"

    def _config_toml(self) -> str:
        provider = self.cfg.get("provider") or {}
        lines = ['approval_policy = "never"', 'sandbox_mode = "danger-full-access"',
                 "check_for_update_on_startup = false"]
        if self.cfg.get("model"):
            lines.insert(0, f"model = {_toml_str(self.cfg['model'])}")
        if self.cfg.get("effort"):
            lines.append(f"model_reasoning_effort = {_toml_str(self.cfg['effort'])}")
        if self.cfg.get("web_search") is False:
            lines.append('web_search = "disabled"')   # seed 000: hosted search runs past the sandbox
        if provider.get("base_url"):
            lines.append('model_provider = "hermit"')
        lines += ["", "[features]", "hooks = true", "", "[analytics]", "enabled = false"]
        if provider.get("base_url"):
            wire = provider.get("wire_api", "responses")
            if wire != "responses":
                raise ConfigError(f"agent.provider.wire_api {wire!r} is not supported by Codex",
                                  hint="Codex 0.164 refuses wire_api = chat; use a server's Responses endpoint "
                                       "(wire_api: responses), or a chat-only server as evolver.base: llm")
            lines += ["", "[model_providers.hermit]", f"name = {_toml_str(provider.get('name', 'hermit'))}",
                      f"base_url = {_toml_str(provider['base_url'])}", f'wire_api = "{wire}"',
                      "request_max_retries = 2", "stream_max_retries = 2"]
            if provider.get("env_key"):
                lines.append(f"env_key = {_toml_str(provider['env_key'])}")
        return "\n".join(lines) + "\n"

    def _command(self, ctx: AgentContext) -> tuple[list[str], dict[str, str]]:
        codex_home = ctx.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(self._config_toml())
        self._copy_login(".codex", codex_home, CODEX_LOGIN_FILES)
        # The deployment's project-layer .codex/hooks.json runs under --dangerously-bypass-hook-trust;
        # copying it into CODEX_HOME too would make every hook fire twice.
        env = ctx.base_env() | self._auth_env() | {"CODEX_HOME": str(codex_home), "RUST_LOG": "warn"}
        return [str(self.binary), *CODEX_EXEC_FLAGS, *self.cfg.get("args", []), ctx.prompt], env


@dataclass
class ClaudeCodeAgent(HostCLIAgent):
    host: str = "claude-code"
    name: str = "claude-code"

    def _command(self, ctx: AgentContext) -> tuple[list[str], dict[str, str]]:
        config_dir = ctx.home / ".claude"
        config_dir.mkdir(parents=True, exist_ok=True)
        env = ctx.base_env() | CLAUDE_ENV | {"CLAUDE_CONFIG_DIR": str(config_dir)}
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"   # the CLI refuses bypass mode as root otherwise
        provider = self.cfg.get("provider") or {}
        if provider.get("base_url"):
            env["ANTHROPIC_BASE_URL"] = provider["base_url"]
        env_key = provider.get("env_key") or "ANTHROPIC_API_KEY"
        if env_key in os.environ:
            env["ANTHROPIC_API_KEY"] = os.environ[env_key]
        self._copy_login(".claude", config_dir, CLAUDE_LOGIN_FILES)
        argv = [str(self.binary), "-p", ctx.prompt, *CLAUDE_FLAGS, *self.cfg.get("args", [])]
        if self.cfg.get("web_search") is False:
            argv += ["--disallowedTools", "WebSearch,WebFetch"]
        if self.cfg.get("model"):
            argv += ["--model", self.cfg["model"]]
        return argv, env


# Pi's models.json ``api`` for each agent.provider.wire_api (unset: Anthropic Messages).
PI_APIS = {None: "anthropic-messages", "messages": "anthropic-messages", "chat": "openai-completions",
           "responses": "openai-responses"}
PI_LOGIN_FILES = ("auth.json",)


@dataclass
class PiAgent(HostCLIAgent):
    """``pi --mode json --no-session`` with a private PI_CODING_AGENT_DIR.

    With ``provider.base_url`` the provider goes into that dir's models.json. Pi's SDKs append
    their own path, as Claude Code's does: anthropic-messages posts to ``{base_url}/v1/messages``
    (give the server's root), openai-completions to ``{base_url}/chat/completions`` (give …/v1).
    models.json's ``apiKey`` holds the *name* of the key's variable, which Pi reads from its
    environment (measured on Pi 0.73.1), so the key itself is never written to a file.
    """

    host: str = "pi"
    name: str = "pi"

    def _command(self, ctx: AgentContext) -> tuple[list[str], dict[str, str]]:
        agent_dir = ctx.home / ".pi" / "agent"
        agent_dir.mkdir(parents=True, exist_ok=True)
        self._copy_login(".pi/agent", agent_dir, PI_LOGIN_FILES)
        provider = self.cfg.get("provider") or {}
        model = self.cfg.get("model") or "default"
        env = ctx.base_env() | {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}
        argv = [str(self.binary), "--mode", "json", "--no-session"]
        if provider.get("base_url"):
            wire = provider.get("wire_api")
            if wire not in PI_APIS:
                raise ConfigError(f"agent.provider.wire_api {wire!r} is not supported by Pi",
                                  hint="use messages (the default), chat or responses")
            # Pi requires an apiKey for a custom provider; a literal that names no variable is sent as is.
            models = {"providers": {"hermit": {
                "baseUrl": provider["base_url"], "api": PI_APIS[wire],
                "apiKey": provider.get("env_key") or "none",
                "models": [{"id": model}]}}}
            (agent_dir / "models.json").write_text(json.dumps(models, indent=2))
            env |= self._auth_env()
            argv += ["--model", f"hermit/{model}"]
        elif self.cfg.get("model"):
            argv += ["--model", model]
        return [*argv, *self.cfg.get("args", []), ctx.prompt], env

    def _finish_run(self, ctx: AgentContext, outcome, trajectory: Path) -> AgentRun:
        run = super()._finish_run(ctx, outcome, trajectory)
        # Pi exits 0 even when the model could not be reached (measured on 0.73.1: three
        # retries, then an assistant message with stopReason "error"); only its stream says so.
        if run.error is None and not run.timed_out and run.final_answer is None and trajectory.is_file():
            errors = summarize(trajectory).errors
            if errors:
                return replace(run, error=f"pi ended on a model error: {errors[-1][:200]}")
        return run
