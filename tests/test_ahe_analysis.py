"""ahe analysis: task labels, pass@i, timeout_as, the nine-cell diff, rollout moves, stability."""

from __future__ import annotations

import json
import math

import pytest
from support.ahe_factory import results, trial

from git_hermit.evolvers.ahe.analysis import (
    DIFF_CELLS, StepStats, TaskRollouts, classify, diff, pass_at_estimate, stability)


# --- classification (§1.2) ------------------------------------------------------------------

@pytest.mark.parametrize("letters, label", [
    ("PP", "pass"), ("FF", "fail"), ("PF", "fail"), ("PE", "fail"), ("EE", "exception"),
    ("TE", "exception"), ("FE", "fail"), ("P", "pass"), ("F", "fail"), ("E", "exception"),
])
def test_task_label(letters, label):
    stats = classify(results({"t": letters}), k=len(letters))
    assert stats.task_results == {"t": label}


def test_counts_exception_types_per_trial_and_timeout_tasks():
    stats = classify(results({"a": "PP", "b": "PF", "c": "EE", "d": "TT", "e": "PT"}), k=2)
    assert (stats.n_pass, stats.n_fail, stats.n_exception, stats.n_total) == (1, 2, 2, 5)
    assert stats.exception_types == {"RuntimeError": 2, "AgentTimeoutError": 3}
    assert stats.timeout_tasks == {"d", "e"}
    assert stats.per_task_rollouts["e"] == TaskRollouts(1, 0, 1, 2)
    assert stats.trial_stats.n_total == 10 and stats.trial_stats.n_pass == 4
    assert stats.trial_stats.trial_pass_rate == pytest.approx(0.4)


def test_reward_decides_even_with_exception_type_and_missing_type_is_unknown():
    stats = classify({"a": [trial("a", 1, "fail", reward=0.5, exception_type="TimeoutError")],
                      "b": [trial("b", 1, "exception")]}, k=1)
    assert stats.task_results == {"a": "fail", "b": "exception"}
    assert stats.timeout_tasks == frozenset()  # a trial with a reward is never a timeout
    assert stats.exception_types == {"Unknown": 1}


def test_task_without_trials_is_absent():
    stats = classify({"a": [], **results({"b": "P"})}, k=1)
    assert set(stats.task_results) == {"b"}


# --- pass@i (§1.3) --------------------------------------------------------------------------

def test_pass_at_estimator_values():
    assert pass_at_estimate(2, 1, 1) == pytest.approx(0.5)
    assert pass_at_estimate(2, 1, 2) == pytest.approx(1.0)
    assert pass_at_estimate(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))
    assert pass_at_estimate(2, 0, 2) == 0.0
    assert math.isnan(pass_at_estimate(1, 1, 2)) and math.isnan(pass_at_estimate(0, 0, 1))


def test_pass_at_k_is_chen_macro_average():
    stats = classify(results({"a": "PP", "b": "PF", "c": "FF", "d": "PE"}), k=2)
    assert stats.pass_rate == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)
    assert stats.pass_at[1] == stats.pass_rate
    assert stats.pass_at[2] == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert stats.eligible_counts == {1: 4, 2: 4}


def test_pass_at_macro_averages_uneven_trial_counts():
    stats = classify(results({"a": "PPP", "b": "F"}), k=2)
    assert stats.pass_at[1] == pytest.approx((1.0 + 0.0) / 2)
    assert stats.pass_at[2] == pytest.approx(1.0)  # only "a" has n >= 2
    assert stats.eligible_counts[2] == 1


def test_k1_pass_rate_is_task_share_and_no_rollout_details():
    stats = classify(results({"a": "P", "b": "F", "c": "E", "d": "P"}), k=1)
    assert stats.pass_rate == pytest.approx(0.5)
    assert stats.pass_at == {1: 0.5}
    assert stats.per_task_rollouts == {} and stats.trial_stats is None


def test_empty_step_scores_zero():
    assert classify({}, k=2).pass_rate == 0.0 and classify({}, k=1).pass_rate == 0.0


def test_to_dict_is_json():
    stats = classify(results({"a": "PT", "b": "P"}), k=2)
    data = json.loads(json.dumps(stats.to_dict()))
    assert data["timeout_tasks"] == ["a"]
    assert data["pass_at_k"]["per_task_pass_at"]["b"]["2"] is None  # i > n: not estimable
    assert data["pass_at_k"]["pass_at"] == {"1": 0.75, "2": 1.0}


# --- timeout_as (seed parameter) ---------------------------------------------------------------

def _scored(by_task, timeout_as):
    # the driver scores the results once (model.rollout.scored) before any evolver sees them
    from git_hermit.model.rollout import scored
    return {task: [scored(r, timeout_as) for r in trials] for task, trials in by_task.items()}


def test_timeout_as_fail_changes_labels_but_not_pass_at_1():
    spec = {"a": "TT", "b": "PT", "c": "EE"}
    as_exc = classify(_scored(results(spec), "exception"), k=2)
    as_fail = classify(_scored(results(spec), "fail"), k=2)
    assert as_exc.task_results == {"a": "exception", "b": "fail", "c": "exception"}
    assert as_fail.task_results == {"a": "fail", "b": "fail", "c": "exception"}
    assert as_exc.pass_rate == as_fail.pass_rate == pytest.approx((0 + 0.5 + 0) / 3)
    assert as_fail.exception_types == {"RuntimeError": 2}
    assert as_fail.timeout_tasks == as_exc.timeout_tasks == {"a", "b"}
    assert as_fail.per_task_rollouts["a"] == TaskRollouts(0, 2, 0, 2)


def test_timed_out_flag_without_type_counts_as_timeout():
    r = trial("a", 1, "exception", timed_out=True)
    assert classify({"a": [r]}, k=1).exception_types == {"Timeout": 1}
    assert classify(_scored({"a": [r]}, "fail"), k=1).task_results == {"a": "fail"}


def test_bad_arguments_rejected():
    with pytest.raises(ValueError):
        classify({}, k=0)


# --- diff (§2) ----------------------------------------------------------------------------------

CELL_CASES = {  # (prev letters, cur letters) for k=1 and k=2 per cell
    "flipped": (("F", "P"), ("PF", "PP")),
    "regressed": (("P", "F"), ("PP", "PF")),
    "infra_recovered": (("E", "P"), ("EE", "PP")),
    "infra_lost": (("P", "E"), ("PP", "EE")),
    "stable_pass": (("P", "P"), ("PP", "PP")),
    "stable_fail": (("F", "F"), ("FF", "PF")),
    "exception_to_fail": (("E", "F"), ("EE", "PE")),
    "fail_to_exception": (("F", "E"), ("FE", "TT")),
    "exception_stable": (("E", "E"), ("EE", "ET")),
}


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("cell", DIFF_CELLS)
def test_every_diff_cell(cell, k):
    prev_letters, cur_letters = CELL_CASES[cell][k - 1]
    d = diff(classify(results({"t": prev_letters}), k=k), classify(results({"t": cur_letters}), k=k))
    assert getattr(d, cell) == ("t",)
    assert all(getattr(d, other) == () for other in DIFF_CELLS if other != cell)


@pytest.mark.parametrize("k", [1, 2])
def test_absent_task_counts_as_exception(k):
    p, f = "P" * k, "F" * k
    prev = classify(results({"gone_pass": p, "gone_fail": f}), k=k)
    cur = classify(results({"new_pass": p, "new_fail": f}), k=k)
    d = diff(prev, cur)
    assert d.infra_lost == ("gone_pass",) and d.fail_to_exception == ("gone_fail",)
    assert d.infra_recovered == ("new_pass",) and d.exception_to_fail == ("new_fail",)


def test_no_previous_step_no_diff():
    assert diff(None, classify(results({"a": "P"}), k=1)) is None


def test_net_and_retention():
    prev = classify(results({"a": "P", "b": "P", "c": "P", "d": "F", "e": "F"}), k=1)
    cur = classify(results({"a": "P", "b": "F", "c": "P", "d": "P", "e": "P"}), k=1)
    d = diff(prev, cur)
    assert d.net == 1 and d.retention == pytest.approx(2 / 3)
    assert diff(classify(results({"a": "F"}), k=1), classify(results({"a": "F"}), k=1)).retention is None


def test_rollout_sub_buckets_for_stable_fail():
    prev = classify(results({"up": "FF", "down": "PF", "same": "PF", "flat0": "FF", "ok": "PP"}), k=2)
    cur = classify(results({"up": "PF", "down": "FF", "same": "FP", "flat0": "FE", "ok": "PP"}), k=2)
    d = diff(prev, cur)
    assert d.has_rollouts
    assert set(d.stable_fail) == {"up", "down", "same", "flat0"}  # they stay in stable_fail too
    assert d.rollout_improved == ("up",) and d.rollout_regressed == ("down",)
    assert d.rollout_unchanged == ("flat0", "same")
    assert d.rollout_details["up"] == (0, 1, 2) and d.rollout_details["ok"] == (2, 2, 2)
    assert d.rollout_text("down") == "down (1/2->0/2)"


def test_rollout_details_missing_side_counts_zero():
    prev = classify(results({"a": "PP"}), k=2)
    cur = classify(results({"b": "PF"}), k=2)
    d = diff(prev, cur)
    assert d.rollout_details == {"a": (2, 0, 2), "b": (0, 1, 2)}


def test_rollout_sub_buckets_need_rollouts_on_both_sides():
    prev = classify(results({"a": "F"}), k=1)
    cur = classify(results({"a": "PF"}), k=2)
    d = diff(prev, cur)
    assert d.stable_fail == ("a",) and not d.has_rollouts
    assert d.rollout_improved == d.rollout_regressed == d.rollout_unchanged == ()


def test_prev_rebuilt_without_rollouts_has_none():
    prev = StepStats(k=2, task_results={"a": "fail"}, pass_rate=0.0)
    d = diff(prev, classify(results({"a": "PF"}), k=2))
    assert not d.has_rollouts and d.to_dict()["has_rollouts"] is False


# --- stability (§2.6) -------------------------------------------------------------------------

def test_stability_buckets_and_min_iterations():
    history = {
        "flaky3": [[1, "pass"], [2, "fail"], [3, "pass"]],
        "flaky2": [[1, "pass"], [2, "fail"], [3, "exception"]],
        "good": [[1, "pass"], [2, "exception"]],
        "bad": [[1, "fail"], [2, "fail", {"n_pass": 0}]],
        "infra": [[1, "exception"], [2, "exception"]],
    }
    buckets = stability(history, min_iterations=3)
    assert buckets == {"unstable": ["flaky3"], "possibly_unstable": ["flaky2"],
                       "stable_pass": ["good"], "stable_fail": ["bad"], "infra_only": ["infra"]}
    assert stability(history, min_iterations=2)["unstable"] == ["flaky2", "flaky3"]
    assert stability(history, min_iterations=4)["possibly_unstable"] == ["flaky2", "flaky3"]
