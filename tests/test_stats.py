"""Statistics: task labels, Chen pass@k, macro pass@1, and the paired bootstrap comparison."""

from __future__ import annotations

import math
import random

import pytest

from git_hermit.model.rollout import RolloutResult
from git_hermit.accounting.stats import (
    PairedComparison, compare, paired_bootstrap, pass_at, pass_at_1, pass_at_k, per_task_pass_at_1, task_label,
    task_labels,
)


def results(task: str, *outcomes: str) -> list[RolloutResult]:
    return [RolloutResult(task, attempt, outcome) for attempt, outcome in enumerate(outcomes, 1)]


@pytest.mark.parametrize("outcomes, label", [
    (["pass", "pass"], "pass"),
    (["exception", "exception"], "exception"),
    (["pass", "fail"], "fail"),
    (["pass", "exception"], "fail"),          # spec §1.2: a pass/exception mix is fail
    (["fail", "exception"], "fail"),
    (["pass"], "pass"),
])
def test_task_label(outcomes, label):
    assert task_label(outcomes) == label


def test_task_label_needs_rollouts():
    with pytest.raises(ValueError):
        task_label([])


@pytest.mark.parametrize("n, c, k, expected", [
    (2, 1, 1, 0.5),                      # 1 - C(1,1)/C(2,1) = 1 - 1/2
    (5, 2, 2, 0.7),                      # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (10, 3, 5, 1 - 21 / 252),            # 1 - C(7,5)/C(10,5)
    (3, 2, 2, 1.0),                      # n - c < k: every 2-subset holds a pass
    (4, 0, 2, 0.0),
    (4, 4, 4, 1.0),
])
def test_pass_at_k_matches_chen(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_undefined_cases_are_nan():
    assert math.isnan(pass_at_k(2, 1, 3)) and math.isnan(pass_at_k(0, 0, 1)) and math.isnan(pass_at_k(2, 1, -1))


def test_pass_at_1_is_macro_averaged_and_counts_exceptions_as_failures():
    by_task = {"a": results("a", "pass", "pass"), "b": results("b", "pass", "exception"),
               "c": results("c", "fail", "fail", "pass", "pass"), "d": []}
    assert per_task_pass_at_1(by_task) == {"a": 1.0, "b": 0.5, "c": 0.5}
    assert pass_at_1(by_task) == pytest.approx(2 / 3)       # not the micro 5/8
    assert pass_at_1({}) == 0.0
    assert task_labels(by_task) == {"a": "pass", "b": "fail", "c": "fail"}


def test_pass_at_several_k_uses_tasks_with_enough_rollouts():
    by_task = {"a": results("a", "pass", "fail"), "b": results("b", "fail", "fail", "fail", "pass")}
    rates = pass_at(by_task, [1, 2, 3])
    assert rates[1] == pytest.approx((0.5 + 0.25) / 2)
    assert rates[2] == pytest.approx((1.0 + 0.5) / 2)        # b: 1 - C(3,2)/C(4,2) = 0.5
    assert rates[3] == pytest.approx(0.75)                    # only b has n >= 3: 1 - C(3,3)/C(4,3)
    assert pass_at(by_task, [5]) == {5: 0.0}


def test_comparison_prints_points():
    assert str(PairedComparison(0.25, 0.169, 0.331, 80)) == "+25.0 points [+16.9, +33.1]"
    assert str(PairedComparison(-0.05, -0.1, 0.0, 10)) == "-5.0 points [-10.0, +0.0]"


def test_bootstrap_is_deterministic_and_brackets_the_delta():
    rng = random.Random(7)
    a = {f"t{i}": rng.choice([0.0, 0.5, 1.0]) for i in range(120)}
    b = {task: min(1.0, value + rng.choice([0.0, 0.0, 0.5])) for task, value in a.items()}
    first = paired_bootstrap(a, b, seed=3, n_resamples=2000)
    assert first == paired_bootstrap(a, b, seed=3, n_resamples=2000)
    assert paired_bootstrap(a, b, seed=4, n_resamples=2000) != first
    assert first.low <= first.delta <= first.high and first.low > 0 and first.significant
    assert first.delta == pytest.approx(sum(b[t] - a[t] for t in a) / len(a))
    assert first.n_tasks == 120


def test_bootstrap_uses_shared_tasks_and_reports_flips():
    a = {"x": 0.0, "y": 1.0, "z": 0.5, "only_a": 1.0}
    b = {"x": 1.0, "y": 0.5, "z": 0.5, "only_b": 0.0}
    comparison = paired_bootstrap(a, b, n_resamples=500)
    assert comparison.n_tasks == 3
    assert comparison.flips_up == ("x",) and comparison.flips_down == ("y",)
    with pytest.raises(ValueError, match="no task in common"):
        paired_bootstrap({"a": 1.0}, {"b": 1.0})


def test_identical_differences_give_a_zero_width_interval():
    comparison = paired_bootstrap({t: 0.0 for t in "abcd"}, {t: 0.5 for t in "abcd"}, n_resamples=300)
    assert (comparison.delta, comparison.low, comparison.high) == (0.5, 0.5, 0.5)


def test_bootstrap_interval_covers_the_true_difference():
    """Coverage sanity: tasks drawn with a known mean difference of 0.2; the 95% interval
    should contain it in roughly 95% of repeated experiments (percentile bootstrap, n=60)."""
    rng = random.Random(11)
    covered = 0
    experiments = 100
    for experiment in range(experiments):
        diffs = rng.choices([-1.0, 0.0, 1.0], weights=[0.2, 0.4, 0.4], k=60)   # mean 0.2
        a = {f"t{i}": 0.5 for i in range(60)}
        b = {f"t{i}": 0.5 + d / 2 for i, d in enumerate(diffs)}
        comparison = paired_bootstrap(a, b, n_resamples=500, seed=experiment)
        covered += comparison.low <= 0.1 <= comparison.high        # b - a = d/2, true mean 0.1
    assert 0.85 <= covered / experiments <= 1.0


def test_more_tasks_give_a_narrower_interval():
    rng = random.Random(5)

    def width(n: int) -> float:
        a = {f"t{i}": float(rng.random() < 0.5) for i in range(n)}
        b = {f"t{i}": float(rng.random() < 0.6) for i in range(n)}
        comparison = paired_bootstrap(a, b, n_resamples=1000)
        return comparison.high - comparison.low

    assert width(400) < width(25)


def test_compare_rollout_results():
    baseline = {"a": results("a", "fail", "fail"), "b": results("b", "pass", "pass")}
    candidate = {"a": results("a", "pass", "pass"), "b": results("b", "pass", "pass")}
    comparison = compare(baseline, candidate, n_resamples=200)
    assert comparison.delta == 0.5 and comparison.flips_up == ("a",)


def test_bootstrap_interval_of_one_evaluation():
    from git_hermit.accounting.stats import bootstrap_interval
    interval = bootstrap_interval({"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0})
    assert interval.mean == 0.75 and interval.n_tasks == 4
    assert interval.low == 0.25 and interval.high == 1.0
    assert str(interval) == "0.750 [0.250, 1.000]"
    same = bootstrap_interval({"a": 1.0, "b": 1.0})
    assert (same.low, same.high) == (1.0, 1.0)
