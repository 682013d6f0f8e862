"""Budgets (issue 15.6, 15.7): ``budget: {max_usd, max_tokens}`` stops a run before it
spends more, keeps what it finished, resumes once the budget is raised; ``git hermit
estimate`` forecasts the next steps from the ledger; a USD budget with a model that has no
price is refused before anything runs. Every rollout of the scripted agent costs $0.02."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support.budget_support import PRICE, ROLLOUT_TOKENS, ROLLOUT_USD
from support.cli_helpers import hermit
from conftest import git
from support.review_support import teammate_clone
from support.step_support import RUN, calls, env_for, make_run, refs, rollouts_dir, step_dir
from support.budget_helpers import ANSWERS, BUDGET_EXIT, ROWS, _add_test_split, _close, _edit, _estimate, _finished, _run, _scores_note  # noqa: F401

STEP1 = f"refs/heads/hermit/{RUN}/step-0001"


def _without_scores(refs_text: str) -> str:
    return "".join(line for line in refs_text.splitlines(keepends=True) if "notes/hermit/scores" not in line)


def _pending(repo: Path) -> str:
    """The pending ref's line of ``refs(repo)``: a stopped step's finished rollouts, published."""
    return next((line + "\n" for line in refs(repo).splitlines() if line.startswith(f"refs/hermit/{RUN}/pending ")), "")


def test_budget_stops_mid_step_within_one_rollout_and_resumes_after_raising_it(repo):
    control = _run(repo, {"max_usd": 0.07})
    before = refs(repo)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT, r.out + r.err
    finished = _finished(repo, 1)
    spent = len(finished) * ROLLOUT_USD
    assert 0.07 - ROLLOUT_USD < spent <= 0.07 + 1e-9          # within one rollout's cost of the limit
    assert len(calls(control, "agent")) == len(finished) == 3
    assert all(f["usage"]["input_tokens"] == 1000 for f in finished)
    assert "error: budget reached" in r.err and "$0.06" in r.err and "$0.01 left" in r.err
    assert "budget.max_usd" in r.err and "hint:" in r.err
    assert calls(control, "debugger") == [] and calls(control, "evolve") == []
    # no step ref; the scores note of H_0 records the finished rollouts and what they cost
    # (and its finished rollouts on the pending ref, so a restart elsewhere reuses them)
    assert _without_scores(refs(repo)).replace(_pending(repo), "") == _without_scores(before)
    note = _scores_note(repo, f"hermit/{RUN}/step-0000")
    assert note["step"] == 1 and sum(len(t["attempts"]) for t in note["tasks"].values()) == 3
    assert note["usage_by_role"]["acting"]["cost_usd"] == pytest.approx(spent) and "stop" not in note
    stopped = json.loads(hermit(repo, "estimate", "--json", env=env_for(control)).out)
    assert stopped["steps_seen"] == 0 and stopped["unfinished"] == {"step": 1, "rollouts": 3}
    assert abs(stopped["spent"]["cost_usd"] - spent) < 1e-9 and abs(stopped["budget"]["left_usd"] - 0.01) < 1e-9

    # the same budget: the rest of the step would cross it, so nothing starts
    before = refs(repo)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT and "would cross" in r.err, r.err
    assert len(calls(control, "agent")) == 3 and refs(repo) == before

    # raised: the step resumes; the finished rollouts are not run (nor billed) again
    _edit(repo, budget={"max_usd": 10.0})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    log = calls(control, "agent")
    assert len(log) == ROWS and len(set(log)) == ROWS
    ledger = json.loads((step_dir(repo, 1) / "ledger.json").read_text())
    acting = [e for e in ledger["entries"] if e["role"] == "acting"]
    assert len(acting) == ROWS and abs(sum(e["usage"]["cost_usd"] for e in acting) - ROWS * ROLLOUT_USD) < 1e-9
    assert "refs/heads/hermit/r/step-0001" in refs(repo)


def test_step_and_train_refuse_a_step_the_estimate_says_would_cross(repo):
    control = _run(repo, None)
    assert hermit(repo, "step", env=env_for(control)).code == 0
    ledger = json.loads((step_dir(repo, 1) / "ledger.json").read_text())
    spent = sum(e["usage"]["cost_usd"] for e in ledger["entries"])
    # room for half a step more: the next step's estimate (8 rollouts + learners) crosses it
    _edit(repo, budget={"max_usd": round(spent + ROWS * ROLLOUT_USD / 2, 4)})
    before, agent_calls = refs(repo), len(calls(control, "agent"))
    for command in ("step", "train"):
        r = hermit(repo, command, env=env_for(control))
        assert r.code == BUDGET_EXIT, (command, r.out + r.err)
        assert "step 2 would cross" in r.err and "left" in r.err and "hint:" in r.err
        assert len(calls(control, "agent")) == agent_calls and refs(repo) == before


def test_estimate_forecasts_the_next_steps_from_the_ledger(repo):
    control = _run(repo, {"max_usd": 5.0})
    r = hermit(repo, "estimate", env=env_for(control))
    assert r.code == 0 and "no finished step" in r.out, r.out + r.err
    assert hermit(repo, "train", "--epochs", "2", env=env_for(control)).code == 0
    r = hermit(repo, "estimate", "--steps", "3", "--json", env=env_for(control))
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["steps_seen"] == 2 and data["steps"] == 3
    acting = data["per_step"]["acting"]
    assert acting["tokens"]["mean"] == ROWS * ROLLOUT_TOKENS and acting["tokens"]["sd"] == 0
    assert abs(acting["cost_usd"]["mean"] - ROWS * ROLLOUT_USD) < 1e-9
    assert acting["cost_usd"]["min"] == acting["cost_usd"]["max"]
    assert {"debugger", "evolve"} <= set(data["per_step"])
    per_step = sum(role["cost_usd"]["mean"] for role in data["per_step"].values())
    assert abs(data["next"]["cost_usd"]["mean"] - 3 * per_step) < 1e-9
    assert data["next"]["tokens"]["mean"] == 3 * sum(role["tokens"]["mean"] for role in data["per_step"].values())
    assert abs(data["spent"]["cost_usd"] + data["budget"]["left_usd"] - 5.0) < 1e-9
    text = hermit(repo, "estimate", "--steps", "3", env=env_for(control))
    assert text.code == 0 and "next 3 step(s)" in text.out and "acting" in text.out and "left" in text.out


def test_usd_budget_with_an_unpriced_model_is_refused_and_max_tokens_works_without_prices(repo):
    control = _run(repo, {"max_usd": 1.0}, prices={"scripted": {"input": 1.0, "output": 1.0}})
    before = refs(repo)
    for command in ("step", "train", "rollout"):
        r = hermit(repo, command, env=env_for(control))
        assert r.code == 5, (command, r.out + r.err)
        assert "fake-model" in r.err and "no price" in r.err and "hint:" in r.err and "prices" in r.err
    assert calls(control, "agent") == [] and refs(repo) == before

    # a token budget needs no prices: 3000 tokens stop the step after two rollouts (2 × 1100)
    _edit(repo, prices={}, budget={"max_tokens": 3000})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT, r.out + r.err
    assert len(_finished(repo, 1)) == 2 and "2,200" in r.err and "800 left" in r.err


def test_budget_stops_learner_sessions_and_the_resumed_step_bills_each_session_once(repo):
    # room for the 8 rollouts and about one and a half Debugger sessions (~1k tokens at $1/M each)
    control = _run(repo, {"max_usd": ROWS * ROLLOUT_USD + 0.0015})
    _edit(repo, evolver={**yaml.safe_load((repo / "hermit.yaml").read_text())["evolver"],
                         "params": {"k": 2, "target_pass_rate": 1.0,
                                    "debugger": {"retries": 1, "backoff_s": 0.0, "concurrency": 1}}})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT, r.out + r.err
    assert "before a debugger session" in r.err and "left" in r.err
    sessions = calls(control, "debugger")
    assert 1 <= len(sessions) < len(ANSWERS) and calls(control, "evolve") == []
    assert len(calls(control, "agent")) == ROWS

    _edit(repo, budget={"max_usd": 10.0})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert len(calls(control, "agent")) == ROWS                     # no rollout ran again
    assert sorted(calls(control, "debugger")) == sorted(ANSWERS)     # no session ran again
    ledger = json.loads((step_dir(repo, 1) / "ledger.json").read_text())["entries"]
    assert sorted(e["key"] for e in ledger if e["role"] == "debugger") == sorted(ANSWERS)


def test_dask_executor_stops_submitting_at_the_budget(repo):
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    control = _run(repo, {"max_tokens": 3 * ROLLOUT_TOKENS + 500})
    _edit(repo, executor={"kind": "dask", "address": "local", "workers": 1})
    r = hermit(repo, "step", env=env_for(control), timeout=180, subprocess=True)   # Dask's state is per process
    assert r.code == BUDGET_EXIT, r.out + r.err
    finished = _finished(repo, 1)
    # one worker with two threads: never more than one rollout's tokens over what is left
    assert len(finished) == 3 and len(finished) * ROLLOUT_TOKENS <= 3 * ROLLOUT_TOKENS + 500
    assert f"{len(finished)} of its {ROWS} rollout(s) finished" in r.err


def test_a_fresh_clone_counts_the_spending_its_fetched_steps_recorded_in_notes(repo, tmp_path):
    # the step ledgers under .hermit/ stay on the machine that ran them; the notes travel
    control = _run(repo, None)
    _add_test_split(repo)
    assert hermit(repo, "train", "--epochs", "2", env=env_for(control)).code == 0
    r = hermit(repo, "eval", f"hermit/{RUN}/step-0001", "--split", "test", env=env_for(control))
    assert r.code == 0, r.out + r.err
    origin = _estimate(repo, control)
    assert origin["steps_seen"] == 2 and origin["spent"]["cost_usd"] > 2 * ROWS * ROLLOUT_USD
    other = teammate_clone(repo, tmp_path)      # the same config, uncommitted; no .hermit/
    seen = _estimate(other, control)
    assert _close(seen["spent"], origin["spent"]) and seen["steps_seen"] == 2
    assert _close(seen["per_step"], origin["per_step"]) and _close(seen["next"], origin["next"])

    # room for half a step more: both refuse step 3, with the same figures, and run nothing
    spent = origin["spent"]["cost_usd"]
    for place in (repo, other):
        _edit(place, budget={"max_usd": round(spent + ROWS * ROLLOUT_USD / 2, 4)})
    agent_calls = len(calls(control, "agent"))
    said = []
    for place in (repo, other):
        r = hermit(place, "step", env=env_for(control))
        assert r.code == BUDGET_EXIT and "step 3 would cross" in r.err, r.out + r.err
        said.append(r.err)
    assert said[0] == said[1] and len(calls(control, "agent")) == agent_calls


def test_eval_spending_counts_toward_the_budget_and_not_toward_a_steps_forecast(repo):
    control = _run(repo, None)
    _add_test_split(repo)
    assert hermit(repo, "step", env=env_for(control)).code == 0
    before = _estimate(repo, control)
    r = hermit(repo, "eval", f"hermit/{RUN}/step-0001", "--split", "test", env=env_for(control))
    assert r.code == 0, r.out + r.err
    after = _estimate(repo, control)
    held_out = len(ANSWERS) * ROLLOUT_USD
    assert abs(after["spent"]["cost_usd"] - before["spent"]["cost_usd"] - held_out) < 1e-9
    assert after["spent"]["tokens"] - before["spent"]["tokens"] == len(ANSWERS) * ROLLOUT_TOKENS
    assert after["per_step"] == before["per_step"] and after["steps_seen"] == 1
    # a re-run reuses the rollouts and bills nothing more
    assert hermit(repo, "eval", f"hermit/{RUN}/step-0001", "--split", "test", env=env_for(control)).code == 0
    assert _estimate(repo, control)["spent"] == after["spent"]
    # nor does a re-run of part of the split forget what the rest of it spent
    r = hermit(repo, "rollout", f"hermit/{RUN}/step-0001", "--split", "test", "--tasks", "t1", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert _close(_estimate(repo, control)["spent"], after["spent"])

    # the next step fits the budget without the eval's spending, and not with it
    step_usd = before["next"]["cost_usd"]["mean"]
    _edit(repo, budget={"max_usd": round(before["spent"]["cost_usd"] + step_usd + held_out / 2, 6)})
    agent_calls = len(calls(control, "agent"))
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT and "step 2 would cross" in r.err, r.out + r.err
    assert len(calls(control, "agent")) == agent_calls


def _eval_dir_files(repo: Path) -> list[str]:
    root = repo / ".hermit" / "runs" / RUN / "evals"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.is_dir() else []


def test_rollout_and_eval_refuse_at_a_reached_budget_and_stop_mid_run(repo):
    control = _run(repo, None)
    _add_test_split(repo)
    seed = f"hermit/{RUN}/step-0000"
    r = hermit(repo, "rollout", seed, "--split", "test", env=env_for(control))
    assert r.code == 0, r.out + r.err
    held_out = len(ANSWERS) * ROLLOUT_USD                      # $0.08 spent
    _edit(repo, budget={"max_usd": held_out})
    before, files, agent_calls = refs(repo), _eval_dir_files(repo), len(calls(control, "agent"))
    for command in ("rollout", "eval"):
        r = hermit(repo, command, seed, "--split", "train", env=env_for(control))
        assert r.code == BUDGET_EXIT, (command, r.out + r.err)
        assert "error: budget reached" in r.err and "spent $0.08" in r.err and "$0.00 left" in r.err, r.err
        assert "hint:" in r.err and "budget.max_usd" in r.err
        assert refs(repo) == before and _eval_dir_files(repo) == files
        assert len(calls(control, "agent")) == agent_calls
    # a re-run whose rows all have results spends nothing: it still just reports
    for command in ("rollout", "eval"):
        r = hermit(repo, command, seed, "--split", "test", env=env_for(control))
        assert r.code == 0, (command, r.out + r.err)

    # room for two more rollouts: the train split (8 rows) stops after two, which are kept
    _edit(repo, budget={"max_usd": round(held_out + 2.5 * ROLLOUT_USD, 4)})
    r = hermit(repo, "rollout", seed, "--split", "train", env=env_for(control))
    assert r.code == BUDGET_EXIT, r.out + r.err
    assert "2 of its 8 rollout(s) finished" in r.err and "left" in r.err
    assert len(calls(control, "agent")) == agent_calls + 2 and len(_finished(repo, 1)) == 2
    note = _scores_note(repo, seed)          # kept in the note too, which a clone's budget reads
    assert sum(len(t["attempts"]) for t in note["tasks"].values()) == 2
    assert note["usage_by_role"]["acting"]["cost_usd"] == pytest.approx(2 * ROLLOUT_USD)
    spent = _estimate(repo, control)["spent"]["cost_usd"]
    assert spent == pytest.approx(held_out + 2 * ROLLOUT_USD)
    r = hermit(repo, "eval", seed, "--split", "train", env=env_for(control))
    assert r.code == BUDGET_EXIT and "budget reached" in r.err, r.out + r.err
    assert len(calls(control, "agent")) == agent_calls + 2

    # raised: the rest runs once, the two finished rollouts are reused
    _edit(repo, budget={"max_usd": 10.0})
    r = hermit(repo, "eval", seed, "--split", "train", env=env_for(control))
    assert r.code == 0, r.out + r.err
    log = calls(control, "agent")
    assert len(log) == agent_calls + ROWS and len(set(log[agent_calls:])) == ROWS
    assert _estimate(repo, control)["spent"]["cost_usd"] == pytest.approx(held_out + ROWS * ROLLOUT_USD)


def test_notes_carry_usage_by_role_so_a_clone_prices_and_splits_it_as_the_origin_does(repo, tmp_path):
    pytest.importorskip("openai", reason="the llm judge needs the optional openai extra")
    from support.judges_helpers import FakeChatServer
    control = _run(repo, None, prices={})                  # no prices yet: the notes hold no cost
    _add_test_split(repo)
    seed = f"hermit/{RUN}/step-0000"
    env = {**env_for(control), "JUDGE_KEY": "judge-" + "key" * 3}
    with FakeChatServer('Looks right.\n{"reward": 1, "reason": "ok"}') as server:
        _edit(repo, judge={"kind": "llm", "model": "grader-1", "base_url": server.base_url, "env_key": "JUDGE_KEY",
                           "rubric": "The answer must be right.", "max_retries": 0})
        r = hermit(repo, "eval", seed, "--split", "test", env=env)
    assert r.code == 0, r.out + r.err
    by_role = _scores_note(repo, seed)["usage_by_role"]
    assert by_role["acting"]["input_tokens"] == len(ANSWERS) * 1000
    assert by_role["judge"]["input_tokens"] == len(ANSWERS) * 1000 and by_role["judge"]["output_tokens"] == len(ANSWERS) * 200

    other = teammate_clone(repo, tmp_path)
    # prices given afterwards: each role's tokens are priced at its own model's price
    for place in (repo, other):
        _edit(place, prices={"fake-model": PRICE, "grader-1": {"input": 1.0, "output": 2.0},
                             "scripted": {"input": 1.0, "output": 1.0}}, budget={"max_usd": 5.0})
    agent_usd, judge_usd = len(ANSWERS) * ROLLOUT_USD, len(ANSWERS) * (1000 * 1.0 + 200 * 2.0) / 1e6
    seen = {}
    for place in (repo, other):
        spent = _estimate(place, control)["spent"]
        assert spent["cost_usd"] == pytest.approx(agent_usd + judge_usd), place
        assert spent["by_role"]["judge"]["cost_usd"] == pytest.approx(judge_usd)
        assert spent["by_role"]["acting"]["cost_usd"] == pytest.approx(agent_usd)
        seen[place] = spent
    assert _close(seen[repo], seen[other])
    text = hermit(other, "estimate", env=env_for(control)).out
    assert "judge" in text and "acting" in text, text

    # a note written before usage_by_role: its agents' and judges' usage reads as the agents'
    note = _scores_note(other, seed)
    del note["usage_by_role"]
    git(other, "notes", "--ref", "refs/notes/hermit/scores", "add", "-f", "-m", json.dumps(note), seed)
    spent = _estimate(other, control)["spent"]
    assert spent["tokens"] == seen[repo]["tokens"] and list(spent["by_role"]) == ["acting"]
    assert spent["cost_usd"] == pytest.approx(len(ANSWERS) * (1000 * 2 * 10.0 + 300 * 100.0) / 1e6)


def test_log_shows_the_judges_share_of_a_steps_rollout_usage(repo):
    pytest.importorskip("openai", reason="the llm judge needs the optional openai extra")
    from support.judges_helpers import FakeChatServer
    control = _run(repo, None, prices={"fake-model": PRICE, "grader-1": {"input": 1.0, "output": 2.0}})
    env = {**env_for(control), "JUDGE_KEY": "judge-" + "key" * 3}
    with FakeChatServer('Looks right.\n{"reward": 1, "reason": "ok"}') as server:
        _edit(repo, judge={"kind": "llm", "model": "grader-1", "base_url": server.base_url, "env_key": "JUDGE_KEY",
                           "rubric": "The answer must be right.", "max_retries": 0})
        r = hermit(repo, "step", env=env)
    assert r.code == 0, r.out + r.err
    judge_usd = ROWS * (1000 * 1.0 + 200 * 2.0) / 1e6
    line = next(x for x in hermit(repo, "log").out.splitlines() if x.startswith("step    0"))
    # the rollouts' usage (agents and judges), then the judges' part of it
    assert f"tokens 18.4k ${ROWS * ROLLOUT_USD + judge_usd:.2f} (judge 9.6k ${judge_usd:.2f})" in line, line


def test_a_clone_counts_what_a_step_the_budget_stopped_spent(repo, tmp_path):
    control = _run(repo, {"max_usd": 0.07})
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT and len(_finished(repo, 1)) == 3, r.out + r.err
    origin = _estimate(repo, control)
    other = teammate_clone(repo, tmp_path)
    seen = _estimate(other, control)
    assert seen["unfinished"] == origin["unfinished"] == {"step": 1, "rollouts": 3}
    assert _close(seen["spent"], origin["spent"]) and seen["spent"]["cost_usd"] == pytest.approx(3 * ROLLOUT_USD)

    # the clone's step counts it: the same budget refuses the rest of the step, as at the origin
    agent_calls = len(calls(control, "agent"))
    r = hermit(other, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT and "spent $0.06" in r.err, r.out + r.err
    assert len(calls(control, "agent")) == agent_calls
    # room for the step's 8 rollouts and about one Debugger session: the clone reuses the 3 the
    # origin finished (published on its pending ref when the budget stopped it: nothing is billed
    # twice), runs the other 5 and stops before a session; its note adds what it spent
    for place in (repo, other):
        _edit(place, budget={"max_usd": round(ROWS * ROLLOUT_USD + 0.0015, 4)},
              evolver={**yaml.safe_load((place / "hermit.yaml").read_text())["evolver"],
                       "params": {"k": 2, "target_pass_rate": 1.0,
                                  "debugger": {"retries": 1, "backoff_s": 0.0, "concurrency": 1}}})
    r = hermit(other, "step", env=env_for(control))
    assert r.code == BUDGET_EXIT and "before a debugger session" in r.err, r.out + r.err
    assert len(calls(control, "agent")) == agent_calls + ROWS - 3 and calls(control, "debugger")
    spent = _estimate(other, control)["spent"]
    assert spent["by_role"]["acting"]["cost_usd"] == pytest.approx(ROWS * ROLLOUT_USD)
    assert spent["by_role"]["debugger"]["cost_usd"] > 0
    assert hermit(other, "push").code == 0 and hermit(repo, "fetch").code == 0
    assert _close(_estimate(repo, control)["spent"], spent)       # the origin counts the clone's spending

    # raised: the clone finishes the step; its ledger (the analysis note) keeps the origin's part
    _edit(other, budget={"max_usd": 10.0})
    r = hermit(other, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    finished = _estimate(other, control)
    assert finished["steps_seen"] == 1 and finished["unfinished"] is None
    assert finished["per_step"]["acting"]["cost_usd"]["mean"] == pytest.approx(ROWS * ROLLOUT_USD)
    assert hermit(other, "push").code == 0 and hermit(repo, "fetch").code == 0
    assert _close(_estimate(repo, control)["spent"], finished["spent"])


def test_eval_with_a_baseline_keeps_both_runs_finished_rollouts_when_the_budget_stops_it(repo):
    control = _run(repo, None)
    _add_test_split(repo)
    assert hermit(repo, "step", env=env_for(control)).code == 0
    spent = _estimate(repo, control)["spent"]["cost_usd"]
    # room for the candidate's 4 held-out rollouts and two and a half of the baseline's
    _edit(repo, budget={"max_usd": round(spent + 6.5 * ROLLOUT_USD, 6)})
    agent_calls = len(calls(control, "agent"))
    candidate, baseline = f"hermit/{RUN}/step-0001", f"hermit/{RUN}/step-0000"
    r = hermit(repo, "eval", candidate, "--baseline", baseline, "--split", "test", env=env_for(control))
    assert r.code == BUDGET_EXIT and "2 of its 4 rollout(s) finished" in r.err, r.out + r.err
    assert len(calls(control, "agent")) == agent_calls + 6
    assert len(_scores_note(repo, candidate)["tasks"]) == len(ANSWERS)          # the candidate's run, whole
    assert len(_scores_note(repo, baseline)["splits"]["test"]["tasks"]) == 2     # the baseline's, as far as it got
    assert _estimate(repo, control)["spent"]["cost_usd"] == pytest.approx(spent + 6 * ROLLOUT_USD)

    _edit(repo, budget={"max_usd": 10.0})
    r = hermit(repo, "eval", candidate, "--baseline", baseline, "--split", "test", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert len(calls(control, "agent")) == agent_calls + 8 and _scores_note(repo, candidate)["ci"]
