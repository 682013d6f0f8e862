"""ahe Evolve Agent inputs: the evolution query's sections and order (§8.4), the attribution
table (§4.5) and rollback notes, START.md and DEBUGGER.md."""

from __future__ import annotations

import json
import re

import pytest
from support.ahe_factory import results

from git_hermit.evolvers.ahe.analysis import classify, diff, stability
from git_hermit.evolvers.ahe.attribution import evaluate_changes
from git_hermit.evolvers.ahe.queries import build_evolution_query, debugger_rules, render_start_prompt
from git_hermit.evolvers.ahe.records import best_ever_record, score_entry, update_task_history

HEADINGS = [
    "Iteration 3 evaluation completed.",
    "## 1. Current Iteration Overview",
    "## 2. Task Classification Details",
    "## 3. Detailed Cross-Iteration Analysis (iteration 2 -> 3)",
    "## 4. Agent Debugger Analysis (LLM-powered root cause analysis)",
    "## 5. Historical Trends",
    "## 6. Best Ever",
    "## 7. Task Stability Analysis (Across All Historical Iterations)",
    "## 8. Previous Iteration Change Attribution Report (Auto-Generated)",
    "## Execution Instructions",
]


def full_query(k=2, rollback="auto", rolled_back=("chg-2",), undone=None):
    p, f = "P" * k, "F" * k
    partial = ("P" + "F" * (k - 1)) if k > 1 else "F"
    s1 = classify(results({"a": f, "b": p, "c": f, "x": "E" * k}), k=k)
    s2 = classify(results({"a": f, "b": p, "c": f, "x": "E" * k}), k=k)
    s3 = classify(results({"a": p, "b": f, "c": partial, "x": "E" * k, "t": "T" * k}), k=k)
    history = update_task_history(update_task_history(update_task_history({}, 1, s1), 2, s2), 3, s3)
    d = diff(s2, s3)
    evaluation = evaluate_changes([
        {"id": "chg-1", "description": "teach the agent to run the tests before stopping",
         "predicted_fixes": ["a", "c"], "risk_tasks": []},
        {"id": "chg-2", "description": "deny | rm", "predicted_fixes": [], "risk_tasks": ["b"]}], d)
    scores = [score_entry(1, s1, timestamp="t1"), score_entry(2, s2, timestamp="t2")]
    return build_evolution_query(
        3, s3, d, overview_body="Analyzed 2 tasks (2 debug).\n\n### Debug (has failures)\n- **b** ...",
        scores=scores, best_ever=best_ever_record(1, s1, "abc123"), stability=stability(history, 3),
        evaluation=evaluation, rollback=rollback, rolled_back=rolled_back, rollback_undone=undone)


@pytest.mark.parametrize("k", [1, 2])
def test_sections_in_order(k):
    query = full_query(k)
    headings = [h if k > 1 or not h.startswith("## 5.") else "## 5. Historical Trends (Pass Rate)"
                for h in HEADINGS]
    positions = [query.index(h + "\n") for h in headings]
    assert positions == sorted(positions) and positions[0] == 0
    assert len(re.findall(r"^## ", query, re.MULTILINE)) == len(HEADINGS) - 1


def test_k2_overview_and_classification():
    query = full_query(2)
    assert "- **Pass@k**: pass@1=" in query and "| pass@2=" in query
    assert "- Tasks: 1 all-pass | 2 has-failure | 2 exception" in query
    assert "#### Partial pass (1) — high-priority targets" in query
    assert "- c: 1/2 passed (pass@1=50%, pass@2=100%)" in query
    assert "#### Zero pass (1) — failed all 2 rollouts" in query
    assert "### ⏱️ Timed Out (1)" in query and "- Warning: 1 tasks had infra errors" in query
    assert "- RuntimeError (1): x" in query
    assert "🎉 Improved fail->all-pass (1): a (0/2->2/2)" in query
    assert "📈 Rollout improved, still not all-pass (1): c (0/2->1/2)" in query
    assert "**Net change**: +0" in query and "**Pass rate change**: " in query
    assert "- pass@1: iter1: " in query and "- Best pass@1: " in query
    assert "commit `abc123`" in query
    assert "state/analysis/step_0003/detail/{task_name}.md" in query
    assert '"iteration": 3' in query


def test_k1_labels():
    query = full_query(1)
    assert "- **Pass rate**: " in query and "- Pass: 1 | Fail: 2 | Exception: 2" in query
    assert "🎉 Improved fail->pass (1): a" in query and "Partial pass" not in query


def test_attribution_table_and_notes():
    query = full_query(2)
    assert "| Change | Predicted Fixes | Actually Fixed | Regressions | Verdict | Suggested Action |" in query
    assert "| chg-1: teach the agent to run the tests before  | 1/2 | a | - | PARTIALLY_EFFECTIVE |" in query
    assert "| chg-2: deny / rm | 0/0 | - | b | HARMFUL | ❌ Must rollback |" in query
    assert "chg-1 predicted but not fixed: ['c']" in query
    assert "ALREADY rolled back automatically" in query and ": chg-2." in query


def test_rollback_notes_by_mode():
    assert "no change was rolled back automatically" in full_query(rolled_back=())
    undone = full_query(undone={"chg-2": "middleware.py lacks stop"})
    assert "automatic rollback of chg-2 was undone because check_spec then failed: middleware.py lacks stop" in undone
    agent = full_query(rollback="agent", rolled_back=())
    assert "`rollback: agent`" in agent and "ALREADY" not in agent


def test_net_regression_warning_and_unattributed():
    s1 = classify(results({"a": "P", "b": "P"}), k=1)
    s2 = classify(results({"a": "F", "b": "F"}), k=1)
    d = diff(s1, s2)
    query = build_evolution_query(2, s2, d, evaluation=evaluate_changes([{"id": "chg-1"}], d))
    assert "Net regression" in query and "Unattributed regressions (no change named them): ['a', 'b']" in query


def test_first_step_has_only_the_basic_sections():
    s1 = classify(results({"a": "PF"}), k=2)
    query = build_evolution_query(1, s1, None)
    assert "## 3." not in query and "## 4." not in query and "## 5." not in query
    assert "## 8." not in query and "## Execution Instructions" in query


def test_start_prompt_is_filled_and_names_the_deliverable():
    text = render_start_prompt(4, date="2026-01-01")
    assert "${" not in text and "Date: 2026-01-01" in text
    assert text.count('"iteration": 4') >= 2
    assert "./check_spec" in text and "state/change_manifest.json" in text
    for name in ("AGENTS.md", "scripts/*.py", "middleware.py", ".agents/skills/", "agents/*.md",
                 "MEMORY.md", "hooks.json", "hook_runner.py", "hermit_hooks.py"):
        assert name in text
    manifest = json.loads(re.search(r"```json\n(.*?)```", text, re.DOTALL).group(1))
    assert manifest["iteration"] == 4
    assert set(manifest["changes"][0]) == {"id", "type", "description", "files", "failure_pattern",
                                           "predicted_fixes", "risk_tasks", "component", "why_this_component"}


def test_debugger_rules_exist():
    rules = debugger_rules()
    assert "Read only" in rules and "20 tool calls" in rules
