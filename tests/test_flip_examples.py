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
