"""What every plugin format shares: the adapter copied into the plugin, its skills, the hook
configuration that runs the adapter's middleware from the plugin's own directory, the hook
runner's record, the context text and the README (the PluginFormat protocol and its data are
model/plugin_format.py).

A plugin is installed by the host from a directory git-hermit does not choose and runs where
git-hermit may not be installed: nothing written here names this machine's interpreter, this
repository or the build directory (hooks run ``python3`` from PATH unless told otherwise, and
find the adapter through the host's own plugin-root variable).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

from git_hermit import errors, resources
from git_hermit.adapter.components import HOOKS_FILE
from git_hermit.hosts import registry
from git_hermit.model.inventory import Inventory
from git_hermit.model.plugin_format import Carried, Dropped, PluginSpec
# the hook runner's record (it looks beside adapter/ for it), as a deployment writes it
from git_hermit.adapter.deploy import (HOOK_TIMEOUT_S, RECORD_NAME, RECORD_VERSION, RUNNER_FILES, WIRE_FILE, render_hooks,
                                       wire_source)

ADAPTER_DIR = "adapter"          # the adapter as committed, inside the plugin
CARD_FILE = "CARD.md"
README_FILE = "README.md"
DEFAULT_PYTHON = "python3"


# -- shared pieces ------------------------------------------------------------------------------

def unlisted_scripts(inv: Inventory, hooks_run: bool) -> list[Dropped]:
    """Scripts reach the model only through the middleware's session_start, which lists them with
    their paths inside the installed plugin; without it nothing tells the agent where they are."""
    if inv.scripts and not (inv.middleware and hooks_run):
        return [Dropped("scripts", ", ".join(inv.scripts), "nothing hands their paths inside the installed "
                                                           "plugin to the agent (the middleware's session_start "
                                                           "does, where the host runs it)")]
    return []


def copy_adapter(inv: Inventory, adapter: Path, dest: Path, host: str) -> None:
    """The adapter's files (regular files only) under ``dest``, with their modes; the fixed
    hook-runtime files from this installation where the adapter lacks them, and ``host``'s wire."""
    for rel in inv.files:
        source = adapter / rel
        if source.is_symlink() or not source.is_file():
            raise errors.InputError(f"the adapter's {rel} is not a regular file (a symlink?)",
                                    hint="a plugin carries regular files only: remove it from the adapter")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, 0o755 if os.access(source, os.X_OK) else 0o644)
    if inv.middleware:
        shipped = resources.hooks_dir() / "agent"
        for name in RUNNER_FILES:
            if not (dest / name).is_file():
                shutil.copyfile(shipped / name, dest / name)
        impl = registry.get(host)
        if impl.hook_wire is not None:
            (dest / WIRE_FILE).write_text(wire_source(impl), encoding="utf-8")


def copy_skills(inv: Inventory, adapter: Path, dest: Path) -> list[str]:
    """Each skill's directory as ``dest/<name>/``; the names, sorted."""
    for skill in inv.skills:
        prefix = skill.directory + "/"
        for rel in inv.files:
            if rel.startswith(prefix):
                target = dest / skill.name / rel[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(adapter / rel, target)
    return sorted(s.name for s in inv.skills)


def hook_config(adapter: Path, python: str, runtime: str) -> dict[str, object]:
    """The adapter's hooks.json with its placeholders filled: ``python`` (a command on PATH or an
    absolute path, shell-quoted here) and ``runtime``, a shell word the host expands to the adapter's
    directory inside the installed plugin (e.g. ``"${CLAUDE_PLUGIN_ROOT}/adapter"``)."""
    source = adapter / HOOKS_FILE
    if not source.is_file():
        source = resources.hooks_dir() / "agent" / HOOKS_FILE
    return {"hooks": render_hooks(source.read_bytes(), shlex.quote(python), runtime)["hooks"]}


def write_record(root: Path, host: str) -> None:
    """The hook runner's record beside ``adapter/``: which wire it speaks and its deadline. The
    runner then keeps its audit log (``.hermit-hooks/hook-calls.jsonl``) and per-session state
    in the plugin's directory, as a deployment keeps them in its workspace."""
    write_json(root / RECORD_NAME, {"v": RECORD_VERSION, "host": host, "hook_timeout_s": HOOK_TIMEOUT_S})


def context_text(inv: Inventory, adapter: Path, plugin: str) -> str:
    """The adapter's context file as the plugin hands it to the model, with a few lines on where
    its other parts went; a memory the agent reads itself (not through a hook) follows it."""
    assert inv.context is not None
    text = (adapter / inv.context).read_text(encoding="utf-8").rstrip("\n")
    lines = ["", "", "---", f"This policy comes with the {plugin} plugin; the adapter's files are in the "
             f"plugin's `{ADAPTER_DIR}/` directory."]
    if inv.middleware and (inv.scripts or inv.memory_by_hook):
        lines.append("Its helper scripts (with their paths) and its long-term memory are handed to you "
                     "when the session starts.")
    if inv.memory and not inv.memory_by_hook:
        notes = (adapter / inv.memory).read_text(encoding="utf-8").strip()
        lines += ["", f"## Memory notes ({inv.memory})", "",
                  f"{inv.memory} is not in this project; this is its content:", "", notes]
    return text + "\n".join(lines) + "\n"


def readme(title: str, spec: PluginSpec, install: tuple[str, ...], carried: tuple[Carried, ...],
           dropped: list[Dropped], notes: tuple[str, ...] = ()) -> str:
    lines = [f"# {spec.name}: a {title}", "", spec.description, "",
             f"What the adapter is, how it was trained and how it scored: [{CARD_FILE}]({CARD_FILE}).", "",
             "Install:", "", "```", *install, "```", ""]
    lines += ["It carries:", ""] + [f"- {c.component}: {c.where}" for c in carried] + [""]
    if dropped:
        lines += ["Left out (converted with --allow-lossy):", ""] + [f"- {d.line()}" for d in dropped] + [""]
    lines += list(notes)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def python_note(spec: PluginSpec) -> str:
    """What the hooks need where the plugin is installed."""
    if spec.python == DEFAULT_PYTHON:
        return ("Its hooks run the adapter's middleware with `python3` (3.11 or newer, standard library only) "
                "from PATH; git-hermit need not be installed.")
    return f"Its hooks run the adapter's middleware with `{spec.python}`; git-hermit need not be installed."
