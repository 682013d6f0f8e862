"""Rules the test suite keeps (issue 26, item 7): helpers live in one package, tests/support/
(conftest.py aside), never in a test file another one imports; and every fixture a test reads is
inside the repository."""

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


def test_no_test_reads_a_fixture_outside_the_repository():
    outside = re.compile(r"parents\[[2-9]\]|\.\.[\"']?\s*/\s*[\"']?shared|/work/shared")
    found = [f"{path.relative_to(TESTS)}: {line.strip()}" for path in _python_files() if path != Path(__file__)
             for line in path.read_text(encoding="utf-8").splitlines()
             if outside.search(line) and not line.lstrip().startswith("#")]
    assert found == []
