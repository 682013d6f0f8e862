"""check_spec: the static rules an adapter must keep, per template (template.yaml `checks`).

Each rule reads the adapter's files (Python through `ast`, front matter through
`yaml.safe_load`) and reports every broken rule as ``path:line: rule: what is wrong``. Only
``error`` violations fail a check; ``warning`` ones are advice. Host checks (running the hooks
the way each host does) live in ``hostcheck`` and run only with ``hosts=True``.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import yaml

from git_hermit.adapter.templates import Template, glob_match, is_fixed, is_learnable
from git_hermit.errors import InputError, SchemaError

ERROR = "error"
WARNING = "warning"

MIDDLEWARE_FUNCTIONS = ("session_start", "before_tool", "after_tool", "stop", "before_model")
# What middleware.py may import besides the standard library: the hook runner ships only this.
MIDDLEWARE_EXTRA_MODULES = frozenset({"hermit_hooks"})
# Skill and sub-agent names: what both hosts accept (lowercase, digits, single hyphens).
NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
PROVENANCE_LEVELS = ("topic", "general")
# Never part of an adapter: version control, caches, and what a deployment or run writes.
_IGNORED = re.compile(r"(^|/)(\.git|__pycache__|\.pytest_cache|\.hermit|\.hermit-hooks)(/|$)"
                      r"|\.pyc$|(^|/)\.DS_Store$|(^|/)\.hermit-deploy\.json$")


@dataclass(frozen=True)
class Violation:
    """One broken rule at one place in the adapter."""

    path: str          # relative to the adapter directory, POSIX
    line: int          # 1-based; 1 when the rule is about the whole file
    rule: str          # kebab-case rule id
    message: str
    severity: str = ERROR  # "error" | "warning"; only errors fail the check

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


def check_adapter(adapter_dir: Path, template: Template, *, hosts: bool = False,
                  limits: Mapping[str, int] | None = None) -> list[Violation]:
    """Run the template's static rules on ``adapter_dir``; sorted by path, then line.

    ``limits`` overrides the template's limits (an evolver's params, e.g. general_min_tasks).
    With ``hosts=True`` the host checks of ``git_hermit.adapter.hostcheck`` run too, when
    that module is installed; otherwise a warning says they were skipped.
    """
    adapter_dir = Path(adapter_dir)
    if not adapter_dir.is_dir():
        raise InputError(f"adapter directory {adapter_dir} does not exist",
                         hint="pass the directory that holds the adapter's files")
    unknown = [rule_id for rule_id in template.checks if rule_id not in RULES]
    if unknown:
        raise SchemaError(f"template {template.id} names unknown check {unknown[0]!r}",
                          hint="known checks: " + ", ".join(sorted(RULES)))
    adapter = _Adapter(adapter_dir, template, {**template.limits, **(limits or {})})
    violations: list[Violation] = []
    for rule_id in template.checks:
        violations.extend(RULES[rule_id].run(adapter))
    if hosts:
        violations.extend(_host_violations(adapter_dir))
    return sorted(violations, key=lambda v: (v.path, v.line))


def has_errors(violations: Iterable[Violation]) -> bool:
    """True when any violation is an error (warnings alone pass)."""
    return any(v.severity == ERROR for v in violations)


def describe_rules() -> dict[str, str]:
    """Rule id -> one line saying what it requires (for `git hermit check --list` and prompts)."""
    return {rule_id: rule.description for rule_id, rule in sorted(RULES.items())}


def _host_violations(adapter_dir: Path) -> list[Violation]:
    try:
        from git_hermit.adapter import hostcheck  # lazy: it runs hooks; absent in a static install
    except ImportError:
        return [Violation(".", 1, "hosts", "host checks skipped: git_hermit.adapter.hostcheck is "
                          "not installed", WARNING)]
    return list(hostcheck.check_hosts(adapter_dir))


# --------------------------------------------------------------------------------------------
# The adapter as the rules see it


@dataclass(frozen=True)
class FrontMatter:
    """A Markdown file's leading ``---`` YAML block, parsed."""

    data: dict[str, Any]
    body: str               # everything after the closing ``---``
    body_line: int          # 1-based line where the body starts
    key_lines: dict[str, int] = field(default_factory=dict)  # top-level key -> its line

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, 1)


class FrontMatterError(ValueError):
    """Front matter that is missing or does not parse; ``line`` is where (1-based)."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int):
        super().__init__(key)
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: PyYAML silently keeps the last,
    so a second provenance block (or name) could hide behind the first."""

    def construct_mapping(self, node, deep=False):
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise _DuplicateKey(str(key), key_node.start_mark.line)
            seen.add(key if isinstance(key, (str, int, float, bool)) else id(key_node))
        return super().construct_mapping(node, deep=deep)


def parse_front_matter(text: str) -> FrontMatter:
    """Parse ``---\\n<yaml mapping>\\n---\\n<body>``; raise FrontMatterError(line, message)."""
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        raise FrontMatterError(1, "does not start with a '---' front-matter block")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise FrontMatterError(1, "the front matter is not closed by a '---' line")
    try:
        data = yaml.load("\n".join(lines[1:end]), Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise FrontMatterError(exc.line + 2, f"the front matter has a duplicate key {exc.key!r}: "
                                             "YAML keeps only the last one, so say it once") from None
    except RecursionError:   # learner output: a crash here would recur on every rerun
        raise FrontMatterError(2, "the front matter is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(line, f"the front matter is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise FrontMatterError(2, "the front matter is not a YAML mapping")
    key_lines = {}
    for i in range(1, end):
        match = re.match(r"([^\s:#][^:]*):", lines[i])
        if match:
            key_lines.setdefault(match.group(1).strip(), i + 1)
    return FrontMatter(data, "\n".join(lines[end + 1:]), end + 2, key_lines)


class _Adapter:
    """Cached, read-only view of an adapter directory for the rules."""

    def __init__(self, root: Path, template: Template, limits: Mapping[str, int]):
        self.root = root
        self.template = template
        self.limits = dict(limits)
        self._texts: dict[str, str] = {}
        self._modules: dict[str, ast.Module | None] = {}

    @cached_property
    def files(self) -> list[str]:
        found = []
        for path in self.root.rglob("*"):
            rel = path.relative_to(self.root).as_posix()
            if not _IGNORED.search(rel) and path.is_file():
                found.append(rel)
        return sorted(found)

    def is_file(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def text(self, rel: str) -> str:
        if rel not in self._texts:
            self._texts[rel] = (self.root / rel).read_text(encoding="utf-8", errors="replace")
        return self._texts[rel]

    def matching(self, patterns: str | Iterable[str] | None) -> list[str]:
        if not patterns:
            return []
        patterns = [patterns] if isinstance(patterns, str) else list(patterns)
        return [rel for rel in self.files if any(glob_match(p, rel) for p in patterns)]

    def python(self, rel: str) -> ast.Module | None:
        """The parsed module, or None when it is missing or does not parse (python-syntax says so)."""
        if rel not in self._modules:
            try:
                self._modules[rel] = ast.parse(self.text(rel), filename=rel) if self.is_file(rel) else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._modules[rel] = None
        return self._modules[rel]

    def front_matter(self, rel: str) -> FrontMatter | None:
        try:
            return parse_front_matter(self.text(rel))
        except FrontMatterError:
            return None

    def setting(self, key: str) -> Any:
        value = self.template.settings.get(key)
        if value is None:
            raise SchemaError(f"template {self.template.id} lacks {key!r}, which its checks need",
                              hint="reinstall git-hermit (a template file is damaged)")
        return value

    def limit(self, key: str) -> int:
        if key not in self.limits:
            raise SchemaError(f"template {self.template.id} lacks the limit {key!r}",
                              hint="reinstall git-hermit (a template file is damaged)")
        return int(self.limits[key])


# --------------------------------------------------------------------------------------------
# The rules


@dataclass(frozen=True)
class Rule:
    """A registered check: its id (as template.yaml names it), what it requires, and the code."""

    id: str
    description: str
    check: Callable[[_Adapter], Iterator[Violation]]

    def run(self, adapter: _Adapter) -> list[Violation]:
        return list(self.check(adapter))


RULES: dict[str, Rule] = {}


def _rule(rule_id: str, description: str):
    def register(check: Callable[[_Adapter], Iterator[Violation]]):
        RULES[rule_id] = Rule(rule_id, description, check)
        return check
    return register


@_rule("required-files", "the template's required files exist")
def _required_files(a: _Adapter) -> Iterator[Violation]:
    for rel in dict.fromkeys((a.template.context_file, *a.template.required)):
        if not a.is_file(rel):
            yield Violation(rel, 1, "required-files", f"missing: every {a.template.id} adapter has this file")


@_rule("context-size", "the context file stays within what the host reads (bytes or characters)")
def _context_size(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.context_file
    if not a.is_file(rel):
        return
    if "context_bytes" in a.limits:
        limit, unit = a.limit("context_bytes"), "bytes"
        lines: list[bytes] | list[str] = (a.root / rel).read_bytes().splitlines(keepends=True)
    else:
        limit, unit = a.limit("context_chars"), "characters"
        lines = a.text(rel).splitlines(keepends=True)
    total = sum(map(len, lines))
    if total <= limit:
        return
    seen = 0
    for number, line in enumerate(lines, start=1):
        seen += len(line)
        if seen > limit:
            yield Violation(rel, number, "context-size",
                            f"is {total} {unit}, over the limit of {limit}; from this line on the agent would not see it")
            return


@_rule("adapter-md-equal", "the context export (ADAPTER.md) is byte-equal to the context file")
def _adapter_md_equal(a: _Adapter) -> Iterator[Violation]:
    export, context = a.template.context_export, a.template.context_file
    if not export or not a.is_file(context):
        return
    if not a.is_file(export):
        yield Violation(export, 1, "adapter-md-equal", f"missing: it must be a copy of {context}")
        return
    ours, theirs = (a.root / export).read_bytes(), (a.root / context).read_bytes()
    if ours == theirs:
        return
    ours_lines, theirs_lines = ours.splitlines(keepends=True), theirs.splitlines(keepends=True)
    line = next((i + 1 for i, (x, y) in enumerate(zip(ours_lines, theirs_lines)) if x != y),
                min(len(ours_lines), len(theirs_lines)) + 1)
    yield Violation(export, line, "adapter-md-equal",
                    f"differs from {context} from this line on: keep it an exact copy of {context}")


def _normalise_prose(text: str) -> str:
    """Lower case, markdown emphasis dropped, whitespace collapsed: how seed rules are matched."""
    return " ".join(re.sub(r"[*_`]", "", text).lower().split())


@_rule("seed-rules", "the context file keeps the paper's three seed rules (their marker sentences)")
def _seed_rules(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.context_file
    if not a.is_file(rel):
        return
    text = _normalise_prose(a.text(rel))
    for rule_name, sentence in a.setting("seed_rules").items():
        if _normalise_prose(sentence) not in text:
            yield Violation(rel, 1, "seed-rules",
                            f"seed rule '{rule_name}' was removed; keep the sentence: {' '.join(sentence.split())}")


@_rule("memory-header", "the memory file starts with its header line")
def _memory_header(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.files.get("memory")
    if not rel or not a.is_file(rel):
        return
    header = " ".join(str(a.setting("memory_header")).split())
    lines = a.text(rel).splitlines()
    if not lines or lines[0].rstrip() != header:
        yield Violation(rel, 1, "memory-header", f"the first line must be the header: {header}")


@_rule("memory-entries", "after its header the memory file holds only '- ' entries (indented lines continue one)")
def _memory_entries(a: _Adapter) -> Iterator[Violation]:
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


@_rule("python-syntax", "every learnable Python file parses")
def _python_syntax(a: _Adapter) -> Iterator[Violation]:
    for rel in a.matching(a.template.files.get("python")):
        try:
            ast.parse(a.text(rel), filename=rel)
        except SyntaxError as exc:
            yield Violation(rel, exc.lineno or 1, "python-syntax", f"does not parse: {exc.msg}")
        except ValueError as exc:  # e.g. a NUL byte
            yield Violation(rel, 1, "python-syntax", f"does not parse: {exc}")
        except (RecursionError, MemoryError):  # CPython's parser gives up on deep nesting this way
            yield Violation(rel, 1, "python-syntax", "does not parse: nested too deeply")


def _module_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _takes_one_positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    required = len(positional) - len(args.defaults)
    kwonly_required = any(default is None for default in args.kw_defaults)
    return (len(positional) >= 1 or args.vararg is not None) and required <= 1 and not kwonly_required


@_rule("middleware-functions", "middleware.py defines session_start, before_tool, after_tool, stop, before_model")
def _middleware_functions(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.files.get("middleware")
    tree = a.python(rel) if rel else None
    if tree is None:
        return
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


@_rule("middleware-imports", "middleware.py imports only the standard library and hermit_hooks")
def _middleware_imports(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.files.get("middleware")
    tree = a.python(rel) if rel else None
    if tree is None:
        return
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


@_rule("middleware-process", "middleware.py does not exit, abort, fork or send signals, nor load ctypes")
def _middleware_process(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.files.get("middleware")
    tree = a.python(rel) if rel else None
    if tree is None:
        return
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
        node = pending.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if _mentions(node, needle):
            return True
        for name in ast.walk(node):
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Load):
                pending.extend(definitions.get(name.id, ()))
    return False


@_rule("memory-at-session-start", "middleware.session_start still reads MEMORY.md (directly or through a helper)")
def _memory_at_session_start(a: _Adapter) -> Iterator[Violation]:
    rel, memory = a.template.files.get("middleware"), a.template.files.get("memory")
    tree = a.python(rel) if rel else None
    if tree is None or not memory:
        return
    session_start = _module_functions(tree).get("session_start")
    if session_start is None:
        return  # middleware-functions reports it
    if not _reaches_constant(tree, session_start, Path(memory).name):
        yield Violation(rel, session_start.lineno, "memory-at-session-start",
                        f"session_start no longer reads {memory}: keep reading it "
                        f"(the {memory} beside {rel}) and hand its entries to the model as context")


def _component_files(a: _Adapter, kind: str) -> tuple[list[str], list[Violation]]:
    """The files of a component kind ('skills' or 'agents'), and its folders that lack their file."""
    pattern = a.template.files.get(kind)
    if not pattern:
        return [], []
    found = a.matching(pattern)
    missing = []
    parts = pattern.split("/")
    if len(parts) >= 2 and parts[-2] == "*" and "*" not in parts[-1]:
        base = a.root.joinpath(*parts[:-2])
        if base.is_dir():
            for folder in sorted(p for p in base.iterdir() if p.is_dir() and not _IGNORED.search(p.name)):
                if not (folder / parts[-1]).is_file():
                    rel = folder.relative_to(a.root).as_posix()
                    missing.append(Violation(rel, 1, "front-matter", f"has no {parts[-1]}"))
    return found, missing


def _identity(rel: str) -> str:
    """The name a skill or sub-agent file must declare: its folder for SKILL.md/AGENT.md, else its stem."""
    path = Path(rel)
    return path.parent.name if path.name in ("SKILL.md", "AGENT.md") else path.stem


@_rule("front-matter", "every skill and sub-agent file starts with YAML front matter naming and describing it")
def _front_matter(a: _Adapter) -> Iterator[Violation]:
    for kind in ("skills", "agents"):
        files, missing = _component_files(a, kind)
        yield from missing
        for rel in files:
            try:
                fm = parse_front_matter(a.text(rel))
            except FrontMatterError as exc:
                yield Violation(rel, exc.line, "front-matter", str(exc))
                continue
            name, description = fm.data.get("name"), fm.data.get("description")
            if not isinstance(name, str) or not name.strip():
                yield Violation(rel, fm.line_of("name"), "front-matter", "'name' is missing or empty")
            elif not NAME_PATTERN.match(name) or len(name) > NAME_MAX:
                yield Violation(rel, fm.line_of("name"), "front-matter",
                                f"name {name!r} must be lowercase letters, digits and single hyphens "
                                f"(at most {NAME_MAX})")
            elif name != _identity(rel):
                yield Violation(rel, fm.line_of("name"), "front-matter",
                                f"name {name!r} does not match its file's name {_identity(rel)!r}")
            if not isinstance(description, str) or not description.strip():
                yield Violation(rel, fm.line_of("description"), "front-matter",
                                "'description' is missing or empty: the agent picks it by its description")
            elif len(description) > DESCRIPTION_MAX:
                yield Violation(rel, fm.line_of("description"), "front-matter",
                                f"description is {len(description)} characters, over {DESCRIPTION_MAX}")


@_rule("subagent-size", "a sub-agent's instructions (its file's body) stay within the limit")
def _subagent_size(a: _Adapter) -> Iterator[Violation]:
    limit = a.limit("subagent_chars")
    for rel in a.matching(a.template.files.get("agents")):
        fm = a.front_matter(rel)
        body = fm.body if fm else a.text(rel)
        if len(body.strip()) > limit:
            yield Violation(rel, fm.body_line if fm else 1, "subagent-size",
                            f"instructions are {len(body.strip())} characters, over the limit of {limit}")


@_rule("memory-notes", "memory notes sit under unique, non-empty '## <topic>' headings")
def _memory_notes(a: _Adapter) -> Iterator[Violation]:
    rel = a.template.files.get("memory")
    if not rel or not a.is_file(rel):
        return
    topics: dict[str, int] = {}
    current: tuple[str, int] | None = None   # (topic, line) of the note being read
    has_text = False
    in_fence = False

    def close() -> Iterator[Violation]:
        if current is not None and not has_text:
            yield Violation(rel, current[1], "memory-notes", f"topic {current[0]!r} has no note under it")

    for number, line in enumerate(a.text(rel).splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            has_text = True
            continue
        if in_fence:
            continue
        if line.startswith("# ") or line.rstrip() == "#":
            if number != 1:
                yield Violation(rel, number, "memory-notes",
                                "only the first line may be a '# ' title; put notes under '## <topic>' headings")
        elif line.startswith("## ") or line.rstrip() == "##":
            yield from close()
            topic = line[2:].strip()
            key = " ".join(topic.casefold().split())
            if not topic:
                yield Violation(rel, number, "memory-notes", "a '## ' heading needs a topic")
            elif key in topics:
                yield Violation(rel, number, "memory-notes",
                                f"topic {topic!r} appears twice (first at line {topics[key]}): one note per topic")
            else:
                topics[key] = number
            current, has_text = (topic, number), False
        elif line.strip():
            has_text = True
    yield from close()


# Evo-Harness: managed skills carry a provenance block and live within the library's budgets.


@dataclass(frozen=True)
class _Skill:
    rel: str
    fm: FrontMatter
    provenance: Any           # the provenance block, None for a native (baseline) skill

    @property
    def level(self) -> str | None:
        return self.provenance.get("level") if isinstance(self.provenance, dict) else None


def _skills(a: _Adapter) -> list[_Skill]:
    key = a.setting("provenance_key")
    skills = []
    for rel in a.matching(a.template.files.get("skills")):
        fm = a.front_matter(rel)
        if fm is not None:  # front-matter reports the ones that do not parse
            skills.append(_Skill(rel, fm, fm.data.get(key)))
    return skills


def _skills_root(a: _Adapter) -> str:
    pattern = a.template.files.get("skills", "skills/*/SKILL.md")
    return pattern.split("/*/")[0]


@_rule("provenance", "a managed skill's provenance block names the algorithm, its level and its source tasks")
def _provenance(a: _Adapter) -> Iterator[Violation]:
    key, algorithm = a.setting("provenance_key"), a.setting("provenance_algorithm")
    for skill in _skills(a):
        if key not in skill.fm.data:
            continue  # a native skill: not managed by the Curators
        prov, line = skill.provenance, skill.fm.line_of(key)

        def bad(message: str) -> Violation:
            return Violation(skill.rel, line, "provenance", message)

        if not isinstance(prov, dict):
            yield bad(f"'{key}' must be a mapping with algorithm, level and source_task_ids")
            continue
        if prov.get("algorithm") != algorithm:
            yield bad(f"'{key}.algorithm' is {prov.get('algorithm')!r}, not {algorithm!r}")
        if prov.get("level") not in PROVENANCE_LEVELS:
            yield bad(f"'{key}.level' is {prov.get('level')!r}; it must be one of {', '.join(PROVENANCE_LEVELS)}")
        ids = prov.get("source_task_ids")
        if not isinstance(ids, list) or not ids:
            yield bad(f"'{key}.source_task_ids' must be a non-empty list of the tasks that support the skill")
            continue
        invalid = [i for i in ids if isinstance(i, bool) or not isinstance(i, (str, int)) or not str(i).strip()]
        if invalid:
            yield bad(f"'{key}.source_task_ids' holds {invalid[0]!r}, which is not a task id")
        seen: set[str] = set()
        for task_id in map(str, ids):
            if task_id in seen:
                yield bad(f"'{key}.source_task_ids' lists task {task_id!r} twice")
            seen.add(task_id)


@_rule("general-support", "a general skill cites at least general_min_tasks distinct tasks")
def _general_support(a: _Adapter) -> Iterator[Violation]:
    need, key = a.limit("general_min_tasks"), a.setting("provenance_key")
    for skill in _skills(a):
        if skill.level != "general" or not isinstance(skill.provenance.get("source_task_ids"), list):
            continue
        distinct = {str(i) for i in skill.provenance["source_task_ids"]}
        if len(distinct) < need:
            yield Violation(skill.rel, skill.fm.line_of(key), "general-support",
                            f"a general skill needs at least {need} distinct source tasks; it cites {len(distinct)}")


def _folder_chars(a: _Adapter, skill: _Skill) -> int:
    """Characters of every other file in a folder skill (scripts, references, data): the budgets
    bound what is deployed with the skill, not only its SKILL.md (seed 001). A file that is not
    UTF-8 text counts its bytes."""
    if "/" not in skill.rel:
        return 0
    folder = skill.rel.rsplit("/", 1)[0] + "/"
    total = 0
    for rel in a.files:
        if rel.startswith(folder) and rel != skill.rel:
            data = (a.root / rel).read_bytes()
            try:
                total += len(data.decode("utf-8"))
            except UnicodeDecodeError:
                total += len(data)
    return total


@_rule("skill-size", "a managed skill's body and the other files of its folder stay within max_skill_chars")
def _skill_size(a: _Adapter) -> Iterator[Violation]:
    limit = a.limit("max_skill_chars")
    for skill in _skills(a):
        if skill.provenance is None:
            continue
        body, extra = len(skill.fm.body.strip()), _folder_chars(a, skill)
        if body + extra > limit:
            what = f"the body is {body} characters" + (f" and the folder's other files {extra}" if extra else "")
            yield Violation(skill.rel, skill.fm.body_line, "skill-size", f"{what}, over max_skill_chars {limit}")


def _library_chars(a: _Adapter, skill: _Skill) -> int:
    """Normalised YAML metadata plus body plus the folder's other files: what max_library_chars bounds."""
    metadata = yaml.safe_dump(skill.fm.data, sort_keys=True, allow_unicode=True)
    return len(metadata) + len(skill.fm.body.strip()) + _folder_chars(a, skill)


@_rule("library-size", "the managed skills (every file of their folders) together stay within max_library_chars")
def _library_size(a: _Adapter) -> Iterator[Violation]:
    limit = a.limit("max_library_chars")
    total = sum(_library_chars(a, s) for s in _skills(a) if s.provenance is not None)
    if total > limit:
        yield Violation(_skills_root(a), 1, "library-size",
                        f"the managed skills total {total} characters (metadata, bodies and their folders' files), "
                        f"over max_library_chars {limit}")


@_rule("library-count", "at most max_topic_skills topic and max_general_skills general skills")
def _library_count(a: _Adapter) -> Iterator[Violation]:
    counts = {level: 0 for level in PROVENANCE_LEVELS}
    for skill in _skills(a):
        if skill.level in counts:
            counts[skill.level] += 1
    for level in PROVENANCE_LEVELS:
        limit = a.limit(f"max_{level}_skills")
        if counts[level] > limit:
            yield Violation(_skills_root(a), 1, "library-count",
                            f"{counts[level]} {level} skills, over max_{level}_skills {limit}")


@_rule("skill-shadow", "no skill folder shadows a flat skill file of the same name")
def _skill_shadow(a: _Adapter) -> Iterator[Violation]:
    root = _skills_root(a)
    for rel in a.matching(a.template.files.get("skills")):
        flat = f"{root}/{_identity(rel)}.md"
        if a.is_file(flat):
            yield Violation(rel, 1, "skill-shadow",
                            f"shadows the flat skill {flat}: rename one of them or merge them")


@_rule("fixed-file", "the fixed hook-runtime files are identical to the installed ones")
def _fixed_file(a: _Adapter) -> Iterator[Violation]:
    for rel, source in sorted(a.template.fixed.items()):
        if not source.is_file():
            yield Violation(rel, 1, "fixed-file",
                            f"cannot be compared: the installed {source.name} is missing (reinstall git-hermit)")
        elif not a.is_file(rel):
            yield Violation(rel, 1, "fixed-file", f"missing: restore the installed copy of {source.name}")
        elif (a.root / rel).read_bytes() != source.read_bytes():
            yield Violation(rel, 1, "fixed-file",
                            f"was changed: a fixed file must stay identical to the installed {source.name}")


@_rule("unknown-file", "every file belongs to the template (learnable, fixed or part of the seed)")
def _unknown_file(a: _Adapter) -> Iterator[Violation]:
    seed = set(a.template.seed_files())
    for rel in a.files:
        if not (is_learnable(a.template, rel) or is_fixed(a.template, rel) or rel in seed):
            yield Violation(rel, 1, "unknown-file",
                            f"is not a file of the {a.template.id} template: learners may not change it",
                            WARNING)
