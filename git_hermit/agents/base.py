"""The acting-agent backend protocol and what one agent run returns.

A backend starts the acting agent in a prepared workspace with its own HOME/config dir,
a wall-clock timeout, and the environment it needs (an API key from ``env_key`` or a copy
of the user's login); it leaves the event stream in ``trajectory_path``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol

from git_hermit.model.rollout import Usage
from git_hermit.redact import register

# Variables every agent process may see; everything else from the user's environment is
# withheld so no unrelated secret reaches an agent, a trajectory or a log (hermit.yaml's
# agent.env and agent.pass_env arrive as ``extra_env``: the user's explicit choice).
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR",
                 "NODE_EXTRA_CA_CERTS", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                 "NO_PROXY")


# an agent that exited non-zero without an answer: it crashed (or its model refused it), an exception
AGENT_EXIT_ERROR = "AgentExitError"


@dataclass(frozen=True)
class AgentRun:
    """What the acting agent left behind (before judging)."""

    final_answer: str | None
    usage: Usage
    returncode: int | None
    timed_out: bool
    duration_s: float
    error: str | None = None               # one line when the agent failed to run properly
    exception_type: str | None = None      # e.g. AgentTimeout, AgentCrashError
    trajectory: str | None = None          # file name inside the rollout dir
    model: str | None = None


@dataclass(frozen=True)
class AgentContext:
    """Where one rollout happens: its workspace, private home and output files."""

    rollout_dir: Path
    workspace: Path
    home: Path
    prompt: str
    timeout_s: float
    attempt: int
    task_id: str
    host: str
    extra_env: Mapping[str, str] = field(default_factory=dict)
    sandbox: Any = None                    # a sandbox.SandboxSpec to run the agent in, or None

    @property
    def trajectory_path(self) -> Path:
        return self.rollout_dir / "trajectory.jsonl"

    @property
    def stderr_path(self) -> Path:
        return self.rollout_dir / "agent.stderr"

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in BASE_ENV_KEYS}
        env["HOME"] = str(self.home)
        env.update(self.extra_env)
        register(self.extra_env)   # environment values are redacted from everything stored
        return env


def in_sandbox(ctx: AgentContext, argv: list[str], env: dict[str, str], *,
               readable: tuple[Path | str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    """``argv``/``env`` unchanged without a sandbox, else wrapped in bubblewrap (supervise.sandbox)."""
    if ctx.sandbox is None:
        return argv, env
    from git_hermit.supervise.sandbox import wrap
    return wrap(argv, spec=ctx.sandbox, workspace=ctx.workspace, home=ctx.home, env=env, readable=readable)


class AgentBackend(Protocol):
    @property
    def name(self) -> str: ...

    def check_available(self) -> None:
        """Raise AgentError (before the first rollout) when the agent cannot start."""

    def run(self, ctx: AgentContext) -> AgentRun: ...


def copy_login_files(source_home: Path, dest_home: Path, names: tuple[str, ...]) -> list[str]:
    """Copy the user's login files (e.g. Codex auth.json) into a per-rollout home.

    The copies live only in ``.hermit/`` working dirs, never in git, notes or logs; their
    names (not contents) are returned so callers can say what was used.
    """
    copied = []
    for name in names:
        src = source_home / name
        if src.is_file():
            dst = dest_home / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            dst.chmod(0o600)
            copied.append(name)
    return copied


def last_nonempty_line(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


def real_home() -> Path:
    """The invoking user's home (login files are copied from here)."""
    return Path(os.path.expanduser("~"))
