"""A few example flips per judged change, kept in the scores note (``evaluation.examples``).

A reviewer reads a verdict better with one or two of the tasks it rests on: the task id, the
agent's answer before the change (H_{N-1}, from step N's rollout records) and after it (H_N, this
step's rollouts), and what the judge said. They go in the note the step writes, so a clone that
fetched only the notes shows them. Capped (two per change, a short line each, forty in all);
the step redacts the whole evaluation before it is written.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

PER_CHANGE = 2
MAX_EXAMPLES = 40
TEXT_LIMIT = 160


def _line(text: str | None) -> str | None:
    if text is None:
        return None
    one = " ".join(str(text).split())
    return one if len(one) <= TEXT_LIMIT else one[: TEXT_LIMIT - 1] + "…"


def _first(results: Iterable[Any]) -> Any | None:
    ordered = sorted(results, key=lambda r: r.attempt)
    return ordered[0] if ordered else None


def _before(records: Mapping[str, bytes], task: str) -> dict[str, Any] | None:
    """The first attempt's result.json of ``task`` in a step's rollout records."""
    from git_hermit.rollouts.runner import task_dirname
    prefix = task_dirname(task) + "/"
    found = sorted((key for key in records if key.startswith(prefix) and key.endswith("/result.json")),
                   key=lambda key: (len(key), key))
    for key in found:
        try:
            data = json.loads(records[key])
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def flip_examples(verdicts: Iterable[Any], after: Mapping[str, list[Any]],
                  before_records: Callable[[], Mapping[str, bytes]]) -> list[dict[str, Any]]:
    """``[{change_id, task, kind: fixed|regressed, before, before_outcome, after, after_outcome, judge}]``
    for the tasks each verdict names (its fixes first, then its realised risks)."""
    wanted: list[tuple[str, str, str]] = []
    for note in verdicts:
        for one in (note, *getattr(note, "also", ())):
            tasks = [(t, "fixed") for t in one.actually_fixed] + [(t, "regressed") for t in one.risk_realized]
            wanted += [(one.change_id, task, kind) for task, kind in tasks[:PER_CHANGE]]
    if not wanted:
        return []
    records = before_records()
    out = []
    for change_id, task, kind in wanted[:MAX_EXAMPLES]:
        now = _first(after.get(task, []))
        was = _before(records, task)
        out.append({"change_id": change_id, "task": task, "kind": kind,
                    "before": _line(was.get("final_answer")) if was else None,
                    "before_outcome": was.get("outcome") if was else None,
                    "after": _line(now.final_answer) if now is not None else None,
                    "after_outcome": now.outcome if now is not None else None,
                    "judge": _line(now.verifier_output) if now is not None and now.verifier_output else None})
    return out
