"""Preflight (issue 13, items 4 and 5): `check`, `step`, `train`, `rollout` and `eval` name every
missing file, program, key and login in one error before any rollout or learner session starts;
`doctor` fails on a missing agent or learner and shows Pi; `step` warns about work-tree edits it
will not use. Real git and the real executable; missing programs come from `bin:` settings and
fake ones from PATH; no real keys."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, calls, env_for, make_run, memory_lines

from git_hermit.hosts import registry

MISSING_KEY = "HERMIT_TEST_NOT_SET_KEY"


def edit_config(repo: Path, **blocks) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    for key, value in blocks.items():
        if key == "evolver":           # keep the run's evolver name and params
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def ref(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", "--verify", "-q", name, check=False).strip()


def run_env(control: Path) -> dict[str, str]:
    env = env_for(control)
    env.pop(MISSING_KEY, None)
    return env


def error_lines(err: str) -> tuple[list[str], list[str]]:
    lines = err.splitlines()
    return [l for l in lines if l.startswith("error:")], [l for l in lines if l.startswith("hint:")]


# --- item 4: one error naming everything, before spending ------------------------------------------
def test_step_names_every_missing_thing_before_any_rollout(repo, tmp_path, monkeypatch):
    monkeypatch.delenv(MISSING_KEY, raising=False)
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    edit_config(repo, evolver={"base": "codex", "model": {"name": "m", "bin": str(tmp_path / "no-codex"),
                                                          "provider": {"env_key": MISSING_KEY}}},
                data={"train": "rows/train.txt", "test": "rows/test.txt"})
    r = hermit(repo, "step", env=run_env(control))
    assert r.code == 12, r.out + r.err                     # a missing binary is the most specific
    errors, hints = error_lines(r.err)
    assert len(errors) == 1 and len(hints) == 1, r.err
    assert "evolver.model.bin" in errors[0] and str(tmp_path / "no-codex") in errors[0]
    assert MISSING_KEY in errors[0] and "rows/test.txt" in errors[0] and "3 problems" in errors[0]
    assert "agent.bin" not in r.err                        # the learner's binary is not the agent's
    assert calls(control, "agent") == [] and calls(control, "debugger") == []
    assert not ref(repo, f"refs/heads/hermit/{RUN}/step-0001")
    assert "Traceback" not in r.err


def test_exit_code_is_the_kind_of_problem(repo, tmp_path, monkeypatch):
    monkeypatch.delenv(MISSING_KEY, raising=False)
    control = make_run(repo, {"t1": "4"}, k=1)
    (repo / "rows" / "train.txt").unlink()
    r = hermit(repo, "step", env=run_env(control))        # bad input: the rows file
    assert r.code == 7 and "rows/train.txt" in r.err and "data.train" in r.err, r.err
    (repo / "rows" / "train.txt").write_text("t1#1\n")
    edit_config(repo, judge={"kind": "llm", "model": "judge-m", "rubric": "r", "env_key": MISSING_KEY})
    r = hermit(repo, "step", env=run_env(control))        # config: the judge's key
    assert r.code == 5 and MISSING_KEY in r.err and "judge" in r.err, r.err
    assert calls(control, "agent") == []


def test_agent_binary_and_login_are_checked(repo, tmp_path, isolated_git_env):
    control = make_run(repo, {"t1": "4"}, k=1)
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    codex = fake_bin / "codex-fake"
    codex.write_text("#!/bin/sh\necho 'codex-cli 0.164.0'\n")
    codex.chmod(0o755)
    edit_config(repo, agent={"backend": "codex", "bin": str(tmp_path / "nowhere" / "codex"), "model": "m"})
    r = hermit(repo, "rollout", env=run_env(control))
    assert r.code == 12 and "agent.bin" in r.err and "codex has no credentials" in r.err, r.err
    # a fake codex on PATH, run on the user's ChatGPT login: the login file must exist
    edit_config(repo, agent={"backend": "codex", "bin": "codex-fake", "model": "m", "login": "chatgpt"})
    env = {**run_env(control), "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}
    r = hermit(repo, "rollout", env=env)
    assert r.code == 5 and ".codex/auth.json" in r.err and "agent.login" in r.err, r.err
    assert "agent.bin" not in r.err
    (isolated_git_env / ".codex").mkdir()
    (isolated_git_env / ".codex" / "auth.json").write_text("{}")
    r = hermit(repo, "check", "--static", env=env)
    assert r.code == 0, r.out + r.err
    assert calls(control, "agent") == []


def test_eval_checks_its_split_and_the_judge_command(repo, tmp_path):
    control = make_run(repo, {"t1": "4"}, k=1)
    r = hermit(repo, "eval", f"hermit/{RUN}/step-0000", "--split", "test", env=run_env(control))
    assert r.code == 5 and "data.test" in r.err, r.err
    edit_config(repo, judge={"kind": "command", "command": [str(tmp_path / "no-verifier"), "{workspace}"]},
                data={"train": "rows/train.txt", "test": "rows/test.txt"})
    r = hermit(repo, "eval", f"hermit/{RUN}/step-0000", "--split", "test", env=run_env(control))
    assert r.code == 12 and "judge.command" in r.err and "rows/test.txt" in r.err, r.err
    assert calls(control, "agent") == []


def test_check_runs_the_preflight_and_can_skip_it(repo, tmp_path):
    control = make_run(repo, {"t1": "4"}, k=1)
    assert hermit(repo, "check", "--static", env=run_env(control)).code == 0
    (repo / "tasks.jsonl").unlink()
    r = hermit(repo, "check", "--static", env=run_env(control))
    assert r.code == 7 and "tasks.jsonl" in r.err and "tasks.path" in r.err, r.err
    assert "ok" in r.out                                   # the adapter's own report still prints
    assert hermit(repo, "check", "--static", "--no-preflight", env=run_env(control)).code == 0


# --- doctor ------------------------------------------------------------------------------------------
def test_doctor_fails_on_a_missing_learner_and_shows_pi(repo, tmp_path):
    control = make_run(repo, {"t1": "4"}, k=1)
    r = hermit(repo, "doctor", env=run_env(control))
    assert r.code == 0, r.out + r.err
    assert any(line[3:].startswith("pi") for line in r.out.splitlines()), r.out
    edit_config(repo, evolver={"base": "claude-code", "model": {"name": "m", "bin": str(tmp_path / "no-claude")}})
    r = hermit(repo, "doctor", env=run_env(control))
    assert r.code == 12, r.out + r.err
    assert "evolver.model.bin" in r.out and "all good" not in r.out
    data = json.loads(hermit(repo, "doctor", "--json", env=run_env(control)).out)
    assert [h["host"] for h in data["hosts"]] == list(registry.names())
    assert not data["ok"] and any("evolver.model.bin" in p for p in data["problems"])


# --- item 5: hand edits --------------------------------------------------------------------------------
def warnings_of(err: str) -> list[str]:
    return [l for l in err.splitlines() if l.startswith("warning:")]


def test_step_warns_about_edits_it_will_not_use(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    with open(repo / "adapter" / "MEMORY.md", "a") as handle:   # an uncommitted hand edit
        handle.write(memory_lines({"t1": "4"}))
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    warnings = warnings_of(r.err)
    assert any("adapter/ has uncommitted edits (adapter/MEMORY.md)" in w and "step-0000" in w for w in warnings), r.err
    assert any("hermit.yaml has changes not committed at HEAD" in w for w in warnings), r.err
    assert "pass@1 0.000" in r.out                          # the tip ran, not the edit
    # committed on main, the edit is still not on the run's branch
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "remember t1 on main")
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert [w for w in warnings_of(r.err) if "HEAD has 1 commit(s) changing adapter/" in w], r.err
    assert "hermit.yaml" not in r.err and "pass@1 0.000" in r.out


def test_no_warning_when_the_work_tree_is_only_behind_the_run(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tasks, rows, config")
    plan_memory = {"append": {"MEMORY.md": memory_lines({"t1": "4"})}}
    from support.step_support import change, plan
    plan(control, 1, **plan_memory, changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    assert hermit(repo, "step", env=env_for(control)).code == 0
    r = hermit(repo, "step", env=env_for(control))          # main's adapter/ is the seed, the tip moved on
    assert r.code == 0, r.out + r.err
    assert warnings_of(r.err) == [], r.err


def test_a_hand_edit_committed_on_the_step_branch_enters_the_run(repo, tmp_path):
    control = make_run(repo, {"t1": "4"}, k=1)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tasks, rows, config")
    # the README's recipe: a second work tree on the run's latest step branch
    edit = tmp_path / "edit"
    git(repo, "worktree", "add", "-q", str(edit), f"hermit/{RUN}/step-0000")
    with open(edit / "adapter" / "MEMORY.md", "a") as handle:
        handle.write(memory_lines({"t1": "4"}))
    git(edit, "commit", "-qam", "hand edit: remember t1")
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert warnings_of(r.err) == [], r.err
    assert "pass@1 1.000" in r.out, r.out


def test_check_json_lists_the_preflight_problems(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    (repo / "rows" / "train.txt").unlink()
    r = hermit(repo, "check", "--static", "--json", env=run_env(control))
    assert r.code == 7, r.out + r.err
    data = json.loads(r.out)                                # one JSON document, the report
    assert data["ok"] is False and data["violations"] == []
    assert [(p["where"], p["kind"]) for p in data["preflight"]] == [("data.train", "input")]


def test_a_session_learner_names_its_own_settings():
    import pytest
    from git_hermit.errors import AgentError
    from git_hermit.learners import make_learner
    learner = make_learner({"base": "codex", "model": {"name": "m", "bin": "no-such-codex-xyz"}}, "evolve")
    with pytest.raises(AgentError) as caught:
        learner.check_available()
    assert "evolver.model.bin" in caught.value.hint and "agent.bin" not in caught.value.hint
