"""A user's `git gc --prune=now` while `train` runs never prunes what a step is about to publish
(issue 23, item 10): its new blobs, trees, commits and notes commits wait in git-hermit's quarantine
until the ref transaction that references them.

`train` runs three steps while a second process runs `git gc --prune=now` back to back for the
whole time; before the quarantine it failed with "bad tree object", "invalid object" or
"trying to write ref … with nonexistent object" (exit 4) on every try here.
"""

from __future__ import annotations

import os
import subprocess
import threading

from support.cli_helpers import GIT_HERMIT
from conftest import git
from support.step_support import RUN, change, env_for, make_run, memory_lines, plan

ANSWERS = {"t1": "4", "t2": "7", "t3": "9"}


def test_train_survives_gc_prune_now_running_all_along(repo):
    control = make_run(repo, ANSWERS, k=1, allow_early_stop=False)
    for step, task in enumerate(ANSWERS, 1):
        plan(control, step, append={"MEMORY.md": memory_lines({task: ANSWERS[task]})},
             write={f"scripts/step{step}.py": f"print({step})\n"},
             changes=[change(f"chg-{step}", ["MEMORY.md", f"scripts/step{step}.py"], fixes=[task])])
    stop = threading.Event()
    runs: list[int] = []

    def prune() -> None:
        while not stop.is_set():
            done = subprocess.run(["git", "-c", "gc.reflogExpire=never", "-c", "gc.reflogExpireUnreachable=never",
                                   "gc", "--quiet", "--prune=now"], cwd=repo, capture_output=True, text=True)
            runs.append(done.returncode)

    pruner = threading.Thread(target=prune)
    pruner.start()
    try:
        train = subprocess.run([*GIT_HERMIT, "train", "--epochs", "3"], cwd=repo, capture_output=True, text=True,
                               env={**os.environ, **env_for(control)}, timeout=900)
    finally:
        stop.set()
        pruner.join()
    assert train.returncode == 0, train.stdout[-2000:] + train.stderr[-2000:]
    assert len(runs) >= 3, f"gc ran {len(runs)} times: too few to have raced the steps"
    for n in (1, 2, 3):
        assert git(repo, "rev-parse", "--verify", "-q", f"refs/heads/hermit/{RUN}/step-{n:04d}").strip()
    fsck = subprocess.run(["git", "fsck", "--full", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert not git(repo, "for-each-ref", "refs/hermit-tmp/")        # the keep-alive refs went with the steps
    quarantine = repo / ".git" / "hermit" / "objects"
    assert not quarantine.exists() or not any(quarantine.iterdir()), [(p, list(p.rglob("*"))) for p in quarantine.iterdir()]


def test_a_blob_already_in_the_database_but_unreachable_is_still_ours_until_published(repo):
    """A rollout's result.json identical to an unreachable copy (a discarded write, an earlier
    step's pending rollouts) was not written again; `gc --prune=now` then removed it and the
    records tree failed with "object … is unavailable". Written into the quarantine, it survives."""
    from git_hermit.gitio import Repo
    content = b'{"reward": 1.0}\n'
    loose = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=content, capture_output=True,
                           check=True).stdout.decode().strip()                      # unreachable, in the database
    with Repo.discover(repo) as r:
        [sha] = r.write_blobs([content])
        assert sha == loose
        git(repo, "gc", "--prune=now", "--quiet")
        assert subprocess.run(["git", "cat-file", "-e", loose], cwd=repo).returncode != 0   # pruned from the database
        tree = r.write_tree(None, {"result.json": ("100644", sha)})                         # still readable by us
        assert r.read_blob(tree, "result.json") == content
