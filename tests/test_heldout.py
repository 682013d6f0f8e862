"""`git hermit train` ends with the independent test (issue 9, item 11): when hermit.yaml has a
test split, the final snapshot and the seed are evaluated on it, the difference printed with its
paired CI and recorded in the scores note — for ahe (final = best-ever) and evo-harness (the tip;
continual-harness is covered in test_continual_harness.py). Reused when already done."""

from __future__ import annotations

import json

import yaml

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, calls, change, env_for, make_run, memory_lines, plan
from support.evo_harness_helpers import env as evo_env, log as evo_log, make_evo_run, plan as evo_plan, skill


def _add_test_split(repo, rows: list[str]) -> None:
    (repo / "rows" / "test.txt").write_text("".join(f"{r}\n" for r in rows))
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["data"]["test"] = "rows/test.txt"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _rev(repo, name: str) -> str:
    return git(repo, "rev-parse", "--verify", "-q", name, check=False).strip()


def test_ahe_train_ends_with_the_best_ever_commit_against_the_seed_on_test(repo):
    answers = {"t1": "4", "t2": "7", "t3": "9"}
    control = make_run(repo, answers, k=1, allow_early_stop=False)
    (repo / "rows" / "train.txt").write_text("t1#1\nt2#1\n")
    _add_test_split(repo, ["t3#1"])
    plan(control, 1, append={"MEMORY.md": memory_lines(answers)}, changes=[change("chg-1", ["MEMORY.md"])])
    r = hermit(repo, "train", "--epochs", "2", env=env_for(control))
    assert r.code == 0, r.out + r.err
    best = _rev(repo, f"refs/tags/hermit/{RUN}/best")
    assert best == _rev(repo, f"refs/heads/hermit/{RUN}/step-0001")
    assert f"held-out test: final {best[:12]} (best-ever) pass@1 1.000 vs seed" in r.out, r.out
    assert "difference +100.0 points" in r.out
    test_note = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", best))["splits"]["test"]
    assert test_note["pass_at_1"] == 1.0 and test_note["ci"]["delta"] == 100.0
    agent = calls(control, "agent")
    assert agent.count("t3#1") == 2                      # the final snapshot and the seed, once each
    log = hermit(repo, "log", env=env_for(control))
    assert any(line.startswith("held-out test: step 1") and "+100.0 points" in line for line in log.out.splitlines())
    assert "stream pass@1" not in log.out                  # ahe evaluates the same tasks every step


def test_evo_harness_train_ends_with_the_tip_against_the_seed_on_test(repo):
    control = make_evo_run(repo, {"t1": "1", "t2": "42", "t3": "3", "t4": "4", "t5": "5"}, {"batch_size": 2})
    (repo / "rows" / "train.txt").write_text("t1#1\nt2#1\nt3#1\nt4#1\n")
    _add_test_split(repo, ["t5#1"])
    evo_plan(control, **{"1_topic_curator": {"write": {
        "skills/short-answers/SKILL.md": skill("short-answers", "topic", ["t1"])}}})
    r = hermit(repo, "train", env=evo_env(control))
    assert r.code == 0, r.out + r.err
    tip = _rev(repo, f"refs/heads/hermit/{RUN}/step-0002")
    assert "training stopped: the training stream is spent" in r.out
    assert f"held-out test: final {tip[:12]} (tip, step 2) pass@1 0.000 vs seed" in r.out, r.out
    assert "difference +0.0 points [+0.0, +0.0] (paired bootstrap 95% CI over 1 tasks)" in r.out, r.out
    assert evo_log(control, "agent").count("t5") == 2
    note = json.loads(git(repo, "notes", "--ref=hermit/scores", "show", tip))
    assert note["split"] == "test" and note["ci"]["baseline"] == _rev(repo, f"refs/heads/hermit/{RUN}/step-0000")
    log = hermit(repo, "log").out.splitlines()
    assert "stream pass@1 0.250 over 4 tasks (2 window(s))" in log, log
    assert any(line.startswith("held-out test: step 2") for line in log), log
