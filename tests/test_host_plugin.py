"""Hosts are plugins: a toy host defined here, registered through the registry's public
function, deploys an adapter, runs a rollout and passes config validation with no other
change to git_hermit; and no module outside the host modules names a host."""

from __future__ import annotations

import ast
import json
import os
import re
import stat
from pathlib import Path
from typing import Mapping

import pytest

import git_hermit
from git_hermit.adapter.deploy import deploy
from git_hermit.adapter.hostcheck import check_hosts
from git_hermit.config import parse_config
from git_hermit.hostkit.sessions import session_command
from git_hermit.hosts import registry
from git_hermit.hosts.base import ContextLimit, Host, Layout, Login, SessionSpec, SubAgent
from git_hermit.agents import AgentContext, backends, make_agent
from git_hermit.trajectories import summarize

PACKAGE = Path(git_hermit.__file__).parent

# A CLI printing a `codex exec --json`-shaped stream: its answer names the prompt and the
# variable the toy host's session sets, so the test sees the session's argv and env arrive.
TOY_CLI = """#!/bin/sh
prompt="$2"
printf '%s\\n' '{"type":"thread.started","thread_id":"toy-1"}' '{"type":"turn.started"}'
printf '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"TOY %s %s"}}\\n' "$prompt" "$TOY_MODEL"
printf '%s\\n' '{"type":"turn.completed","usage":{"input_tokens":7,"cached_input_tokens":0,"output_tokens":3}}'
"""


class ToyHost(Host):
    """A host nobody ships: its own context file, skills dir and sub-agent files, no hooks."""

    name = "toy"
    binary = "toy-cli"
    package = "toy-cli@1.0.0"
    family = "toy"
    trajectory_formats = ("codex-exec",)        # it writes a stream an existing reader reads
    default_endpoint = "https://toy.invalid"
    layout = Layout(context_file="TOY.md", skills_dir=".toy/skills", native_sub_agents=True)
    login = Login(".toy", ("token.json",))
    context_limit = ContextLimit(64, "bytes", "warning", "the toy reads 64")
    cli: Path | None = None

    def find(self) -> Path | None:
        return self.cli

    def config_dir(self, home: Path) -> Path:
        return home / ".toy"

    def session(self, binary, spec: SessionSpec, prompt: str, home: Path,
                base_env: Mapping[str, str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        self.config_dir(home).mkdir(parents=True, exist_ok=True)
        (self.config_dir(home) / "config.json").write_text(json.dumps({"base_url": spec.base_url}))
        return [str(binary), "--prompt", prompt, *spec.args], dict(base_env) | {"TOY_MODEL": spec.model or "none"}

    def sub_agent_file(self, agent: SubAgent) -> tuple[str, bytes] | None:
        return f".toy/agents/{agent.name}.txt", f"{agent.name}: {agent.description}\n".encode()


@pytest.fixture
def toy(tmp_path):
    cli = tmp_path / "bin" / "toy-cli"
    cli.parent.mkdir()
    cli.write_text(TOY_CLI)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    host = ToyHost()
    host.cli = cli
    registry.register(host)
    yield host
    registry.unregister("toy")
    assert not registry.known("toy")


def _adapter(root: Path) -> Path:
    adapter = root / "adapter"
    for rel, text in {"AGENTS.md": "# Rules\n", ".agents/skills/fix/SKILL.md": "---\nname: fix\n---\nbody\n",
                      "agents/reviewer.md": "---\nname: reviewer\ndescription: reviews\n---\nreview\n",
                      "middleware.py": "def session_start(inp):\n    return None\n"}.items():
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).write_text(text)
    return adapter


def test_a_toy_host_deploys_where_its_module_says(toy, tmp_path):
    record = deploy(_adapter(tmp_path), tmp_path / "ws", "toy")
    ws = tmp_path / "ws"
    assert record.host == "toy" and record.context_file == "TOY.md"
    assert (ws / "TOY.md").read_text().startswith("# Rules\n")
    assert (ws / ".toy/skills/fix/SKILL.md").is_file()
    assert (ws / ".toy/agents/reviewer.txt").read_text() == "reviewer: reviews\n"
    # no hooks on this host: no hooks file, and the context file says to run session start by hand
    assert not record.hooks and record.hooks_config is None
    assert "hook_runner.py" in (ws / "TOY.md").read_text()
    assert not (ws / "AGENTS.md").exists() and not (ws / ".codex").exists()


def test_a_toy_host_runs_a_rollout(toy, tmp_path):
    assert "toy" in backends()
    agent = make_agent({"backend": "toy", "model": "toy-model", "provider": {"base_url": "http://127.0.0.1:9"}})
    agent.check_available()
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    ctx = AgentContext(rollout_dir=tmp_path, workspace=tmp_path / "ws", home=tmp_path / "home",
                       prompt="fix-it", timeout_s=30, attempt=1, task_id="t", host="toy")
    run = agent.run(ctx)
    assert run.error is None and run.returncode == 0
    assert run.final_answer == "TOY fix-it toy-model"
    assert run.usage.input_tokens == 7
    assert json.loads((tmp_path / "home/.toy/config.json").read_text()) == {"base_url": "http://127.0.0.1:9"}
    assert summarize(ctx.trajectory_path).final_answer == run.final_answer
    # the harness's one-session runner uses the same definition
    argv, env = session_command("toy", toy.cli, tmp_path / "ws", "http://127.0.0.1:9", "fix-it",
                                home=tmp_path / "h2", model="toy-model")
    assert argv == [str(toy.cli), "--prompt", "fix-it"] and env["TOY_MODEL"] == "toy-model"


def test_hostcheck_holds_the_toy_host_to_its_own_rows(toy, tmp_path):
    adapter = _adapter(tmp_path)
    (adapter / "MEMORY.md").write_text("# Memory\n\n- toy lesson\n")
    found = [v for v in check_hosts(adapter) if v.message.startswith("toy")]
    # its context limit (a warning past 64 bytes); no hooks, so the hand-run session start is
    # run from TOY.md, and the seed middleware hands no memory: that is reported too
    assert {v.rule for v in found} == {"host-context-size", "host-memory-handover"}
    assert any("the deployed TOY.md is" in v.message and "the toy reads 64" in v.message for v in found)


def test_config_accepts_a_registered_host_and_refuses_an_unknown_one(toy):
    text = "run: r\ntemplate: ahe@1.0\nadapter: adapter\nhost: toy\nagent:\n  backend: toy\n"
    config = parse_config(text)
    assert config.host == "toy" and config.agent.backend == "toy"
    registry.unregister("toy")
    with pytest.raises(git_hermit.errors.ConfigError) as err:
        parse_config(text)
    message = err.value.message     # every problem named, not the first "(and 1 more)"
    assert "2 problems: (1) at $.agent.backend: 'toy' is not one of" in message and "(2) at $.host" in message
    registry.register(toy)


@pytest.mark.parametrize("host", [h.name for h in registry.hosts()])
def test_rollouts_and_the_session_harness_run_the_same_command(host, tmp_path, monkeypatch):
    """One definition of a host's session: the argv a rollout runs is the argv conformance approves."""
    impl = registry.get(host)
    monkeypatch.setenv("SCRIPTED_API_KEY", "dummy")
    base = "http://127.0.0.1:9"
    agent = make_agent({"backend": host, "model": "m", "bin": "sh",
                        "provider": {"base_url": base + impl.api_path, "env_key": "SCRIPTED_API_KEY"}})
    agent.check_available()
    agent.binary = "/opt/cli"
    (tmp_path / "home").mkdir()
    ctx = AgentContext(rollout_dir=tmp_path, workspace=tmp_path, home=tmp_path / "home", prompt="P",
                       timeout_s=5, attempt=1, task_id="t", host=host)
    rollout_argv, rollout_env = agent._command(ctx)
    harness_argv, harness_env = session_command(host, "/opt/cli", tmp_path, base, "P", home=tmp_path / "h2", model="m")
    assert rollout_argv == harness_argv
    private = {k for k in harness_env if k not in os.environ and not k.startswith("XDG_")} - {"HOME"}
    assert private and private <= set(rollout_env)


# -- no host names outside the host packages ------------------------------------------------

# Everything under hosts/ (each host's package, and the table that lists them) may name a host;
# outside it only the generated completion table does (built from the CLI's choices, which come
# from the registry).
ALLOWED = {"_completion_table.py"}


def _allowed(rel: str) -> bool:
    return rel.startswith("hosts/") or rel in ALLOWED


def _host_literals(path: Path, names: set[str]) -> list[int]:
    """Lines of string constants equal to a host name (docstrings and comments do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names)


def test_no_module_outside_the_host_modules_names_a_host():
    names = {n for h in registry.hosts() for n in (h.name, *h.aliases)}
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not _allowed(rel) and (lines := _host_literals(path, names)):
            offenders[rel] = lines
    assert offenders == {}


def test_no_module_outside_the_host_modules_names_a_hosts_trajectory_format():
    """A host's session formats are its own (trace found Claude's sub-agents and Codex's parents by
    naming "claude-session" and "codex-rollout"; it asks Host.sub_sessions / parent_file now)."""
    formats = {fmt for h in registry.hosts() for fmt in h.trajectory_formats}
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not _allowed(rel) and (lines := _host_literals(path, formats)):
            offenders[rel] = lines
    assert offenders == {}


def test_the_grep_of_the_brief_finds_only_the_host_modules():
    pattern = re.compile(r"\"(pi|codex|claude-code)\"|'(pi|codex|claude-code)'")
    found = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
             if pattern.search(path.read_text(encoding="utf-8"))}
    assert {rel for rel in found if not _allowed(rel)} == set()


def _builtin_packages() -> set[str]:
    """The built-in hosts' packages, as the registry names them (git_hermit.hosts.codex, …)."""
    return {value.partition(":")[0] for value in registry.BUILTIN}


def test_each_built_in_host_is_one_package_under_hosts():
    """A host's parts (Host, trajectory reader, plugin layout) live in its package, nowhere else:
    no module outside hosts/ is named after a built-in host or imports one's package."""
    packages = _builtin_packages()
    stems = {name.rsplit(".", 1)[1] for name in packages} | {h.family for h in registry.hosts()}
    for package in packages:
        folder = PACKAGE.parent / package.replace(".", "/")
        assert {"__init__.py", "trajectory.py", "layout.py"} <= {p.name for p in folder.glob("*.py")}, package
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if _allowed(rel):
            continue
        if path.stem in stems or path.parent.name in stems:
            offenders.append(f"{rel}: named after a host")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = []
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            hit = [m for m in imported if any(m == p or m.startswith(p + ".") for p in packages)]
            if hit:
                offenders.append(f"{rel}:{node.lineno} imports {hit[0]}")
    assert offenders == []


def test_a_host_reaches_its_reader_and_layout_through_the_host():
    """The generic reader and convert ask the Host; every built-in host brings both."""
    from git_hermit.adapter.plugins import formats
    for host in registry.hosts():
        assert formats()[host.name] is host.plugin_format() and host.plugin_format().target == host.name
    fixtures = Path(__file__).parent / "fixtures" / "trajectories"
    for path in sorted(fixtures.rglob("*.jsonl"))[:40]:
        from git_hermit.trajectories import detect_format
        try:
            fmt = detect_format(path)
        except Exception:
            continue
        host = registry.host_for_format(fmt)
        assert fmt == "atif" or (host is not None and fmt in host.trajectory_formats)


def test_the_host_layer_imports_nothing_above_it():
    """The host protocol and table (hosts/*.py) sit below rollouts, adapter and learners: they
    import only hosts/, errors, model, redact and plugins (the entry points that add a host). A
    host's package (hosts/<host>/) sits above adapter and trajectories (pyproject's layers)."""
    allowed = ("git_hermit.hosts", "git_hermit.errors", "git_hermit.model", "git_hermit.redact", "git_hermit.plugins")
    for path in sorted((PACKAGE / "hosts").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # what only type checkers read (under `if TYPE_CHECKING:`) is no import at run time
        typing_only = {id(n) for guard in ast.walk(tree) if isinstance(guard, ast.If)
                       and isinstance(guard.test, ast.Name) and guard.test.id == "TYPE_CHECKING"
                       for stmt in guard.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("git_hermit"):
                module = node.module if node.module != "git_hermit" else f"git_hermit.{node.names[0].name}"
                assert module.startswith(allowed), f"{path.name} imports {module}"
