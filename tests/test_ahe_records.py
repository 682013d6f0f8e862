"""ahe records: task history, best-ever (strict >), the stop rule, the scores table and the
evolution history (spec/ahe.md §9, §10)."""

from __future__ import annotations

import json

from support.ahe_factory import results, trial

from git_hermit.evolvers.ahe.analysis import classify, diff
from git_hermit.evolvers.ahe.attribution import evaluate_changes
from git_hermit.evolvers.ahe.records import (
    HISTORY_HEADER, append_history, best_ever_record, reached_target, read_scores,
    render_history_after, render_history_block, render_scores, score_entry,
    task_breakdown, update_best_ever, update_task_history, write_best_ever,
    write_change_evaluation, write_scores, write_stats, write_task_history)


def test_task_history_entries_and_replacement():
    s1 = classify(results({"a": "PF", "b": "EE"}), k=2)
    h = update_task_history({}, 1, s1)
    assert h == {"a": [[1, "fail", {"n_pass": 1, "n_fail": 1, "n_exception": 0, "total": 2}]],
                 "b": [[1, "exception", {"n_pass": 0, "n_fail": 0, "n_exception": 2, "total": 2}]]}
    s1b = classify(results({"a": "PP"}), k=2)
    h2 = update_task_history(h, 1, s1b)  # the same step again replaces, never doubles
    assert h2["a"] == [[1, "pass", {"n_pass": 2, "n_fail": 0, "n_exception": 0, "total": 2}]]
    assert h2["b"] == [] and h["a"][0][1] == "fail"  # the input is not mutated
    k1 = update_task_history({}, 3, classify(results({"a": "P"}), k=1))
    assert k1 == {"a": [[3, "pass"]]}


def test_task_breakdown():
    stats = classify(results({"a": "PP", "b": "PF", "c": "FE", "d": "EE", "e": "PP"}), k=2)
    assert task_breakdown(stats) == {"total": 5, "passed_2_of_2": 2, "passed_1_of_2": 1,
                                     "passed_0_of_2": 1, "all_exception": 1}
    assert task_breakdown(classify(results({"a": "P", "b": "E"}), k=1)) == \
        {"total": 2, "pass": 1, "fail": 0, "exception": 1}


def test_best_ever_is_strict_and_keeps_the_commit():
    s1 = classify(results({"a": "PF"}), k=2)
    s2 = classify(results({"a": "FP"}), k=2)  # same pass@1
    s3 = classify(results({"a": "PP"}), k=2)
    best, improved = update_best_ever(None, best_ever_record(1, s1, "c1"))
    assert improved and best["commit"] == "c1" and best["pass_at"] == {"1": 0.5, "2": 1.0}
    best, improved = update_best_ever(best, best_ever_record(2, s2, "c2"))
    assert not improved and best["iteration"] == 1
    best, improved = update_best_ever(best, best_ever_record(3, s3, "c3"))
    assert improved and (best["iteration"], best["commit"]) == (3, "c3")
    assert set(best_ever_record(1, classify(results({"a": "P"}), k=1), "x")) == \
        {"iteration", "pass_rate", "k", "commit", "tasks"}


def test_reached_target():
    stats = classify(results({"a": "PP", "b": "PF"}), k=2)
    assert reached_target(stats, 0.75) and not reached_target(stats, 0.76)


def test_scores_table_k2_and_trend():
    e1 = score_entry(1, classify(results({"a": "PF", "b": "FF"}), k=2), timestamp="t1")
    e2 = score_entry(2, classify({"a": [trial("a", 1, "pass", tokens=300), trial("a", 2, "pass", tokens=100)],
                                  **results({"b": "PE"})}, k=2), timestamp="t2")
    text = render_scores([e1, e2])
    lines = text.splitlines()
    assert lines[2] == ("| Iter | pass@1 | pass@2 | Tasks | 2/2 | 1/2 | 0/2 | Exc | Trials | Trial P | "
                        "Trial F | Trial E | Tok/trial | Time |")
    assert lines[4] == "| 1 | 25.0% | 50.0% | 2 | 0 | 1 | 1 | 0 | 4 | 1 | 3 | 0 | - | t1 |"
    assert lines[5] == "| 2 | 75.0% | 100.0% | 2 | 1 | 1 | 0 | 0 | 4 | 3 | 0 | 1 | 133 | t2 |"  # (300+100+0)/3: exceptions excluded
    assert lines[-1] == "Pass rate trend: 25.0% -> 75.0% (+50.0pp over 2 iterations)"


def test_scores_table_k1_with_timing_and_single_row():
    e1 = score_entry(1, classify(results({"a": "P", "b": "F"}), k=1), timestamp="t1",
                     timing={"total_min": 10, "eval_min": 6, "analysis_min": 1, "evolve_min": 3})
    text = render_scores([e1])
    assert "| Iter | Pass Rate | Pass | Fail | Exc | Total | Duration | Eval | Anlys | Evolve | Tok/trial | Time |" in text
    assert "| 1 | 50.0% | 1 | 1 | 0 | 2 | 10.0m | 6.0m | 1.0m | 3.0m | - | t1 |" in text
    assert "trend" not in text
    assert "Duration" not in render_scores([score_entry(1, classify(results({"a": "P"}), k=1), timestamp="t")])


def test_history_block_k2():
    s1 = classify(results({"a": "FF", "b": "PP", "c": "PF"}), k=2)
    s2 = classify(results({"a": "PP", "b": "PF", "c": "PF", "d": "EE", "e": "FF"}), k=2)
    text = render_history_block(2, s2, diff(s1, s2), timestamp="2026-01-01 12:00", rollouts_ref="step-0002")
    assert text.startswith("## Iteration 2 — 2026-01-01 12:00\n")
    assert "- **Evaluation** (each task x2 rollouts)" in text
    assert "- pass@1=0.400 | pass@2=0.600" in text
    assert ("- 5 tasks breakdown: 1 tasks passed all 2 rollouts; 2 tasks passed 1 of 2 rollouts; "
            "1 tasks failed all 2 rollouts; 1 tasks hit exception") in text
    assert "- Per-trial pass rate: 0.400 (4/10 trials)" in text
    assert "- Regressions: 1" in text and "- Retention rate: 0.000 (0/1" in text
    assert "- Exception stats: RuntimeError: 2" in text and "- Rollouts: `step-0002`" in text
    assert "- 🔶 Partial pass (2): b (1/2), c (1/2)" in text and "- ❌ All failed (1): e" in text
    assert "### Cross-Iteration Changes (iteration 1 -> 2)" in text
    assert "🎉 Improved fail->all-pass (1): a (0/2->2/2)" in text
    assert "- Infra recovered exception->pass" not in text and "- Net change: +0" in text


def test_history_block_k1_first_step_and_name_cap():
    stats = classify(results({f"t{i:02d}": "F" for i in range(20)}), k=1)
    text = render_history_block(1, stats, None, timestamp="x")
    assert "- Pass rate: 0.000 (0/20)" in text and "Cross-Iteration" not in text
    assert "- ❌ Failed (20): t00, " in text and "t14, ... (+5 more)" in text
    assert "- ✅ Passed (0): -" in text and "- Exception stats: None" in text


def test_append_history_is_idempotent_per_step(tmp_path):
    path = tmp_path / "evolution_history.md"
    s = classify(results({"a": "P"}), k=1)
    block1 = render_history_block(1, s, None, timestamp="x")
    append_history(path, 1, block1)
    append_history(path, 1, render_history_after("did things"))
    append_history(path, 2, render_history_block(2, s, None, timestamp="y"))
    append_history(path, 2, render_history_block(2, s, None, timestamp="z"))  # a resumed step 2
    text = path.read_text(encoding="utf-8")
    assert text.startswith(HISTORY_HEADER + "\n\n## Iteration 1 — x")
    assert "**Evolve Agent Output:**\n\ndid things\n\n---\n\n" in text
    assert text.count("## Iteration 2 ") == 1 and "## Iteration 2 — z" in text
    assert render_history_after(None) == "**Evolve Agent Output:**\n\n(no output)\n\n---\n\n"


def test_writers(tmp_path):
    s1 = classify(results({"a": "PF"}), k=2)
    s2 = classify(results({"a": "PP"}), k=2)
    entries = [score_entry(1, s1, timestamp="t1"), score_entry(2, s2, timestamp="t2")]
    write_scores(tmp_path, entries)
    assert read_scores(tmp_path) == json.loads(json.dumps(entries))
    assert (tmp_path / "iteration_scores.md").read_text(encoding="utf-8") == render_scores(entries)
    assert read_scores(tmp_path / "nothing") == []
    write_best_ever(tmp_path, best_ever_record(2, s2, "c2"))
    assert json.loads((tmp_path / "best_ever.json").read_text())["commit"] == "c2"
    write_task_history(tmp_path, update_task_history({}, 1, s1))
    assert json.loads((tmp_path / "task_history.json").read_text())["a"][0][1] == "fail"
    d = diff(s1, s2)
    stats_file = write_stats(tmp_path / "stats", 2, s2, d)
    assert json.loads(stats_file.read_text())["diff"]["flipped"] == ["a"]
    evaluation = evaluate_changes([{"id": "chg-1", "predicted_fixes": ["a"]}], d, evaluating_iteration=1)
    ev_file = write_change_evaluation(tmp_path / "evaluations", 2, evaluation)
    assert ev_file.name == "step_0002.json"
    assert json.loads(ev_file.read_text())["summary"] == "chg-1: EFFECTIVE"
