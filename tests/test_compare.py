"""`git hermit compare RUN_A RUN_B`: final pass@1 on a common split with a paired CI, from notes."""

from __future__ import annotations

import json

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import copy_demo


@pytest.fixture(scope="module")
def two_runs_made(demo_run, tmp_path_factory):
    """The demo with its held-out eval and a second run b, made once for the module (an eval is
    20 rollouts); each test gets a copy."""
    root = tmp_path_factory.mktemp("two-runs")
    repo = copy_demo(demo_run, root / "demo")
    evaluated = hermit(repo, "eval", "hermit/demo/final", "--baseline", "hermit/demo/step-0000", "--split", "test",
                       "--json", timeout=300)
    assert evaluated.code == 0, evaluated.err
    assert hermit(repo, "init", "--run", "b").code == 0
    # run b: its seed scored exactly as the demo's seed (the same adapter), copied onto b's seed commit
    seed = git(repo, "rev-parse", "hermit/b/step-0000").strip()
    note = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", "hermit/demo/step-0000"))
    path = root / "note.json"
    path.write_text(json.dumps({**note, "run": "b", "commit": seed}))
    git(repo, "notes", "--ref=hermit/scores", "add", "-F", str(path), seed)
    return repo, json.loads(evaluated.out)


@pytest.fixture
def two_runs(two_runs_made, tmp_path):
    made, evaluated = two_runs_made
    return copy_demo(made, tmp_path / "demo"), evaluated


def test_compare_two_runs_on_the_test_split(two_runs):
    repo, evaluated = two_runs
    result = hermit(repo, "compare", "demo", "b", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["a"]["pass_at_1"] == evaluated["candidate"]["pass_at_1"]
    assert data["b"]["pass_at_1"] == evaluated["baseline"]["pass_at_1"]
    assert data["difference"]["delta_points"] == pytest.approx(-evaluated["comparison"]["delta_points"])
    assert data["a"]["chosen_by"] == "final tag" and data["b"]["chosen_by"] == "tip"
    assert data["a"]["steps"] == 4 and data["a"]["rolled_back"] == 1 and data["a"]["tokens"] > 0
    assert data["a"]["cost_usd"] is None                      # no price set: unknown, not zero
    text = hermit(repo, "compare", "demo", "b").out
    assert "b minus demo: -70.0 points" in text and "paired bootstrap 95% CI over 5 test tasks" in text
    assert "cost" in text and "unknown" in text


def test_compare_without_scores_on_the_split_says_how_to_measure(two_runs):
    repo, _ = two_runs
    result = hermit(repo, "compare", "demo", "b", "--split", "valid")
    assert result.code == 4
    assert result.err.startswith("error: run 'demo' has no valid scores") and "hint: measure it: git hermit eval" in result.err


def test_compare_says_when_a_runs_score_is_over_the_rollouts_a_budget_stop_left(two_runs, tmp_path):
    repo, _ = two_runs
    seed = git(repo, "rev-parse", "hermit/b/step-0000").strip()
    note = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", seed))
    test = note["splits"]["test"] if note["split"] != "test" else note
    rollouts = sum(len(t["attempts"]) for t in test["tasks"].values())
    test["partial"] = {"rollouts": rollouts, "expected": rollouts + 3}     # as a budget stop writes it
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(note))
    git(repo, "notes", "--ref=hermit/scores", "add", "-f", "-F", str(path), seed)
    data = json.loads(hermit(repo, "compare", "demo", "b", "--json").out)
    assert data["b"]["partial"] == {"rollouts": rollouts, "expected": rollouts + 3} and data["a"]["partial"] is None
    text = hermit(repo, "compare", "demo", "b").out
    assert f"(partial: {rollouts}/{rollouts + 3} rollouts)" in text, text
