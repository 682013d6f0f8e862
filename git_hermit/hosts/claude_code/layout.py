"""A Claude Code plugin inside a local marketplace (`claude plugin marketplace add DIR`, then
`claude plugin install NAME@hermit-NAME`). Measured on Claude Code 2.1.317, it carries every
component: the context as an output style the plugin forces (appended to the system prompt,
the default coding instructions kept), skills, sub-agents, and hooks that run the adapter's
middleware from ``${CLAUDE_PLUGIN_ROOT}/adapter`` — the memory is handed over at SessionStart.
"""

from __future__ import annotations

import json
from pathlib import Path

from git_hermit.adapter.plugins.base import (ADAPTER_DIR, CARD_FILE, README_FILE, context_text, copy_adapter,
                                             copy_skills, hook_config, unlisted_scripts, python_note, readme, write_json,
                                             write_record, write_text)
from git_hermit.hosts.claude_code import HOST as CLAUDE_CODE
from git_hermit.model.inventory import CONTEXT, HOOKS, MEMORY, SCRIPTS, SKILLS, SUB_AGENTS, Inventory
from git_hermit.model.plugin_format import Carried, Dropped, PluginFormat, PluginSpec, Written

HOST = CLAUDE_CODE.name
RUNTIME = '"${CLAUDE_PLUGIN_ROOT}/' + ADAPTER_DIR + '"'


def marketplace_name(name: str) -> str:
    return f"hermit-{name}"


def _output_style(name: str, description: str, body: str) -> str:
    # force-for-plugin: applied while the plugin is enabled; keep-coding-instructions: the
    # default system prompt stays and the adapter's policy is added to it
    return ("---\n" f"name: {json.dumps(name)}\n" f"description: {json.dumps(description)}\n"
            "force-for-plugin: true\nkeep-coding-instructions: true\n---\n\n" + body)


class ClaudeCodePlugin(PluginFormat):
    target = HOST
    title = "Claude Code plugin"
    carries_all = True

    def dropped(self, inv: Inventory) -> list[Dropped]:
        return unlisted_scripts(inv, hooks_run=True)

    def write(self, inv: Inventory, adapter: Path, out: Path, spec: PluginSpec) -> Written:
        rel = f"plugins/{spec.name}"
        plugin = out / rel
        market = marketplace_name(spec.name)
        write_json(out / ".claude-plugin" / "marketplace.json", {
            "name": market, "owner": {"name": "git-hermit"},
            "description": f"The {spec.name} adapter trained by git-hermit",
            "plugins": [{"name": spec.name, "source": f"./{rel}", "description": spec.description,
                         "version": spec.version}]})
        write_json(plugin / ".claude-plugin" / "plugin.json", {
            "name": spec.name, "version": spec.version, "description": spec.description,
            "author": {"name": "git-hermit"}})
        copy_adapter(inv, adapter, plugin / ADAPTER_DIR, HOST)
        carried: list[Carried] = []
        if inv.context:
            style = f"output-styles/{spec.name}.md"
            write_text(plugin / style, _output_style(spec.name, f"The {spec.name} adapter's policy ({inv.context})",
                                                     context_text(inv, adapter, spec.name)))
            carried.append(Carried(CONTEXT, f"{rel}/{style} (an output style the plugin applies)"))
        if inv.skills:
            names = copy_skills(inv, adapter, plugin / "skills")
            carried.append(Carried(SKILLS, f"{rel}/skills/: {', '.join(names)}"))
        for agent in inv.sub_agents:
            write_text(plugin / "agents" / f"{agent.name}.md", (adapter / agent.path).read_text(encoding="utf-8"))
        if inv.sub_agents:
            carried.append(Carried(SUB_AGENTS, f"{rel}/agents/: {', '.join(a.name for a in inv.sub_agents)}"))
        if inv.middleware:
            write_json(plugin / "hooks" / "hooks.json", hook_config(adapter, spec.python, RUNTIME))
            write_record(plugin, HOST)
            carried.append(Carried(HOOKS, f"{rel}/hooks/hooks.json runs {ADAPTER_DIR}/{inv.middleware} "
                                          f"({len(inv.hook_events)} events)"))
        if inv.memory:
            carried.append(Carried(MEMORY, "handed over at session start (middleware.session_start)"
                                   if inv.memory_by_hook else f"in the output style ({inv.memory})"))
        if inv.scripts and inv.middleware:
            carried.append(Carried(SCRIPTS, f"{rel}/{ADAPTER_DIR}/scripts/, listed at session start"))
        install = (f"claude plugin marketplace add {spec.output}", f"claude plugin install {spec.name}@{market}")
        write_text(plugin / CARD_FILE, spec.card)
        write_text(plugin / README_FILE, readme(self.title, spec, install, tuple(carried), self.dropped(inv), notes=(
            python_note(spec), "",
            "The hooks log every call to `.hermit-hooks/hook-calls.jsonl` under the installed plugin's "
            "directory (`claude plugin list` shows where it is read from).")))
        return Written(rel, tuple(carried), install)


FORMAT = ClaudeCodePlugin()
