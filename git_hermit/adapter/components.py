"""What an adapter is made of, host-neutrally: its context file, skills, sub-agents, hook
middleware, memory and scripts, found through its template's ``files:`` declarations. `convert`
asks each plugin format which of these it carries, and the adapter card lists them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterable

from git_hermit.adapter.templates import Template, glob_match

# The component names convert's refusals and the card use, in the order they are listed.
CONTEXT, SKILLS, SUB_AGENTS, HOOKS, MEMORY, SCRIPTS = "context", "skills", "sub-agents", "hooks", "memory", "scripts"
COMPONENTS = (CONTEXT, SKILLS, SUB_AGENTS, HOOKS, MEMORY, SCRIPTS)
# The middleware functions the hook runner calls (hermit_hooks' HookInput events).
MIDDLEWARE_FUNCTIONS = ("session_start", "before_tool", "after_tool", "stop", "before_model")
HOOKS_FILE = "hooks.json"


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


def _patterns(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return ()


def _matching(paths: Iterable[str], value: object) -> list[str]:
    patterns = _patterns(value)
    return sorted(p for p in paths if any(glob_match(pattern, p) for pattern in patterns))


def _sub_agent_name(path: str) -> str:
    """``agents/<name>.md`` (ahe) or ``sub_agents/<name>/AGENT.md`` (continual-harness)."""
    parts = path.split("/")
    return parts[-2] if parts[-1] == "AGENT.md" and len(parts) >= 2 else parts[-1].removesuffix(".md")


def hook_events(hooks_json: bytes | None) -> tuple[str, ...]:
    """The events a hooks.json registers (none when it is missing or unreadable)."""
    if hooks_json is None:
        return ()
    try:
        data = json.loads(hooks_json.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return ()
    hooks = data.get("hooks") if isinstance(data, dict) else None
    return tuple(hooks) if isinstance(hooks, dict) else ()


def inventory(paths: Iterable[str], template: Template, read: Callable[[str], bytes | None]) -> Inventory:
    """The components of the adapter whose files are ``paths``; ``read(rel)`` gives a file's bytes."""
    files = tuple(sorted(paths))
    present = set(files)
    declared = template.files
    skills = tuple(Skill(rel.split("/")[-2], rel.rsplit("/", 1)[0])
                   for rel in _matching(files, declared.get("skills")))
    agents = tuple(SubAgentDef(_sub_agent_name(rel), rel) for rel in _matching(files, declared.get("agents")))
    middleware = declared.get("middleware")
    middleware = middleware if isinstance(middleware, str) and middleware in present else None
    memory = declared.get("memory")
    memory = memory if isinstance(memory, str) and memory in present else None
    scripts = tuple(p for p in files if glob_match("scripts/*.py", p))
    return Inventory(files=files, context=template.context_file if template.context_file in present else None,
                     skills=skills, sub_agents=agents, middleware=middleware,
                     hook_events=hook_events(read(HOOKS_FILE)) if middleware else (),
                     memory=memory, scripts=scripts)
