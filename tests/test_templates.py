"""Templates: loading template.yaml, writing seed adapters, detecting layouts, path classes,
and the behaviour of the ahe seed's middleware and helper script."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import git
from git_hermit import resources
from git_hermit.adapter import templates
from git_hermit.adapter.check_spec import check_adapter
from git_hermit.adapter.templates import (
    detect_template, glob_match, is_fixed, is_learnable, list_templates, load_template, write_seed,
)
from git_hermit.errors import HermitError, InputError, SchemaError

ALL = list_templates()    # the installed templates: each evolver's (the tests run over them)
HOOK_FILES = ("hooks.json", "hook_runner.py", "hermit_hooks.py")


def hooks_installed() -> bool:
    return all((resources.hooks_dir() / "agent" / name).is_file() for name in HOOK_FILES)


needs_hooks = pytest.mark.skipif(not hooks_installed(), reason="hooks/agent/ runtime not written yet")


def test_every_evolver_has_its_template_and_every_template_an_evolver():
    from git_hermit.evolvers import registry
    assert sorted({spec.template for spec in registry.specs()}) == list_templates()
    assert {"ahe@1.0", "continual-harness@1.0", "evo-harness@1.0"} <= set(ALL)


@pytest.mark.parametrize("template_id", ALL)
def test_load_template_by_id_and_by_bare_name(template_id):
    template = load_template(template_id)
    assert template.id == template_id
    assert f"{template.name}@{template.version}" == template_id
    assert template.root == resources.templates_dir() / template.name
    assert load_template(template.name) == template
    assert template.context_file == "AGENTS.md"
    assert template.checks and template.learnable


def test_unknown_template_is_an_input_error_naming_the_choices():
    with pytest.raises(InputError) as info:
        load_template("gepa@2.0")
    assert info.value.message == "unknown template 'gepa@2.0'"
    assert info.value.hint == "choose one of ahe@1.0, continual-harness@1.0, evo-harness@1.0"


def test_ahe_template_is_seed_000s_table():
    t = load_template("ahe@1.0")
    assert set(t.learnable) == {"AGENTS.md", "ADAPTER.md", "scripts/*.py", "middleware.py",
                                ".agents/skills/*/SKILL.md", ".agents/skills/*/scripts/**",
                                "agents/*.md", "MEMORY.md"}
    assert t.context_export == "ADAPTER.md"
    assert t.fixed == {name: resources.hooks_dir() / "agent" / name for name in HOOK_FILES}
    assert set(t.settings["seed_rules"]) == {"non-interactive", "announce-destructive", "background"}
    # The fixed files are shipped once, in hooks/agent/, never duplicated in the template folder.
    assert not any((t.root / name).exists() for name in HOOK_FILES)


@pytest.mark.parametrize("template_id, path, learnable, fixed", [
    ("ahe@1.0", "AGENTS.md", True, False),
    ("ahe@1.0", "ADAPTER.md", True, False),
    ("ahe@1.0", "scripts/run_tests.py", True, False),
    ("ahe@1.0", "scripts/lib/helper.py", False, False),      # `*` stays in one segment
    ("ahe@1.0", "scripts/notes.txt", False, False),
    ("ahe@1.0", "./middleware.py", True, False),
    ("ahe@1.0", ".agents/skills/debug/SKILL.md", True, False),
    ("ahe@1.0", ".agents/skills/debug/scripts/a/b.sh", True, False),
    ("ahe@1.0", ".agents/skills/debug/notes.md", False, False),
    ("ahe@1.0", "agents/reviewer.md", True, False),
    ("ahe@1.0", "MEMORY.md", True, False),
    ("ahe@1.0", "hooks.json", False, True),
    ("ahe@1.0", "hook_runner.py", False, True),
    ("ahe@1.0", "hermit_hooks.py", False, True),
    ("ahe@1.0", "hook_hosts.py", False, True),
    ("ahe@1.0", "template.yaml", False, False),
    ("continual-harness@1.0", "sub_agents/planner/AGENT.md", True, False),
    ("continual-harness@1.0", "memory/NOTES.md", True, False),
    ("continual-harness@1.0", "middleware.py", False, False),
    ("evo-harness@1.0", "skills/verify/SKILL.md", True, False),
    ("evo-harness@1.0", "skills/verify/helpers/run.py", True, False),
    ("evo-harness@1.0", "AGENTS.md", False, False),            # config is read-only for the Curators
])
def test_learnable_and_fixed_paths(template_id, path, learnable, fixed):
    template = load_template(template_id)
    assert is_learnable(template, path) is learnable
    assert is_fixed(template, path) is fixed


@pytest.mark.parametrize("pattern, path, expected", [
    ("a/*.md", "a/x.md", True),
    ("a/*.md", "a/b/x.md", False),
    ("a/**", "a/b/c/d", True),
    ("a/**/*.py", "a/x.py", True),
    ("a/**/*.py", "a/b/c/x.py", True),
    ("a/**/*.py", "a/b/c/x.pyc", False),
    ("?.md", "ab.md", False),
    ("x.md", "y/x.md", False),
])
def test_glob_match(pattern, path, expected):
    assert glob_match(pattern, path) is expected


@needs_hooks
@pytest.mark.parametrize("template_id", ALL)
def test_write_seed_writes_a_seed_that_passes_check_spec(tmp_path, template_id):
    template = load_template(template_id)
    dest = tmp_path / "adapter"
    written = write_seed(template, dest)
    assert written == sorted(written)
    on_disk = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert written == on_disk
    assert set(template.required) <= set(written)
    for rel, source in template.fixed.items():
        assert (dest / rel).read_bytes() == source.read_bytes()
    assert check_adapter(dest, template) == []          # no errors and no warnings
    assert detect_template(dest) == template


@needs_hooks
def test_seed_survives_a_git_commit_with_modes(repo):
    template = load_template("ahe@1.0")
    written = write_seed(template, repo / "adapter")
    git(repo, "add", "adapter")
    git(repo, "commit", "-q", "-m", "seed")
    tracked = git(repo, "ls-files", "-s", "adapter").splitlines()
    assert sorted(line.split("\t")[1].removeprefix("adapter/") for line in tracked) == written
    modes = {line.split("\t")[1]: line.split()[0] for line in tracked}
    assert modes["adapter/scripts/run_tests.py"] == "100755"   # the helper stays executable
    assert modes["adapter/AGENTS.md"] == "100644"


@needs_hooks
def test_write_seed_is_idempotent(tmp_path):
    template = load_template("ahe@1.0")
    first = write_seed(template, tmp_path / "a")
    assert write_seed(template, tmp_path / "a") == first


def test_write_seed_refuses_to_overwrite_other_content_and_writes_nothing(tmp_path):
    template = load_template("continual-harness@1.0")
    dest = tmp_path / "adapter"
    (dest / "memory").mkdir(parents=True)
    (dest / "memory" / "NOTES.md").write_text("# my own notes\n")
    with pytest.raises(InputError) as info:
        write_seed(template, dest)
    assert "memory/NOTES.md already exists" in info.value.message
    assert (dest / "memory" / "NOTES.md").read_text() == "# my own notes\n"
    assert not (dest / "AGENTS.md").exists()


def test_write_seed_into_a_file_is_an_input_error(tmp_path):
    (tmp_path / "adapter").write_text("x")
    with pytest.raises(InputError):
        write_seed(load_template("evo-harness@1.0"), tmp_path / "adapter")


def test_write_seed_reports_a_missing_shipped_file(tmp_path):
    import dataclasses
    template = load_template("ahe@1.0")
    broken = dataclasses.replace(template, fixed={"hooks.json": tmp_path / "nowhere" / "hooks.json"})
    with pytest.raises(HermitError, match="missing from the installation"):
        write_seed(broken, tmp_path / "adapter")
    assert not (tmp_path / "adapter").exists()


def test_detect_template(tmp_path):
    assert detect_template(tmp_path) is None
    (tmp_path / "AGENTS.md").write_text("x")
    (tmp_path / "skills").mkdir()
    assert detect_template(tmp_path).id == "evo-harness@1.0"
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "NOTES.md").write_text("# Notes\n")
    # as many markers each: the template that claims more of the files wins (no marker file needed)
    assert detect_template(tmp_path).id == "continual-harness@1.0"
    (tmp_path / "skills" / "verify").mkdir()
    (tmp_path / "skills" / "verify" / "SKILL.md").write_text("x")
    assert detect_template(tmp_path) is None          # as many markers and files each: ambiguous
    (tmp_path / "middleware.py").write_text("")
    (tmp_path / "MEMORY.md").write_text("")
    assert detect_template(tmp_path).id == "ahe@1.0"  # three markers beat two


@pytest.mark.parametrize("text, message", [
    ("id: [unclosed", "not valid YAML"),
    ("- a list", "not a mapping"),
    ("id: x@1\nname: x\nversion: '1'\ncontext_file: A.md\nlearnable: []\n", "missing key 'checks'"),
    ("id: y@1\nname: x\nversion: '1'\ncontext_file: A.md\nlearnable: []\nchecks: []\n", "is not x@1"),
    ("id: x@1\nname: x\nversion: '1'\ncontext_file: A.md\nlearnable: [1]\nchecks: []\n", "not a list of strings"),
])
def test_a_damaged_template_yaml_is_a_schema_error(tmp_path, text, message):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "template.yaml").write_text(text)
    with pytest.raises(SchemaError, match=message):
        templates._load_all(tmp_path)


# --- the ahe seed's middleware, run as the hook runner runs it (its own process) -------------

MIDDLEWARE_PROBE = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import middleware
    from hermit_hooks import HookInput
    calls = json.loads(sys.argv[2])
    out = []
    for name, fields in calls:
        result = getattr(middleware, name)(HookInput(event=name, **fields))
        out.append(None if result is None else result.to_dict())
    print(json.dumps(out))
""")


def run_middleware(adapter: Path, calls: list) -> list:
    proc = subprocess.run([sys.executable, "-S", "-c", MIDDLEWARE_PROBE, str(adapter), json.dumps(calls)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


@needs_hooks
def test_seed_middleware_hands_memory_and_scripts_over_at_session_start(tmp_path):
    adapter = tmp_path / "adapter"
    write_seed(load_template("ahe@1.0"), adapter)
    header = (adapter / "MEMORY.md").read_text().splitlines()[0]
    (adapter / "MEMORY.md").write_text(f"{header}\n\n- Use uv run for this repo.\n- Tests need\n  a database.\n")
    [result] = run_middleware(adapter, [["session_start", {"source": "startup"}]])
    assert "- Use uv run for this repo.\n- Tests need a database." in result["context"]
    assert f"python {adapter / 'scripts' / 'run_tests.py'}: Find the project's test command" in result["context"]

    (adapter / "MEMORY.md").write_text(header + "\n")
    (adapter / "scripts" / "run_tests.py").unlink()
    assert run_middleware(adapter, [["session_start", {}]]) == [None]   # an empty memory is valid


@needs_hooks
@pytest.mark.parametrize("command, denied", [
    ("rm -rf /", True), ("sudo rm -r -f /*", True), ("cd x && rm -fr ~", True), ("rm -R $HOME/", True),
    ("rm -rf build", False), ("rm -rf ~/project/tmp", False), ("rm --force /etc/x", False), ("ls /", False),
])
def test_seed_middleware_denies_wiping_root_or_home(tmp_path, command, denied):
    adapter = tmp_path / "adapter"
    write_seed(load_template("ahe@1.0"), adapter)
    [result] = run_middleware(adapter, [["before_tool", {"tool_kind": "shell", "tool_name": "Bash",
                                                         "tool_input": {"command": command}}]])
    assert (result is not None and result["deny"] is True and "Refused" in result["reason"]) is denied


@needs_hooks
def test_seed_middleware_after_tool_stop_before_model(tmp_path):
    adapter = tmp_path / "adapter"
    write_seed(load_template("ahe@1.0"), adapter)
    failed, code_only, ok, patch, stop, model = run_middleware(adapter, [
        ["after_tool", {"tool_kind": "shell", "failed": True, "exit_code": 2}],
        ["after_tool", {"tool_kind": "shell", "exit_code": 1}],
        ["after_tool", {"tool_kind": "shell", "failed": False, "exit_code": 0}],
        ["after_tool", {"tool_kind": "patch", "failed": True}],
        ["stop", {}],
        ["before_model", {}],
    ])
    assert failed["context"].startswith("The last command failed (exit code 2).")
    assert code_only["context"].startswith("The last command failed (exit code 1).")
    assert ok is None and patch is None and stop is None and model is None


# --- the seed's helper script ------------------------------------------------------------

def run_script(project: Path, *args: str) -> subprocess.CompletedProcess:
    script = load_template("ahe@1.0").seed_source("scripts/run_tests.py")
    # The inner pytest needs none of the installed plugins; loading them is most of its run time.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, str(script), "--dir", str(project), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_run_tests_script_runs_the_projects_tests(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    passed = run_script(tmp_path)
    assert passed.returncode == 0 and "1 passed" in passed.stdout and "exit code 0" in passed.stdout
    (tmp_path / "tests" / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2\n")
    failed = run_script(tmp_path, "--lines", "5")
    assert failed.returncode == 1 and "earlier lines cut" in failed.stdout


def test_run_tests_script_without_a_test_setup(tmp_path):
    result = run_script(tmp_path)
    assert result.returncode == 2 and "no test setup recognised" in result.stdout


def test_seed_scripts_are_executable():
    for template_id in ("ahe@1.0", "continual-harness@1.0"):
        root = load_template(template_id).root
        for script in root.glob("**/scripts/*.py"):
            assert os.stat(script).st_mode & stat.S_IXUSR, script


def test_the_run_tests_script_is_shipped_once_and_seeded_into_both_templates(tmp_path):
    """issue 26 item 4: one templates/shared/run_tests.py, not a copy in each template."""
    shared = resources.templates_dir() / "shared" / "run_tests.py"
    assert shared.is_file()
    copies = [p for p in resources.templates_dir().rglob("run_tests.py") if p != shared]
    assert copies == []
    for template_id, rel in (("ahe@1.0", "scripts/run_tests.py"),
                             ("continual-harness@1.0", ".agents/skills/run-tests/scripts/run_tests.py")):
        template = load_template(template_id)
        assert rel in template.seed_files() and is_learnable(template, rel)
        written = write_seed(template, tmp_path / template.name)
        assert rel in written and (tmp_path / template.name / rel).read_bytes() == shared.read_bytes()
