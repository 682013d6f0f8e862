"""Issue 14.5: data flows one way through a step.

Tasks and rows are parsed once per step (a streaming evolver's window is cut from the parsed
split, not parsed again); ``timeout_as`` is applied once, when a step or `rollout` reads its
results, so the rollouts on disk stay as they happened and a changed setting applies to reused
ones too; past outcomes come from the scores notes into typed results once (their labels are the
ones the note recorded); ``k`` has one default.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
import yaml

import git_hermit
from support.continual_harness_helpers import SUPPORT, make_continual_run

PACKAGE = Path(git_hermit.__file__).resolve().parent


def _count_calls(monkeypatch, module: str, name: str) -> list[int]:
    """Count calls of ``module.name`` wherever it is bound (a ``from module import name`` too)."""
    import importlib
    original = getattr(importlib.import_module(module), name)
    calls: list[int] = []

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("git_hermit") and getattr(mod, name, None) is original:
            monkeypatch.setattr(mod, name, counting)
    return calls


def test_a_streaming_step_parses_tasks_and_rows_once(repo, monkeypatch):
    control = make_continual_run(repo)
    monkeypatch.setenv("HERMIT_TEST_CONTROL", str(control))
    monkeypatch.syspath_prepend(str(SUPPORT))
    monkeypatch.chdir(repo)
    import git_hermit.core.evaluate  # noqa: F401  (bind the loaders before counting)
    import git_hermit.core.step  # noqa: F401
    from git_hermit.core.step import run_step
    from git_hermit.gitio import Repo
    tasks = _count_calls(monkeypatch, "git_hermit.rollouts.tasks", "load_tasks")
    rows = _count_calls(monkeypatch, "git_hermit.rollouts.rows", "load_split")
    outcome = run_step(Repo.discover(repo), "r", say=lambda _: None)
    assert outcome.step == 1 and outcome.tip
    assert (len(tasks), len(rows)) == (1, 1)


# --- timeout_as -----------------------------------------------------------------------------------
def test_timeout_as_has_one_default_and_one_place_that_applies_it():
    """evolver.params.timeout_as is read in one place (RunConfig.timeout_as, its default from the
    framework's params schema) and applied by one function (model.rollout.scored): no other
    function takes it, defaults it, or reads the parameter."""
    takes, read = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.arg, ast.keyword)) and node.arg == "timeout_as":
                takes.append(rel)
            if isinstance(node, ast.Constant) and node.value == "timeout_as":
                read.append(rel)
    assert sorted(set(takes)) == ["model/rollout.py"], f"timeout_as passed around in: {sorted(set(takes))}"
    assert sorted(set(read)) == ["config.py"], f"evolver.params.timeout_as read in: {sorted(set(read))}"
    schemas = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.schema.json")
               if "timeout_as" in json.loads(p.read_text()).get("properties", {})]
    assert schemas == ["evolvers/framework.params.schema.json"], schemas


def test_timeout_as_applies_to_reused_rollouts_both_ways(tmp_path):
    """A rollout is stored as it happened; `timeout_as` is applied when it is read, so switching the
    setting re-scores reused rollouts (today a rollout stored as a fail stayed a fail)."""
    from git_hermit.model.rollout import RolloutResult, scored
    timed_out = RolloutResult("t", 1, "exception", exception_type="AgentTimeout", timed_out=True)
    as_fail = scored(timed_out, "fail")
    assert (as_fail.outcome, as_fail.reward, as_fail.exception_type) == ("fail", None, "AgentTimeout")
    assert scored(timed_out, "exception") == timed_out
    verifier = RolloutResult("t", 1, "exception", exception_type="VerifierTimeoutError")
    assert scored(verifier, "fail").outcome == "fail" and scored(verifier, "fail").is_timeout
    crashed = RolloutResult("t", 1, "exception", exception_type="AgentCrashError")
    assert scored(crashed, "fail") == crashed


# --- past outcomes ------------------------------------------------------------------------------
def test_past_evaluation_is_read_into_typed_results_once_with_the_labels_the_note_recorded():
    """A past evaluation reaches an evolver as typed results read from its scores note once; the
    ahe statistics of them give every task the label the note recorded (a timeout that
    `timeout_as: fail` scored a fail stays a fail: it is not scored again as an exception)."""
    from git_hermit.evolvers.ahe.analysis import classify
    from git_hermit.evolvers.base import PastEvaluation
    from git_hermit.model.records import Attempt, Scores, TaskScore, dumps, loads
    note = Scores("r", 1, "a" * 40, "train", 2, 0.25, {
        "t-pass": TaskScore("pass", (Attempt("pass", 1.0), Attempt("pass", 1.0))),
        "t-half": TaskScore("fail", (Attempt("pass", 1.0), Attempt("fail", 0.0))),
        "t-verifier-timeout": TaskScore("fail", (Attempt("fail", None, "VerifierTimeoutError"),
                                                 Attempt("fail", None, "AgentTimeout"))),
        "t-crash": TaskScore("exception", (Attempt("exception", None, "AgentCrashError"),) * 2)})
    past = PastEvaluation.of(1, "a" * 40, loads("scores", dumps("scores", note)))
    assert {t: [r.outcome for r in rs] for t, rs in past.results.items()} == {
        t: [a.outcome for a in s.attempts] for t, s in note.tasks.items()}
    stats = classify(past.results, k=past.scores.k)
    assert stats.task_results == {t: s.outcome for t, s in note.tasks.items()}
    assert stats.timeout_tasks == {"t-verifier-timeout"}


# --- k ----------------------------------------------------------------------------------------------
def test_k_default_is_written_once():
    """`k` (rollouts per task) defaults to "inferred from the rows" in one place: no evolver schema
    and no command spells its own default."""
    from git_hermit.evolvers.params import param_defaults
    from git_hermit.evolvers import registry
    for name in registry.names():
        assert param_defaults(name)["k"] is None
    own = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.schema.json")
           if "k" in json.loads(p.read_text()).get("properties", {})]
    assert own == ["evolvers/framework.params.schema.json"], f"k declared (with its default) in: {own}"
