"""What an adapter is made of, host-neutrally, as data: the component names, the middleware
functions, and one adapter's inventory (context file, skills, sub-agents, hook middleware, memory,
scripts). adapter/components.py finds them through the template; here, below hosts/base.py, so
that a plugin format's protocol (model/plugin_format.py) names them without importing the adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

# The component names convert's refusals and the card use, in the order they are listed.
CONTEXT, SKILLS, SUB_AGENTS, HOOKS, MEMORY, SCRIPTS = "context", "skills", "sub-agents", "hooks", "memory", "scripts"
COMPONENTS = (CONTEXT, SKILLS, SUB_AGENTS, HOOKS, MEMORY, SCRIPTS)
# The middleware functions the hook runner calls (hermit_hooks' HookInput events).
MIDDLEWARE_FUNCTIONS = ("session_start", "before_tool", "after_tool", "stop", "before_model")


@dataclass(frozen=True)
class Skill:
    name: str
    directory: str          # adapter-relative: everything under it belongs to the skill


@dataclass(frozen=True)
class SubAgentDef:
    name: str
    path: str               # adapter-relative definition (Markdown with front matter)


@dataclass(frozen=True)
class Inventory:
    """The components of one adapter (paths relative to the adapter directory)."""

    files: tuple[str, ...]
    context: str | None                     # AGENTS.md
    skills: tuple[Skill, ...]
    sub_agents: tuple[SubAgentDef, ...]
    middleware: str | None                  # middleware.py: the hook runner calls it
    hook_events: tuple[str, ...]            # the host events hooks.json registers
    memory: str | None                      # MEMORY.md (handed over by the middleware) | memory/NOTES.md
    scripts: tuple[str, ...]

    @property
    def memory_by_hook(self) -> bool:
        """True when the middleware's session_start hands the memory over (ahe's MEMORY.md);
        False when the agent reads the memory file itself (continual-harness's notes)."""
        return self.memory is not None and self.middleware is not None and self.memory == "MEMORY.md"

    def present(self) -> tuple[str, ...]:
        """The component names this adapter has, in COMPONENTS order."""
        have = {CONTEXT: self.context, SKILLS: self.skills, SUB_AGENTS: self.sub_agents,
                HOOKS: self.middleware, MEMORY: self.memory, SCRIPTS: self.scripts}
        return tuple(name for name in COMPONENTS if have[name])
