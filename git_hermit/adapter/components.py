"""What an adapter is made of, host-neutrally: its context file, skills, sub-agents, hook
middleware, memory and scripts (model/inventory.py's Inventory), found through its template's
``files:`` declarations. `convert` asks each plugin format which of these it carries, and the
adapter card lists them.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable

from git_hermit.adapter.templates import Template, glob_match
from git_hermit.model.inventory import Inventory, Skill, SubAgentDef

HOOKS_FILE = "hooks.json"


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
