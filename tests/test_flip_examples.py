"""core.flip_examples: the example flips a step keeps per judged change are capped."""

from __future__ import annotations

import json
from types import SimpleNamespace

from git_hermit.core.flip_examples import MAX_EXAMPLES, PER_CHANGE, TEXT_LIMIT, flip_examples
from git_hermit.model.rollout import RolloutResult


def _verdict(cid: str, fixed: list[str], risks: list[str] = ()) -> SimpleNamespace:
    return SimpleNamespace(change_id=cid, actually_fixed=tuple(fixed), risk_realized=tuple(risks), also=())


def test_two_per_change_fixes_first_long_answers_cut_and_a_total_cap():
    tasks = [f"t{i}" for i in range(5)]
    after = {t: [RolloutResult(task=t, attempt=2, outcome="fail", final_answer="late"),
                 RolloutResult(task=t, attempt=1, outcome="pass", final_answer="x" * 500, verifier_output="ok\nfine")]
             for t in tasks}
    before = {f"{t}/1/result.json": json.dumps({"final_answer": "no", "outcome": "fail"}).encode() for t in tasks}
    out = flip_examples([_verdict("chg-1", tasks[:3], ["t4"])], after, lambda: before)
    assert [(e["task"], e["kind"]) for e in out] == [("t0", "fixed"), ("t1", "fixed")][:PER_CHANGE]
    assert len(out[0]["after"]) == TEXT_LIMIT and out[0]["after"].endswith("…")
    assert out[0]["before"] == "no" and out[0]["after_outcome"] == "pass" and out[0]["judge"] == "ok fine"
    many = [_verdict(f"chg-{i}", tasks[:2]) for i in range(50)]
    assert len(flip_examples(many, after, lambda: before)) == MAX_EXAMPLES
    assert flip_examples([_verdict("chg-1", [])], after, lambda: before) == []


def test_an_example_flip_keeps_no_secret_the_agent_answered_with(repo):
    """The answers kept as example flips are the agent's own output (untrusted): a secret in one
    reaches neither the scores note nor the report, while the flip itself is kept."""
    import sys
    from pathlib import Path

    from support.cli_helpers import hermit
    from conftest import git
    from support.step_support import AGENT_SCRIPT, RUN, change, env_for, make_run, memory_lines, plan
    from support.secret_plants import fake_secrets

    secret = fake_secrets()["github"]
    answers = {"t1": "4", "t2": "7"}
    control = make_run(repo, answers, k=1)
    # the agent that does not know yet answers with a token it found in its environment
    agent = Path(control, "agent.py")
    agent.write_text(AGENT_SCRIPT.format(python=sys.executable, control=str(control)).replace(
        '"I do not know"', repr(f"I do not know; my token is {secret}")))
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    for _ in range(2):
        r = hermit(repo, "step", env=env_for(control))
        assert r.code == 0, r.out + r.err
    step1 = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-0001").strip()
    note = json.loads(git(repo, "notes", "--ref", "hermit/scores", "show", step1))
    examples = note["evaluation"]["examples"]
    assert [(e["task"], e["kind"]) for e in examples] == [("t1", "fixed")], examples
    assert examples[0]["before"].startswith("I do not know; my token is [REDACTED") and examples[0]["after"] == "4"
    report = hermit(repo, "report", "1")
    assert report.code == 0, report.err
    everything = git(repo, "notes", "--ref", "hermit/scores", "show", step1) + report.out
    assert secret not in everything and secret[4:] not in everything
