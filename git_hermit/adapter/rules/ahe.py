"""The ahe template's own rules: the paper's seed rules in the context file, MEMORY.md's
header and entries, and middleware.py as the hook runner loads it (its five functions, imports
of the standard library only, no process escapes, session_start still reading MEMORY.md).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Iterator

from git_hermit.adapter.rules.view import AdapterView, RuleSet
from git_hermit.adapter.violations import Violation

RULES = RuleSet()

MIDDLEWARE_FUNCTIONS = ("session_start", "before_tool", "after_tool", "stop", "before_model")
# What middleware.py may import besides the standard library: the hook runner ships only this.
MIDDLEWARE_EXTRA_MODULES = frozenset({"hermit_hooks"})


def _normalise_prose(text: str) -> str:
    """Lower case, markdown emphasis dropped, whitespace collapsed: how seed rules are matched."""
    return " ".join(re.sub(r"[*_`]", "", text).lower().split())


@RULES.rule("seed-rules", "the context file keeps the paper's three seed rules (their marker sentences)")
def _seed_rules(a: AdapterView) -> Iterator[Violation]:
    rel = a.template.context_file
    if not a.is_file(rel):
        return
    text = _normalise_prose(a.text(rel))
    for rule_name, sentence in a.setting("seed_rules").items():
        if _normalise_prose(sentence) not in text:
            yield Violation(rel, 1, "seed-rules",
                            f"seed rule '{rule_name}' was removed; keep the sentence: {' '.join(sentence.split())}")


@RULES.rule("memory-header", "the memory file starts with its header line")
def _memory_header(a: AdapterView) -> Iterator[Violation]:
    rel = a.template.files.get("memory")
    if not rel or not a.is_file(rel):
        return
    header = " ".join(str(a.setting("memory_header")).split())
    lines = a.text(rel).splitlines()
    if not lines or lines[0].rstrip() != header:
        yield Violation(rel, 1, "memory-header", f"the first line must be the header: {header}")


@RULES.rule("memory-entries", "after its header the memory file holds only '- ' entries (indented lines continue one)")
def _memory_entries(a: AdapterView) -> Iterator[Violation]:
    rel = a.template.files.get("memory")
    if not rel or not a.is_file(rel):
        return
    seen_entry = False
    for number, line in enumerate(a.text(rel).splitlines()[1:], start=2):
        if not line.strip():
            continue
        if line.startswith("- ") or line.rstrip() == "-":
            if not line[1:].strip():
                yield Violation(rel, number, "memory-entries", "empty entry: write the lesson after '- '")
            seen_entry = True
        elif line.startswith("  ") and seen_entry:
            continue
        else:
            yield Violation(rel, number, "memory-entries",
                            "not a memory entry: start it with '- ' (or indent it to continue the entry above); "
                            "session_start hands over only entries")


def _middleware(a: AdapterView) -> tuple[str, ast.Module] | None:
    """The template's middleware file and its parsed module; None when there is none or it does
    not parse (python-syntax says so)."""
    rel = a.template.files.get("middleware")
    tree = a.python(rel) if rel else None
    return (rel, tree) if rel and tree is not None else None


def _module_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _takes_one_positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    required = len(positional) - len(args.defaults)
    kwonly_required = any(default is None for default in args.kw_defaults)
    return (len(positional) >= 1 or args.vararg is not None) and required <= 1 and not kwonly_required


@RULES.rule("middleware-functions", "middleware.py defines session_start, before_tool, after_tool, stop, before_model")
def _middleware_functions(a: AdapterView) -> Iterator[Violation]:
    found = _middleware(a)
    if found is None:
        return
    rel, tree = found
    functions = _module_functions(tree)
    for name in MIDDLEWARE_FUNCTIONS:
        fn = functions.get(name)
        if fn is None:
            yield Violation(rel, 1, "middleware-functions",
                            f"{name} is not defined: define `def {name}(inp)` at module level (the hook runner calls it)")
        elif isinstance(fn, ast.AsyncFunctionDef):
            yield Violation(rel, fn.lineno, "middleware-functions",
                            f"{name} is async: the hook runner calls it as a plain function")
        elif not _takes_one_positional(fn):
            yield Violation(rel, fn.lineno, "middleware-functions",
                            f"{name} must take the HookInput as its one positional argument: `def {name}(inp)`")


def _import_targets(tree: ast.Module) -> Iterator[tuple[int, str | None, str]]:
    """(line, top-level module or None for a relative import, as written) for every import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0], alias.name
        elif isinstance(node, ast.ImportFrom):
            written = "." * node.level + (node.module or "")
            yield node.lineno, None if node.level else (node.module or "").split(".")[0], written
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in ("__import__", "import_module"):
                module = node.args[0].value
                yield node.lineno, None if module.startswith(".") else module.split(".")[0], module


@RULES.rule("middleware-imports", "middleware.py imports only the standard library and hermit_hooks")
def _middleware_imports(a: AdapterView) -> Iterator[Violation]:
    found = _middleware(a)
    if found is None:
        return
    rel, tree = found
    allowed = sys.stdlib_module_names | MIDDLEWARE_EXTRA_MODULES
    for line, top, written in _import_targets(tree):
        if top is None:
            yield Violation(rel, line, "middleware-imports",
                            f"relative import {written!r}: the deployed middleware is loaded as a plain module")
        elif top not in allowed:
            yield Violation(rel, line, "middleware-imports",
                            f"imports {written!r}, which is neither the standard library nor hermit_hooks "
                            "(the hook runner's environment has nothing else)")


# What would let a middleware end or signal a process (its own, the runner, the host) or reach
# C code: the runner contains all of it at run time; this refuses it before deployment.
_PROCESS_CALLS = frozenset({"_exit", "abort", "kill", "killpg", "fork", "forkpty", "pidfd_send_signal",
                            "raise_signal", "pthread_kill", "setitimer", "alarm"})
_PROCESS_MODULES = frozenset({"os", "posix", "signal", "sys", "_thread"})
_REFUSED_MODULES = frozenset({"signal", "ctypes", "_ctypes", "posix", "_posixsubprocess"})
_EXITS = frozenset({"exit", "quit"})


def _process_escapes(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for line, top, written in _import_targets(tree):
        if top in _REFUSED_MODULES:
            yield line, f"imports {written!r}"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _PROCESS_MODULES:
            for alias in node.names:
                if alias.name in _PROCESS_CALLS | _EXITS:
                    yield node.lineno, f"imports {node.module}.{alias.name}"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in _PROCESS_MODULES and node.attr in _PROCESS_CALLS | _EXITS:
            yield node.lineno, f"uses {node.value.id}.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _EXITS:
                yield node.lineno, f"calls {node.func.id}()"
            elif node.func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and node.args[1].value in _PROCESS_CALLS | _EXITS:
                yield node.lineno, f"looks up {node.args[1].value!r} with getattr"


@RULES.rule("middleware-process", "middleware.py does not exit, abort, fork or send signals, nor load ctypes")
def _middleware_process(a: AdapterView) -> Iterator[Violation]:
    found = _middleware(a)
    if found is None:
        return
    rel, tree = found
    for line, what in sorted(set(_process_escapes(tree))):
        yield Violation(rel, line, "middleware-process",
                        f"{what}: a middleware may not end or signal processes (the hook runner "
                        "answers the host itself; return a HookResult, or None)")


def _mentions(node: ast.AST, needle: str) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and needle in n.value
               for n in ast.walk(node))


def _reaches_constant(tree: ast.Module, start: ast.AST, needle: str) -> bool:
    """Does ``start`` mention ``needle``, directly or through module-level functions and names it uses?"""
    definitions: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and node.value is not None:
                        definitions.setdefault(name.id, []).append(node.value)
    pending, visited = [start], set()
    while pending:
        current = pending.pop()
        if id(current) in visited:
            continue
        visited.add(id(current))
        if _mentions(current, needle):
            return True
        for name in ast.walk(current):
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Load):
                pending.extend(definitions.get(name.id, ()))
    return False


@RULES.rule("memory-at-session-start", "middleware.session_start still reads MEMORY.md (directly or through a helper)")
def _memory_at_session_start(a: AdapterView) -> Iterator[Violation]:
    found, memory = _middleware(a), a.template.files.get("memory")
    if found is None or not memory:
        return
    rel, tree = found
    session_start = _module_functions(tree).get("session_start")
    if session_start is None:
        return  # middleware-functions reports it
    if not _reaches_constant(tree, session_start, Path(memory).name):
        yield Violation(rel, session_start.lineno, "memory-at-session-start",
                        f"session_start no longer reads {memory}: keep reading it "
                        f"(the {memory} beside {rel}) and hand its entries to the model as context")
