"""A Pi package (`pi install DIR`). Measured on Pi 0.73.1: a package brings skills and
extensions; the package's one extension (hooks/plugin/pi_extension.ts) adds the adapter's policy
to the system prompt and runs the middleware's session_start (the memory) once. Pi runs no shell
hooks and has no sub-agents: the middleware's other functions and the sub-agents are dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

from git_hermit import resources
from git_hermit.adapter.plugins.base import (ADAPTER_DIR, CARD_FILE, README_FILE, context_text, copy_adapter,
                                             copy_skills, python_note, readme, unlisted_scripts, write_json,
                                             write_record, write_text)
from git_hermit.hosts.pi import HOST as PI
from git_hermit.model.inventory import (CONTEXT, HOOKS, MEMORY, MIDDLEWARE_FUNCTIONS, SCRIPTS, SKILLS, SUB_AGENTS,
                                        Inventory)
from git_hermit.model.plugin_format import Carried, Dropped, PluginFormat, PluginSpec, Written

HOST = PI.name
EXTENSION = "extensions/hermit.ts"
CONTEXT_FILE = "context.md"


class PiPackage(PluginFormat):
    target = HOST
    title = "Pi package"

    def dropped(self, inv: Inventory) -> list[Dropped]:
        lost = []
        if inv.sub_agents:
            lost.append(Dropped(SUB_AGENTS, ", ".join(a.name for a in inv.sub_agents), "Pi has no sub-agents"))
        if inv.middleware:
            others = [f for f in MIDDLEWARE_FUNCTIONS if f != "session_start"]
            lost.append(Dropped(HOOKS, ", ".join(others), "Pi runs no shell hooks; the package's extension runs "
                                                          "only the session-start hook"))
        return lost + unlisted_scripts(inv, hooks_run=True)

    def write(self, inv: Inventory, adapter: Path, out: Path, spec: PluginSpec) -> Written:
        copy_adapter(inv, adapter, out / ADAPTER_DIR, HOST)
        carried: list[Carried] = []
        manifest: dict[str, object] = {"extensions": [f"./{EXTENSION.split('/')[0]}"]}
        if inv.context:
            write_text(out / CONTEXT_FILE, context_text(inv, adapter, spec.name))
            carried.append(Carried(CONTEXT, f"{CONTEXT_FILE}, added to the system prompt by {EXTENSION}"))
        if inv.skills:
            names = copy_skills(inv, adapter, out / "skills")
            manifest["skills"] = ["./skills"]
            carried.append(Carried(SKILLS, f"skills/: {', '.join(names)}"))
        if inv.middleware:
            write_record(out, HOST)
            carried.append(Carried(HOOKS, f"session_start only: {EXTENSION} runs {ADAPTER_DIR}/{inv.middleware}'s "
                                          "session-start hook"))
        if inv.memory:
            carried.append(Carried(MEMORY, "handed over at session start (middleware.session_start)"
                                   if inv.memory_by_hook else f"in {CONTEXT_FILE} ({inv.memory})"))
        if inv.scripts and inv.middleware:
            carried.append(Carried(SCRIPTS, f"{ADAPTER_DIR}/scripts/, listed at session start"))
        template = (resources.hooks_dir() / "plugin" / "pi_extension.ts").read_text(encoding="utf-8")
        write_text(out / EXTENSION, template.replace("__PYTHON__", json.dumps(spec.python))
                   .replace("__SESSION_START__", "true" if inv.middleware else "false"))
        # Pi reads a package's resources from the package.json key named after itself
        write_json(out / "package.json", {"name": spec.name, "version": spec.version, "description": spec.description,
                                          "keywords": ["pi-package"], PI.binary: manifest})
        install = (f"pi install {spec.output}",)
        write_text(out / CARD_FILE, spec.card)
        write_text(out / README_FILE, readme(self.title, spec, install, tuple(carried), self.dropped(inv), notes=(
            python_note(spec),)))
        return Written(".", tuple(carried), install)


FORMAT = PiPackage()
