"""Pi (``pi --mode json --no-session``): its binary, session config and deployment.

Measured on Pi 0.73.1. Pi runs no hooks and has no sub-agents: the deployment's context
file tells it to run the session-start hook by hand and where the sub-agent definitions are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from git_hermit.errors import ConfigError
from git_hermit.hosts.base import Host, Layout, Login, SessionSpec
from git_hermit.hosts.wire import Wire, _join

if TYPE_CHECKING:
    from hermit_hooks import HookResult

    from git_hermit.model.plugin_format import PluginFormat
    from git_hermit.model.trajectory import ReadState, Step

# Pi's models.json ``api`` for each agent.provider.wire_api (unset: Anthropic Messages).
APIS = {None: "anthropic-messages", "messages": "anthropic-messages", "chat": "openai-completions",
        "responses": "openai-responses"}


class PiWire(Wire):
    """Pi runs no shell hooks: the agent runs the command by hand, without a payload."""

    name = "pi"
    reads_stdin = False
    prints_field = "context"   # the agent reads what the command prints
    CALLS = {"SessionStart": "session_start"}
    READS = {"SessionStart": frozenset(("context",))}

    def render(self, host_event: str, result: HookResult | None) -> dict[str, Any]:
        if result is None or host_event != "SessionStart":
            return {}
        text = _join(result.context, result.system_message)
        return {"context": text} if text else {}


class Pi(Host):
    """``pi --mode json --no-session`` with a private PI_CODING_AGENT_DIR.

    With ``provider.base_url`` the provider goes into that dir's models.json. Pi's SDKs append
    their own path, as Claude Code's does: anthropic-messages posts to ``{base_url}/v1/messages``
    (give the server's root), openai-completions to ``{base_url}/chat/completions`` (give …/v1).
    models.json's ``apiKey`` holds the *name* of the key's variable, which Pi reads from its
    environment (measured on Pi 0.73.1), so the key itself is never written to a file.
    """

    name = "pi"
    binary = "pi"
    package = "@mariozechner/pi-coding-agent@0.73.1"
    family = "pi"
    trajectory_formats = ("pi",)
    # run with --no-session: it stores none; its stream reports each call's usage as it ends
    default_endpoint = "https://api.anthropic.com"
    home_env = ("PI_CODING_AGENT_DIR",)
    layout = Layout(context_file="AGENTS.md", skills_dir=".agents/skills")
    hook_wire = PiWire()
    # seed 000's Codex-vs-Claude-Code table, this host's rows (the ahe learner reads them)
    capability_notes = {
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
    }
    login = Login(".pi/agent", ("auth.json",), value="pi", command="pi /login")
    # Pi exits 0 even when the model could not be reached (three retries, then an assistant
    # message with stopReason "error"); only its stream says so.
    errors_only_in_stream = True

    def config_dir(self, home: Path) -> Path:
        return home / ".pi" / "agent"

    def session(self, binary: Path | str, spec: SessionSpec, prompt: str, home: Path,
                base_env: Mapping[str, str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        agent_dir = self.config_dir(home)
        agent_dir.mkdir(parents=True, exist_ok=True)
        model = spec.model or "default"
        env = dict(base_env) | {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}
        argv = [str(binary), "--mode", "json", "--no-session"]
        if spec.base_url:
            if spec.wire_api not in APIS:
                raise ConfigError(f"agent.provider.wire_api {spec.wire_api!r} is not supported by Pi",
                                  hint="use messages (the default), chat or responses")
            # Pi requires an apiKey for a custom provider; a literal that names no variable is sent as is.
            models = {"providers": {"hermit": {
                "baseUrl": spec.base_url, "api": APIS[spec.wire_api],
                "apiKey": spec.env_key or "none",
                "models": [{"id": model}]}}}
            (agent_dir / "models.json").write_text(json.dumps(models, indent=2))
            if spec.env_key and spec.env_key in environ:
                env[spec.env_key] = environ[spec.env_key]
            argv += ["--model", f"hermit/{model}"]
        elif spec.model:
            argv += ["--model", model]
        return [*argv, *spec.args, prompt], env

    # -- its trajectory reader and plugin layout, the package's other modules (imported when asked)
    def sniff_format(self, record: dict[str, Any], weak: bool = False) -> str | None:
        from git_hermit.hosts.pi import trajectory
        return trajectory.sniff(record, weak)

    def read_trajectory(self, fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
        from git_hermit.hosts.pi import trajectory
        return trajectory.read(fmt, path, state)

    def plugin_format(self) -> PluginFormat:
        from git_hermit.hosts.pi import layout
        return layout.FORMAT


HOST = Pi()
