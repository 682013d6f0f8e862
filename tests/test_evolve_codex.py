"""The learners as real Codex CLI sessions against the scripted model server: the Evolve Agent's
shell commands edit a skill and write the change manifest, and `git hermit step` commits the
skill edit with its manifest note; the Agent Debugger's report reaches it; a prompt too long for
argv goes through a file. Skipped (with the reason) when Codex is not installed."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from support.cli_helpers import hermit
from conftest import git
from git_hermit.hosts.locate import find_node
from git_hermit.hosts.registry import find_host_cli
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.learners import PROMPT_FILE_THRESHOLD, make_learner
from support.step_support import RUN, calls, env_for, make_run
from support.evolve_codex_helpers import EVOLVE, MANIFEST, RULE, SKILL, _codex_evolver, require_codex  # noqa: F401


@pytest.mark.hosts
def test_evolve_session_through_real_codex_commits_the_skill_edit(repo):
    require_codex()
    control = make_run(repo, {"t1": "4"}, k=1)
    (repo / "AGENTS.md").write_text("USER-PROJECT-RULES: this repository's own instructions\n")
    with ScriptedModelServer(EVOLVE) as server:
        _codex_evolver(repo, server)
        r = hermit(repo, "step", env={**env_for(control), "SCRIPTED_API_KEY": "test-key"}, timeout=300)
        requests = server.model_requests()
    assert r.code == 0, r.out + r.err
    assert calls(control, "evolve") == [] and calls(control, "debugger") == []   # Codex ran, not the script
    assert len(requests) >= 3
    first = requests[0].text()
    assert "state/change_manifest.json" in first and "check_spec" in first      # START.md + query reached it
    # the session is rooted in its own workspace, not in the user's repository around it
    assert not any("USER-PROJECT-RULES" in q.text() for q in requests)
    assert "test-key" not in r.out + r.err
    seed = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0000").strip()
    tip = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0001").strip()
    assert git(repo, "rev-list", f"{seed}..{tip}").split() == [tip]
    assert git(repo, "diff", "--name-only", seed, tip).split() == [SKILL]
    assert git(repo, "show", f"{tip}:{SKILL}").endswith(RULE)
    assert "Hermit-Change: chg-skill" in git(repo, "log", "-1", "--format=%(trailers:only,unfold)", tip)
    note = json.loads(git(repo, "notes", "--ref=hermit/manifest", "show", tip))
    assert [(c["id"], c["files"], c["predicted_fixes"]) for c in note["changes"]] == \
        [("chg-skill", [".agents/skills/debug-failing-test/SKILL.md"], ["t1"])]
    evolve = repo / ".hermit" / "runs" / RUN / "step-0001" / "evolve"
    assert (evolve / "workspace" / "check.txt").read_text().strip().endswith("rc=0")   # its tool works
    result = json.loads((evolve / "result.json").read_text())
    assert result["ok"] and "memory look-up" in result["text"]
    ledger = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip))["ledger"]
    assert ledger["evolve"]["input_tokens"] > 0


@pytest.mark.hosts
def test_debugger_and_evolve_sessions_both_through_real_codex(repo):
    require_codex()
    control = make_run(repo, {"t1": "4"}, k=1)
    report = "DEBUGGER-MARK: the agent answered without looking the answer up."

    def script(body: dict, tool_results: int) -> Turn:
        if "change_manifest.json" in json.dumps(body):          # the Evolve Agent's session
            return EVOLVE[min(tool_results, len(EVOLVE) - 1)]
        return Turn.say(report + "\n\n## Fix\nLook the answer up in MEMORY.md.")

    with ScriptedModelServer(script) as server:
        _codex_evolver(repo, server, debugger=True)
        r = hermit(repo, "step", env={**env_for(control), "SCRIPTED_API_KEY": "test-key"}, timeout=300)
        requests = server.model_requests()
    assert r.code == 0, r.out + r.err
    step = repo / ".hermit" / "runs" / RUN / "step-0001"
    assert json.loads((step / "debugger" / "t1.json").read_text())["response"].startswith(report)
    evolve_requests = [q for q in requests if "change_manifest.json" in json.dumps(q.body)]
    assert evolve_requests and "DEBUGGER-MARK" in evolve_requests[0].text()   # the report reached Evolve
    tip = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0001").strip()
    assert "Hermit-Change: chg-skill" in git(repo, "log", "-1", "--format=%(trailers:only,unfold)", tip)
    ledger = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip))["ledger"]
    assert ledger["debugger"]["input_tokens"] > 0 and ledger["evolve"]["input_tokens"] > 0


@pytest.mark.hosts
def test_a_prompt_too_long_for_argv_reaches_codex_through_a_file(tmp_path, monkeypatch):
    require_codex()
    monkeypatch.setenv("SCRIPTED_API_KEY", "test-key")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    prompt = "Follow these rules.\n" + "x" * (PROMPT_FILE_THRESHOLD * 2) + "\nEND-OF-PROMPT\n"
    script = [Turn.shell("ls .hermit > seen.txt && tail -c 15 .hermit/*.md >> seen.txt"), Turn.say("read it")]
    with ScriptedModelServer(script) as server:
        learner = make_learner({"base": "codex", "model": {"name": "scripted-model", "provider": {
            "base_url": f"{server.base_url}/v1", "env_key": "SCRIPTED_API_KEY"}}}, "evolve")
        answer = learner.ask(workspace, prompt, timeout_s=120, key="step-1")
        requests = server.model_requests()
    assert answer.ok, answer.error
    assert answer.text == "read it"
    seen = (workspace / "seen.txt").read_text()
    assert "END-OF-PROMPT" in seen
    assert len(requests[0].text()) < PROMPT_FILE_THRESHOLD          # the instruction, not the prompt
