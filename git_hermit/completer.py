"""Shell completion answered without importing click: a TAB costs a Python start-up, not the CLI's.

The shells' scripts (render/completion.py) call ``git-hermit`` with ``_GIT_HERMIT_COMPLETE`` set;
the launcher hands that here before anything heavy is imported. Commands, options, choices and
argument kinds come from ``_completion_table.py``, generated from the click commands
(`git hermit help --completion-table`; a test keeps it equal to the CLI and holds this
module's answers to click's own completion). Run names and ``step-N`` are read from the
repository's step branches, through gitio, only when such a value is asked for.
Only ``os`` and ``sys`` are imported on the way (no typing, dataclasses, json, re or pathlib: each
costs milliseconds that a TAB pays every time).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False     # typing itself is not imported at run time (see above); mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

COMPLETE_VAR = "_GIT_HERMIT_COMPLETE"


class Candidate:
    """One value to offer; ``type`` plain, or file / dir (the shell then completes paths itself)."""

    __slots__ = ("value", "help", "type")

    def __init__(self, value: str, help: str = "", type: str = "plain"):
        self.value, self.help, self.type = value, help, type


def _load_table() -> dict[str, Any]:
    from git_hermit._completion_table import TABLE
    return TABLE


def _split_words(text: str) -> list[str]:
    if not any(c in text for c in "\'\"\\"):
        return text.split()
    import shlex   # quotes on the line: split as the shell does
    try:
        return shlex.split(text)
    except ValueError:   # an unclosed quote while typing
        return text.split()


def _runs() -> list[str]:
    from git_hermit.core.runs import list_runs   # imported only when run names are asked for
    from git_hermit.gitio import Repo
    return list_runs(Repo.discover())


def _steps(run: str | None) -> list[str]:
    from git_hermit.core.runs import list_runs, list_steps
    from git_hermit.gitio import Repo
    repo = Repo.discover()
    run = run or next(iter(list_runs(repo)), None)
    return [f"step-{n}" for n, _ in list_steps(repo, run)] if run else []


def _values(kind: dict[str, Any], incomplete: str, given: dict[str, str], table: dict[str, Any]) -> list[Candidate]:
    """Candidates for an option value or an argument of ``kind`` (the table's description)."""
    if kind.get("choices"):
        return [Candidate(c) for c in kind["choices"] if c.startswith(incomplete)]
    source = kind.get("source")
    try:
        if source == "run":
            return [Candidate(r) for r in _runs() if r.startswith(incomplete)]
        if source == "step":
            return [Candidate(s) for s in _steps(given.get("--run")) if s.startswith(incomplete)]
    except Exception:  # outside a repository, or a broken one: complete nothing, print nothing
        return []
    if source == "template":     # read from the installed templates, not a list kept here
        from git_hermit.adapter.templates import list_templates
        return [Candidate(t) for t in list_templates() if t.startswith(incomplete)]
    if source == "host":         # the registry's, an installed plugin's host too
        from git_hermit.hosts.registry import names
        return [Candidate(h) for h in names() if h.startswith(incomplete)]
    if source == "command":
        return [Candidate(name) for name in sorted(table["commands"]) if name.startswith(incomplete)]
    if kind.get("path") in ("file", "dir"):
        return [Candidate(incomplete, type=kind["path"])]
    return []


def complete(args: list[str], incomplete: str, table: dict[str, Any] | None = None) -> list[Candidate]:
    """What to offer for ``incomplete`` after the words ``args`` (``git-hermit`` itself excluded)."""
    table = table or _load_table()
    scope = table                      # the group; a command's own scope once its name is read
    positionals = 0
    given: dict[str, str] = {}
    pending: str | None = None          # an option still waiting for its value
    only_positionals = False
    for word in args:
        if pending is not None:
            given[pending] = word
            pending = None
        elif word == "--" and "commands" not in scope:
            only_positionals = True
        elif word.startswith("-") and not only_positionals and word != "-":
            spec = scope["options"].get(word.split("=", 1)[0])
            if spec is not None and spec["takes_value"] and "=" not in word:
                pending = word
        elif "commands" in scope:
            scope = scope["commands"].get(word)
            if scope is None:
                return []
        else:
            positionals += 1
    if pending is not None:
        return _values(scope["options"][pending], incomplete, given, table)
    if incomplete.startswith("-") and not only_positionals:
        return [Candidate(name, spec["help"]) for name, spec in scope["options"].items()
                if name.startswith(incomplete)]
    if "commands" in scope:
        return [Candidate(name, spec["help"]) for name, spec in sorted(scope["commands"].items())
                if name.startswith(incomplete)]
    arguments = scope["arguments"]
    if positionals < len(arguments):
        return _values(arguments[positionals], incomplete, given, table)
    if arguments and arguments[-1].get("many"):
        return _values(arguments[-1], incomplete, given, table)
    return []


def _format(shell: str, item: Candidate) -> str:
    if shell == "bash":
        return f"{item.type},{item.value}"
    help_ = " ".join(item.help.split()) or "_"
    if shell == "zsh":
        return f"{item.type}\n{item.value}\n{help_}"
    return f"{item.type}\t{item.value}\t{help_}"          # fish


def answer(environ: dict[str, str] | None = None) -> int:
    """Answer one completion request from the environment (the shell scripts' protocol)."""
    environ = environ if environ is not None else dict(os.environ)
    shell = environ[COMPLETE_VAR].removesuffix("_complete")
    words = _split_words(environ.get("COMP_WORDS", ""))
    if shell == "fish":
        incomplete = environ.get("COMP_CWORD", "")
        args = words[1:]
        if incomplete and args and args[-1] == incomplete:
            args.pop()
    else:
        cword = int(environ.get("COMP_CWORD") or 0)
        args = words[1:cword]
        incomplete = words[cword] if cword < len(words) else ""
    for item in complete(args, incomplete):
        sys.stdout.write(_format(shell, item) + "\n")
    return 0
