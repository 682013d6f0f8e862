"""The repository is the run: `push` carries all of it (config, records, finished rollouts), a
fresh clone reads and continues it, records stay with their step whatever moves its tip, a step
killed during its learners restarts in a fresh clone without re-running a rollout, and a clone that
lacks part of a run's records is told so (a step refuses to continue with less).

Machines are clones of a bare remote (tests/support/share_support.py); learners are scripted, the acting
agent a `command` (tests/support/step_support.py's), so every rollout is counted in the control's agent.log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

from support.cli_helpers import GIT_HERMIT, hermit
from conftest import git
from support.share_support import RUN, Scenario, diff_inputs, read_inputs
from support.step_support import calls, wait_for


def _refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


# ------------------------------------------------------------------------------- the config travels
def test_the_readme_teammate_line_works_in_a_fresh_clone_and_continues_the_run(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    origin = scenario.start("a")
    scenario.step("a")           # `git hermit push` only: main (with hermit.yaml) travels with the run
    assert git(scenario.remote, "rev-parse", "refs/heads/main").strip() == git(origin, "rev-parse", "main").strip()
    # the README's line, as a teammate types it
    git(tmp_path, "clone", "-q", str(scenario.remote), "teammate")
    teammate = tmp_path / "teammate"
    fetched = hermit(teammate, "fetch")
    assert fetched.code == 0, fetched.err
    here, there = hermit(origin, "log"), hermit(teammate, "log")
    assert there.code == 0, there.err
    assert here.out == there.out and "lacks" not in there.err
    scenario.machines["teammate"] = teammate
    stepped = scenario.hermit("teammate", "step", timeout=300)
    assert stepped.code == 0, stepped.err + stepped.out
    assert git(teammate, "rev-parse", "--verify", "-q", f"refs/heads/hermit/{RUN}/step-0002").strip()


def test_a_clone_on_a_branch_without_the_config_is_told_which_branch_to_check_out(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    scenario.start("a")
    scenario.step("a")
    git(tmp_path, "clone", "-q", str(scenario.remote), "other")
    other = tmp_path / "other"
    assert hermit(other, "fetch").code == 0
    git(other, "switch", "-q", "--orphan", "elsewhere")
    before = _refs(other)
    for args in (("log",), ("step",)):
        result = hermit(other, *args)
        assert result.code == 5, (args, result.err)
        error, hint = result.err.splitlines()[:2]
        assert "run 'r'" in error and "'main'" in error, error
        assert hint.startswith("hint: ") and "git checkout main" in hint and "would start another run" in hint, hint
    assert _refs(other) == before


# --------------------------------------------------------------------- records stay with their step
def test_a_manual_rollback_between_steps_reads_the_same_in_the_origin_and_a_clone(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    origin = scenario.start("a")
    scenario.step("a")
    scenario.step("a")
    rolled = scenario.hermit("a", "rollback", "step-2:chg-1", "--reason", "breaks t1")
    assert rolled.code == 0, rolled.err
    assert scenario.hermit("a", "push").code == 0
    clone = scenario.on("b")
    for args in (("log",), ("log", "--json"), ("show", "step-1"), ("show", "step-2"), ("show", "step-2", "--json"),
                 ("estimate",), ("estimate", "--json"), ("estimate", "--steps", "3")):
        here, there = hermit(origin, *args), hermit(clone, *args)
        assert here.code == there.code == 0, (args, there.err)
        assert here.out == there.out, args
    # the step's learner tokens are still counted after the rollback moved its tip
    log = json.loads(hermit(origin, "log", "--json").out)
    step_two = next(s for s in log["steps"] if s["step"] == 2)
    assert step_two["analysis"] and step_two["analysis"]["ledger"], step_two
    estimate = json.loads(hermit(clone, "estimate", "--json").out)
    assert estimate["steps_seen"] == 2 and estimate["spent"]["by_role"].get("evolve"), estimate


def test_a_hand_edit_on_the_latest_step_fetched_keeps_the_steps_records(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    origin = scenario.start("a")
    scenario.step("a")
    clone = scenario.on("b")
    git(clone, "switch", "-q", f"hermit/{RUN}/step-0001")
    (clone / "adapter" / "MEMORY.md").write_text((clone / "adapter" / "MEMORY.md").read_text() + "- answer t2: 2\n")
    git(clone, "commit", "-qam", "a reviewer's hand edit")
    git(clone, "push", "-q", "origin", f"hermit/{RUN}/step-0001")
    fetched = hermit(origin, "fetch")
    assert fetched.code == 0, fetched.err
    assert f"refs/heads/hermit/{RUN}/step-0001: fast-forward" in fetched.out
    for args in (("log", "--json"), ("show", "step-1", "--json"), ("estimate", "--json")):
        here, there = hermit(origin, *args), hermit(clone, *args)
        assert here.out == there.out, args
    step_one = next(s for s in json.loads(hermit(origin, "log", "--json").out)["steps"] if s["step"] == 1)
    assert step_one["analysis"]["ledger"], step_one


# ---------------------------------------------------------------- restart elsewhere, re-bill nothing
def test_a_step_killed_during_its_learners_restarts_in_a_fresh_clone_without_rerunning_a_rollout(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    # the reference: the same two steps on one machine, uninterrupted
    scenario.start("a")
    scenario.step("a")
    scenario.step("a")
    reference = read_inputs(scenario.control)
    scenario.reset()
    origin = scenario.start("a")
    scenario.step("a")
    rollouts = len(calls(scenario.control, "agent"))
    (scenario.control / "hold-evolve").write_text("")       # step 2 blocks in its Evolve Agent session
    proc = subprocess.Popen([*GIT_HERMIT, "step"], cwd=origin, env={**os.environ, **scenario.env()},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: (scenario.control / "held-evolve").exists(), "step 2's learners", proc, timeout=120)
        ran = len(calls(scenario.control, "agent"))
        assert ran > rollouts
        pushed = scenario.hermit("a", "push")          # the workflow pushes mid-step
        assert pushed.code == 0, pushed.err
        assert f"refs/hermit/{RUN}/pending" in pushed.out
    finally:
        os.killpg(proc.pid, signal.SIGKILL)            # the job's time limit
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    (scenario.control / "hold-evolve").unlink()
    restarted = scenario.step("b")                     # a fresh checkout of the remote
    assert "finished rollout(s) taken from" in restarted.out + restarted.err
    assert len(calls(scenario.control, "agent")) == ran, "a finished rollout ran again"
    assert diff_inputs(reference, read_inputs(scenario.control), scenario.roots()) == []
    # published, the step's pending rollouts are gone here and on the remote
    assert not git(scenario.remote, "for-each-ref", f"refs/hermit/{RUN}/pending").strip()
    assert hermit(origin, "fetch").code == 0
    assert hermit(origin, "log").out == hermit(scenario.machines["b"], "log").out


# ----------------------------------------------------------------------------- missing records
def test_a_clone_with_only_the_branches_is_told_what_is_missing_and_a_step_refuses(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    origin = scenario.start("a")
    scenario.step("a")
    partial = tmp_path / "partial.git"
    git(tmp_path, "init", "-q", "--bare", partial.name)
    git(origin, "push", "-q", str(partial), "refs/heads/*:refs/heads/*")     # the branches, nothing else
    git(tmp_path, "clone", "-q", str(partial), "branches-only")
    clone = tmp_path / "branches-only"
    fetched = hermit(clone, "fetch")          # brings the step branches, and says what the remote lacks
    assert fetched.code == 0, fetched.err
    assert "warning: " in fetched.err and f"refs/hermit/{RUN}/records" in fetched.err, fetched.err
    shown = hermit(clone, "log")
    assert shown.code == 0, shown.err
    warning = shown.err.strip()
    assert warning.startswith("warning: ") and "refs/notes/hermit/scores" in warning
    assert f"refs/hermit/{RUN}/records" in warning and "step 1" in warning
    assert "`git hermit fetch origin`" in warning, warning
    before = _refs(clone)
    scenario.machines["branches-only"] = clone
    stepped = scenario.hermit("branches-only", "step")
    assert stepped.code == 20, stepped.err
    error, hint = stepped.err.strip().splitlines()[-2:]
    assert error.startswith("error: step 2") and "step 1" in error and "records" in error, error
    assert hint.startswith("hint: ") and "git hermit fetch origin" in hint, hint
    assert calls(scenario.control, "agent") and _refs(clone) == before
    assert not (clone / ".hermit" / "runs" / RUN / "evals").exists()      # nothing ran


def test_a_record_over_the_size_bound_is_named_not_read_into_a_learners_prompt(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    origin = scenario.start("a")
    scenario.step("a")
    ref = f"refs/hermit/{RUN}/records"            # planted by hand: neither fetch nor a step writes one
    huge = tmp_path / "huge.md"
    huge.write_bytes(b"x" * (4 * 1024 * 1024 + 1))
    index = {"GIT_INDEX_FILE": str(tmp_path / "index")}
    git(origin, "read-tree", ref, env=index)
    blob = git(origin, "hash-object", "-w", str(huge)).strip()
    git(origin, "update-index", "--add", "--cacheinfo", f"100644,{blob},steps/0001/learner/state/huge.md", env=index)
    tree = git(origin, "write-tree", env=index).strip()
    git(origin, "update-ref", ref, git(origin, "commit-tree", tree, "-p", ref, "-m", "by hand").strip())
    stepped = scenario.hermit("a", "step")
    assert stepped.code == 18, stepped.err        # a damaged record, named
    error, hint = stepped.err.strip().splitlines()[-2:]
    assert "steps/0001/learner/state/huge.md" in error and "4,194,304" in error, error
    assert hint.startswith("hint: ") and f"git log {ref}" in hint, hint
    assert not [r for name, r in read_inputs(scenario.control).items() if name.startswith("evolve--step-2")]
    assert not git(origin, "rev-parse", "--verify", "-q", f"refs/heads/hermit/{RUN}/step-0002", check=False).strip()


# -------------------------------------------------------------------------------- what is recorded
def test_each_step_records_what_the_seed_lists_and_traces_travel_apart(tmp_path):
    scenario = Scenario(tmp_path, "ahe")
    origin = scenario.start("a")
    scenario.step("a")
    scenario.step("a")
    files = git(origin, "ls-tree", "-r", "--name-only", f"refs/hermit/{RUN}/records").split()
    for name in ("steps/0002/step.json", "steps/0002/ledger.json", "steps/0002/rollouts/t1/1/result.json",
                 "steps/0002/learner/history.md", "steps/0002/learner/debugger/jobs.json",
                 "steps/0002/learner/state/analysis/step_0002/overview.md",
                 "steps/0002/learner/state/analysis/step_0002/detail/t1.md",
                 "steps/0002/learner/state/queries/step_0002.md", "steps/0002/learner/state/manifests/step_0002.json",
                 "steps/0002/learner/state/evaluations/step_0002.json", "steps/0002/learner/state/stats/step_0002.json",
                 "steps/0001/learner/state/best_ever.json", "steps/0002/learner/state/rollbacks/step_0002.json",
                 "steps/0002/learner/state/iteration_scores.md"):
        assert name in files, name
    assert not any(f.endswith("trajectory.jsonl") or f.endswith("task.md") for f in files)
    record = json.loads(git(origin, "show", f"refs/hermit/{RUN}/records:steps/0002/step.json"))
    assert record["evaluated"] == git(origin, "rev-parse", f"hermit/{RUN}/step-0001").strip()
    assert record["tip"] == git(origin, "rev-parse", f"hermit/{RUN}/step-0002").strip()
    # a `command` agent's trace is plain text, never exploded: the Debugger is pointed at no `steps/`
    debugger = [r for name, r in read_inputs(scenario.control).items() if name.startswith("debugger--")]
    assert debugger and all("trajectory.txt" in r["prompt"] and "one file per step" not in r["prompt"]
                            for r in debugger), debugger[0]["prompt"]
    # show names where the records are, readable in any clone that fetched the run
    shown = hermit(origin, "show", "step-2")
    assert f"git show hermit/{RUN}/records:steps/0002/" in shown.out
    # the analysis note names the Debugger's reports in the records, not in this machine's .hermit/
    overview = json.loads(git(origin, "notes", "--ref=hermit/analysis", "show", f"hermit/{RUN}/step-0002"))["overview"]
    assert f"hermit/{RUN}/records:steps/0002/learner/state/analysis/step_0002/detail/" in overview
    assert ".hermit/runs" not in overview
    # traces: not pushed by default; `push --traces` says what it adds, `fetch --traces` brings them
    assert not git(scenario.remote, "for-each-ref", f"refs/hermit/{RUN}/traces").strip()
    pushed = scenario.hermit("a", "push", "--traces")
    assert pushed.code == 0, pushed.err
    added = [line for line in pushed.out.splitlines() if line.startswith("traces: ")]
    assert added and "bytes added" in added[0] and int(added[0].split()[1].replace(",", "")) > 0, pushed.out
    clone = scenario.on("b")
    assert not git(clone, "for-each-ref", f"refs/hermit/{RUN}/traces").strip()
    assert hermit(clone, "fetch", "--traces").code == 0
    traces = git(clone, "ls-tree", "-r", "--name-only", f"refs/hermit/{RUN}/traces").split()
    assert "steps/0002/rollouts/t1/task.md" in traces and any(t.startswith("steps/0002/rollouts/t1/1/") for t in traces)
    # the final selection is a record of the run, not only a tag: it travels and reads the same
    assert scenario.hermit("a", "finalize").code == 0 and scenario.hermit("a", "push").code == 0
    assert hermit(clone, "fetch").code == 0
    here, there = (git(repo, "show", f"refs/hermit/{RUN}/records:final_selection.json") for repo in (origin, clone))
    assert here == there and json.loads(there)["commit"] == git(clone, "rev-parse", f"hermit/{RUN}/final").strip()


def test_continual_and_evo_harness_steps_record_their_learners_work(tmp_path):
    for evolver, names in (("continual-harness", ("learner/report.md", "learner/log.json", "learner/failures.md",
                                                  "learner/passes/policy.json")),
                           ("evo-harness", ("learner/reflections/", "learner/topic/outcome.json",
                                            "learner/general/outcome.json"))):
        scenario = Scenario(tmp_path / evolver, evolver)
        (tmp_path / evolver).mkdir()
        origin = scenario.start("a")
        scenario.step("a")
        files = git(origin, "ls-tree", "-r", "--name-only", f"refs/hermit/{RUN}/records").split()
        for name in names:
            assert any(f.startswith(f"steps/0001/{name}") for f in files), (evolver, name, files)
