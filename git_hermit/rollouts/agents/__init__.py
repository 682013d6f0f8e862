"""Acting-agent backends: codex, claude-code, pi, command, scripted."""

from __future__ import annotations

from typing import Any

from git_hermit.errors import AgentError
from git_hermit.rollouts.agents.base import AgentBackend, AgentContext, AgentRun

BACKENDS = ("codex", "claude-code", "pi", "command", "scripted")


def make_agent(cfg: dict[str, Any]) -> AgentBackend:
    """The backend hermit.yaml's ``agent:`` block names."""
    backend = cfg.get("backend", "codex")
    if backend == "scripted":
        from git_hermit.rollouts.agents.scripted import ScriptedAgent
        return ScriptedAgent(cfg)
    if backend == "command":
        from git_hermit.rollouts.agents.command import CommandAgent
        return CommandAgent(list(cfg.get("command") or []))
    from git_hermit.rollouts.agents.hosts import ClaudeCodeAgent, CodexAgent, PiAgent
    backends = {"codex": CodexAgent, "claude-code": ClaudeCodeAgent, "pi": PiAgent}
    if backend not in backends:
        raise AgentError(f"unknown agent backend {backend!r}", hint=f"use one of {', '.join(BACKENDS)}")
    return backends[backend](cfg)


__all__ = ["AgentBackend", "AgentContext", "AgentRun", "BACKENDS", "make_agent"]
