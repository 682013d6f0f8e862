"""Rules the test suite keeps (issue 26, item 7): helpers live in one package, tests/support/
(conftest.py aside), never in a test file another one imports; one project builder
(tests/support/project.py) runs `git hermit init` and writes hermit.yaml; and every fixture a
test reads is inside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def test_no_test_imports_another_test_files_helpers():
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(TESTS)}:{node.lineno} imports {name}"
                      for name in names if name.split(".")[-1].startswith("test_")]
    assert found == [], "move the helpers into tests/support/"


def test_every_helper_module_is_in_the_support_package():
    """tests/ holds test files and conftest.py; a helper module elsewhere is a second helper package."""
    stray = sorted(p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py")
    assert stray == [], "move them into tests/support/"


def test_no_test_puts_the_support_folder_on_sys_path():
    """Helpers are imported as ``support.<module>``: a module imported by its bare name as well would
    be a second copy of it, with its own state."""
    found = [f"{path.relative_to(TESTS)}:{node.lineno}" for path in _python_files()
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr in ("insert", "append") and ast.unparse(node.func.value) == "sys.path"
             and "support" in ast.unparse(node).lower()]
    assert found == [], "import it as support.<module>"


BUILDER = TESTS / "support" / "project.py"
CONFIG_WRITERS = {"write_config", "edit_config"}      # project.py's, which write hermit.yaml


def _runs_init(node: ast.AST) -> bool:
    """`git hermit init` called (hermit(repo, "init", ...), a command list [..., "init", ...]), not `git init`."""
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return name != "git" and any(isinstance(a, ast.Constant) and a.value == "init" for a in node.args)
    if isinstance(node, ast.List):
        words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        return "init" in words and words[:1] != ["git"]
    return False


def _writes_config(node: ast.AST) -> bool:
    """hermit.yaml written: ``<path with "hermit.yaml">.write_text(...)``/``open(..., "w")``, or project.py's writers."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in CONFIG_WRITERS:
        return True
    target = func.value if isinstance(func, ast.Attribute) and name in ("write_text", "write_bytes", "open") \
        else node.args[0] if name == "open" and node.args else None
    return target is not None and any(isinstance(n, ast.Constant) and n.value == "hermit.yaml"
                                      for n in ast.walk(target))


def test_one_project_builder_runs_init_and_writes_the_config():
    """A function that runs `git hermit init` and writes hermit.yaml builds a project: that is
    build_project's job (tests/support/project.py), so every test's project is made the same way."""
    builders = []
    for path in _python_files():
        if path == BUILDER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = list(ast.walk(node))
                if any(map(_runs_init, inside)) and any(map(_writes_config, inside)):
                    builders.append(f"{path.relative_to(TESTS)}:{node.lineno} {node.name}")
    assert builders == [], "build the project with support.project.build_project"


def test_no_test_reads_a_fixture_outside_the_repository():
    outside = re.compile(r"parents\[[2-9]\]|\.\.[\"']?\s*/\s*[\"']?shared|/work/shared")
    found = [f"{path.relative_to(TESTS)}: {line.strip()}" for path in _python_files() if path != Path(__file__)
             for line in path.read_text(encoding="utf-8").splitlines()
             if outside.search(line) and not line.lstrip().startswith("#")]
    assert found == []
