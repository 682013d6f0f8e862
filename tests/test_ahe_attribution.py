"""ahe attribution: the §4.3 verdict table row by row, §4.4's JSON, precision/recall."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from git_hermit.evolvers.ahe.analysis import StepDiff
from git_hermit.evolvers.ahe.attribution import (
    EFFECTIVE, HARMFUL, INEFFECTIVE, MIXED, PARTIALLY_EFFECTIVE, SUGGESTED_ACTIONS, VERDICTS,
    aggregate_precision_recall, evaluate_changes, verdict_for)

DIFF = StepDiff(flipped=("f1", "f2", "f3"), regressed=("r1", "r2"), stable_pass=("s1",),
                infra_recovered=("ir",), infra_lost=("il",), exception_to_fail=("ef",),
                rollout_improved=("ri",), rollout_regressed=("rr",))


def change(cid, fixes=(), risks=(), **extra):
    return {"id": cid, "description": f"desc {cid}", "files": ["AGENTS.md"],
            "predicted_fixes": list(fixes), "risk_tasks": list(risks), **extra}


@pytest.mark.parametrize("fixes, risks, verdict", [
    (["s1"], ["r1"], HARMFUL),                 # risk hit, no fix
    ([], ["r2"], HARMFUL),                     # empty predictions can still be harmful
    (["f1", "s1"], ["r1"], MIXED),             # risk hit and a fix
    (["f1", "f2"], ["r1", "s1"], MIXED),       # all fixes but a risk hit: MIXED precedes EFFECTIVE
    (["f1", "f2"], [], EFFECTIVE),             # every predicted fix flipped
    (["f1", "f2"], ["s1"], EFFECTIVE),         # an unrealised risk changes nothing
    (["f1", "s1"], [], PARTIALLY_EFFECTIVE),   # some fix flipped
    (["s1", "ef"], [], INEFFECTIVE),           # nothing flipped
    ([], [], INEFFECTIVE),                     # no predictions at all
    (["ir", "ri"], ["il", "rr"], INEFFECTIVE), # infra and rollout moves are neither fix nor regression
])
def test_decision_table_rows(fixes, risks, verdict):
    evaluation = evaluate_changes([change("chg-1", fixes, risks)], DIFF)
    assert evaluation.changes[0].verdict == verdict


def test_verdict_for_is_top_down():
    assert [verdict_for(0, 1, 1), verdict_for(1, 1, 1), verdict_for(2, 2, 0), verdict_for(1, 2, 0),
            verdict_for(0, 0, 0)] == list(VERDICTS)
    assert set(SUGGESTED_ACTIONS) == set(VERDICTS)


def test_per_change_lists_keep_order_and_duplicates():
    evaluation = evaluate_changes([change("chg-1", ["f2", "s1", "f1", "f2"], ["r2", "s1", "r2"])], DIFF)
    c = evaluation.changes[0]
    assert c.actually_fixed == ("f2", "f1", "f2") and c.still_failed == ("s1",)
    assert c.risk_realized == ("r2", "r2") and c.hit_rate == "3/4"


def test_unattributed_regressions_exclude_any_mention():
    diff = StepDiff(regressed=("r1", "r2", "r3"))
    evaluation = evaluate_changes([change("chg-1", ["r3"]), change("chg-2", [], ["r1"])], diff)
    assert evaluation.unattributed_regressions == ("r2",)


def test_change_evaluation_json_shape_and_dataclass_input():
    @dataclass(frozen=True)
    class Change:  # the lead's manifest model has these fields (and more)
        id: str
        description: str
        files: list = field(default_factory=list)
        predicted_fixes: list = field(default_factory=list)
        risk_tasks: list = field(default_factory=list)
        failure_pattern: str = ""
        component: str = "prompt"

    evaluation = evaluate_changes(
        [Change("chg-1", "fix quoting", ["scripts/a.py"], ["f1"]), change("chg-2", ["s1"], ["r1"])],
        DIFF, evaluating_iteration=3)
    data = json.loads(json.dumps(evaluation.to_dict()))
    assert data["evaluating_iteration"] == 3
    assert data["summary"] == "chg-1: EFFECTIVE, chg-2: HARMFUL"
    assert list(data["change_evaluations"][0]) == [
        "change_id", "description", "files", "predicted_fixes", "actually_fixed", "still_failed",
        "predicted_risks", "risk_realized", "hit_rate", "verdict"]
    assert data["change_evaluations"][0]["files"] == ["scripts/a.py"]
    assert data["unattributed_regressions"] == ["r2"]
    assert [c.change_id for c in evaluation.with_verdict(HARMFUL)] == ["chg-2"]


def test_missing_fields_default():
    evaluation = evaluate_changes([{}], DIFF)
    c, declared = evaluation.changes[0], evaluation.declared[0]
    assert (c.change_id, declared.description, declared.files, c.hit_rate, c.verdict) == (
        "unknown", "", (), "0/0", INEFFECTIVE)


def test_precision_recall_hand_made():
    # flipped {f1,f2,f3}; regressed {r1,r2}
    changes = [change("chg-1", ["f1", "s1"], ["r1", "s1"]),
               change("chg-2", ["f1", "f2", "x"], ["y"])]
    p = evaluate_changes(changes, DIFF).prediction
    # predicted fixes {f1,s1,f2,x}: 2 flipped -> 2/4; flipped {f1,f2,f3}: 2 predicted -> 2/3
    assert p.fix_precision == pytest.approx(0.5) and p.fix_recall == pytest.approx(2 / 3)
    # risks {r1,s1,y}: 1 regressed -> 1/3; regressed {r1,r2}: 1 named -> 1/2
    assert p.regression_precision == pytest.approx(1 / 3) and p.regression_recall == pytest.approx(0.5)


def test_precision_recall_undefined_and_aggregated():
    empty = evaluate_changes([], StepDiff())
    p = empty.prediction
    assert p.fix_precision is p.fix_recall is p.regression_precision is p.regression_recall is None
    step2 = evaluate_changes([change("chg-1", ["a", "b"], ["c"])], StepDiff(flipped=("a",), regressed=("d",)))
    step3 = evaluate_changes([change("chg-1", ["e"], ["f"])], StepDiff(flipped=("e", "g"), regressed=("f",)))
    total = aggregate_precision_recall([empty, step2, step3])
    assert total.fix_precision == pytest.approx(2 / 3)        # (1 + 1) / (2 + 1)
    assert total.fix_recall == pytest.approx(2 / 3)           # (1 + 1) / (1 + 2)
    assert total.regression_precision == pytest.approx(1 / 2)  # (0 + 1) / (1 + 1)
    assert total.regression_recall == pytest.approx(1 / 2)     # (0 + 1) / (1 + 1)
    assert total.to_dict()["counts"]["flipped"] == 3


def test_flips_and_regressions_a_rollback_caused_are_not_counted_as_unpredicted():
    # the previous step rolled back a change that had regressed r and fixed g: r flipping back and
    # g regressing are the rollback's; a predicted flip of a restored task stays the change's
    diff = StepDiff(flipped=("r", "p", "n"), regressed=("g", "x"))
    rollbacks = [("rollback abc of chg-2", ("r", "p"), ("g",))]
    ev = evaluate_changes([change("chg-3", fixes=["p"], risks=["x"])], diff, rollbacks=rollbacks)
    assert dict(ev.rollback_flips) == {"r": "rollback abc of chg-2"}
    assert dict(ev.rollback_regressions) == {"g": "rollback abc of chg-2"}
    counts = ev.prediction.to_dict()["counts"]
    assert (counts["flipped"], counts["flipped_predicted"]) == (2, 1)        # p (predicted) and n
    assert (counts["regressed"], counts["regressed_predicted"]) == (1, 1)    # x only
    assert ev.unattributed_regressions == ()
    assert [c.verdict for c in ev.changes] == [MIXED]                        # verdicts are unchanged
    plain = evaluate_changes([change("chg-3", fixes=["p"], risks=["x"])], diff)
    assert plain.prediction.to_dict()["counts"]["flipped"] == 3 and plain.unattributed_regressions == ("g",)


def test_the_attribution_produces_the_verdict_note_record_itself():
    """issue 26 item 4: one record for a judged change, model's VerdictNote; the attribution makes it
    (no parallel ChangeVerdict whose fields are copied into the note)."""
    import git_hermit.evolvers.ahe.attribution as attribution_module
    from git_hermit.model.records import VerdictNote, dumps, loads
    assert not hasattr(attribution_module, "ChangeVerdict")
    ev = evaluate_changes([change("chg-1", ["t1", "t2"], ["t3"])], StepDiff(flipped=("t1",), regressed=()),
                          evaluating_iteration=2, run="run", evaluated_commit="abc")
    (note,) = ev.changes
    assert note == VerdictNote("run", 3, "chg-1", "PARTIALLY_EFFECTIVE", ("t1",), ("t2",), (), ("t1", "t2"), ("t3",),
                               "1/2", evaluated_commit="abc")
    assert loads("verdicts", dumps("verdicts", note)) == note          # field for field through the note


def test_a_verdict_note_written_before_the_merge_reads_the_same():
    """A change group's verdict note as the code before issue 26 item 4 wrote it (the fixture) reads as
    the same record, and writes back byte for byte."""
    from pathlib import Path
    from git_hermit.model.records import VerdictNote, dumps, loads
    text = (Path(__file__).parent / "fixtures" / "notes" / "verdict-v1-group.json").read_text()
    note = loads("verdicts", text)
    assert note == VerdictNote("run-a", 3, "chg-1", "PARTIALLY_EFFECTIVE", ("t1",), ("t2",), (), ("t1", "t2"), ("t3",),
                               "1/2", evaluated_commit="abc123", rollback_commit="def456",
                               also=(VerdictNote("run-a", 3, "chg-2", "HARMFUL", (), (), ("t4",), (), ("t4",), "0/0",
                                                 rollback_note="rolled back with chg-1"),))
    assert dumps("verdicts", note) == text
    assert note.for_change("chg-2").rollback_commit == "def456"
