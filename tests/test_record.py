"""Issue 8, "a record you can trust": best-ever ties, finalize without a best tag, notes that a
re-run never rewrites, the run lock on rollout/eval, a finished run, one step numbering,
learner usage across a resume, and timeouts under ``timeout_as: fail``. Real git and the real
executable; the acting agent is a ``command`` program and the learners are scripted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import Waiter, hermit
from conftest import git
from support.step_support import RUN, calls, change, env_for, make_run, memory_lines, plan

BEST = f"refs/tags/hermit/{RUN}/best"


def step_ref(n: int, run: str = RUN) -> str:
    return f"refs/heads/hermit/{run}/step-{n:04d}"


def rev(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", "--verify", "-q", name, check=False).strip()


def notes_snapshot(repo: Path) -> tuple[str, dict[tuple[str, str], str]]:
    """Every notes ref with its tip, and every note's text: equal snapshots are byte-identical notes."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/notes")
    texts = {}
    for line in refs.splitlines():
        ref = line.split()[0]
        for pair in git(repo, "notes", f"--ref={ref}", "list").splitlines():
            blob, commit = pair.split()
            texts[(ref, commit)] = git(repo, "cat-file", "blob", blob)
    return refs, texts


def all_refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


# --- the demo, run once per session and copied per test ------------------------------------------
@pytest.fixture(scope="module")
def demo_master(demo_made):
    """The session's demo run (conftest's demo_made): its repository and its output."""
    return demo_made


@pytest.fixture
def demo(tmp_path, demo_master) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(demo_master[0], target, symlinks=True)
    return target


# --- 1. best-ever: strictly higher, compared exactly ----------------------------------------------
def test_a_tie_at_one_third_never_moves_best(repo):
    # the agent answers "I do not know" to every task: only t1 (whose answer that is) passes, so the
    # seed and every later adapter score exactly 1/3
    control = make_run(repo, {"t1": "I do not know", "t2": "7", "t3": "9"}, k=1, allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": "- a note that changes nothing\n"},
         changes=[change("chg-1", ["MEMORY.md"])])
    for n in range(1, 4):
        r = hermit(repo, "step", env=env_for(control))
        assert r.code == 0, r.out + r.err
        assert rev(repo, BEST) == rev(repo, step_ref(0)), f"step {n} moved best on a tie"
    for n in range(3):
        scores = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", step_ref(n)))
        assert scores["pass_at_1"] == round(1 / 3, 6)
    r = hermit(repo, "finalize", env=env_for(control))
    assert r.code == 0, r.err
    assert rev(repo, f"refs/tags/hermit/{RUN}/final") == rev(repo, step_ref(0))


# --- 2 and 9. streaming evolvers: finalize without a best tag; a spent stream is not an error -----
def test_finalize_without_best_tag_takes_the_last_tip_and_a_spent_stream_exits_0(repo):
    from support.continual_harness_helpers import _hermit, make_continual_run
    control = make_continual_run(repo, tasks=3)                     # step_size 3: one step spends the stream
    first = _hermit(repo, control, "step")
    assert first.returncode == 0, first.stderr + first.stdout
    before = (all_refs(repo), notes_snapshot(repo))
    again = _hermit(repo, control, "step")
    assert again.returncode == 0, again.stderr + again.stdout
    assert "the training stream is spent" in again.stdout + again.stderr
    assert "error:" not in again.stderr
    assert (all_refs(repo), notes_snapshot(repo)) == before
    final = _hermit(repo, control, "finalize")
    assert final.returncode == 0, final.stderr
    assert "final (last)" in final.stdout
    assert rev(repo, "refs/tags/hermit/r/final") == rev(repo, "refs/heads/hermit/r/step-0001")
    assert rev(repo, "refs/tags/hermit/r/best") == ""


# --- 7. re-running a command never loses data ------------------------------------------------------
def test_rollout_and_eval_twice_on_the_demo_leave_every_note_byte_identical(demo):
    before = notes_snapshot(demo)
    assert any(ref.endswith("/scores") for ref, _ in before[1])
    for n in range(5):                                      # every evaluated commit, all rows reused
        r = hermit(demo, "rollout", f"hermit/demo/step-{n:04d}")
        assert r.code == 0, r.err
        assert "24 rollouts reused" in r.out
    after = notes_snapshot(demo)
    assert after == before
    scores = json.loads(after[1][("refs/notes/hermit/scores", rev(demo, "hermit/demo/step-0001"))])
    assert scores["ci"] and scores["evaluation"]["flips"]
    assert json.loads(after[1][("refs/notes/hermit/scores", rev(demo, "hermit/demo/step-0004"))])["stop"]
    # a held-out eval writes its split once; the same eval again changes nothing
    args = ("eval", "hermit/demo/final", "--baseline", "hermit/demo/step-0000", "--split", "test")
    assert hermit(demo, *args).code == 0
    once = notes_snapshot(demo)
    assert once != before
    assert hermit(demo, *args).code == 0
    assert notes_snapshot(demo) == once
    for read_only in (("log",), ("show", "step-2"), ("log", "--json")):
        assert hermit(demo, *read_only).code == 0
    assert notes_snapshot(demo) == once
    # a partial rollout (--tasks) never replaces the whole record by a poorer one
    r = hermit(demo, "rollout", "hermit/demo/step-0001", "--tasks", "csv-1,units-2")
    assert r.code == 0, r.err
    assert notes_snapshot(demo) == once


# --- 8. rollout and eval take the run lock ---------------------------------------------------------
def test_rollout_and_eval_refuse_a_locked_run_or_wait_for_it(repo):
    from git_hermit.gitio import Repo, RunLock
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    lock = RunLock(Repo.discover(repo), RUN, "a test holding the lock").acquire()
    try:
        before = (all_refs(repo), notes_snapshot(repo))
        for args in (("rollout",), ("eval", step_ref(0), "--split", "train")):
            r = hermit(repo, *args, env=env_for(control))
            assert r.code == 6, r.out + r.err
            assert "locked by pid" in r.err and "hint:" in r.err
        assert calls(control, "agent") == []
        assert (all_refs(repo), notes_snapshot(repo)) == before
        waiting = Waiter(["rollout", "--wait"], repo, env=env_for(control))
        waiting.until("waiting for")
        assert waiting.proc.poll() is None and calls(control, "agent") == []
    finally:
        lock.release()
    done = waiting.finish()
    assert done.code == 0, done.out + done.err
    assert sorted(calls(control, "agent")) == ["t1#1", "t2#1"]


# --- 9. a finished run says so ---------------------------------------------------------------------
def _without_held_out(snapshot) -> dict:
    """Every note, the scores notes without their held-out ``splits`` (which `train` adds)."""
    texts = {}
    for (ref, commit), text in snapshot[1].items():
        data = json.loads(text)
        if ref.endswith("/scores"):
            data.pop("splits", None)
        texts[(ref, commit)] = data
    return texts


def test_step_and_train_on_a_finished_run_say_so_and_rewrite_nothing(demo):
    before = (all_refs(demo), notes_snapshot(demo))
    r = hermit(demo, "step")
    assert r.code == 0, r.out + r.err
    assert "finished" in r.out and "reached target_pass_rate" in r.out
    assert (all_refs(demo), notes_snapshot(demo)) == before
    # `train` says the same; it then runs the held-out test the demo never ran, which adds the
    # test split to the notes and rewrites nothing else; a second `train` changes nothing at all
    heads = lambda: [line for line in all_refs(demo).splitlines() if not line.startswith("refs/notes/")]
    r = hermit(demo, "train")
    assert r.code == 0, r.out + r.err
    assert "finished" in r.out and "reached target_pass_rate" in r.out
    assert heads() == [line for line in before[0].splitlines() if not line.startswith("refs/notes/")]
    assert _without_held_out(notes_snapshot(demo)) == _without_held_out(before[1])
    once = (all_refs(demo), notes_snapshot(demo))
    r = hermit(demo, "train")
    assert r.code == 0 and "finished" in r.out, r.out + r.err
    assert (all_refs(demo), notes_snapshot(demo)) == once


def test_a_finished_run_says_so_before_the_preflight_asks_for_credentials(demo, tmp_path):
    # the machine that merely looks at a finished run may lack what a step would need: the
    # answer is still "finished", exit 0, not the preflight's list of what is missing
    config = yaml.safe_load((demo / "hermit.yaml").read_text())
    config["agent"] = {"backend": "codex", "model": "gpt-5.6-luna"}
    (demo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    git(demo, "commit", "-qam", "the agent is codex now")
    env = {"HOME": str(tmp_path / "empty-home"), "CODEX_HOME": str(tmp_path / "no-codex"),
           "OPENAI_API_KEY": ""}
    assert hermit(demo, "check", env=env).code != 0            # the preflight does refuse a step
    heads = lambda: [line for line in all_refs(demo).splitlines() if not line.startswith("refs/notes/")]
    before = heads()
    r = hermit(demo, "step", env=env)
    assert r.code == 0, r.out + r.err
    assert "finished" in r.out and "reached target_pass_rate" in r.out
    assert heads() == before


def test_a_rerun_whose_rows_all_have_results_asks_nothing_of_the_machine(repo):
    # every row of the split already ran on this commit: `rollout` again reruns nothing, so a
    # missing agent program is no reason to refuse (the preflight stands for rollouts to come)
    control = make_run(repo, {"t1": "5", "t2": "7"}, k=1)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the benchmark")
    first = hermit(repo, "rollout", env=env_for(control))
    assert first.code == 0, first.err
    agent = control / "agent.py"
    agent.rename(control / "agent-moved.py")
    again = hermit(repo, "rollout", env=env_for(control))
    assert again.code == 0, again.err
    assert "pass@1" in again.out
    # one row without its result: the preflight names the missing program before anything runs
    shutil.rmtree(next((repo / ".hermit").rglob("t2/1")))
    missing = hermit(repo, "rollout", env=env_for(control))
    assert missing.code != 0 and "agent-moved" not in missing.err and "agent.py" in missing.err, missing.err


# --- 10. one step numbering ------------------------------------------------------------------------
def test_step_output_log_show_and_notes_agree_on_step_numbers(demo, demo_master):
    out = demo_master[1].out
    tip4 = rev(demo, "hermit/demo/step-0004")
    # step 5 ran the rollouts of H_4 (step-0004), which `log` shows on its row "step 4"
    assert f"step 5: rollouts of H_4 (hermit/demo/step-0004 {tip4[:12]}): pass@1 1.000" in out
    assert "step 4 made H_4: hermit/demo/step-0004 -> " + tip4[:12] in out
    log = hermit(demo, "log").out
    assert log.splitlines()[0].startswith("# row N is H_N (hermit/demo/step-NNNN), made by step N")
    row4 = next(line for line in log.splitlines() if line.startswith("step    4"))
    assert tip4[:10] in row4 and "pass@1 1.000" in row4
    show = hermit(demo, "show", "step-2").out
    assert "scores of this commit (train, k=2), measured by step 3's rollouts: pass@1" in show
    assert "verdict on chg-1: EFFECTIVE (judged by step 3's rollouts)" in show
    analysis = json.loads(git(demo, "notes", "--ref=hermit/analysis", "show", "hermit/demo/step-0002"))
    assert analysis["step"] == 2 and analysis["evaluated"] == "H_1"
    assert analysis["commit_evaluated"] == rev(demo, "hermit/demo/step-0001")
    # every path a note names exists where it says: in the run's records, in any clone that fetched it
    overview = analysis["overview"]
    detail = overview.split("Detail per task: `", 1)[1].split("`", 1)[0]
    listed = git(demo, "show", detail).splitlines()
    assert detail.startswith("hermit/demo/records:") and any(name.endswith(".md") for name in listed), (detail, listed)
    assert "`detail/" not in overview and "`state/" not in overview


# --- 11. learner usage survives a resume -----------------------------------------------------------
def evolve_then_collide(workspace: Path, prompt: str, key: str) -> str:
    """A scripted Evolve Agent that, on its first call, makes the step's publication fail by
    creating the step's branch itself (as a concurrent process would): the step then resumes."""
    from support.step_support import control_dir, evolve_session
    control = control_dir()
    text = evolve_session(workspace, prompt, key)
    marker = control / "collided"
    if not marker.exists():
        marker.write_text("")
        repo = Path((control / "repo").read_text())
        seed = git(repo, "rev-parse", step_ref(0)).strip()
        git(repo, "update-ref", step_ref(1), seed)
    return text


def test_learner_usage_of_cached_sessions_survives_a_resume(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    (control / "repo").write_text(str(repo))
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"]["scripted"]["evolve"] = "test_record:evolve_then_collide"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})}, changes=[change("chg-1", ["MEMORY.md"])])
    first = hermit(repo, "step", env=env_for(control))
    assert first.code == 4 and "published by another process" in first.err, first.out + first.err
    ledger = json.loads((repo / ".hermit/runs/r/step-0001/ledger.json").read_text())
    used = {role: sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"]
                      for e in ledger["entries"] if e["role"] == role) for role in ("debugger", "evolve")}
    assert used["debugger"] > 0 and used["evolve"] > 0
    git(repo, "update-ref", "-d", step_ref(1))
    second = hermit(repo, "step", env=env_for(control))
    assert second.code == 0, second.out + second.err
    assert len(calls(control, "evolve")) == 1 and sorted(calls(control, "debugger")) == ["t1", "t2"]
    analysis = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", step_ref(1)))
    for role in ("debugger", "evolve"):
        usage = analysis["ledger"][role]
        assert usage["input_tokens"] + usage["output_tokens"] == used[role], role
    resumed = json.loads((repo / ".hermit/runs/r/step-0001/ledger.json").read_text())
    assert {e["role"] for e in resumed["entries"]} >= {"debugger", "evolve"}
    assert "(learners: " in hermit(repo, "log").out


# --- 12. timeout_as: fail still tells the Debugger about the timeout -------------------------------
def debugger_recording(workspace: Path, prompt: str, key: str) -> str:
    from support.step_support import control_dir, debugger_session
    (control_dir() / f"debugger-prompt-{key}.md").write_text(prompt)
    return debugger_session(workspace, prompt, key)


def test_timeout_as_fail_labels_a_fail_and_tells_the_debugger_it_timed_out(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, params={"timeout_as": "fail"})
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"]["timeout_s"] = 2
    config["evolver"]["scripted"]["debugger"] = "test_record:debugger_recording"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (control / "hold-agent-t2").write_text("")             # t2's agent never answers: it times out
    try:
        r = hermit(repo, "step", env=env_for(control))
    finally:
        (control / "hold-agent-t2").unlink()
    assert r.code == 0, r.out + r.err
    scores = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", step_ref(0)))
    assert scores["tasks"]["t2"]["outcome"] == "fail"       # the label for the diff is fail
    prompt = (control / "debugger-prompt-t2.md").read_text()
    assert "1 of 1 rollouts timed out" in prompt and "TIMEOUT" in prompt, prompt[:2000]
