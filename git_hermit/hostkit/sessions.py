"""Run one real session of a host CLI against a (scripted) model server.

The argv, environment and private home are the host module's own (hosts/<host>.py, the same
definition rollouts run), pointed at the server; a fresh HOME, a minimal environment (no
inherited secrets), and a timeout that kills the whole process group. The result carries
the host's event stream as parsed JSON lines.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git_hermit.errors import InputError
from git_hermit.hosts import registry
from git_hermit.hosts.base import SessionSpec

# The variables a session inherits; anything else (API keys, tokens) stays out.
_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM")
# The scripted server takes any key; the host reads it from the variable the spec names.
_KEY_VAR = "SCRIPTED_API_KEY"


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
    events: tuple[dict[str, Any], ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def session_command(host: str, cli: Path | str, workspace: Path, base_url: str, prompt: str, *,
                    home: Path, model: str | None = None,
                    extra_args: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one session against the scripted server at ``base_url``:
    the host module's own session (the one rollouts run), pointed at that server, no retries;
    ``model`` defaults to the host's ``scripted_model``."""
    try:
        impl = registry.get(host)
    except KeyError:
        raise InputError(f"unknown host {host!r}", f"use one of {', '.join(registry.names())}") from None
    home.mkdir(parents=True, exist_ok=True)
    base_env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
    base_env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    spec = SessionSpec(model=model or impl.scripted_model, base_url=base_url.rstrip("/") + impl.api_path, env_key=_KEY_VAR,
                       args=extra_args, retries=0)
    return impl.session(cli, spec, prompt, home, base_env, {_KEY_VAR: "dummy"})


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
    model: str | None = None,
) -> SessionResult:
    """Run one session of ``host`` in ``workspace``; ``home`` must be a fresh directory."""
    argv, env = session_command(host, cli, workspace, base_url, prompt, home=home, model=model,
                                extra_args=extra_args)
    env.update(extra_env or {})
    from git_hermit.supervise.process import run_capture   # the one process runner
    outcome = run_capture(argv, cwd=workspace, env=env, timeout_s=timeout_s)
    return SessionResult(host=host, argv=tuple(argv), stdout=outcome.stdout, stderr=outcome.stderr,
                         exit_code=outcome.returncode, duration_s=outcome.duration_s,
                         timed_out=outcome.timed_out, home=home, events=tuple(parse_events(outcome.stdout)))


def parse_events(stdout: str) -> list[dict[str, Any]]:
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
