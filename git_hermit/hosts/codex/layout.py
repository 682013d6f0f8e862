"""A Codex plugin inside a local marketplace (`codex plugin marketplace add DIR`, then
`codex plugin add NAME@hermit-NAME`). Measured on Codex 0.164.0: a plugin's
``.codex-plugin/plugin.json`` brings skills and hooks (run from ``${PLUGIN_ROOT}/adapter``, so
the middleware hands the memory over at SessionStart), but Codex reads no instructions file and
no agent role from a plugin: the context and the sub-agents are dropped.
"""

from __future__ import annotations

from pathlib import Path

from git_hermit.adapter.plugins.base import (ADAPTER_DIR, CARD_FILE, README_FILE, copy_adapter, copy_skills,
                                             hook_config, python_note, readme, unlisted_scripts, write_json,
                                             write_record, write_text)
from git_hermit.hosts.codex import HOST as CODEX
from git_hermit.model.inventory import CONTEXT, HOOKS, MEMORY, SCRIPTS, SKILLS, SUB_AGENTS, Inventory
from git_hermit.model.plugin_format import Carried, Dropped, PluginFormat, PluginSpec, Written

HOST = CODEX.name
RUNTIME = '"${PLUGIN_ROOT}/' + ADAPTER_DIR + '"'


def marketplace_name(name: str) -> str:
    return f"hermit-{name}"


class CodexPlugin(PluginFormat):
    target = HOST
    title = "Codex plugin"

    def dropped(self, inv: Inventory) -> list[Dropped]:
        lost = []
        if inv.context:
            lost.append(Dropped(CONTEXT, inv.context, "Codex reads no instructions file from a plugin "
                                                      "(deploy it as the project's AGENTS.md instead)"))
        if inv.sub_agents:
            lost.append(Dropped(SUB_AGENTS, ", ".join(a.name for a in inv.sub_agents),
                                "Codex loads no agent roles from a plugin"))
        if inv.memory and not inv.memory_by_hook:
            lost.append(Dropped(MEMORY, inv.memory, "the policy tells the agent to read it, and the policy "
                                                    "does not reach a Codex plugin"))
        return lost + unlisted_scripts(inv, hooks_run=True)

    def write(self, inv: Inventory, adapter: Path, out: Path, spec: PluginSpec) -> Written:
        rel = f"plugins/{spec.name}"
        plugin = out / rel
        market = marketplace_name(spec.name)
        write_json(out / ".agents" / "plugins" / "marketplace.json", {
            "name": market, "interface": {"displayName": f"{spec.name} (git-hermit)"},
            "plugins": [{"name": spec.name, "source": {"source": "local", "path": f"./{rel}"}}]})
        manifest: dict[str, object] = {"name": spec.name, "version": spec.version, "description": spec.description}
        copy_adapter(inv, adapter, plugin / ADAPTER_DIR, HOST)
        carried: list[Carried] = []
        if inv.skills:
            names = copy_skills(inv, adapter, plugin / "skills")
            manifest["skills"] = "./skills/"
            carried.append(Carried(SKILLS, f"{rel}/skills/: {', '.join(names)}"))
        if inv.middleware:
            write_json(plugin / "hooks" / "hooks.json", hook_config(adapter, spec.python, RUNTIME))
            write_record(plugin, HOST)
            manifest["hooks"] = "./hooks/hooks.json"
            carried.append(Carried(HOOKS, f"{rel}/hooks/hooks.json runs {ADAPTER_DIR}/{inv.middleware} "
                                          f"({len(inv.hook_events)} events)"))
            if inv.memory_by_hook:
                carried.append(Carried(MEMORY, "handed over at session start (middleware.session_start)"))
            if inv.scripts:
                carried.append(Carried(SCRIPTS, f"{rel}/{ADAPTER_DIR}/scripts/, listed at session start"))
        write_json(plugin / ".codex-plugin" / "plugin.json", manifest)
        install = (f"codex plugin marketplace add {spec.output}", f"codex plugin add {spec.name}@{market}")
        write_text(plugin / CARD_FILE, spec.card)
        write_text(plugin / README_FILE, readme(self.title, spec, install, tuple(carried), self.dropped(inv), notes=(
            python_note(spec), "",
            "Codex runs a plugin's hooks only once they are trusted: review them with `/hooks` in Codex "
            "(or pass `--dangerously-bypass-hook-trust` to `codex exec` for a run you have checked). "
            "They log every call to `.hermit-hooks/hook-calls.jsonl` under the installed plugin's root.")))
        return Written(rel, tuple(carried), install)


FORMAT = CodexPlugin()
