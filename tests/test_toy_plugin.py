"""One place per plugin (issue 26, item 1): a small package (tests/fixtures/toy_plugin/) adds a
host and an evolver through entry points. Installed into a fresh venv (no network, no file of
git-hermit touched), `init`, `check`, `step`, `deploy`, `doctor`, the man page and completion
`trace` (the toy's trajectory reader) and `convert` (its plugin layout) all see them; the venv
this test runs in does not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import git
from support.project import build_project, read_config
from support.step_support import AGENT_SCRIPT

from git_hermit.evolvers import registry as evolvers
from git_hermit.hosts import registry as hosts

TOY = Path(__file__).parent / "fixtures" / "toy_plugin"
PACKAGE = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv that sees this checkout's git-hermit (and its dependencies) through a .pth
    file, with the toy package pip-installed into it from its folder, offline."""
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel", reason="building the toy package needs wheel (the dev extra has it)")
    root = tmp_path_factory.mktemp("toy-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "git_hermit_dev.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    build = tmp_path_factory.mktemp("toy-build")
    source = build / "toy_plugin"   # a copy: building writes build/ and *.egg-info beside the sources
    shutil.copytree(TOY, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
                           "--no-deps", "--no-cache-dir", str(source)], capture_output=True, text=True,
                          cwd=build, env={**os.environ, "PIP_NO_INPUT": "1", "TMPDIR": str(build)})
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def run(venv: Path, cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv), "-m", "git_hermit", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


PROBE = """
import importlib.metadata as m, json, sys
from git_hermit import plugins
groups = sys.argv[1:]
print(json.dumps({g: [sorted(map(list, plugins.entry_points(g))),
                      sorted([e.name, e.value] for e in m.entry_points(group=g))] for g in groups}))
"""


@pytest.mark.parametrize("where", ["here", "toy venv"])
def test_the_entry_point_scan_answers_as_importlib_metadata(where, request):
    """plugins.entry_points reads entry_points.txt itself (importing importlib.metadata costs every
    command more than the scan): it must find what importlib.metadata finds."""
    python = sys.executable if where == "here" else str(request.getfixturevalue("venv"))
    done = subprocess.run([python, "-c", PROBE, "console_scripts", "pytest11", "git_hermit.hosts",
                           "git_hermit.evolvers"], capture_output=True, text=True, check=True)
    for group, (ours, theirs) in json.loads(done.stdout).items():
        assert ours == theirs, group
    if where == "toy venv":
        assert ["toy-host", "toy_plugin.host:HOST"] in json.loads(done.stdout)["git_hermit.hosts"][0]


def test_the_toy_is_not_seen_where_it_is_not_installed():
    assert "toy-host" not in hosts.names() and "toy-evolver" not in evolvers.names()
    assert not (PACKAGE / "templates" / "toy").exists()


def test_an_installed_package_adds_a_host_and_an_evolver_everywhere(venv, tmp_path):
    def touched() -> tuple[str, str]:
        return (git(PACKAGE, "status", "--porcelain", "--", "git_hermit", "hooks", "templates", "schemas", "man"),
                git(PACKAGE, "status", "--porcelain", "--ignored", "--", "tests/fixtures/toy_plugin"))
    before = touched()
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    # init: the toy evolver's template (shipped inside its folder) seeds the run
    r = run(venv, repo, "init", "--template", "toy", "--run", "r")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "toy@1.0" in r.stdout
    assert read_config(repo)["evolver"]["name"] == "toy-evolver"
    agent = tmp_path / "agent.py"
    build_project(repo, initialised=True,     # the installed executable's init, above
                  tasks=[{"id": "t1", "prompt": "What is it?", "answer": "4"}], rows={"train": ["t1#1"]},
                  scripts={agent: AGENT_SCRIPT.format(python=sys.executable, control=str(tmp_path))},
                  config={"host": "toy-host",
                          "agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{prompt_file}", "{workspace}", "{task_id}", "{attempt}"]},
                          "evolver": {"name": "toy-evolver", "base": "scripted", "params": {"line": "hi"}},
                          "trainer": {"epochs": 1, "allow_early_stop": False, "concurrency": 1}})

    # check: the toy template's rules, the toy host's synthetic session among the hosts'
    r = run(venv, repo, "check", "--no-preflight", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    found = json.loads(r.stdout)
    assert found["ok"] and found["template"] == "toy@1.0", found
    assert found["runtime"]["version"] == found["runtime"]["current"]

    # step: the toy evolver's scribe commits, rollouts deployed for the toy host
    r = run(venv, repo, "step")
    assert r.returncode == 0, r.stdout + r.stderr
    tip = git(repo, "rev-parse", "hermit/r/step-0001").strip()
    assert "- step-1: hi" in git(repo, "show", f"{tip}:adapter/MEMORY.md")

    # deploy: the toy host's layout and its wire; its hook answers in the toy's format
    dest = tmp_path / "deployed"
    r = run(venv, repo, "deploy", str(dest), "--host", "toy-host")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (dest / "TOY.md").is_file() and (dest / ".toy" / "hooks.json").is_file()
    wire = (dest / ".hermit-adapter" / "hook_wire.py").read_text()
    assert "class ToyWire" in wire and "WIRE = ToyWire()" in wire
    record = json.loads((dest / ".hermit-deploy.json").read_text())
    command = record["hook_command"].replace("EVENT", "SessionStart")
    done = subprocess.run(command, shell=True, cwd=dest, input=json.dumps({"session_id": "s", "cwd": str(dest)}),
                          capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == {"context": (dest / ".hermit-adapter" / "MEMORY.md").read_text()}, done

    # trace: the toy host's own reader reads a toy session (its format sniffed, its steps counted)
    session = tmp_path / "toy-session.jsonl"
    session.write_text("".join(json.dumps(line) + "\n" for line in (
        {"toy": "run", "cmd": "ls", "out": "a.txt", "exit": 0},
        {"toy": "run", "cmd": "false", "out": "", "exit": 1},
        {"toy": "say", "text": "4"})))
    r = run(venv, repo, "trace", str(session), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    traced = json.loads(r.stdout)
    assert (traced["format"], traced["steps"], traced["tool_calls"], traced["failed_tool_calls"],
            traced["final_answer"]) == ("toy", 3, 2, 1, "4"), traced
    r = run(venv, repo, "trace", str(session), "--format", "toy", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["format"] == "toy", r.stdout + r.stderr

    # convert: the toy host's own plugin layout
    plugin = tmp_path / "toy-plugin"
    r = run(venv, repo, "convert", "hermit/r/step-0001", "--target", "toy-host", "-o", str(plugin))
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((plugin / "toy-plugin.json").read_text())
    assert manifest["adapter"] == "adapter" and "MEMORY.md" in manifest["files"], manifest
    assert "- step-1: hi" in (plugin / "adapter" / "MEMORY.md").read_text()

    # doctor, the man page, completion
    r = run(venv, repo, "doctor", "--json")
    report = json.loads(r.stdout)
    assert "toy-host" in [h["host"] for h in report["hosts"]], report
    assert any("'broken-host'" in p and "skipped" in p for p in report["problems"]), report
    r = run(venv, repo, "help", "--man")
    hosts_section = r.stdout.split(".SH HOSTS", 1)[1].split(".SH EXIT STATUS", 1)[0]
    assert "toy\\-host" in hosts_section and "toy\\-evolver" in hosts_section.split(".SH EVOLVERS")[1]
    r = run(venv, repo, env={"_GIT_HERMIT_COMPLETE": "bash_complete", "COMP_WORDS": "git-hermit deploy --host t",
                             "COMP_CWORD": "3"})
    assert "toy-host" in r.stdout, r.stdout + r.stderr
    r = run(venv, repo, env={"_GIT_HERMIT_COMPLETE": "bash_complete", "COMP_WORDS": "git-hermit init --template t",
                             "COMP_CWORD": "3"})
    assert "toy@1.0" in r.stdout, r.stdout + r.stderr
    # ... and no file of git-hermit was touched
    assert touched() == before
