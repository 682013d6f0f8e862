"""Issue 9, items 5 and 12, on the real host CLIs (``-m hosts``): a continual-harness and an
evo-harness run's `finalize --archive`, unpacked into a fresh project, started with the real
Codex 0.164.0 / Claude Code 2.1.317 against the scripted model server. The session must see
what the learners wrote: the skill in its context, the sub-agent among the agents it can start,
and the memory note when it reads `memory/NOTES.md` as the policy tells it to.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.hostkit.sessions import run_session
from support.conformance_helpers import require_cli
from support.continual_harness_helpers import _hermit, make_continual_run
from support.evo_harness_helpers import env as evo_env, make_evo_run, plan as evo_plan, skill
from support.cli_helpers import hermit

HOSTS = ("codex", "claude-code")


def _set(repo: Path, host: str, **params) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["host"] = host
    config["evolver"]["params"].update(params)
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _unpack(archive: Path, project: Path) -> Path:
    project.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(project, filter="data")
    return project


def _session(host: str, project: Path, tmp: Path, script: list[Turn]):
    cli = require_cli(host)
    with ScriptedModelServer(script) as server:
        result = run_session(host, cli, project, server.base_url, "Solve the task.", home=tmp / f"home-{host}",
                             timeout_s=180)
        requests = server.model_requests()
    assert result.ok, (result.exit_code, result.stderr[-2000:])
    assert requests, "the host sent no model request"
    return requests


@pytest.mark.hosts
@pytest.mark.parametrize("host", HOSTS)
def test_continual_harness_snapshot_runs_natively(repo, tmp_path, host):
    require_cli(host)
    control = make_continual_run(repo, tasks=3)
    _set(repo, host, final="last")
    assert _hermit(repo, control, "step").returncode == 0
    archive = tmp_path / "final.tar.gz"
    r = _hermit(repo, control, "finalize", "--archive", str(archive))
    assert r.returncode == 0, r.stderr
    project = _unpack(archive, tmp_path / "project")
    requests = _session(host, project, tmp_path, [Turn.shell("cat memory/NOTES.md"), Turn.say("done")])
    first, last = json.dumps(requests[0].body), json.dumps(requests[-1].body)
    assert "Lesson of step 1" in first                                   # the policy, rewritten by the Refiner
    assert "Check an answer before giving it." in first                  # the skill it added
    assert "planner-1" in first and "Plans the task before any edit." in first   # the sub-agent it created
    assert "Step 1 saw failures." in last                                # the memory note, read where the policy says


@pytest.mark.hosts
@pytest.mark.parametrize("host", HOSTS)
def test_evo_harness_snapshot_runs_natively(repo, tmp_path, host):
    require_cli(host)
    control = make_evo_run(repo, {"t1": "1", "t2": "2"}, {"batch_size": 2, "final": "last"})
    _set(repo, host)
    evo_plan(control, **{"1_topic_curator": {"write": {"skills/short-answers/SKILL.md": skill(
        "short-answers", "topic", ["t1"], description="Use when the answer is one number, and print only it.")}}})
    assert hermit(repo, "step", env=evo_env(control)).code == 0
    archive = tmp_path / "final.tar.gz"
    r = hermit(repo, "finalize", "--archive", str(archive), env=evo_env(control))
    assert r.code == 0, r.err
    project = _unpack(archive, tmp_path / "project")
    requests = _session(host, project, tmp_path, [Turn.say("done")])
    body = json.dumps(requests[0].body)
    assert "short-answers" in body and "Use when the answer is one number, and print only it." in body
    assert "verify-before-finishing" in body                             # the native skill too
