"""Module shape (issue 14.10): check_spec and gitio's Repo stay split along their parts (no
module over 300 lines, no function over 80), and the adapter package imports in one direction
(issue 14.6: check_spec <-> hostcheck was a cycle). Read with `ast`, nothing is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "git_hermit"
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 80


def split_modules() -> list[Path]:
    """check_spec and what it was split into; gitio's repo and its parts."""
    adapter = PACKAGE / "adapter"
    found = [adapter / "check_spec.py", adapter / "violations.py", adapter / "front_matter.py",
             *sorted((adapter / "rules").glob("*.py"))]
    found += [PACKAGE / "gitio" / name for name in
              ("repo.py", "objects.py", "gitdir.py", "reading.py", "writing.py")]
    return found


@pytest.mark.parametrize("path", split_modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_split_module_is_small_and_its_functions_short(path):
    assert path.is_file(), f"{path} is missing"
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{path.name} has {lines} lines"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{path.name}: {node.name} has {length} lines"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """Modules of the git_hermit package that ``path`` imports anywhere (lazy imports included)."""
    return _named(ast.walk(ast.parse(path.read_text(encoding="utf-8"))), path, name)


def _named(nodes: Iterable[ast.AST], path: Path, name: str) -> set[str]:
    """The modules (and module.name) the import statements among ``nodes`` of module ``name`` name."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def test_adapter_package_imports_form_no_cycle():
    modules = {_module_name(p): p for p in (PACKAGE / "adapter").rglob("*.py")}
    _fail_on_cycle({name: sorted(m for m in _imports(path, name) if m in modules and m != name)
                    for name, path in modules.items()})


def _fail_on_cycle(graph: dict[str, list[str]]) -> None:
    """Fail naming the first import cycle of ``graph`` ({module: the modules it imports}), depth first."""
    state: dict[str, int] = {}   # 1 while on the current path, 2 once done

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for target in graph[name]:
            if state.get(target) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail[trail.index(target):] + [target]))
            if target not in state:
                visit(target, trail + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def _module_level_imports(path: Path, name: str) -> set[str]:
    """Like ``_imports``, but only the imports a module makes when it loads or is type checked:
    its top level and its ``if`` blocks (``TYPE_CHECKING`` included), not a function's own."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return _named([node for top in tree.body for node in (ast.walk(top) if isinstance(top, ast.If) else [top])],
                  path, name)


def test_package_imports_form_no_cycle_even_for_the_type_checker():
    """Issue 26.4: hosts/base.py named PluginFormat, ReadState and Step under TYPE_CHECKING from
    the layers above it, which import it back: a circle of six files mypy and readers walk."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    _fail_on_cycle({name: sorted(m for m in _module_level_imports(path, name) if m in modules and m != name)
                    for name, path in modules.items()})
