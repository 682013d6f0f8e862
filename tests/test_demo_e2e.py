"""`git hermit demo` end to end: the real executable, a new repository, the whole ahe loop."""

from __future__ import annotations

import json

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import copy_demo


@pytest.mark.slow
def test_demo_runs_the_loop_and_leaves_it_in_git(demo_made, tmp_path):
    # the session's demo run (the real executable into a new directory), copied before reading
    # it, so nothing this test runs can leak into the other tests' copies
    made, r = demo_made
    target = copy_demo(made, tmp_path / "demo")
    assert "simulated" in r.out
    history = json.loads(hermit(target, "log", "--json").out)
    rates = [s["pass_at_1"] for s in history["steps"] if s["pass_at_1"] is not None]
    assert rates[-1] > rates[0], rates                       # pass@1 rose
    verdicts = [c["verdict"]["verdict"] for s in history["steps"] for c in s["changes"] if c["verdict"]]
    assert "HARMFUL" in verdicts and "EFFECTIVE" in verdicts  # predictions confirmed and refuted
    rollbacks = [rb for s in history["steps"] for rb in s["rollbacks"]]
    assert rollbacks and rollbacks[0]["verdict"] == "HARMFUL"  # rolled back automatically
    harmful = next(c for s in history["steps"] for c in s["changes"]
                   if c["verdict"] and c["verdict"]["verdict"] == "HARMFUL")
    assert rollbacks[0]["reverts"] == harmful["commit"]
    best = git(target, "rev-parse", "refs/tags/hermit/demo/best").strip()
    assert best == history["best"] == history["final"]
    notes = git(target, "log", "--notes=hermit/verdicts", "-1", "--format=%N", harmful["commit"])
    assert '"verdict": "HARMFUL"' in notes
    assert git(target, "status", "--porcelain") == ""         # the work tree was never touched
    # the demo refuses a non-empty directory, leaving it as it was
    again = hermit(tmp_path, "demo", str(target))
    assert again.code == 7 and "not empty" in again.err
