"""A synthetic run of any length for the scale tests (not a test module).

``build_run`` writes a run as `git hermit step` leaves it — change commits with their manifest and
verdict notes, rollback commits (Hermit-Reverts), scores and analysis notes on every step tip, a
held-out test split and best/final tags — with real git (`init`, commit-tree, one notes publication
per ref), so a test can make 2N steps as cheaply as N and compare what the CLI does on each.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from conftest import git
from support.project import build_project
from git_hermit.core.records import StepRecord, add_steps
from git_hermit.gitio import NOTES_REFS, NotesStore, Repo
from git_hermit.model.records import Analysis, Attempt, Change, Manifest, Scores, TaskScore, dumps

try:   # the verdict note's record, under its name before and after the records were renamed
    from git_hermit.model.records import VerdictNote
except ImportError:
    from git_hermit.model.records import Verdict as VerdictNote

TASKS = 6


def _scores(run: str, step: int, commit: str, seed: str, split: str = "train") -> Scores:
    tasks = {f"task-{i}": TaskScore("pass" if (i + step) % 3 else "fail",
                                    (Attempt("pass" if (i + step) % 3 else "fail", 1.0, tokens=100 + i),))
             for i in range(TASKS)}
    rate = sum(t.outcome == "pass" for t in tasks.values()) / len(tasks)
    return Scores(run, step + 1, commit, split, 1, rate, tasks, usage={"input_tokens": 1000, "output_tokens": 50})


def build_run(repo: Path, run: str, steps: int) -> None:
    """Run ``run`` (in a git repository) with ``steps`` steps after its seed; every third step also
    rolls back the change made by the step before it."""
    build_project(repo, init_args=("--run", run))
    seed = git(repo, "rev-parse", f"refs/heads/hermit/{run}/step-0000").strip()
    tree = git(repo, "rev-parse", f"{seed}^{{tree}}").strip()
    parent = seed
    for n in range(1, steps + 1):
        parent = git(repo, "commit-tree", tree, "-p", parent, "-m",
                     f"hermit(ahe) step {n}: chg-{n}: tweak memory\n\nHermit-Run: {run}\nHermit-Step: {n}\n"
                     f"Hermit-Evolver: ahe\nHermit-Change: chg-{n}").strip()
        if n % 3 == 0:   # roll back the previous step's change on this step's branch
            reverted = git(repo, "rev-parse", f"refs/heads/hermit/{run}/step-{n - 1:04d}").strip()
            parent = git(repo, "commit-tree", tree, "-p", parent, "-m",
                         f"hermit: roll back chg-{n - 1}\n\nHARMFUL on two tasks.\n\nHermit-Run: {run}\n"
                         f"Hermit-Step: {n}\nHermit-Reverts: {reverted}\nHermit-Verdict: HARMFUL").strip()
        git(repo, "update-ref", f"refs/heads/hermit/{run}/step-{n:04d}", parent)
    repo_obj = Repo.discover(repo)
    tips = {n: repo_obj.read_ref(f"refs/heads/hermit/{run}/step-{n:04d}") for n in range(steps + 1)}
    changes = {n: repo_obj.log(f"{tips[n - 1]}..{tips[n]}") for n in range(1, steps + 1)}
    manifests, verdicts, scores, analyses = {}, {}, {}, {}
    for n in range(1, steps + 1):
        change_commit = next(c.sha for c in changes[n] if ("Hermit-Change", f"chg-{n}") in c.trailers)
        change = Change(f"chg-{n}", f"tweak memory {n}", (f"lessons/{n}.md",), "forgets", ("task-1",),
                        ("task-2",), "memory")
        manifests[change_commit] = dumps("manifest", Manifest(run, n, (change,)))
        rolled = n % 3 == 2 and n + 1 <= steps
        rollback = next((c.sha for c in changes[n + 1] if any(k == "Hermit-Reverts" for k, _ in c.trailers)),
                        None) if rolled else None
        if n < steps:
            verdicts[change_commit] = dumps("verdicts", VerdictNote(
                run, n + 1, f"chg-{n}", "HARMFUL" if rolled else "EFFECTIVE", ("task-1",), (), (),
                evaluated_commit=tips[n], rollback_commit=rollback))
    for n in range(steps + 1):
        scores[tips[n]] = dumps("scores", _scores(run, n, tips[n], seed))
        analyses[tips[n]] = dumps("analysis", Analysis(run, n, "ahe", {
            "overview": f"step {n}", "ledger": {"debugger": {"input_tokens": 10, "output_tokens": 5}}}))
    final = _scores(run, steps, tips[steps], seed)
    test = _scores(run, steps, tips[steps], seed, split="test").split_summary()
    scores[tips[steps]] = dumps("scores", Scores(**{**final.__dict__, "splits": {"test": test}}))
    store = NotesStore(repo_obj)
    for kind, notes in (("manifest", manifests), ("verdicts", verdicts), ("scores", scores), ("analysis", analyses)):
        store.write_many(NOTES_REFS[kind], notes, "scale notes")
    git(repo, "tag", f"hermit/{run}/best", tips[steps])
    git(repo, "tag", f"hermit/{run}/final", tips[steps])
    # each step's records, as a step publishes them (the run is whole: a read command warns of none missing)
    update, _ = add_steps(repo_obj, run, {n: {"step.json": StepRecord(run, n, "ahe", tips[n - 1], tips[n]).to_json()}
                                          for n in range(1, steps + 1)}, "scale records")
    repo_obj.update_refs([update])
    repo_obj.close()


def counting_git(bin_dir: Path, log: Path) -> dict[str, str]:
    """An environment whose ``git`` appends each invocation to ``log`` and runs the real git."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
