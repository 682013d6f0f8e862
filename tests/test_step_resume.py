"""A `git hermit step` killed with SIGKILL in each phase leaves no step ref and no note, and
the same command resumes it: finished rollouts, Debugger sessions and Evolve sessions are not
run again. Also the run lock against a second concurrent step."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from support.cli_helpers import hermit
from conftest import git
from support.step_support import (RUN, calls, change, env_for, kill_group, make_run, memory_lines, plan, refs,
                          rollouts_dir, start_step, step_dir, wait_for)

ANSWERS = {"t1": "4", "t2": "7"}
STEP1 = f"refs/heads/hermit/{RUN}/step-0001"


def _run(repo: Path) -> Path:
    control = make_run(repo, ANSWERS, k=2)
    plan(control, 1, append={"MEMORY.md": memory_lines(ANSWERS)},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1", "t2"])], answer="remembered both answers")
    return control


def _resume_and_check_normal_step(repo: Path, control: Path) -> None:
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    seed = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0000").strip()
    tip = git(repo, "rev-parse", STEP1).strip()
    commits = git(repo, "rev-list", f"{seed}..{tip}").split()
    assert len(commits) == 1
    assert "Hermit-Change: chg-1" in git(repo, "log", "-1", "--format=%(trailers:only,unfold)", tip)
    assert json.loads(git(repo, "notes", "--ref=hermit/manifest", "show", tip))["changes"][0]["id"] == "chg-1"
    assert json.loads(git(repo, "notes", "--ref=hermit/scores", "show", seed))["pass_at_1"] == 0.0
    assert json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip))["step"] == 1
    assert git(repo, "rev-parse", f"refs/tags/hermit/{RUN}/best").strip() == seed
    history = (repo / ".hermit" / "runs" / RUN / "state" / "evolution_history.md").read_text()
    assert history.count("## Iteration 1 ") == 1 and "remembered both answers" in history
    assert not (repo / ".git" / "hermit" / f"{RUN}.lock").exists()   # the stale lock was taken over


def _published(repo: Path) -> str:
    """The refs, less the finished rollouts a step publishes when its rollout phase ends (its pending
    ref: a restart elsewhere reuses them; the step's own publication deletes it)."""
    return "".join(line + "\n" for line in refs(repo).splitlines() if not line.startswith(f"refs/hermit/{RUN}/pending "))


def _kill_in(repo: Path, control: Path, hold: str, ready) -> None:
    """Start a step, wait until it blocks on ``hold`` and ``ready()``, SIGKILL it, check that
    nothing was published, and release the hold for the rerun."""
    before = _published(repo)
    (control / f"hold-{hold}").write_text("")
    proc = start_step(repo, control)
    try:
        wait_for(ready, f"the step to reach hold-{hold}", proc)
    finally:
        kill_group(proc)
    assert _published(repo) == before          # no step ref, no notes, no best tag
    (control / f"hold-{hold}").unlink()


def test_kill_during_rollouts_resumes_without_rerunning_finished_ones(repo):
    control = _run(repo)
    rollouts = rollouts_dir(repo, 1)
    _kill_in(repo, control, "agent-t2", lambda: all(
        (rollouts / "t1" / str(i) / "result.json").is_file() and (control / f"held-agent-t2#{i}").exists()
        for i in (1, 2)))
    assert sorted(calls(control, "agent")) == ["t1#1", "t1#2", "t2#1", "t2#2"]
    _resume_and_check_normal_step(repo, control)
    assert sorted(calls(control, "agent")) == ["t1#1", "t1#2", "t2#1", "t2#1", "t2#2", "t2#2"]
    assert sorted(calls(control, "debugger")) == ["t1", "t2"]
    assert calls(control, "evolve") == ["step-1"]


def test_kill_during_debugger_keeps_finished_sessions(repo):
    control = _run(repo)
    out = step_dir(repo, 1) / "debugger"
    _kill_in(repo, control, "debugger-t2",
             lambda: (out / "t1.json").is_file() and (control / "held-debugger-t2").exists())
    _resume_and_check_normal_step(repo, control)
    assert len(calls(control, "agent")) == 4                          # no rollout re-run
    assert sorted(calls(control, "debugger")) == ["t1", "t2", "t2"]   # t1 finished before the kill
    assert calls(control, "evolve") == ["step-1"]


def test_kill_during_evolve_reruns_only_the_evolve_session(repo):
    control = _run(repo)
    _kill_in(repo, control, "evolve", lambda: (control / "held-evolve").exists())
    assert not (step_dir(repo, 1) / "evolve" / "result.json").exists()
    _resume_and_check_normal_step(repo, control)
    assert len(calls(control, "agent")) == 4
    assert sorted(calls(control, "debugger")) == ["t1", "t2"]
    assert calls(control, "evolve") == ["step-1", "step-1"]


HOOK = """#!/bin/sh
# Block the step's own ref transaction (the one that names its step branch) at "prepared",
# then abort it: the step process is killed while git holds the prepared transaction.
[ "$1" = prepared ] || exit 0
input=$(cat)
case "$input" in *refs/heads/hermit/{run}/step-*) ;; *) exit 0 ;; esac
[ -e "{control}/hold-commit" ] || exit 0
: > "{control}/held-commit"
while [ ! -e "{control}/release-commit" ]; do sleep 0.05; done
: > "{control}/hook-done"
exit 1
"""


def test_kill_during_commit_publishes_nothing_and_reuses_the_evolve_result(repo):
    control = _run(repo)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(HOOK.format(run=RUN, control=control))
    hook.chmod(0o755)
    before = _published(repo)
    (control / "hold-commit").write_text("")
    proc = start_step(repo, control)
    try:
        wait_for(lambda: (control / "held-commit").exists(), "the ref transaction", proc)
        # kill only the step (its git child must live to abort the transaction and drop its locks)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            kill_group(proc)
        (control / "release-commit").write_text("")
    proc.stdout.close()
    proc.stderr.close()
    wait_for(lambda: (control / "hook-done").exists(), "the hook to abort the transaction")
    wait_for(lambda: not list((repo / ".git" / "refs").rglob("*.lock")) + list((repo / ".git").glob("*.lock")),
             "git to drop its ref locks", timeout=10)
    # nothing published; only the keep-alive refs of the unpublished objects are left (gc-safe)
    assert "".join(line + "\n" for line in _published(repo).splitlines() if " refs/hermit-tmp/" not in f" {line}") == before
    assert (step_dir(repo, 1) / "evolve" / "result.json").is_file()
    (control / "hold-commit").unlink()
    _resume_and_check_normal_step(repo, control)
    assert not git(repo, "for-each-ref", "refs/hermit-tmp/")     # the rerun dropped them
    assert len(calls(control, "agent")) == 4
    assert sorted(calls(control, "debugger")) == ["t1", "t2"]
    assert calls(control, "evolve") == ["step-1"]                     # the finished session is reused


def test_second_step_while_one_runs_gets_exit_6(repo):
    control = _run(repo)
    (control / "hold-evolve").write_text("")
    proc = start_step(repo, control)
    try:
        wait_for(lambda: (control / "held-evolve").exists(), "the first step's evolve session", proc)
        before = refs(repo)
        r = hermit(repo, "step", env=env_for(control))
        assert r.code == 6, r.out + r.err
        err = "\n".join(l for l in r.err.splitlines() if not l.startswith("warning: "))   # hand-edit warnings
        assert err.startswith("error: ") and "git hermit step" in err and "Traceback" not in r.err
        assert refs(repo) == before
        (control / "hold-evolve").unlink()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            kill_group(proc)
    assert calls(control, "evolve") == ["step-1"]
    assert git(repo, "rev-parse", "--verify", "-q", STEP1, check=False).strip()
