"""The ``scripted`` backend: a deterministic Python agent that plays a host.

It runs in-process (no model, no network) but drives the deployment's real hook commands
with the host's payload shapes — so the adapter's middleware and memory reach it exactly as
they would reach Codex — and writes a Codex ``exec --json`` event stream. The policy is
``agent.scripted.policy`` (``module:function``), which the config must name: this backend knows
no agent of its own (`git hermit demo` writes its acting agent there).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from git_hermit.adapter.deploy import read_record
from git_hermit.adapter.hookcall import fire, installed_commands, merged_output
from git_hermit.errors import ConfigError
from git_hermit.model.rollout import Usage
from git_hermit.agents.base import AgentContext, AgentRun
from git_hermit.trajectories import summarize

HOOK_TIMEOUT_S = 30.0


def load_policy(spec: str | None) -> Callable[..., str]:
    if not spec:
        raise ConfigError("agent.backend scripted needs agent.scripted.policy",
                          hint="name the agent's function as module:function, e.g. "
                               "scripted: {policy: my_agent:run}")
    from git_hermit.loader import load
    try:
        return load(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"agent.scripted.policy {spec!r} cannot be loaded ({exc})",
                          hint="give it as module:function") from None


@dataclass
class ScriptedAgent:
    cfg: dict[str, Any] = field(default_factory=dict)
    name: str = "scripted"

    def __post_init__(self) -> None:
        self.policy_spec = (self.cfg.get("scripted") or {}).get("policy")

    def check_available(self) -> None:
        load_policy(self.policy_spec)

    def run(self, ctx: AgentContext) -> AgentRun:
        policy = load_policy(self.policy_spec)
        record = read_record(ctx.workspace)
        commands = installed_commands(ctx.workspace, record) if record is not None and record.hooks else {}
        session_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"hermit:{ctx.rollout_dir}"))
        common = {"session_id": session_id, "transcript_path": str(ctx.trajectory_path),
                  "cwd": str(ctx.workspace), "model": "scripted"}
        env = ctx.base_env() | {"CODEX_HOME": str(ctx.home / ".codex")}
        hook_errors: list[str] = []

        def run_hook(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
            calls = fire(commands, event, {**common, **payload}, cwd=ctx.workspace, env=env,
                         timeout_s=HOOK_TIMEOUT_S)
            hook_errors.extend(f"{c.event}: exit {c.returncode}" for c in calls if c.returncode not in (0,))
            return merged_output(calls) if calls else None

        start = time.monotonic()
        with open(ctx.trajectory_path, "w", encoding="utf-8") as stream:
            def emit(event: dict[str, Any]) -> None:
                stream.write(json.dumps(event) + "\n")
            try:
                answer = policy(ctx.workspace, ctx.prompt, attempt=ctx.attempt, emit=emit, run_hook=run_hook)
                error, exc_type = None, None
            except Exception as exc:   # the agent crashing is the rollout's exception, not the step's
                answer, error, exc_type = None, f"scripted agent crashed: {type(exc).__name__}: {exc}", "AgentCrashError"
        duration = time.monotonic() - start
        usage = summarize(ctx.trajectory_path).usage if ctx.trajectory_path.stat().st_size else Usage()
        if duration > ctx.timeout_s:
            return AgentRun(answer, usage, None, True, duration, f"agent timed out after {ctx.timeout_s:g}s",
                            "AgentTimeout", ctx.trajectory_path.name, "scripted")
        return AgentRun(answer, usage, 0 if error is None else 1, False, duration, error, exc_type,
                        ctx.trajectory_path.name, "scripted")

