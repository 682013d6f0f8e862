"""Evolvers are plugins (issue 14 items 3 and 11): a toy evolver defined here — one folder, one
`register` call — runs `git hermit step` and `finalize` end to end on a real repository; no module
outside an evolver's folder and the registry names an evolver; and a learner the user writes
(module:function on PYTHONPATH) is called for its role and its edit is committed.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import GIT_HERMIT
from conftest import git
from support.step_support import RUN, env_for, make_run

from git_hermit.evolvers import registry

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "git_hermit"

TOY_INIT = '''"""A toy evolver: one learner role, one commit per step."""
from git_hermit.evolvers.registry import EvolverSpec

SPEC = EvolverSpec(name="toy", evolver="toy_evolver.evolver:ToyEvolver", template="ahe@1.0",
                   roles=("scribe",), aliases=("toy_evolver",), streaming=True,
                   scripted={"scribe": "toy_evolver.evolver:scribe"})
'''

TOY_EVOLVER = '''"""The toy's algorithm: its scribe appends the params' line to MEMORY.md."""
from git_hermit.files import files_in_directory
from git_hermit.evolvers.base import PlannedCommit, StepResult


def scribe(workspace, prompt, key):
    memory = workspace / "MEMORY.md"
    memory.write_text(memory.read_text() + f"- {key}: {prompt}\\n")
    return "noted"


class ToyEvolver:
    name = "toy"

    def step_tasks(self, tasks, step, params):
        return None

    def learn(self, ctx):
        workspace = ctx.step_dir / "toy"
        ctx.materialise(workspace)
        before = files_in_directory(workspace)
        answer = ctx.learner("scribe").ask(workspace, ctx.params["line"], timeout_s=60, key=f"step-{ctx.step}")
        after = files_in_directory(workspace)
        changed = {path: data for path, data in after.items() if before.get(path) != data}
        passed = sum(r.outcome == "pass" for rows in ctx.results.values() for r in rows)
        return StepResult(commits=[PlannedCommit(files=changed, summary=f"scribe {answer.text}, {passed} passed")])
'''

TOY_SCHEMA = {
    "type": "object", "additionalProperties": False,
    # k and timeout_as are the framework's (evolvers/framework.params.schema.json), not the toy's
    "properties": {"line": {"type": "string", "default": "hello"},
                   "final": {"enum": ["last"], "default": "last"}},
    "x-init": {"k": 1},
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy evolver's folder under tmp, on sys.path and registered; unregistered afterwards."""
    folder = tmp_path / "plugins" / "toy_evolver"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(TOY_INIT)
    (folder / "evolver.py").write_text(TOY_EVOLVER)
    (folder / "params.schema.json").write_text(json.dumps(TOY_SCHEMA))
    monkeypatch.syspath_prepend(str(folder.parent))
    spec = registry.register("toy_evolver")
    yield spec
    registry.unregister("toy")


def _main(cwd: Path, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`git hermit ARGS` through the CLI's main() in this process (where the toy is registered)."""
    from git_hermit.cli import main
    monkeypatch.chdir(cwd)
    handler = signal.getsignal(signal.SIGINT)
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.signal(signal.SIGINT, handler)
    out, err = capsys.readouterr()
    return code, out, err


def _set_evolver(repo: Path, evolver: dict) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"] = evolver
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def test_a_toy_evolver_registered_once_runs_step_and_finalize(repo, toy, monkeypatch, capsys):
    control = make_run(repo, {"t1": "42", "t2": "7"}, k=1)
    monkeypatch.setenv("HERMIT_TEST_CONTROL", str(control))
    # its alias, its own parameter, and its scripted learner by default (evolver.scripted names none)
    _set_evolver(repo, {"name": "toy_evolver", "base": "scripted", "params": {"line": "remember 42"}})

    code, out, err = _main(repo, monkeypatch, capsys, "step")
    assert code == 0, err
    assert "step 1" in out
    tip = f"hermit/{RUN}/step-0001"
    assert git(repo, "log", "-1", "--format=%s", tip).strip() == "hermit(toy) step 1: scribe noted, 0 passed"
    memory = git(repo, "show", f"{tip}:adapter/MEMORY.md")
    assert memory.endswith("- step-1: remember 42\n")

    # the toy keeps no best-ever tag; its schema's final (last) is finalize's default
    code, out, err = _main(repo, monkeypatch, capsys, "finalize")
    assert code == 0, err
    assert git(repo, "rev-parse", f"hermit/{RUN}/final").strip() == git(repo, "rev-parse", tip).strip()

    # a parameter the toy's own schema does not have is refused before anything runs
    _set_evolver(repo, {"name": "toy", "base": "scripted", "params": {"lines": "x"}})
    before = git(repo, "for-each-ref")
    code, out, err = _main(repo, monkeypatch, capsys, "step")
    assert code == 5, err
    assert "evolver.params.lines is not a parameter of toy (did you mean line?)" in err
    assert git(repo, "for-each-ref") == before


def test_an_unregistered_evolver_is_a_config_error_naming_the_registered_ones(repo, monkeypatch, capsys):
    make_run(repo, {"t1": "42"}, k=1)
    _set_evolver(repo, {"name": "toy", "base": "scripted"})
    code, out, err = _main(repo, monkeypatch, capsys, "step")
    assert code == 5, err
    assert "unknown evolver 'toy'" in err
    assert "hint: use " + ", ".join(registry.names()) in err


def _string_constants(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, value) of every string constant that is not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_module_outside_the_evolver_folders_and_the_registry_names_an_evolver():
    specs = registry.specs()
    names = {word for s in specs for word in (s.name, *s.aliases, s.template, s.template_name)}
    packages = {s.package for s in specs}
    folders = {s.folder for s in specs}
    exempt = {PACKAGE_ROOT / "evolvers" / "registry.py",
              PACKAGE_ROOT / "_completion_table.py"}       # generated from the CLI
    # the bundled demo is a run of one evolver, as a user's hermit.yaml is: it may name it
    exempt_dirs = {*folders, PACKAGE_ROOT / "demo"}
    found = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        if path in exempt or any(d in path.parents for d in exempt_dirs):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE_ROOT.parent)
        for line, value in _string_constants(tree):
            if value in names or any(value.startswith(p) for p in packages):
                found.append(f"{where}:{line}: {value!r}")
        for node in ast.walk(tree):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            imported = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
            for name in imported:
                if any(name == p or name.startswith(p + ".") for p in packages):
                    found.append(f"{where}:{node.lineno}: imports {name}")
    schema = json.loads((PACKAGE_ROOT.parent / "schemas" / "config.schema.json").read_text())

    def strings(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)
    found += [f"schemas/config.schema.json: {s!r}" for s in strings(schema) if s in names]
    assert found == []


# --- item 11: a learner the user writes ------------------------------------------------------------

USER_LEARNER = '''"""A user's own Evolve Agent for ahe: edits adapter/MEMORY.md and declares the change."""
import json
from pathlib import Path


def evolve(workspace, prompt, key):
    with open(Path(__file__).with_name("calls.log"), "a") as log:
        log.write(key + "\\n")
    with open(workspace / "adapter" / "MEMORY.md", "a") as memory:
        memory.write("- answer t1: 42\\n")
    step = int(key.rsplit("-", 1)[1])
    change = {"id": "remember-t1", "description": "remember t1's answer", "files": ["MEMORY.md"],
              "failure_pattern": "the agent does not know t1", "predicted_fixes": ["t1"], "risk_tasks": [],
              "component": "memory"}
    (workspace / "state" / "change_manifest.json").write_text(json.dumps({"iteration": step, "changes": [change]}))
    return "wrote one memory entry"
'''


def test_a_user_written_learner_is_called_for_its_role_and_its_edit_is_committed(repo, tmp_path):
    control = make_run(repo, {"t1": "42"}, k=1)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_learners.py").write_text(USER_LEARNER)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"]["scripted"]["evolve"] = "my_learners:evolve"      # the debugger stays the tests' own
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = env_for(control)
    env["PYTHONPATH"] = os.pathsep.join([str(mine), env["PYTHONPATH"]])
    proc = subprocess.run([*GIT_HERMIT, "step"], cwd=repo, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (mine / "calls.log").read_text().split() == ["step-1"]
    tip = f"hermit/{RUN}/step-0001"
    assert "remember-t1" in git(repo, "log", "--format=%B", f"hermit/{RUN}/step-0000..{tip}")
    assert git(repo, "show", f"{tip}:adapter/MEMORY.md").endswith("- answer t1: 42\n")


def test_each_evolvers_roles_are_the_ones_its_code_asks_for_and_the_docs_list_them():
    from git_hermit.evolvers.continual_harness.evolver import PASSES
    from git_hermit.evolvers.evo_harness.evolver import LEVELS
    roles = {s.name: s.roles for s in registry.specs()}
    assert roles["continual-harness"] == PASSES
    assert roles["evo-harness"] == ("reflect", *(f"{level}_curator" for level in LEVELS))
    ahe_code = (registry.get("ahe").folder / "evolver.py").read_text()
    assert [r for r in registry.get("ahe").roles if f'ctx.learner("{r}")' not in ahe_code] == []
    page = (PACKAGE_ROOT.parent / "docs" / "extending.md").read_text()
    section = page.split("## A learner", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for spec in registry.specs():
        listed = " ".join(row for row in rows if row.startswith(f"| `{spec.name}` |"))
        for role in spec.roles:
            assert f"`{role}`" in listed, (spec.name, role)
