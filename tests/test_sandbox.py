"""hermit.yaml's ``sandbox:`` (seed 000): acting agents and learner sessions run in bubblewrap.

The real Codex CLI runs as a learner session inside the sandbox against the scripted model
server (reached through the sandbox's network bridge): the session works, a file planted in
the user's home cannot be read, and a loopback port that is not allowed cannot be reached.
A `command` agent's rollout shows the same walls through `git hermit rollout`, and `step`
refuses while the sandbox is enabled where bubblewrap cannot run. Skipped, with the reason,
when bwrap or Codex is missing.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.learners import make_learner
from git_hermit.model.config_blocks import SandboxConfig
from git_hermit.supervise import sandbox
from support.step_support import make_run
from support.evolve_codex_helpers import require_codex

SEED_000 = {"enabled": True, "network": "restricted", "allow": ["chatgpt.com", "auth.openai.com"]}


def require_bwrap() -> None:
    ok, detail = sandbox.probe()
    if not ok:
        pytest.skip(f"the sandbox cannot run here: {detail}")




@pytest.fixture
def planted():
    """A file in the real user's home (not $HOME, which tests may replace) holding a marker."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    path = home / f".hermit-sandbox-test-{uuid.uuid4().hex[:8]}"
    marker = "PLANTED-" + uuid.uuid4().hex
    path.write_text(marker + "\n")
    yield path, marker
    path.unlink(missing_ok=True)


@pytest.fixture
def closed_port():
    """A loopback port that listens on the host (so it is reachable outside the sandbox)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    yield server.getsockname()[1]
    server.close()


def _probe_script(planted: Path, port: int) -> str:
    return (f"cat {planted} > home.txt 2>&1; echo rc=$? >> home.txt; "
            f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' > net.txt 2>&1; echo rc=$? >> net.txt; "
            f"ls / > root.txt; ls -a {Path(pwd.getpwuid(os.getuid()).pw_dir)} > home-list.txt 2>&1")


@pytest.mark.hosts
def test_codex_learner_session_works_inside_the_sandbox_and_meets_its_walls(tmp_path, monkeypatch,
                                                                            planted, closed_port):
    require_bwrap()
    require_codex()
    planted_path, marker = planted
    monkeypatch.setenv("SCRIPTED_API_KEY", "test-key")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("edit me\n")
    script = [Turn.shell(_probe_script(planted_path, closed_port)),
              Turn.shell("echo edited >> notes.md"), Turn.say("sandboxed and done")]
    with ScriptedModelServer(script) as server:
        provider = {"base_url": f"{server.base_url}/v1", "env_key": "SCRIPTED_API_KEY"}
        learner = make_learner({"base": "codex", "model": {"name": "scripted-model", "provider": provider}},
                               "evolve")
        learner.sandbox = sandbox.spec_from_config(SandboxConfig.from_block(SEED_000), backend="codex", provider=provider)
        answer = learner.ask(workspace, "Probe the sandbox.", timeout_s=120, key="step-1")
        requests = server.model_requests()
    assert answer.ok, answer.error
    assert answer.text == "sandboxed and done" and len(requests) == 3     # the model was reached
    assert (workspace / "notes.md").read_text() == "edit me\nedited\n"     # the workspace is writable
    home = (workspace / "home.txt").read_text()
    assert marker not in home and "rc=0" not in home                      # the user's home is not there
    net = (workspace / "net.txt").read_text()
    assert "rc=0" not in net and "refused" in net.lower()                 # another loopback port is not
    assert planted_path.name not in (workspace / "home-list.txt").read_text()


@pytest.mark.hosts
def test_without_the_sandbox_the_same_probes_succeed(tmp_path, monkeypatch, planted, closed_port):
    """The control: the probes are able to fail, so the walls above are the sandbox's."""
    require_codex()
    planted_path, marker = planted
    monkeypatch.setenv("SCRIPTED_API_KEY", "test-key")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [Turn.shell(_probe_script(planted_path, closed_port)), Turn.say("done")]
    with ScriptedModelServer(script) as server:
        provider = {"base_url": f"{server.base_url}/v1", "env_key": "SCRIPTED_API_KEY"}
        learner = make_learner({"base": "codex", "model": {"name": "scripted-model", "provider": provider}},
                               "evolve")
        answer = learner.ask(workspace, "Probe.", timeout_s=120, key="step-1")
    assert answer.ok, answer.error
    assert marker in (workspace / "home.txt").read_text()
    assert "rc=0" in (workspace / "net.txt").read_text()


# A `command` agent that probes its walls and prints what it found (its stdout is the trajectory).
PROBE_AGENT = """#!{python}
import json, os, socket, sys
found = {{}}
def attempt(name, fn):
    try:
        fn()
        found[name] = "ok"
    except OSError as exc:
        found[name] = type(exc).__name__
attempt("home", lambda: open({planted!r}).read())
attempt("repo", lambda: os.listdir({repo!r}))
attempt("git", lambda: os.listdir({git!r}))
attempt("usr", lambda: open("/usr/hermit-probe", "w"))
attempt("port", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5))
attempt("workspace", lambda: open("probe.txt", "w").write("x"))
attempt("home_dir", lambda: open(os.path.join(os.environ["HOME"], "probe"), "w").write("x"))
print(json.dumps(found))
print("4")
"""


def _probe_run(repo: Path, planted: Path, port: int, block: dict | None) -> None:
    control = make_run(repo, {"t1": "4"}, k=1)
    agent = control / "probe_agent.py"
    agent.write_text(PROBE_AGENT.format(python=sys.executable, planted=str(planted), repo=str(repo),
                                        git=str(repo / ".git"), port=port))
    agent.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"]["command"] = [str(agent), "{prompt_file}", "{workspace}"]
    if block is not None:
        config["sandbox"] = block
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _probes(repo: Path) -> dict:
    [trajectory] = list((repo / ".hermit").rglob("trajectory.txt"))
    return json.loads(trajectory.read_text().splitlines()[0])


@pytest.mark.parametrize("network", ["restricted", "none"])
def test_a_command_agent_rollout_runs_inside_the_sandbox(repo, planted, closed_port, network):
    require_bwrap()
    _probe_run(repo, planted[0], closed_port, {**SEED_000, "network": network})
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["scores"]["tasks"]["t1"]["outcome"] == "pass"
    assert _probes(repo) == {"home": "FileNotFoundError", "repo": "FileNotFoundError",
                             "git": "FileNotFoundError", "usr": "OSError", "port": "ConnectionRefusedError",
                             "workspace": "ok", "home_dir": "ok"}


def test_without_a_sandbox_block_the_agent_reaches_everything(repo, planted, closed_port):
    _probe_run(repo, planted[0], closed_port, None)
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    probes = _probes(repo)
    assert probes["home"] == probes["repo"] == probes["git"] == probes["port"] == "ok"


def test_step_refuses_while_enabled_where_bwrap_cannot_run(repo, planted, closed_port, tmp_path):
    _probe_run(repo, planted[0], closed_port, SEED_000)
    refs = sorted(p.name for p in (repo / ".git" / "refs").rglob("*"))
    r = hermit(repo, "step", env={"GIT_HERMIT_BWRAP": str(tmp_path / "no-bwrap")})
    assert r.code == 5, r.out + r.err
    lines = [l for l in r.err.strip().splitlines() if not l.startswith("warning: ")]   # hand-edit warnings
    # the preflight names it with whatever else is missing (here the tests' scripted learners)
    assert lines[0].startswith("error: ") and "sandbox.enabled is true but the sandbox cannot run here" in lines[0]
    assert lines[1].startswith("hint:") and "enabled: false" in lines[1]
    assert "Traceback" not in r.err
    assert not list((repo / ".hermit").rglob("trajectory.txt"))          # no agent ran
    assert sorted(p.name for p in (repo / ".git" / "refs").rglob("*")) == refs
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["sandbox"]["enabled"] = False                                   # the explicit way out
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = hermit(repo, "rollout", env={"GIT_HERMIT_BWRAP": str(tmp_path / "no-bwrap")})
    assert r.code == 0, r.err


def test_doctor_says_whether_the_sandbox_works(repo, tmp_path):
    r = hermit(repo, "doctor", "--json")
    report = json.loads(r.out)
    assert report["sandbox_ok"] == sandbox.probe()[0] and report["sandbox"]
    r = hermit(repo, "doctor", env={"GIT_HERMIT_BWRAP": str(tmp_path / "no-bwrap")})
    assert "!! sandbox: " in r.out and "no-bwrap" in r.out


FAKE_CODEX = """#!{python}
import json, os, shutil
found = sorted(os.listdir("."))
config = open(os.path.join(os.environ["CODEX_HOME"], "config.toml")).read()
open("seen.json", "w").write(json.dumps({{"files": found, "config": config}}))
print(json.dumps({{"type": "item.completed", "item": {{"id": "i", "type": "agent_message", "text": "ok"}}}}))
"""


def test_learner_sessions_apply_web_search_false_and_hide(tmp_path, repo):
    """seed 000's learner params: hosted web search off in the session's config, ``hide`` paths
    absent from its workspace and kept as they were after it (a fake codex `bin` reports both)."""
    fake = tmp_path / "codex"
    fake.write_text(FAKE_CODEX.format(python=sys.executable))
    fake.chmod(0o755)
    workspace = tmp_path / "ws"
    (workspace / "hidden-dir").mkdir(parents=True)
    (workspace / "hidden-dir" / "answers.txt").write_text("the answers\n")
    (workspace / "tests.py").write_text("assert True\n")
    (workspace / "adapter.md").write_text("visible\n")
    from git_hermit.learners import SessionLearner
    learner = SessionLearner("evolve", "codex", {"model": "m", "bin": str(fake), "args": [], "web_search": False},
                             hide=("hidden-dir", "*.py"))
    answer = learner.ask(workspace, "look around", timeout_s=60, key="step-1")
    assert answer.ok, answer.error
    seen = json.loads((workspace / "seen.json").read_text())
    assert seen["files"] == ["adapter.md"]
    assert 'web_search = "disabled"' in seen["config"]
    assert (workspace / "hidden-dir" / "answers.txt").read_text() == "the answers\n"
    assert (workspace / "tests.py").read_text() == "assert True\n"


@pytest.mark.hosts
def test_step_with_seed_000_sandbox_runs_codex_learners_inside_it(repo):
    """`git hermit step` with seed 000's block: the rollout and the Evolve Agent's real Codex
    session run sandboxed, its check_spec tool works there, and the step commits its edit."""
    require_bwrap()
    require_codex()
    from support.evolve_codex_helpers import EVOLVE, SKILL, _codex_evolver
    from support.step_support import RUN, env_for
    from conftest import git
    control = make_run(repo, {"t1": "4"}, k=1)
    agent = control / "answer.py"
    agent.write_text(f"#!{sys.executable}\nprint('I do not know')\n")   # fails: the learners run
    agent.chmod(0o755)
    calls = repo.parent / "bwrap-calls.txt"                # which processes went through bwrap
    spy = repo.parent / "bwrap-spy"
    spy.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {sandbox.bwrap_path()} "$@"\n')
    spy.chmod(0o755)
    with ScriptedModelServer(EVOLVE) as server:
        _codex_evolver(repo, server)
        config = yaml.safe_load((repo / "hermit.yaml").read_text())
        config["agent"]["command"] = [str(agent)]
        config["sandbox"] = SEED_000
        (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        r = hermit(repo, "step", env={**env_for(control), "SCRIPTED_API_KEY": "test-key",
                                      "GIT_HERMIT_BWRAP": str(spy)}, timeout=300)
    assert r.code == 0, r.out + r.err
    wrapped = calls.read_text().splitlines()
    assert any(line.endswith(f"-- {agent}") for line in wrapped)                  # the rollout
    assert any(" exec --json " in line and "--unshare-all" in line for line in wrapped)   # the Evolve Agent
    evolve = repo / ".hermit" / "runs" / RUN / "step-0001" / "evolve"
    assert (evolve / "workspace" / "check.txt").read_text().strip().endswith("rc=0")
    tip = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0001").strip()
    assert git(repo, "show", f"{tip}:{SKILL}").endswith("read MEMORY.md for answers you learned earlier.\n")
