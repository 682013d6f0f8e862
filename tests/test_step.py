"""`git hermit step` / `train` end to end with the ahe evolver: stop conditions, best-ever,
verdict notes, `rollback: auto|agent`, and the Evolve Agent's output (manifest checks, fixed
files, undeclared edits). Real git and the real executable; only the learners are scripted."""

from __future__ import annotations

import json
import tarfile

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, calls, change, env_for, make_run, memory_lines, plan
from support.step_helpers import HARMFUL_STEP2, STEP, _three_steps, chain, note, rev, run_step, step_ref, trailers, tree  # noqa: F401

BEST = f"refs/tags/hermit/{RUN}/best"


# --- stop conditions ---------------------------------------------------------------------------
def test_target_reached_with_early_stop_stops_before_learning(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4", "t2": "7"})},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1", "t2"])])
    r = hermit(repo, "train", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert "reached target_pass_rate" in r.out + r.err
    assert rev(repo, step_ref(1)) and not rev(repo, step_ref(2))
    # step 2 evaluated step 1's tip (scores note) but ran no Debugger and no Evolve Agent
    assert note(repo, "scores", rev(repo, step_ref(1)))["pass_at_1"] == 1.0
    assert calls(control, "evolve") == ["step-1"]
    assert sorted(calls(control, "debugger")) == ["t1", "t2"]
    assert rev(repo, BEST) == rev(repo, step_ref(1))


def test_target_reached_without_early_stop_keeps_learning(repo):
    control = make_run(repo, {"t1": "4"}, k=1, allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})}, changes=[change("chg-1", ["MEMORY.md"])])
    r = hermit(repo, "train", "--epochs", "2", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert rev(repo, step_ref(2)) and not rev(repo, step_ref(3))
    assert calls(control, "evolve") == ["step-1", "step-2"]
    assert "reached target_pass_rate" not in r.out + r.err


def test_train_epochs_stops_at_n_steps(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    r = hermit(repo, "train", "--epochs", "3", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert [rev(repo, step_ref(n)) != "" for n in range(5)] == [True, True, True, True, False]
    assert calls(control, "evolve") == ["step-1", "step-2", "step-3"]
    r = hermit(repo, "train", "--epochs", "3", env=env_for(control))   # already there: nothing to do
    assert r.code == 0 and not rev(repo, step_ref(4))
    assert len(calls(control, "evolve")) == 3


# --- best-ever ---------------------------------------------------------------------------------
def test_best_ever_moves_only_on_strictly_higher_pass_rate(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, allow_early_stop=False)
    plan(control, 2, append={"MEMORY.md": memory_lines({"t1": "4"})}, changes=[change("chg-2", ["MEMORY.md"])])
    run_step(repo, control)                                  # step 1: seed 0.0, the first best
    seed = rev(repo, step_ref(0))
    assert rev(repo, BEST) == seed
    run_step(repo, control)                                  # step 2: step 1's tip ties at 0.0
    assert note(repo, "scores", rev(repo, step_ref(1)))["pass_at_1"] == 0.0
    assert rev(repo, BEST) == seed
    run_step(repo, control)                                  # step 3: step 2's tip scores 0.5
    assert note(repo, "scores", rev(repo, step_ref(2)))["pass_at_1"] == 0.5
    assert rev(repo, BEST) == rev(repo, step_ref(2))
    archive = repo.parent / "final.tar.gz"
    r = hermit(repo, "finalize", "--archive", str(archive), env=env_for(control))
    assert r.code == 0, r.err
    assert rev(repo, f"refs/tags/hermit/{RUN}/final") == rev(repo, step_ref(2))
    with tarfile.open(archive) as tar:
        memory = tar.extractfile("adapter/MEMORY.md").read().decode()
    assert memory == git(repo, "show", f"{step_ref(2)}:adapter/MEMORY.md")


def test_a_clone_hands_the_evolve_agent_the_best_ever_record_its_origin_has(repo, tmp_path):
    """state/best_ever.json, which the Evolve Agent reads, is made from the best tag's evaluation in
    the run's notes, not kept only in the origin's ignored working files: a clone's step writes the
    same record as the origin's."""
    from support.review_support import teammate_clone
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, allow_early_stop=False)
    plan(control, 2, append={"MEMORY.md": memory_lines({"t1": "4"})}, changes=[change("chg-2", ["MEMORY.md"])])
    for _ in range(3):
        run_step(repo, control)                 # step 3 moves the best tag to step 2's tip (0.5)
    state = f".hermit/runs/{RUN}/state/best_ever.json"
    expected = json.loads((repo / state).read_text())
    assert expected["commit"] == rev(repo, BEST) == rev(repo, step_ref(2))
    other = teammate_clone(repo, tmp_path)      # the same config, uncommitted; no .hermit/
    assert not (other / state).exists()
    r = hermit(other, "step", env=env_for(control))        # step 4: H_3 ties, the best stays
    assert r.code == 0, r.out + r.err
    assert rev(other, BEST) == rev(repo, BEST)
    assert json.loads((other / state).read_text()) == expected


def test_verdict_notes_log_and_rollback_auto(repo):
    _three_steps(repo, "auto", step2=HARMFUL_STEP2)
    tip1, tip2, tip3 = (rev(repo, step_ref(n)) for n in (1, 2, 3))
    # verdict notes on each change commit, written by the step that scored it
    v1, v2 = note(repo, "verdicts", tip1), note(repo, "verdicts", tip2)
    assert (v1["change_id"], v1["verdict"], v1["step"]) == ("chg-1", "EFFECTIVE", 2)
    assert v1["actually_fixed"] == ["t1", "t2"]
    assert (v2["change_id"], v2["verdict"], v2["risk_realized"], v2["actually_fixed"]) == \
        ("chg-2", "HARMFUL", ["t2"], [])
    # step 3: the rollback commit comes first, then the Evolve Agent's change
    rollback, evolved = chain(repo, tip3, tip2)
    assert git(repo, "rev-parse", f"{rollback}^").strip() == tip2
    t = trailers(repo, rollback)
    assert f"Hermit-Reverts: {tip2}" in t and "Hermit-Verdict: HARMFUL" in t
    assert git(repo, "diff", "--name-only", tip1, tip2).split() == ["adapter/MEMORY.md", "adapter/scripts/helper.py"]
    assert tree(repo, rollback) == tree(repo, tip1)                 # the files restored exactly (a new one deleted)
    assert "Hermit-Change: chg-3" in trailers(repo, evolved)
    analysis = note(repo, "analysis", tip3)
    assert analysis["rollbacks"] == [{"change_id": "chg-2", "commit": tip2, "verdict": "HARMFUL"}]
    assert analysis["rollbacks_undone"] == {}
    # the log shows the verdicts and the rollback
    r = hermit(repo, "log")
    assert r.code == 0, r.err
    assert "chg-1: EFFECTIVE" in r.out and "chg-2: HARMFUL" in r.out
    assert f"rollback of {tip2[:10]} (HARMFUL)" in r.out
    data = json.loads(hermit(repo, "log", "--json").out)
    assert data["run"] == RUN and data["best"] == tip1
    assert [s["step"] for s in data["steps"]] == [0, 1, 2, 3]
    s1, s2, s3 = data["steps"][1:]
    assert s1["commit"] == tip1 and s1["pass_at_1"] == pytest.approx(2 / 3, abs=1e-5)
    assert [(c["id"], c["commit"], c["verdict"]["verdict"]) for c in s1["changes"]] == [("chg-1", tip1, "EFFECTIVE")]
    assert [(c["id"], c["verdict"]["verdict"]) for c in s2["changes"]] == [("chg-2", "HARMFUL")]
    assert s3["rollbacks"] == [{"commit": rollback, "reverts": tip2, "verdict": "HARMFUL"}]
    assert [c["id"] for c in s3["changes"]] == ["chg-3"] and s3["changes"][0].get("verdict") is None
    assert s3["pass_at_1"] is None and s3["analysis"]["verdicts"] == {"chg-2": "HARMFUL"}
    # show: the change with its manifest and the verdict the next step gave it
    r = hermit(repo, "show", "step-2")
    assert r.code == 0 and "verdict on chg-2: HARMFUL (judged by step 3's rollouts)" in r.out and "risks realised: t2" in r.out
    shown = json.loads(hermit(repo, "show", "step-2", "--json").out)
    assert [(c["commit"], c["verdict"]["verdict"]) for c in shown["commits"]] == [(tip2, "HARMFUL")]


def test_rollback_agent_only_reports(repo):
    _three_steps(repo, "agent", step2=HARMFUL_STEP2)
    tip2, tip3 = rev(repo, step_ref(2)), rev(repo, step_ref(3))
    assert note(repo, "verdicts", tip2)["verdict"] == "HARMFUL"
    commits = chain(repo, tip3, tip2)
    assert len(commits) == 1 and "Hermit-Reverts" not in trailers(repo, commits[0])
    assert note(repo, "analysis", tip3)["rollbacks"] == []
    query = (repo / ".hermit" / "runs" / RUN / "step-0003" / "evolve" / "workspace" / "QUERY.md").read_text()
    assert "HARMFUL" in query


def test_rollback_failing_check_spec_is_undone_and_recorded(repo):
    # chg-2 declares AGENTS.md only; ADAPTER.md (kept equal to it) lands in the undeclared
    # commit, so reverting chg-2's files alone breaks check_spec and the revert is undone.
    rule = "\n- Double-check every answer.\n"
    step2 = dict(append={"AGENTS.md": rule, "ADAPTER.md": rule, "MEMORY.md": memory_lines({"t2": "8"})},
                 changes=[change("chg-2", ["AGENTS.md"], fixes=["t3"], risks=["t2"])])
    _three_steps(repo, "auto", step2=step2, step3_change=False)
    tip2, tip3 = rev(repo, step_ref(2)), rev(repo, step_ref(3))
    step2_commits = chain(repo, tip2, rev(repo, step_ref(1)))
    assert len(step2_commits) == 2 and "Hermit-Change: undeclared" in trailers(repo, step2_commits[1])
    commits = chain(repo, tip3, tip2)
    assert len(commits) == 1 and "Hermit-Reverts" not in trailers(repo, commits[0])
    assert tree(repo, tip3) == tree(repo, tip2)
    analysis = note(repo, "analysis", tip3)
    assert analysis["rollbacks"] == []
    assert list(analysis["rollbacks_undone"]) == ["chg-2"]
    assert "check_spec" in analysis["rollbacks_undone"]["chg-2"]


# --- the Evolve Agent's output -----------------------------------------------------------------
GOOD = change("chg-1", ["MEMORY.md"], fixes=["t1"])


@pytest.mark.parametrize("spec, message", [
    ({"manifest_text": "{not json"}, "state/change_manifest.json is not JSON"),
    ({"iteration": 7, "changes": [GOOD]}, "has iteration 7, expected 1"),
    ({"changes": [change("chg-1", ["MEMORY.md"], fixes=["nope"])]}, "unknown task(s): nope"),
    ({"changes": [change("chg-1", ["../hermit.yaml"])]}, "outside the adapter"),
    ({"changes": [change("chg-1", ["hook_runner.py"])]}, "not a learnable adapter file"),
    ({"manifest": None}, "wrote no state/change_manifest.json"),
], ids=["bad-json", "wrong-iteration", "unknown-task", "outside-adapter", "fixed-file", "no-manifest"])
def test_malformed_manifest_is_rejected_with_exit_8(repo, spec, message):
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})}, **spec)
    r = run_step(repo, control, expect=8)
    assert "error: the learners' output was rejected: " in r.err and message in r.err, r.err
    assert "Traceback" not in r.err
    seed, tip = rev(repo, step_ref(0)), rev(repo, step_ref(1))
    assert chain(repo, tip, seed) == [tip]
    assert tree(repo, tip) == tree(repo, seed)
    assert git(repo, "log", "-1", "--format=%s", tip).strip().endswith("no adapter changes")
    assert message in note(repo, "analysis", tip)["rejected"][0]


def test_fixed_file_edit_reverted_and_undeclared_edits_committed_apart(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"}), "hook_runner.py": "\n# tampered\n"},
         write={"scripts/helper.py": "print('help')\n"}, changes=[GOOD])
    r = run_step(repo, control)
    assert "hook_runner.py" in r.out + r.err
    seed, tip = rev(repo, step_ref(0)), rev(repo, step_ref(1))
    declared, undeclared = chain(repo, tip, seed)
    assert git(repo, "diff", "--name-only", seed, declared).split() == ["adapter/MEMORY.md"]
    assert "Hermit-Change: chg-1" in trailers(repo, declared)
    assert note(repo, "manifest", declared)["changes"][0]["id"] == "chg-1"
    assert git(repo, "diff", "--name-only", declared, undeclared).split() == ["adapter/scripts/helper.py"]
    assert "Hermit-Change: undeclared" in trailers(repo, undeclared)
    assert rev(repo, f"{tip}:adapter/hook_runner.py") == rev(repo, f"{seed}:adapter/hook_runner.py")
    analysis = note(repo, "analysis", tip)
    assert analysis["fixed_files_reverted"] == ["hook_runner.py"]
    assert analysis["undeclared"] == ["scripts/helper.py"]


@pytest.mark.parametrize("spelling", [".agents/skills/debug-failing-test/SKILL.md",
                                      "./.agents/skills/debug-failing-test/SKILL.md",
                                      "adapter/.agents/skills/debug-failing-test/SKILL.md"])
def test_manifest_paths_name_the_same_adapter_file(repo, spelling):
    skill = ".agents/skills/debug-failing-test/SKILL.md"
    control = make_run(repo, {"t1": "4"}, k=1)
    plan(control, 1, append={skill: "\n7. Read MEMORY.md first.\n"}, changes=[change("chg-1", [spelling])])
    run_step(repo, control)
    seed, tip = rev(repo, step_ref(0)), rev(repo, step_ref(1))
    assert chain(repo, tip, seed) == [tip] and "Hermit-Change: chg-1" in trailers(repo, tip)
    assert git(repo, "diff", "--name-only", seed, tip).split() == [f"adapter/{skill}"]
    assert note(repo, "manifest", tip)["changes"][0]["files"] == [skill]


def test_changes_declared_together_are_rolled_back_in_one_commit(repo):
    # chg-a and chg-b both edit MEMORY.md, so they share one commit; both regress their risk
    step2 = dict(append={"MEMORY.md": memory_lines({"t1": "5", "t2": "8"})},
                 changes=[change("chg-a", ["MEMORY.md"], fixes=["t3"], risks=["t1"]),
                          change("chg-b", ["MEMORY.md"], fixes=["t3"], risks=["t2"])])
    _three_steps(repo, "auto", step2=step2, step3_change=False)
    tip1, tip2, tip3 = (rev(repo, step_ref(n)) for n in (1, 2, 3))
    assert chain(repo, tip2, tip1) == [tip2]
    assert chain(repo, tip3, tip2) == [tip3]                           # one rollback, not one per change
    assert git(repo, "log", "-1", "--format=%s", tip3).strip().endswith("rollback chg-a, chg-b (HARMFUL)")
    assert f"Hermit-Reverts: {tip2}" in trailers(repo, tip3)
    assert tree(repo, tip3) == tree(repo, tip1)
    assert note(repo, "analysis", tip3)["verdicts"] == {"chg-a": "HARMFUL", "chg-b": "HARMFUL"}


def test_every_change_of_a_shared_commit_keeps_its_verdict(repo):
    control = make_run(repo, {"t1": "4", "t2": "7", "t3": "9"}, k=1, allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4", "t2": "7"})},
         changes=[change("chg-a", ["MEMORY.md"], fixes=["t1"]), change("chg-b", ["MEMORY.md"], fixes=["t3"])])
    run_step(repo, control)
    run_step(repo, control)
    step1 = json.loads(hermit(repo, "log", "--json").out)["steps"][1]
    assert {c["id"]: (c.get("verdict") or {}).get("verdict") for c in step1["changes"]} == \
        {"chg-a": "EFFECTIVE", "chg-b": "INEFFECTIVE"}
