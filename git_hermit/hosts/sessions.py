"""Run one real session of a host CLI (Codex, Claude Code) against a model server.

Each session gets a fresh HOME (and CODEX_HOME / CLAUDE_CONFIG_DIR), a minimal environment
(no inherited secrets), the exact flags of spec/hosts.md, and a timeout that kills the
whole process group. The result carries the host's event stream as parsed JSON lines.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from git_hermit.errors import InputError

# The variables a session inherits; anything else (API keys, tokens) stays out.
_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM")

_CODEX_CONFIG = """\
model = "{model}"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[features]
hooks = true

[analytics]
enabled = false

[model_providers.scripted]
name = "Scripted"
base_url = "{base_url}/v1"
env_key = "SCRIPTED_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[projects.{workspace}]
trust_level = "trusted"
"""

_CODEX_FLAGS = ("exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                "--dangerously-bypass-approvals-and-sandbox",
                "--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps")

_CLAUDE_FLAGS = ("--output-format", "stream-json", "--verbose", "--include-hook-events",
                 "--dangerously-skip-permissions")

_CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": "dummy",
    "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "IS_SANDBOX": "1",  # root may use bypass mode only inside a declared sandbox
}


@dataclass(frozen=True)
class SessionResult:
    """What one host session left behind."""

    host: str
    argv: tuple[str, ...]
    stdout: str
    stderr: str
    exit_code: int | None
    duration_s: float
    timed_out: bool
    home: Path
    events: tuple[dict, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def session_command(host: str, cli: Path | str, prompt: str, extra_args: tuple[str, ...] = ()) -> list[str]:
    if host == "codex":
        return [str(cli), *_CODEX_FLAGS, *extra_args, prompt]
    if host in ("claude-code", "claude"):
        return [str(cli), "-p", prompt, *_CLAUDE_FLAGS, *extra_args]
    raise InputError(f"unknown host {host!r}", "use codex or claude-code")


def prepare_home(host: str, home: Path, workspace: Path, base_url: str, model: str = "scripted-model") -> dict[str, str]:
    """Write the host's config into a fresh ``home``; return the env the CLI needs."""
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    if host == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(_CODEX_CONFIG.format(
            model=model, base_url=base_url.rstrip("/"), workspace=json.dumps(str(workspace.resolve()))))
        env.update({"CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "dummy", "RUST_LOG": "warn"})
    else:
        env.update(_CLAUDE_ENV)
        env.update({"CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": base_url.rstrip("/")})
    return env


def run_session(
    host: str,
    cli: Path | str,
    workspace: Path,
    base_url: str,
    prompt: str,
    *,
    home: Path,
    timeout_s: float = 120.0,
    extra_env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    model: str = "scripted-model",
) -> SessionResult:
    """Run one session of ``host`` in ``workspace``; ``home`` must be a fresh directory."""
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
    env.update(prepare_home(host, home, workspace, base_url, model))
    env.update(extra_env or {})
    argv = session_command(host, cli, prompt, extra_args)
    from git_hermit.rollouts.process import run_capture   # the one process runner
    outcome = run_capture(argv, cwd=workspace, env=env, timeout_s=timeout_s)
    return SessionResult(host=host, argv=tuple(argv), stdout=outcome.stdout, stderr=outcome.stderr,
                         exit_code=outcome.returncode, duration_s=outcome.duration_s,
                         timed_out=outcome.timed_out, home=home, events=tuple(parse_events(outcome.stdout)))


def parse_events(stdout: str) -> list[dict]:
    """The JSON lines of a host's event stream; other lines are skipped."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events
