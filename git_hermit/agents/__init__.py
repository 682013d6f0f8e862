"""Acting-agent backends: every registered host (hosts/registry.py), command, scripted."""

from __future__ import annotations

from typing import Any

from git_hermit.errors import AgentError
from git_hermit.hosts import registry
from git_hermit.agents.base import AgentBackend, AgentContext, AgentRun

OTHER_BACKENDS = ("command", "scripted")


def backends() -> tuple[str, ...]:
    """hermit.yaml's allowed ``agent.backend`` values: the registered hosts, command, scripted."""
    return (*registry.names(), *OTHER_BACKENDS)


def make_agent(cfg: dict[str, Any]) -> AgentBackend:
    """The backend hermit.yaml's ``agent:`` block names. ``cfg`` is that block as a plain dict
    (config.AgentConfig.block(): it crosses the process / Dask boundary), its backend filled in there."""
    backend = cfg["backend"]
    if backend == "scripted":
        from git_hermit.agents.scripted import ScriptedAgent
        return ScriptedAgent(cfg)
    if backend == "command":
        from git_hermit.agents.command import CommandAgent
        return CommandAgent(list(cfg.get("command") or []))
    if not registry.known(backend):
        raise AgentError(f"unknown agent backend {backend!r}", hint=f"use one of {', '.join(backends())}")
    from git_hermit.agents.hosts import HostCLIAgent
    return HostCLIAgent(cfg, registry.get(backend))


__all__ = ["AgentBackend", "AgentContext", "AgentRun", "backends", "make_agent"]
