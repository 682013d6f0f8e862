"""The import-linter contracts (pyproject.toml) hold, and their layers name every top-level module
of git_hermit, so a new module cannot sit outside the checked layering. (.ci/run also runs
`lint-imports` and `mypy` on their own; mypy is not repeated here: it takes ~20 s.)"""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import git_hermit

# Not code a layer could hold: the `python -m` entry (it only calls the launcher) and the
# generated completion table (data, imported by the completer).
OUTSIDE = {"git_hermit.__main__", "git_hermit._completion_table"}


def _layer_modules() -> set[str]:
    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    return {name.strip("() ") for layer in layers for name in re.split(r"[|:]", layer)}


def _covered(module: str, named: set[str]) -> bool:
    """Named by a layer itself, or a package each of whose modules is (hosts/: the protocol and
    the table sit low, each host's package high)."""
    if module in named:
        return True
    spec = importlib.util.find_spec(module)
    children = [f"{module}.{m.name}" for m in pkgutil.iter_modules(spec.submodule_search_locations or [])] \
        if spec is not None else []
    return bool(children) and all(_covered(child, named) for child in children)


def test_every_top_level_module_is_in_a_layer() -> None:
    modules = {f"git_hermit.{m.name}" for m in pkgutil.iter_modules(git_hermit.__path__)} - OUTSIDE
    named = _layer_modules()
    assert sorted(m for m in modules if not _covered(m, named)) == [], \
        "add each new top-level module to a layer in pyproject.toml"
    assert sorted(n for n in named if importlib.util.find_spec(n) is None) == [], \
        "a layer names a module that no longer exists"


def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    proc = subprocess.run([lint, "--no-cache"], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


# A declared distribution → the top-level module it is imported as (where the names differ).
IMPORT_NAME = {"pyyaml": "yaml", "jsonschema-rs": "jsonschema_rs", "gitpython": "git", "types-pyyaml": None,
               "import-linter": None, "mypy": None, "pytest-xdist": None, "mkdocs": None,
               # the toy plugin's build backend (tests/test_toy_plugin.py builds it with pip)
               "setuptools": None, "wheel": None}   # None: a tool or plugin, run not imported


def _imported_modules(root: Path) -> set[str]:
    import ast
    found: set[str] = set()
    for path in root.rglob("*.py"):
        if ".venv" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_no_declared_dependency_goes_unused() -> None:
    # issue 14.7: the run-time dependencies and the extras are imported by the package, the
    # `dev` extra by the tests (or run as tools), `bench` by the benchmarks
    top = Path(__file__).resolve().parents[1]
    project = tomllib.loads((top / "pyproject.toml").read_text())["project"]
    where = {"dev": top / "tests", "bench": top / "bench"}
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    imported = {root: _imported_modules(root) for root in {top / "git_hermit", *where.values()}}
    unused = []
    for group, requirements in groups.items():
        for requirement in requirements:
            name = re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower()
            module = IMPORT_NAME.get(name, name.replace("-", "_"))
            if module is None:
                continue
            root = where.get(group, top / "git_hermit")
            if module not in imported[root]:
                unused.append(f"{requirement} ({group or 'dependencies'}): {module} is not imported under {root.name}/")
    assert unused == []
