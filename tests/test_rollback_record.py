"""Rollbacks the record can be trusted on (issue 8, items 3-6), through the real executable:
overlapping changes reported by check_spec and committed as one honest group; `git hermit
rollback` as a three-way revert (and its refusal on a conflict, and `--force`); the Evolve
Agent's read-only copies of the adapter before each judged change; and flips a rollback
caused kept out of the prediction precision/recall. Only the learners are scripted."""

from __future__ import annotations

import json
import os
import stat

from support.cli_helpers import hermit
from conftest import git, snapshot_state
from support.step_support import RUN, change, env_for, make_run, memory_lines, plan, step_dir
from support.step_helpers import HARMFUL_STEP2, _three_steps, chain, note, rev, run_step, step_ref, trailers, tree


def _log(repo) -> dict:
    r = hermit(repo, "log", "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


# --- item 3: one change, one commit, or an honest group ------------------------------------------
def test_check_spec_reports_overlapping_changes_while_the_agent_can_fix_them(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, allow_early_stop=False)
    overlapping = [change("chg-a", ["MEMORY.md"], fixes=["t1"]),
                   change("chg-b", ["./MEMORY.md", "scripts/helper.py"], fixes=["t2"])]
    merged = [change("chg-a", ["MEMORY.md", "scripts/helper.py"], fixes=["t1", "t2"])]
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4", "t2": "7"})},
         write={"scripts/helper.py": "print(1)\n"}, changes=overlapping, check=True, fixed_changes=merged)
    plan(control, 2, append={"MEMORY.md": "- a lesson\n"}, write={"scripts/other.py": "print(2)\n"},
         changes=[change("chg-c", ["MEMORY.md"]), change("chg-d", ["scripts/other.py"])], check=True)
    run_step(repo, control)
    run_step(repo, control)
    first = (control / "check_spec-1.txt").read_text()
    code, said = first.split("\n", 1)
    assert code == "1", first
    assert "chg-a" in said and "chg-b" in said and "MEMORY.md" in said and "overlap" in said, said
    # the agent fixed its manifest: one change, one commit
    seed, tip1 = rev(repo, step_ref(0)), rev(repo, step_ref(1))
    assert chain(repo, tip1, seed) == [tip1]
    assert [c["id"] for c in note(repo, "manifest", tip1)["changes"]] == ["chg-a"]
    code2, said2 = (control / "check_spec-2.txt").read_text().split("\n", 1)
    assert code2 == "0", said2                                   # disjoint changes pass
    assert len(chain(repo, rev(repo, step_ref(2)), tip1)) == 2


GROUP_STEP2 = dict(
    append={"MEMORY.md": memory_lines({"t3": "9", "t2": "8"})}, write={"scripts/helper.py": "print(2)\n"},
    changes=[change("chg-e", ["MEMORY.md"], fixes=["t3"]),
             change("chg-h", ["MEMORY.md", "scripts/helper.py"], fixes=["t1"], risks=["t2"])])


def test_two_changes_on_one_file_are_one_group_rolled_back_whole(repo):
    _three_steps(repo, "auto", step2=GROUP_STEP2, step3_change=False)
    tip1, tip2, tip3 = (rev(repo, step_ref(n)) for n in (1, 2, 3))
    # step 2: ONE commit carries both changes, every id, prediction and risk in its trailers
    assert chain(repo, tip2, tip1) == [tip2]
    t = trailers(repo, tip2)
    assert "Hermit-Change: chg-e, chg-h" in t
    assert "Hermit-Predicts-Fix: chg-e: t3" in t and "Hermit-Predicts-Fix: chg-h: t1" in t
    assert "Hermit-Risk: chg-e: none" in t and "Hermit-Risk: chg-h: t2" in t
    assert [c["id"] for c in note(repo, "manifest", tip2)["changes"]] == ["chg-e", "chg-h"]
    assert note(repo, "analysis", tip2)["change_groups"] == [
        {"changes": ["chg-e", "chg-h"], "shared_files": ["MEMORY.md"]}]
    # step 3: chg-e EFFECTIVE, chg-h HARMFUL: the group's commit is reverted whole, and said so
    rollback = chain(repo, tip3, tip2)[0]
    assert f"Hermit-Reverts: {tip2}" in trailers(repo, rollback)
    assert tree(repo, rollback) == tree(repo, tip1)                # both files, nothing left behind
    body = git(repo, "log", "-1", "--format=%B", rollback)
    assert "chg-e (EFFECTIVE) is rolled back with chg-h" in body, body
    step2 = {c["id"]: c["verdict"] for c in _log(repo)["steps"][2]["changes"]}
    assert step2["chg-h"]["verdict"] == "HARMFUL" and step2["chg-e"]["verdict"] == "EFFECTIVE"
    assert step2["chg-h"]["rollback_commit"] == rollback == step2["chg-e"]["rollback_commit"]
    assert step2["chg-e"]["rollback_note"] == "rolled back with chg-h (rollback: auto)"
    assert step2["chg-h"]["rollback_note"] == "rollback: auto"
    r = hermit(repo, "show", tip2)
    assert "rolled back with chg-h" in r.out, r.out


def test_manual_rollback_of_a_group_member_reverts_the_group_and_says_so(repo):
    _three_steps(repo, "agent", step2=GROUP_STEP2, step3_change=False)
    tip1, tip2, tip3 = (rev(repo, step_ref(n)) for n in (1, 2, 3))
    r = hermit(repo, "rollback", "chg-e", "--reason", "undo the group", "--run", RUN)
    assert r.code == 0, r.err
    assert "chg-e, chg-h" in r.out
    new = rev(repo, step_ref(3))
    assert tree(repo, new) == tree(repo, tip1)
    body = git(repo, "log", "-1", "--format=%B", new)
    assert "rollback chg-e, chg-h" in body and "chg-h is rolled back with chg-e" in body, body
    step2 = {c["id"]: c["verdict"] for c in _log(repo)["steps"][2]["changes"]}
    assert step2["chg-e"]["rollback_note"] == "undo the group"
    assert step2["chg-h"]["rollback_note"] == "rolled back with chg-e: undo the group"


# --- item 4: `git hermit rollback` keeps later work ------------------------------------------------
def _two_memory_steps(repo, step2_memory):
    """Step 1's chg-1 appends a line to MEMORY.md; step 2's chg-2 writes ``step2_memory(text)``."""
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, allow_early_stop=False, params={"rollback": "agent"})
    seed_memory = (repo / "adapter" / "MEMORY.md").read_text()
    after1 = seed_memory + memory_lines({"t1": "4"})
    plan(control, 1, write={"MEMORY.md": after1}, changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    plan(control, 2, write={"MEMORY.md": step2_memory(after1)}, changes=[change("chg-2", ["MEMORY.md"], fixes=["t2"])])
    run_step(repo, control)
    run_step(repo, control)
    return control, seed_memory


def _insert_after_header(text: str) -> str:
    head, rest = text.split("\n", 1)
    return head + "\n" + memory_lines({"t2": "7"}) + rest


def test_rollback_of_an_older_change_is_a_three_way_revert(repo):
    _, seed_memory = _two_memory_steps(repo, _insert_after_header)
    tip1, tip2 = rev(repo, step_ref(1)), rev(repo, step_ref(2))
    status = git(repo, "status", "--porcelain")
    r = hermit(repo, "rollback", "chg-1", "--reason", "t1 is wrong", "--run", RUN)
    assert r.code == 0, r.err
    new = rev(repo, step_ref(2))
    assert git(repo, "rev-parse", f"{new}^").strip() == tip2
    # chg-1's line is gone, chg-2's (later, elsewhere in the file) stays
    assert git(repo, "show", f"{new}:adapter/MEMORY.md") == _insert_after_header(seed_memory)
    assert f"Hermit-Reverts: {tip1}" in trailers(repo, new)
    assert "Hermit-Removes-Lines-Of" not in trailers(repo, new)
    log = _log(repo)
    [c1] = log["steps"][1]["changes"]
    [c2] = log["steps"][2]["changes"]
    assert c1["rolled_back_by"] == new and c2.get("lines_removed_by") == []
    assert git(repo, "status", "--porcelain") == status           # work tree and index untouched


def test_rollback_refuses_a_conflict_naming_the_later_commits_then_force(repo):
    def rewrite_t1(text: str) -> str:   # chg-2 edits the very line chg-1 added
        return text.replace("- answer t1: 4\n", "- answer t1: 4 (checked)\n- answer t2: 7\n")
    _, seed_memory = _two_memory_steps(repo, rewrite_t1)
    tip1, tip2 = rev(repo, step_ref(1)), rev(repo, step_ref(2))
    before = snapshot_state(repo)
    r = hermit(repo, "rollback", "chg-1", "--reason", "t1 is wrong", "--run", RUN)
    assert r.code == 14, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), r.err
    assert tip2[:10] in lines[0] and "chg-2" in lines[0] and "MEMORY.md" in lines[0]
    assert "--force" in lines[1]
    assert snapshot_state(repo) == before
    # --force: the file-wise restore, which names the later change whose lines it removes
    r = hermit(repo, "rollback", "chg-1", "--reason", "t1 is wrong", "--force", "--run", RUN)
    assert r.code == 0, r.err
    new = rev(repo, step_ref(2))
    assert git(repo, "show", f"{new}:adapter/MEMORY.md") == seed_memory
    t = trailers(repo, new)
    assert f"Hermit-Reverts: {tip1}" in t and f"Hermit-Removes-Lines-Of: {tip2}" in t
    log = _log(repo)
    [c2] = log["steps"][2]["changes"]
    assert c2["lines_removed_by"] == [new]
    text = hermit(repo, "log").out
    assert f"chg-2: pending (lines removed by rollback {new[:10]})" in text, text
    assert f"chg-1: EFFECTIVE (rolled back by {new[:10]})" in text, text


# --- item 5: rollback: agent can be carried out ---------------------------------------------------
def test_evolve_workspace_holds_the_adapter_before_each_judged_change(repo):
    _three_steps(repo, "agent", step2=HARMFUL_STEP2, step3_change=False)
    tip1 = rev(repo, step_ref(1))
    workspace = step_dir(repo, 3) / "evolve" / "workspace"
    before = workspace / "before" / "chg-2"
    assert (before / "MEMORY.md").read_text() == git(repo, "show", f"{tip1}:adapter/MEMORY.md")
    assert not (before / "scripts" / "helper.py").exists()          # chg-2 added it
    assert (before / "AGENTS.md").is_file()                          # the whole adapter, not a diff
    for path in [before, *before.rglob("*")]:
        assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
    query = (workspace / "QUERY.md").read_text()
    assert "before/chg-2/" in query
    # a re-run of the step's Evolve phase can still clear the read-only copy
    assert os.access(workspace, os.W_OK)


# --- item 6: flips a rollback caused are the rollback's ---------------------------------------------
def test_flip_caused_by_an_automatic_rollback_is_not_an_unpredicted_fix(repo):
    control = _three_steps(repo, "auto", step2=HARMFUL_STEP2)     # step 3 rolls chg-2 back, adds chg-3
    run_step(repo, control)                                         # step 4: t2 back (rollback), t3 (chg-3)
    tip4 = rev(repo, step_ref(4))
    analysis = note(repo, "analysis", tip4)
    assert analysis["flips"]["flipped"] == 2                       # both flips are shown ...
    assert list(analysis["rollback_flips"]) == ["t2"]              # ... t2's is the rollback's
    assert "chg-2" in analysis["rollback_flips"]["t2"]
    step = analysis["precision_recall"]["step"]
    assert step["counts"]["flipped"] == 1 and step["fix_recall"] == 1.0
    run = analysis["precision_recall"]["run"]
    assert run["fix_recall"] == 1.0, run


def test_rollback_takes_the_run_lock_itself_not_the_cli(repo):
    """Issue 14.6: the core command takes the run lock, like step/rollout/eval (cli.py only parses):
    called while another holder has the lock, it refuses and writes nothing."""
    import pytest
    from git_hermit.core.rollback import rollback
    from git_hermit.errors import LockHeld
    from git_hermit.gitio import Repo, RunLock
    _two_memory_steps(repo, _insert_after_header)
    before = rev(repo, step_ref(2))
    store = Repo.discover(repo)
    with RunLock(store, RUN, "a test holding the lock"):
        with pytest.raises(LockHeld):
            rollback(store, RUN, "chg-1", "t1 is wrong")
    assert rev(repo, step_ref(2)) == before
    result = rollback(store, RUN, "chg-1", "t1 is wrong")     # free again: it runs
    assert rev(repo, step_ref(2)) == result.plan.commit != before


def test_rollback_and_finalize_wait_for_a_held_lock_with_wait(repo):
    """Like step, rollout and eval: with --wait, rollback and finalize wait for the run lock that
    another process holds (saying so on stderr), then run; without it they exit 6."""
    from support.cli_helpers import Waiter
    from git_hermit.gitio import Repo, RunLock
    _two_memory_steps(repo, _insert_after_header)
    before = rev(repo, step_ref(2))
    lock = RunLock(Repo.discover(repo), RUN, "a test holding the lock").acquire()
    try:
        refused = hermit(repo, "rollback", "chg-1", "--reason", "t1 is wrong")
        assert refused.code == 6 and "--wait" in refused.err
        waiting = Waiter(["rollback", "chg-1", "--reason", "t1 is wrong", "--wait"], repo)
        waiting.until("waiting for the run lock")
        assert waiting.proc.poll() is None and rev(repo, step_ref(2)) == before
    finally:
        lock.release()
    done = waiting.finish()
    assert done.code == 0, done.out + done.err
    assert "rolled back chg-1" in done.out
    assert rev(repo, step_ref(2)) != before

    lock = RunLock(Repo.discover(repo), RUN, "a test holding the lock").acquire()
    try:
        waiting = Waiter(["finalize", "--wait"], repo)
        waiting.until("waiting for the run lock")
        assert waiting.proc.poll() is None
        assert git(repo, "tag", "--list", f"hermit/{RUN}/final").strip() == ""
    finally:
        lock.release()
    done = waiting.finish()
    assert done.code == 0, done.out + done.err
    assert git(repo, "tag", "--list", f"hermit/{RUN}/final").strip() == f"hermit/{RUN}/final"
