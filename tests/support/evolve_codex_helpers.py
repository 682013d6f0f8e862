"""Helpers of tests/test_evolve_codex.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
import shlex
import pytest
import yaml
from git_hermit.hosts.locate import find_node
from git_hermit.hosts.registry import find_host_cli
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn

SKILL = "adapter/.agents/skills/debug-failing-test/SKILL.md"


RULE = "\n7. Before answering, read MEMORY.md for answers you learned earlier.\n"


MANIFEST = {"iteration": 1, "changes": [{
    "id": "chg-skill", "type": "improvement", "description": "teach the skill to read the memory first",
    "files": [".agents/skills/debug-failing-test/SKILL.md"], "failure_pattern": "answers not looked up",
    "predicted_fixes": ["t1"], "risk_tasks": [], "component": "skill"}]}


EVOLVE = [
    Turn.shell(f"printf %s {shlex.quote(RULE)} >> {SKILL}; ./check_spec > check.txt 2>&1; echo rc=$? >> check.txt"),
    Turn.shell(f"printf %s {shlex.quote(json.dumps(MANIFEST))} > state/change_manifest.json"),
    Turn.say("Added a memory look-up step to the skill; manifest written."),
]


def require_codex():
    if find_node() is None:
        pytest.skip("node is not installed")
    cli = find_host_cli("codex")
    if cli is None:
        pytest.skip("the codex CLI is not installed (git hermit hosts install)")
    return cli


def _codex_evolver(repo, server: ScriptedModelServer, *, debugger: bool = False) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"].update(base="codex", model={
        "name": "scripted-model", "provider": {"base_url": f"{server.base_url}/v1", "env_key": "SCRIPTED_API_KEY"}})
    config["evolver"].pop("scripted")
    config["evolver"]["params"]["debugger"] = {"enabled": debugger, "retries": 1, "timeout_s": 120}
    config["evolver"]["params"]["evolve_timeout_s"] = 120
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

