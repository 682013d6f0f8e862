"""A scores note's usage is what every rollout whose result it holds cost, each counted once,
whichever machine ran it: a `rollout` re-run adds its new rows' usage and nothing for the rows
it reused; a row run again (a clone has no result files) adds its new rollout's cost to the
one it replaced, which was spent too; two machines' notes on one commit merge by adding what
each spent beyond their common base; a row both ran differently keeps its worse attempt and
records the other beside it. Every rollout of the scripted agent costs $0.02."""

from __future__ import annotations

import json

import pytest
import yaml

from support.budget_support import ROLLOUT_TOKENS, ROLLOUT_USD
from support.cli_helpers import hermit
from conftest import git
from support.review_support import teammate_clone
from support.step_support import RUN, calls, env_for
from support.budget_helpers import ANSWERS, BUDGET_EXIT, _add_test_split, _close, _edit, _estimate, _run, _scores_note

SEED = f"hermit/{RUN}/step-0000"


def _seed_sha(repo) -> str:
    return git(repo, "rev-parse", SEED).strip()


def _rollouts(record: dict) -> int:
    return sum(len(t["attempts"]) for t in record["tasks"].values())


def _pass_at_1(record: dict) -> float:
    tasks = record["tasks"].values()
    return sum(sum(a["outcome"] == "pass" for a in t["attempts"]) / len(t["attempts"]) for t in tasks) / len(tasks)


def _assert_costs(record: dict, rollouts: int) -> None:
    """The record's usage and usage_by_role are those of ``rollouts`` scripted rollouts."""
    assert record["usage"]["cost_usd"] == pytest.approx(rollouts * ROLLOUT_USD), record["usage"]
    assert record["usage"]["input_tokens"] + record["usage"]["output_tokens"] == rollouts * ROLLOUT_TOKENS
    assert record["usage_by_role"]["acting"]["cost_usd"] == pytest.approx(rollouts * ROLLOUT_USD)
    assert record["usage_by_role"]["acting"]["input_tokens"] == rollouts * 1000


def test_a_rollout_of_new_rows_adds_their_usage_to_the_note_and_reused_rows_add_nothing(repo):
    control = _run(repo, None)
    _add_test_split(repo)
    env = env_for(control)
    assert hermit(repo, "rollout", SEED, "--split", "test", "--tasks", "t1", env=env).code == 0
    _assert_costs(_scores_note(repo, SEED), 1)
    # two new rows: the note holds three results and what the three cost
    r = hermit(repo, "rollout", SEED, "--split", "test", "--tasks", "t2,t3", env=env)
    assert r.code == 0, r.out + r.err
    note = _scores_note(repo, SEED)
    assert _rollouts(note) == 3
    _assert_costs(note, 3)
    # the whole split: t1-t3 reused (nothing added), t4 new
    assert hermit(repo, "rollout", SEED, "--split", "test", env=env).code == 0
    _assert_costs(_scores_note(repo, SEED), 4)
    assert len(calls(control, "agent")) == 4
    # `-k`: a second attempt of t1 is a new row, the first one is reused
    (repo / "rows" / "bare.txt").write_text("".join(f"{t}\n" for t in ANSWERS))     # k from the command
    _edit(repo, data={**yaml.safe_load((repo / "hermit.yaml").read_text())["data"], "bare": "rows/bare.txt"})
    for args in (("--tasks", "t1,t2", "-k", "1"), ("--tasks", "t1", "-k", "2")):
        r = hermit(repo, "rollout", SEED, "--split", "bare", *args, env=env)
        assert r.code == 0, r.out + r.err
    note = _scores_note(repo, SEED)
    assert note["split"] == "test" and _rollouts(note["splits"]["bare"]) == 3
    _assert_costs(note["splits"]["bare"], 3)
    _assert_costs(note, 4)
    assert len(calls(control, "agent")) == 7
    # a re-run of rows that all have results changes nothing
    before = git(repo, "rev-parse", "refs/notes/hermit/scores")
    assert hermit(repo, "rollout", SEED, "--split", "bare", "--tasks", "t1,t2", "-k", "1", env=env).code == 0
    assert git(repo, "rev-parse", "refs/notes/hermit/scores") == before
    # the note and the ledger agree on what was spent
    assert _estimate(repo, control)["spent"]["cost_usd"] == pytest.approx(7 * ROLLOUT_USD)


def test_a_clones_rollout_of_the_tips_rows_keeps_what_the_origin_spent_on_them(repo, tmp_path):
    control = _run(repo, None)
    env = env_for(control)
    r = hermit(repo, "rollout", "--tasks", "t1,t2", env=env)       # the tip's training rows: 4 of 8
    assert r.code == 0, r.out + r.err
    _assert_costs(_scores_note(repo, SEED), 4)
    other = teammate_clone(repo, tmp_path)
    # the clone has none of the result files: it runs all 8 rows, 4 of them again
    r = hermit(other, "rollout", env=env)
    assert r.code == 0, r.out + r.err
    assert len(calls(control, "agent")) == 4 + 8
    note = _scores_note(other, SEED)
    assert _rollouts(note) == 8
    _assert_costs(note, 12)                  # the origin's 4 rollouts were spent too
    spent = _estimate(other, control)["spent"]
    assert spent["cost_usd"] == pytest.approx(12 * ROLLOUT_USD)
    assert hermit(other, "push").code == 0 and hermit(repo, "fetch").code == 0
    _assert_costs(_scores_note(repo, SEED), 12)
    assert _close(_estimate(repo, control)["spent"], spent)


@pytest.mark.parametrize("budget", [{"max_usd": 10.0}, None], ids=["budget", "no-budget"])
def test_a_clones_step_on_rows_the_origin_ran_notes_both_machines_rollouts_as_its_ledger_does(repo, tmp_path, budget):
    control = _run(repo, None)
    env = env_for(control)
    assert hermit(repo, "rollout", "--tasks", "t1,t2", env=env).code == 0       # 4 of the step's 8 rows
    other = teammate_clone(repo, tmp_path)
    _edit(other, budget=budget)
    r = hermit(other, "step", env=env)          # runs all 8 rows: their files are not here
    assert r.code == 0, r.out + r.err
    assert len(calls(control, "agent")) == 4 + 8
    note = _scores_note(other, SEED)
    _assert_costs(note, 12)
    step = _estimate(other, control)
    assert step["per_step"]["acting"]["cost_usd"]["mean"] == pytest.approx(12 * ROLLOUT_USD)
    assert step["spent"]["by_role"]["acting"]["cost_usd"] == pytest.approx(12 * ROLLOUT_USD)


def test_origin_and_clone_running_different_rows_of_one_commit_merge_to_the_sum(repo, tmp_path):
    control = _run(repo, None)
    _add_test_split(repo)
    env = env_for(control)
    other = teammate_clone(repo, tmp_path)
    (other / "rows" / "test.txt").write_text((repo / "rows" / "test.txt").read_text())
    # each machine runs its own rows of the tip's training split and of the held-out split
    for place, train, test in ((repo, "t1,t2", "t1"), (other, "t3", "t2,t3")):
        for split, tasks in (("test", test), ("train", train)):
            r = hermit(place, "rollout", "--split", split, "--tasks", tasks, env=env)
            assert r.code == 0, r.out + r.err
    assert hermit(other, "push").code == 0
    r = hermit(repo, "push")                 # merges the clone's note with its own, then pushes
    assert r.code == 0, r.out + r.err
    assert hermit(other, "fetch").code == 0
    for place in (repo, other):
        note = _scores_note(place, SEED)
        assert note["split"] == "train" and sorted(note["tasks"]) == ["t1", "t2", "t3"]
        assert _rollouts(note) == 6 and note["k"] == 2
        _assert_costs(note, 6)
        test = note["splits"]["test"]
        assert sorted(test["tasks"]) == ["t1", "t2", "t3"]
        _assert_costs(test, 3)
        assert note["pass_at_1"] == pytest.approx(_pass_at_1(note)) and test["pass_at_1"] == pytest.approx(_pass_at_1(test))
    assert _scores_note(repo, SEED) == _scores_note(other, SEED)
    seen = [_estimate(place, control) for place in (repo, other)]
    assert seen[0]["spent"]["cost_usd"] == pytest.approx(9 * ROLLOUT_USD)
    assert _close(seen[0]["spent"], seen[1]["spent"]) and seen[0]["unfinished"] == seen[1]["unfinished"]
    # the budget reads the same spending in both: reached, with the same figures
    agent_calls = len(calls(control, "agent"))
    said = []
    for place in (repo, other):
        _edit(place, budget={"max_usd": round(8.5 * ROLLOUT_USD, 4)})
        r = hermit(place, "rollout", "--split", "test", env=env)
        assert r.code == BUDGET_EXIT and "budget reached" in r.err and "spent $0.18" in r.err, r.out + r.err
        said.append([line for line in r.err.splitlines() if line.startswith(("error:", "hint:"))])
    assert said[0] == said[1] and len(said[0]) == 2 and len(calls(control, "agent")) == agent_calls
    # room for the rest: each machine runs only the rows it lacks, and the note adds them once
    for place in (repo, other):
        _edit(place, budget={"max_usd": 1.0})
    r = hermit(repo, "rollout", "--split", "test", env=env)
    assert r.code == 0, r.out + r.err
    _assert_costs(_scores_note(repo, SEED)["splits"]["test"], 6)      # t2, t3 again and t4: 3 more
    assert hermit(repo, "push").code == 0 and hermit(other, "fetch").code == 0
    assert _close(_estimate(other, control)["spent"], _estimate(repo, control)["spent"])
    assert _estimate(other, control)["spent"]["cost_usd"] == pytest.approx(12 * ROLLOUT_USD)


def test_an_old_note_without_usage_by_role_reads_as_the_agents_and_gains_the_new_rows(repo):
    control = _run(repo, None)
    _add_test_split(repo)
    env = env_for(control)
    assert hermit(repo, "rollout", SEED, "--split", "test", "--tasks", "t1,t2", env=env).code == 0
    note = _scores_note(repo, SEED)
    del note["usage_by_role"]
    git(repo, "notes", "--ref", "refs/notes/hermit/scores", "add", "-f", "-m", json.dumps(note), SEED)
    assert hermit(repo, "rollout", SEED, "--split", "test", "--tasks", "t3", env=env).code == 0
    note = _scores_note(repo, SEED)
    _assert_costs(note, 3)
    assert list(note["usage_by_role"]) == ["acting"]


def _note(tasks: dict, usage: dict | None, **extra) -> dict:
    note = {"v": 1, "run": "r", "step": 1, "commit": "c" * 40, "split": "train", "k": 1, "pass_at_1": 0.0,
            "pass_at": {"1": 0.0}, "tasks": {t: {"outcome": o, "attempts": [{"outcome": o, "reward": float(o == "pass")}]} for t, o in tasks.items()},
            **extra}
    if usage is not None:
        note["usage"] = usage
    return note


def _usage(tokens: int, cost: float | None) -> dict:
    return {"input_tokens": tokens, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "cost_usd": cost}


def test_the_scores_note_merge_adds_each_sides_spending_and_keeps_conflicts_and_unknown_costs():
    from git_hermit.core.scores_notes import merge_scores_notes
    from git_hermit.model.merge import FieldConflict
    base = _note({"a": "pass"}, _usage(100, 1.0))
    ours = _note({"a": "pass", "b": "fail"}, _usage(150, 1.5), duration_s=2.0)
    theirs = _note({"a": "pass", "c": "pass"}, _usage(130, 1.25),
                   usage_by_role={"acting": _usage(100, 1.0), "judge": _usage(30, 0.25)}, duration_s=1.0)
    merged = merge_scores_notes(base, ours, theirs)
    assert sorted(merged["tasks"]) == ["a", "b", "c"] and merged["pass_at_1"] == pytest.approx(2 / 3)
    assert merged["usage"]["input_tokens"] == 180 and merged["usage"]["cost_usd"] == pytest.approx(1.75)
    # a side older than usage_by_role reads as its agents'
    assert merged["usage_by_role"]["acting"]["input_tokens"] == 150 and merged["usage_by_role"]["judge"]["input_tokens"] == 30
    assert merged["duration_s"] == 3.0
    # no common base (two clones' first rollouts): the sum
    assert merge_scores_notes(None, ours, theirs)["usage"]["input_tokens"] == 280
    # a side whose cost is unknown makes the sum's unknown, never a guess
    assert merge_scores_notes(base, ours, {**theirs, "usage": _usage(130, None)})["usage"]["cost_usd"] is None
    # a field no rule merges, changed differently on both sides, stays a conflict naming it
    with pytest.raises(FieldConflict) as raised:
        merge_scores_notes(base, {**ours, "stop": "here"}, {**theirs, "stop": "there"})
    assert raised.value.path == "stop"


def test_a_held_out_split_one_side_moved_under_splits_merges_with_the_others_new_rows():
    from git_hermit.core.scores_notes import merge_scores_notes
    base = {**_note({"a": "fail"}, _usage(100, 1.0), duration_s=5.0), "split": "test"}
    entry = {k: base[k] for k in ("k", "pass_at_1", "pass_at", "tasks", "usage", "step")}
    ours = {**_note({"a": "pass"}, _usage(40, 0.5), duration_s=1.0), "splits": {"test": entry}}     # ran train
    theirs = {**_note({"a": "fail", "b": "pass"}, _usage(130, 1.25), duration_s=7.0), "split": "test"}
    merged = merge_scores_notes(base, ours, theirs)
    assert merged["split"] == "train" and merged["usage"]["input_tokens"] == 40 and merged["duration_s"] == 1.0
    test = merged["splits"]["test"]
    assert sorted(test["tasks"]) == ["a", "b"] and test["usage"]["cost_usd"] == pytest.approx(1.25)
    assert "duration_s" not in test and "run" not in test
    from git_hermit.model.records import canonical_json, loads
    loads("scores", canonical_json(merged), where="test")      # still a valid scores note


@pytest.mark.parametrize("first, merge", [("origin", "push"), ("clone", "fetch")])
def test_the_same_row_run_differently_on_two_machines_merges_keeping_the_fail_and_the_disagreement(
        repo, tmp_path, first, merge):
    control = _run(repo, None)
    _add_test_split(repo)
    env = env_for(control)
    other = teammate_clone(repo, tmp_path)
    (other / "rows" / "test.txt").write_text((repo / "rows" / "test.txt").read_text())
    # t1's rows on both machines: here the agent knows t1's answer (pass), there it does not (fail)
    right = {**env, "HERMIT_TEST_ANSWER_t1": ANSWERS["t1"], "HERMIT_TEST_ANSWER_t3": ANSWERS["t3"]}
    for place, tasks, answers in ((repo, "t1,t3", right), (other, "t1,t2", env)):
        for split, rows in (("test", "t1"), ("train", tasks)):        # and t1#1 of the held-out split
            r = hermit(place, "rollout", "--split", split, "--tasks", rows, env=answers)
            assert r.code == 0, r.out + r.err
    pushes = (repo, other) if first == "origin" else (other, repo)
    assert hermit(pushes[0], "push").code == 0
    r = hermit(pushes[1], merge)                  # merges the other's note with its own: no exit 15
    assert r.code == 0, r.out + r.err
    said = [line for line in r.out.splitlines() if "t1#" in line]      # one line per such row
    assert len(said) == 3 and all(row in " ".join(said) for row in ("t1#1 ", "t1#2 ", "(test)")), r.out
    assert all("kept fail" in line and "pass" in line and _seed_sha(repo)[:12] in line for line in said), said
    if merge == "fetch":
        assert hermit(pushes[1], "push").code == 0
    assert hermit(pushes[0], "fetch").code == 0
    texts = [git(place, "notes", "--ref", "refs/notes/hermit/scores", "show", SEED) for place in (repo, other)]
    assert texts[0] == texts[1]                   # byte-identical on both machines
    note = json.loads(texts[0])
    # rows stay rows: k attempts per task, the worse outcome kept, pass@k from the kept attempts
    assert sorted(note["tasks"]) == ["t1", "t2", "t3"] and note["k"] == 2 and _rollouts(note) == 6
    assert [a["outcome"] for a in note["tasks"]["t1"]["attempts"]] == ["fail", "fail"]
    assert note["tasks"]["t1"]["outcome"] == "fail" and note["tasks"]["t3"]["outcome"] == "pass"
    assert note["pass_at_1"] == pytest.approx(_pass_at_1(note)) == pytest.approx(1 / 3)
    assert note["pass_at"]["2"] == pytest.approx(1 / 3)
    # the other outcome of each such row is kept beside it
    assert [(d["attempt"], d["outcome"]) for d in note["tasks"]["t1"]["disagreed"]] == [(1, "pass"), (2, "pass")]
    assert all("disagreed" not in note["tasks"][t] for t in ("t2", "t3"))
    # all 8 rollouts were paid for: 4 here, 4 there
    _assert_costs(note, 8)
    test = note["splits"]["test"]
    assert test["tasks"]["t1"]["attempts"][0]["outcome"] == "fail" and test["pass_at_1"] == 0.0
    assert [(d["attempt"], d["outcome"]) for d in test["tasks"]["t1"]["disagreed"]] == [(1, "pass")]
    _assert_costs(test, 2)
    assert len(calls(control, "agent")) == 10
    # show names the disagreement; --json carries it
    for place in (repo, other):
        shown = hermit(place, "show", SEED)
        lines = [line for line in shown.out.splitlines() if "disagree" in line]
        assert shown.code == 0 and len(lines) == 2, shown.out
        assert lines[0].split(":")[0].strip() == "train" and "t1#1 fail/pass, t1#2 fail/pass" in lines[0]
        assert lines[1].split(":")[0].strip() == "test" and "t1#1 fail/pass" in lines[1]
        data = json.loads(hermit(place, "show", SEED, "--json").out)["commits"][-1]
        assert data["scores"]["tasks"]["t1"]["disagreed"] == note["tasks"]["t1"]["disagreed"]
    # log's row of the seed says so (the held-out split's row is shown by show)
    for place in (repo, other):
        seed_row = next(line for line in hermit(place, "log").out.splitlines() if line.startswith("step    0"))
        assert "2 row(s) run on two machines disagree" in seed_row, seed_row
    # a later rollout of other rows rewrites the note and keeps the record
    assert hermit(repo, "rollout", "--tasks", "t4", env=env).code == 0
    later = _scores_note(repo, SEED)
    assert later["tasks"]["t1"]["disagreed"] == note["tasks"]["t1"]["disagreed"] and _rollouts(later) == 8
    assert later["splits"]["test"] == test


def test_a_row_run_differently_beside_a_genuinely_conflicting_field_still_stops_the_push(repo, tmp_path):
    control = _run(repo, None)
    env = env_for(control)
    other = teammate_clone(repo, tmp_path)
    for place, answers in ((repo, {**env, "HERMIT_TEST_ANSWER_t1": ANSWERS["t1"]}), (other, env)):
        r = hermit(place, "rollout", "--tasks", "t1", env=answers)
        assert r.code == 0, r.out + r.err
        note = _scores_note(place, SEED)      # a field no rule merges, set differently on each side
        git(place, "notes", "--ref", "refs/notes/hermit/scores", "add", "-f", "-m",
            json.dumps({**note, "stop": f"stopped on {place.name}"}), SEED)
    assert hermit(repo, "push").code == 0
    before = git(other, "for-each-ref", "refs/notes", "refs/heads", "refs/tags")
    r = hermit(other, "push")
    assert r.code == 15, r.out + r.err
    lines = r.err.strip().splitlines()
    assert lines[0].startswith("error: ") and "stop" in lines[0] and lines[1].startswith("hint: ")
    assert git(other, "for-each-ref", "refs/notes", "refs/heads", "refs/tags") == before


def test_a_row_both_sides_ran_merges_to_the_same_note_in_either_order_and_keeps_every_disagreement():
    from git_hermit.core.scores_notes import merge_scores_notes
    from git_hermit.model.records import canonical_json, loads

    def attempts(*outcomes, tokens=100):
        return {"outcome": "fail" if "fail" in outcomes else outcomes[0],
                "attempts": [{"outcome": o, "reward": float(o == "pass"), "tokens": tokens} for o in outcomes]}

    base = {**_note({"a": "pass"}, _usage(100, 1.0)), "k": 2, "tasks": {"a": attempts("pass", "fail")}}
    ours = {**base, "tasks": {"a": attempts("pass", "pass", tokens=120), "b": attempts("pass", "pass")},
            "usage": _usage(300, 3.0)}
    rerun = attempts("exception", tokens=90)["attempts"] + base["tasks"]["a"]["attempts"][1:]     # a#1 only
    theirs = {**base, "tasks": {"a": {"outcome": "fail", "attempts": rerun}, "b": attempts("pass", "pass", tokens=7)},
              "usage": _usage(250, 2.5)}
    found, other_way = [], []
    merged = merge_scores_notes(base, ours, theirs, found)
    assert canonical_json(merged) == canonical_json(merge_scores_notes(base, theirs, ours, other_way))
    # row a#1: both ran it again differently, the worse (exception, not pass) kept; a#2: only ours ran it again
    assert [x["outcome"] for x in merged["tasks"]["a"]["attempts"]] == ["exception", "pass"]
    assert merged["tasks"]["a"]["disagreed"] == [{"attempt": 1, "outcome": "pass", "reward": 1.0, "tokens": 120}]
    # b: the same outcomes, only the tokens differ: one kept, no disagreement to record
    assert "disagreed" not in merged["tasks"]["b"] and len(merged["tasks"]["b"]["attempts"]) == 2
    assert [(d.task, d.attempt, d.kept["outcome"]) for d in found] == [("a", 1, "exception")]
    assert [(d.task, d.attempt, d.ours["outcome"], d.theirs["outcome"]) for d in other_way] == [("a", 1, "exception", "pass")]
    assert merged["usage"]["input_tokens"] == 100 + 200 + 150       # every rollout paid for, once
    assert merged["pass_at_1"] == pytest.approx((0.5 + 1.0) / 2) and merged["k"] == 2
    loads("scores", canonical_json(merged), where="test")          # still a valid scores note
    # a later merge keeps earlier disagreements from both sides, and adds its own
    again = {**merged, "tasks": {**merged["tasks"], "a": {**merged["tasks"]["a"], "attempts": [
        merged["tasks"]["a"]["attempts"][0], {"outcome": "fail", "reward": 0.0}]}}}
    later = merge_scores_notes(merged, again, {**merged, "tasks": {**merged["tasks"], "a": {
        **merged["tasks"]["a"], "disagreed": [*merged["tasks"]["a"]["disagreed"], {"attempt": 2, "outcome": "exception", "reward": None}]}}})
    assert [(d["attempt"], d["outcome"]) for d in later["tasks"]["a"]["disagreed"]] == [(1, "pass"), (2, "exception")]
