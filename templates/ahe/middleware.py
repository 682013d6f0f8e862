"""The adapter's hook middleware: one function per host lifecycle event, called by hook_runner.py.

Each function takes a HookInput and returns a HookResult, or None when it has nothing to do;
which fields each host honours is in hook_hosts.CAPABILITIES. Import only the standard library
and hermit_hooks: the runner starts on every event and must stay fast and self-contained.
"""

from __future__ import annotations

import os

from hermit_hooks import HookInput, HookResult

# Only `os` (loaded with the interpreter anyway): the runner imports this file on every event,
# and modules such as re or pathlib would add their import time to every tool call.
ADAPTER_DIR = os.path.dirname(os.path.abspath(__file__))
MEMORY_FILE = os.path.join(ADAPTER_DIR, "MEMORY.md")
SCRIPTS_DIR = os.path.join(ADAPTER_DIR, "scripts")

# Targets of a recursive `rm` that no task needs: the filesystem root and the home directory.
WIPE_TARGETS = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*", "${HOME}", "${HOME}/"})


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def memory_entries(text: str) -> list[str]:
    """The entries of MEMORY.md: each "- " line after the header, with its indented continuations."""
    entries: list[str] = []
    for line in text.splitlines()[1:]:
        if line.startswith("- "):
            entries.append(line[2:].strip())
        elif line.startswith("  ") and line.strip() and entries:
            entries[-1] += " " + line.strip()
    return [entry for entry in entries if entry]


def script_summaries() -> list[str]:
    """One line per helper script: its absolute path and the first line of its docstring."""
    if not os.path.isdir(SCRIPTS_DIR):
        return []
    lines = []
    for name in sorted(os.listdir(SCRIPTS_DIR)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(SCRIPTS_DIR, name)
        summary = next((line.strip("\"' ") for line in read_text(path).splitlines()[:5]
                        if line.startswith(('"""', "'''"))), "")
        lines.append(f"- python {path}" + (f": {summary}" if summary else ""))
    return lines


def wipes_root_or_home(command: str) -> bool:
    """True when a shell command runs a recursive `rm` on the filesystem root or the home directory."""
    for separator in ("&&", "||", "|", "&", "\n"):
        command = command.replace(separator, ";")
    for segment in command.split(";"):
        words = segment.split()
        if "rm" not in words:
            continue
        args = words[words.index("rm") + 1:]
        recursive = any(arg == "--recursive" or (arg.startswith("-") and not arg.startswith("--")
                                                  and ("r" in arg or "R" in arg)) for arg in args)
        if recursive and any(arg in WIPE_TARGETS for arg in args):
            return True
    return False


def session_start(inp: HookInput) -> HookResult | None:
    """Hand the long-term memory and the list of helper scripts to the model before the first request."""
    parts = []
    if os.path.isfile(MEMORY_FILE):
        entries = memory_entries(read_text(MEMORY_FILE))
        if entries:
            parts.append("Lessons from earlier sessions (long-term memory):\n"
                         + "\n".join(f"- {entry}" for entry in entries))
    scripts = script_summaries()
    if scripts:
        parts.append("Helper scripts of this adapter:\n" + "\n".join(scripts))
    return HookResult(context="\n\n".join(parts)) if parts else None


def before_tool(inp: HookInput) -> HookResult | None:
    """Refuse a shell command that would wipe the filesystem root or the home directory."""
    command = (inp.tool_input or {}).get("command") if isinstance(inp.tool_input, dict) else None
    if inp.tool_kind == "shell" and isinstance(command, str) and wipes_root_or_home(command):
        return HookResult(deny=True, reason="Refused: this command would delete the filesystem root or "
                                            "the home directory. Delete only the specific paths you need.")
    return None


def after_tool(inp: HookInput) -> HookResult | None:
    """After a failed shell command, remind the model to read the error before trying again."""
    failed = inp.failed is True or (inp.exit_code is not None and inp.exit_code != 0)
    if inp.tool_kind == "shell" and failed:
        code = f" (exit code {inp.exit_code})" if inp.exit_code is not None else ""
        return HookResult(context=f"The last command failed{code}. Read its error output and fix the cause "
                                  "before running it again; do not repeat it unchanged.")
    return None


def stop(inp: HookInput) -> HookResult | None:
    """Let the session end: the seed adapter adds no final check (a learner may add one here)."""
    return None


def before_model(inp: HookInput) -> HookResult | None:
    """Nothing to queue before a model request in the seed adapter."""
    return None
