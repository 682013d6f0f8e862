"""Issue 14.6: no hidden edges and no look-alike records.

Records have one name each across the package (a `Verdict` of a judge is not the verdict note
on a change); the scripted acting agent names no module of the package by string (the demo
passes its own agent in through the config); no module changes ``sys.path`` at run time; the
CLI takes no run lock itself (the core command does, as `step`, `rollout`, `eval` do).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import git_hermit

PACKAGE = Path(git_hermit.__file__).resolve().parent


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_data" not in p.parts)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_every_public_class_has_one_name_in_the_package():
    where: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        for node in _tree(path).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(path.relative_to(PACKAGE).as_posix())
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"classes defined under one name in several modules: {twice}"


def test_no_module_is_imported_under_another_name_of_a_record():
    # `from records import Comparison as CIRecord` hid a second Comparison: a record is named once
    aliased = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("git_hermit.model"):
                aliased += [f"{path.name}: {a.name} as {a.asname}" for a in node.names   # records: classes
                            if a.asname and a.asname != a.name and a.name[:1].isupper()]
    assert not aliased, aliased


def _string_constants(path: Path) -> list[str]:
    return [n.value for n in ast.walk(_tree(path)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_scripted_agent_names_no_package_module_by_string():
    scripted = PACKAGE / "agents" / "scripted.py"
    hidden = [s for s in _string_constants(scripted) if s.startswith("git_hermit.")]
    assert not hidden, f"agents/scripted.py loads {hidden} by name (a hidden edge to demo)"


def _is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
            and node.value.id == "sys")


def test_no_module_changes_sys_path():
    """No module changes sys.path (plugins.py reads it, to find the installed entry points)."""
    found = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            changed = any(_is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value))
                          for t in targets)
            changed |= (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and _is_sys_path(node.func.value))          # sys.path.insert(...), .append(...)
            if changed:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            elif _is_sys_path(node) and path.name != "plugins.py":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} (read)")
    assert not found, f"sys.path used at run time: {found}"


def test_cli_takes_no_run_lock():
    text = (PACKAGE / "cli.py").read_text(encoding="utf-8")
    assert "RunLock" not in text, "the core command takes the run lock; cli.py only parses and prints"


def test_ahe_capability_notes_import_nothing_from_the_hooks(tmp_path):
    from git_hermit.evolvers.ahe.evolver import AHEEvolver
    for name in ("hook_wire", "hermit_hooks"):
        sys.modules.pop(name, None)
    path_before = list(sys.path)
    AHEEvolver._evolver_notes(tmp_path)
    text = (tmp_path / ".hermit" / "EVOLVER.md").read_text()
    assert "## codex" in text and "## claude-code" in text and "**before_tool**" in text
    assert sys.path == path_before
    assert "hook_wire" not in sys.modules and "hermit_hooks" not in sys.modules


@pytest.mark.parametrize("name", ["VerdictNote", "JudgeVerdict", "BaselineCI", "PairedComparison"])
def test_renamed_records_exist(name):
    from git_hermit.accounting import stats
    from git_hermit.model import records
    from git_hermit.rollouts import judges
    assert any(hasattr(m, name) for m in (records, judges, stats))


def test_scripted_agent_runs_the_function_its_config_names():
    from git_hermit.demo import acting
    from git_hermit.demo.benchmark import hermit_config
    from git_hermit.errors import ConfigError
    from git_hermit.agents import make_agent
    from git_hermit.agents.scripted import load_policy
    with pytest.raises(ConfigError, match="agent.scripted.policy"):
        make_agent({"backend": "scripted"}).check_available()
    agent_cfg = hermit_config()["agent"]           # the demo passes its own agent in
    assert load_policy(agent_cfg["scripted"]["policy"]) is acting.run_scripted_agent


def test_preflight_does_not_import_the_step_driver():
    # core/evaluate -> core/preflight -> core/step -> core/evaluate was a circle
    imported = {n.module for n in ast.walk(_tree(PACKAGE / "core" / "preflight.py")) if isinstance(n, ast.ImportFrom)}
    assert "git_hermit.core.step" not in imported
