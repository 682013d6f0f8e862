"""After a budget stop the record says nothing false (issue 15, items 6-7): the score of a step
the budget stopped is shown as partial (finished of expected rollouts), in `log`, `show` and
`report`, on this machine and in a clone; a stop whose only spending was a re-queued
rate-limited attempt keeps that spending in the ledger and the note; a step's note never lets
this run's rate-limited attempts hide what another machine spent on the step."""

from __future__ import annotations

import json

import yaml

from support.budget_support import ROLLOUT_USD
from support.cli_helpers import hermit
from support.review_support import teammate_clone
from support.step_support import RUN, env_for, step_dir
from support.budget_helpers import BUDGET_EXIT, ROWS, _edit, _finished, _run, _scores_note
from support.rate_limits_helpers import ANSWER_TOKENS, LIMITED_TOKENS, _billed_codex_step, _calls

SEED = f"hermit/{RUN}/step-0000"


def _row(log_text: str, step: int) -> str:
    return next(line for line in log_text.splitlines() if line.startswith(f"step {step:>4}"))


def test_a_budget_stopped_steps_score_reads_as_partial_in_log_show_and_report_here_and_in_a_clone(repo, tmp_path):
    control = _run(repo, {"max_usd": 0.07})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT and len(_finished(repo, 1)) == 3, r.out + r.err
    note = _scores_note(repo, SEED)
    assert note["partial"] == {"rollouts": 3, "expected": ROWS}     # what a clone needs to say the same
    other = teammate_clone(repo, tmp_path)
    for place in (repo, other):
        row = _row(hermit(place, "log", env=env_for(control)).out, 0)
        assert "(partial: 3/8 rollouts)" in row, row
        data = json.loads(hermit(place, "log", "--json", env=env_for(control)).out)
        assert data["steps"][0]["partial"] == {"rollouts": 3, "expected": ROWS}, data["steps"][0]
        shown = hermit(place, "show", SEED, env=env_for(control))
        assert shown.code == 0 and "partial: 3/8 rollouts" in shown.out, shown.out + shown.err
        report = hermit(place, "report", env=env_for(control))
        assert report.code == 0 and "partial: 3/8 rollouts" in report.out, report.out + report.err

    # raised: the step finishes, and its score is whole again
    _edit(repo, budget={"max_usd": 10.0})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert "partial" not in _row(hermit(repo, "log").out, 0)
    assert json.loads(hermit(repo, "log", "--json").out)["steps"][0]["partial"] is None
    assert "partial" not in _scores_note(repo, SEED)
    assert "partial" not in hermit(repo, "show", SEED).out


def test_finalize_says_the_tips_training_score_is_partial_after_a_budget_stop(repo):
    control = _run(repo, {"max_usd": 0.07})
    _edit(repo, evolver={**yaml.safe_load((repo / "hermit.yaml").read_text())["evolver"],
                         "params": {"k": 2, "target_pass_rate": 1.0, "final": "last"}})
    assert hermit(repo, "step", env=env_for(control)).code == BUDGET_EXIT
    r = hermit(repo, "finalize", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert "training pass@1 0.000 (partial: 3/8 rollouts)" in r.out, r.out


def test_a_rollout_partly_rerun_after_a_budget_stop_is_whole_once_every_row_has_its_result(repo):
    control = _run(repo, {"max_usd": round(2.5 * ROLLOUT_USD, 4)})
    r = hermit(repo, "rollout", env=env_for(control))
    assert r.code == BUDGET_EXIT, r.out + r.err
    assert _scores_note(repo, SEED)["partial"] == {"rollouts": 2, "expected": ROWS}
    assert "(partial: 2/8 rollouts)" in _row(hermit(repo, "log").out, 0)
    _edit(repo, budget={"max_usd": 10.0})
    assert hermit(repo, "rollout", "--tasks", "t1", env=env_for(control)).code == 0   # still short of 8
    assert "(partial: " in _row(hermit(repo, "log").out, 0)
    assert hermit(repo, "rollout", env=env_for(control)).code == 0
    assert "partial" not in _scores_note(repo, SEED)
    assert "partial" not in _row(hermit(repo, "log").out, 0)


def _acting_tokens(usage_by_role: dict) -> int:
    acting = usage_by_role["acting"]
    return acting["input_tokens"] + acting["output_tokens"]


def test_a_rollout_stopped_after_spending_only_on_a_rate_limited_attempt_keeps_it_in_its_ledger_and_note(repo):
    control = _billed_codex_step(repo, limited=5, budget={"max_tokens": 100})
    r = hermit(repo, "rollout", SEED, "--tasks", "t1", env=env_for(control), timeout=120)
    assert r.code == BUDGET_EXIT and "budget reached" in r.err, r.out + r.err
    assert [kind for _, kind in _calls(control)] == ["429"]      # the attempt's 120 tokens crossed it
    [ledger] = (repo / ".hermit" / "runs" / RUN / "evals").glob("*-train/ledger.json")
    entries = json.loads(ledger.read_text())["entries"]
    assert sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"] for e in entries) == LIMITED_TOKENS
    note = _scores_note(repo, SEED)
    assert _acting_tokens(note["usage_by_role"]) == LIMITED_TOKENS and note["tasks"] == {}
    # the same stop again (the budget still reached) adds nothing: the attempt is billed once
    r = hermit(repo, "rollout", SEED, "--tasks", "t1", env=env_for(control), timeout=120)
    assert r.code == BUDGET_EXIT, r.out + r.err
    assert _acting_tokens(_scores_note(repo, SEED)["usage_by_role"]) == LIMITED_TOKENS
    # raised: the row runs; the note holds the attempt once beside the answer
    (control / "limited").write_text("0")
    _edit(repo, budget={"max_tokens": 100000})
    r = hermit(repo, "rollout", SEED, "--tasks", "t1", env=env_for(control), timeout=120)
    assert r.code == 0, r.out + r.err
    assert _acting_tokens(_scores_note(repo, SEED)["usage_by_role"]) == LIMITED_TOKENS + ANSWER_TOKENS


def test_a_clones_step_with_a_rate_limited_attempt_keeps_what_the_origin_spent_on_its_rows(repo, tmp_path):
    control = _billed_codex_step(repo, limited=0)
    env = env_for(control)
    r = hermit(repo, "rollout", "--tasks", "t1", env=env, timeout=120)      # one of the step's 2 rows
    assert r.code == 0, r.out + r.err
    assert _acting_tokens(_scores_note(repo, SEED)["usage_by_role"]) == ANSWER_TOKENS
    other = teammate_clone(repo, tmp_path)
    (control / "limited").write_text("1")
    r = hermit(other, "step", env=env, timeout=120)                  # no budget: both rows run here
    assert r.code == 0, r.out + r.err
    assert [kind for _, kind in _calls(control)] == ["ok", "429", "ok", "ok"]
    # the origin's rollout, this machine's rate-limited attempt and its two answers
    spent = ANSWER_TOKENS + LIMITED_TOKENS + 2 * ANSWER_TOKENS
    assert _acting_tokens(_scores_note(other, SEED)["usage_by_role"]) == spent
    ledger = json.loads((step_dir(other, 1) / "ledger.json").read_text())["entries"]
    assert sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"] for e in ledger if e["role"] == "acting") == spent


def test_two_machines_budget_stopped_notes_merge_partial_until_their_rows_add_up():
    from git_hermit.core.scores_notes import merge_scores_notes
    from git_hermit.model.records import canonical_json, loads

    def note(tasks: dict, partial: dict | None) -> dict:
        data = {"v": 1, "run": "r", "step": 1, "commit": "c" * 40, "split": "train", "k": 1, "pass_at_1": 0.0,
                "pass_at": {"1": 0.0}, "tasks": {t: {"outcome": "pass", "attempts": [{"outcome": "pass", "reward": 1.0}]}
                                                for t in tasks}}
        return {**data, "partial": partial} if partial else data

    ours = note(["a"], {"rollouts": 1, "expected": 3})
    theirs = note(["b"], {"rollouts": 1, "expected": 3})
    merged = merge_scores_notes(None, ours, theirs)
    assert merged["partial"] == {"rollouts": 2, "expected": 3} and merged["pass_at_1"] == 1.0
    loads("scores", canonical_json(merged), where="test")          # still a valid scores note
    # the other machine finished the split: whole
    merged = merge_scores_notes(None, ours, note(["b", "c"], None))
    assert "partial" not in merged and sorted(merged["tasks"]) == ["a", "b", "c"]
