"""What a scores note's ``usage`` counts, and how two machines' notes on one commit merge.

The rule: a split's ``usage`` (and ``usage_by_role``) is what every rollout it holds the result
of cost, each counted once, whichever machine ran it, plus what a row run again replaced (that
rollout was spent too, and another machine's spending is known only from the note). A re-run
adds its new and re-run rows (``add_spending``); two notes merge by adding what each side spent
beyond their common base, their outcomes merged per task and pass@k recomputed from them. A row
both machines ran (a retried row, two people resuming one step) keeps one attempt by a fixed rule
and records the other outcome beside it (``tasks.<id>.disagreed``), never a hand-resolved conflict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeGuard

from git_hermit.accounting import stats
from git_hermit.accounting.ledger import add_by_role, sum_usage
from git_hermit.model.merge import merge_json, merge_records
from git_hermit.model.records import canonical_json
from git_hermit.model.rollout import Usage

_TOKENS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
_SUMMARY = ("k", "pass_at_1", "pass_at", "tasks", "ci", "usage", "usage_by_role", "step", "partial")   # a ``splits`` entry


def roles_of(usage: Mapping[str, Any] | None, by_role: Mapping[str, Any] | None) -> dict[str, Usage]:
    """A record's usage by role; a note older than ``usage_by_role`` reads as its agents' (``acting``)."""
    if isinstance(by_role, Mapping):
        return {str(role): Usage.from_dict(dict(u)) for role, u in by_role.items() if isinstance(u, Mapping)}
    return {"acting": Usage.from_dict(dict(usage))} if isinstance(usage, Mapping) else {}


def add_spending(usage: Mapping[str, Any] | None, by_role: Mapping[str, Any] | None,
                 added: Mapping[str, Usage]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A record's (usage, usage_by_role) with ``added`` (by role) spent on top."""
    roles = add_by_role(roles_of(usage, by_role), added)
    before = [Usage.from_dict(dict(usage))] if isinstance(usage, Mapping) else list(roles_of(None, by_role).values())
    total = sum_usage([*before, *added.values()])
    return total.to_dict(), {role: u.to_dict() for role, u in roles.items()}


@dataclass(frozen=True)
class RowDisagreement:
    """A row both machines ran with a different outcome or reward: what each side had, which was kept."""

    commit: str
    split: str
    task: str
    attempt: int
    ours: dict[str, Any]       # the attempt record here
    theirs: dict[str, Any]     # the other machine's
    kept: dict[str, Any]       # one of the two: the other is in ``tasks.<task>.disagreed``


def merge_scores_notes(base: dict[str, Any] | None, ours: dict[str, Any] | None, theirs: dict[str, Any] | None,
                       disagreements: list[RowDisagreement] | None = None) -> dict[str, Any] | None:
    """Two machines' scores notes on one commit (the same run's), given their common ``base``.

    Per split: when both sides ran rows, tasks merge per task and per row (a row both sides ran
    differently keeps one attempt, see ``_merge_task``, each added to ``disagreements``) and k
    and pass@k are recomputed from them; usage and duration are the base's plus what each side
    added; every other field merges field-wise (a field both changed differently is a conflict).
    The training split stays the top level, as a `rollout` keeps it. Which attempt a row keeps does
    not depend on which side is ``ours``, so both machines end with the same note."""
    if not _is_note(ours) or not _is_note(theirs) or ours.get("run") != theirs.get("run"):
        return merge_records(base, ours, theirs)
    old: dict[str, dict[str, Any]] = _splits_of(base) if _is_note(base) else {}
    mine, other = _splits_of(ours), _splits_of(theirs)
    top = "train" if "train" in mine or "train" in other else ours["split"]
    merged: dict[str, dict[str, Any]] = {}
    found: list[RowDisagreement] = [] if disagreements is None else disagreements
    for split in [*mine, *(s for s in other if s not in mine)]:
        # a split that ends up under ``splits`` merges as the entry it will be there
        was, one, two = (v.get(split) if split == top else _entry(v.get(split)) for v in (old, mine, other))
        if one is not None and two is not None:
            merged[split] = _merge_split(was, one, two, "" if split == top else f"splits.{split}",
                                         lambda task, n, a, b, kept: found.append(RowDisagreement(
                                             str(ours.get("commit", "")), split, task, n, a, b, kept)))
        elif (only := one if one is not None else two) is not None:
            merged[split] = only
    note: dict[str, Any] = {k: ours[k] for k in ("v", "run", "commit") if k in ours}
    note.update(merged.pop(top), split=top)
    if merged:
        note["splits"] = dict(sorted(merged.items()))
    return note


def _entry(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A split's record as a ``splits`` entry (a top-level record keeps only the entry's fields)."""
    if record is None or "split" not in record:
        return record
    return {k: record[k] for k in _SUMMARY if k in record}


def _is_note(note: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(note, dict) and isinstance(note.get("split"), str) and isinstance(note.get("tasks"), dict)


def _splits_of(note: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """split → its record: the top level's own fields, or a ``splits`` entry."""
    found = {str(s): dict(e) for s, e in (note.get("splits") or {}).items() if isinstance(e, dict)}
    found[note["split"]] = {k: v for k, v in note.items() if k != "splits"}
    return found


def _merge_split(base: dict[str, Any] | None, ours: dict[str, Any], theirs: dict[str, Any], path: str,
                 found: Callable[[str, int, dict[str, Any], dict[str, Any], dict[str, Any]], None]) -> dict[str, Any]:
    base = base or {}
    derived: dict[str, Any] = {}
    if base.get("tasks") != ours["tasks"] != theirs["tasks"] != base.get("tasks"):
        # both sides ran rows: neither side's pass@k is the merged outcomes' (when one side did,
        # its figures are, and a field both changed otherwise stays a conflict)
        was_tasks = base.get("tasks") or {}
        both = {task: _merge_task(task, was_tasks.get(task), ours["tasks"][task], theirs["tasks"][task], found)
                for task in sorted(ours["tasks"].keys() & theirs["tasks"].keys())
                if _changed_on_both_sides(was_tasks.get(task), ours["tasks"][task], theirs["tasks"][task])}
        tasks = merge_json(was_tasks, {**ours["tasks"], **both}, {**theirs["tasks"], **both},
                           f"{path}.tasks" if path else "tasks")
        counts = {t: (len(s["attempts"]), sum(a.get("outcome") == "pass" for a in s["attempts"])) for t, s in tasks.items()}
        ks = sorted({int(k) for k in (*ours.get("pass_at", {}), *theirs.get("pass_at", {}))})
        derived = {"tasks": tasks, "k": max(int(ours.get("k", 1)), int(theirs.get("k", 1))),
                   "pass_at_1": round(float(stats.exact_pass_at_1(counts)), 6),
                   "pass_at": {str(k): round(sum(stats.pass_at_k(n, c, k) for n, c in counts.values() if n >= k)
                                             / max(1, sum(1 for n, _ in counts.values() if n >= k)), 6) for k in ks}}
    if "usage" in ours or "usage" in theirs:
        derived["usage"] = _added(base.get("usage"), ours.get("usage"), theirs.get("usage"))
    if "usage_by_role" in ours or "usage_by_role" in theirs:
        sides = [roles_of(r.get("usage"), r.get("usage_by_role")) for r in (base, ours, theirs)]
        derived["usage_by_role"] = {role: _added(*(s[role].to_dict() if role in s else None for s in sides))
                                    for role in dict.fromkeys([*sides[1], *sides[2]])}
    if isinstance(ours.get("duration_s"), (int, float)) and isinstance(theirs.get("duration_s"), (int, float)):
        was = base.get("duration_s") if isinstance(base.get("duration_s"), (int, float)) else 0.0
        derived["duration_s"] = round(was + max(ours["duration_s"] - was, 0) + max(theirs["duration_s"] - was, 0), 3)
    one, two = {**ours, **derived}, {**theirs, **derived}
    if "tasks" in derived and (ours.get("partial") or theirs.get("partial")):
        # a budget-stopped side: still partial while the merged rows are fewer than it expected
        expected = max(p["expected"] for p in (ours.get("partial"), theirs.get("partial")) if p)
        finished = sum(n for n, _ in counts.values())
        for side in (one, two):
            side.pop("partial", None)
            if finished < expected:
                side["partial"] = {"rollouts": finished, "expected": expected}
    return merge_json(base or None, one, two, path)


def _changed_on_both_sides(base: Any, ours: Any, theirs: Any) -> bool:
    return ours != theirs and base != ours and base != theirs


# Which of two different attempt records of one row a merge keeps: the worse outcome (fail, then
# exception, then pass), then the lower reward, then the first canonical JSON. Worse first, so that
# a row the machines disagree on never raises pass@1 (a flaky pass is not claimed as a pass); a
# total order on the records alone, so both machines keep the same one whichever merges first.
_KEEP_FIRST = {"fail": 0, "exception": 1, "pass": 2}


def _keep_key(attempt: Mapping[str, Any]) -> tuple[int, bool, float, str]:
    reward = attempt.get("reward")
    number = float(reward) if isinstance(reward, (int, float)) else 0.0
    return (_KEEP_FIRST.get(str(attempt.get("outcome")), len(_KEEP_FIRST)), reward is not None, number,
            canonical_json(dict(attempt)))


def kept_by_rule(kept: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether a merge of a row run differently on two machines may keep ``kept`` over ``other``:
    the rule keeps the one ``_keep_key`` puts first (the worse outcome), never the better one."""
    return _keep_key(kept) <= _keep_key(other)


def _merge_task(task: str, base: Any, ours: dict[str, Any], theirs: dict[str, Any],
                found: Callable[[str, int, dict[str, Any], dict[str, Any], dict[str, Any]], None]) -> dict[str, Any]:
    """One task both sides changed, row by row (attempt i is row ``task#i+1``).

    A row only one side ran or changed takes that side's attempt; a row both ran differently keeps
    the attempt ``_keep_key`` puts first. When their outcome or reward differ, the other attempt
    joins ``disagreed`` (with its attempt number) and ``found`` is told; attempts that agree on
    both (only their tokens differ) are the same result and are not a disagreement. Both
    rollouts' spending is counted by the usage merge, not here."""
    was = base.get("attempts", []) if isinstance(base, dict) else []
    mine, other = ours.get("attempts", []), theirs.get("attempts", [])
    attempts: list[dict[str, Any]] = []
    disagreed = {canonical_json(d): d for side in (base if isinstance(base, dict) else {}, ours, theirs)
                 for d in side.get("disagreed", [])}
    for i in range(max(len(mine), len(other))):
        one = mine[i] if i < len(mine) else None
        two = other[i] if i < len(other) else None
        old = was[i] if i < len(was) else None
        if one is None or two is None:          # a row only one side ran
            attempts.append(one or two or {})
            continue
        if old is not None and old in (one, two):  # only one side ran it (again)
            attempts.append(two if old == one else one)
            continue
        kept, lost = sorted((one, two), key=_keep_key)
        attempts.append(kept)
        if (one.get("outcome"), one.get("reward")) != (two.get("outcome"), two.get("reward")):
            entry = {"attempt": i + 1, **lost}
            disagreed[canonical_json(entry)] = entry
            found(task, i + 1, one, two, kept)
    merged: dict[str, Any] = {"outcome": stats.task_label([str(a.get("outcome")) for a in attempts]),
                              "attempts": attempts}
    if disagreed:
        merged["disagreed"] = sorted(disagreed.values(), key=lambda d: (int(d.get("attempt", 0)), canonical_json(d)))
    return merged


def _added(base: Any, ours: Any, theirs: Any) -> dict[str, Any] | None:
    """The base's usage plus what each side added to it (a side that lost some adds nothing)."""
    if not isinstance(ours, Mapping) or not isinstance(theirs, Mapping):
        return dict(ours) if isinstance(ours, Mapping) else (dict(theirs) if isinstance(theirs, Mapping) else None)
    was = base if isinstance(base, Mapping) else {}
    out: dict[str, Any] = {}
    for key in _TOKENS:
        if key in ours or key in theirs:
            out[key] = was.get(key, 0) + max(ours.get(key, 0) - was.get(key, 0), 0) + max(theirs.get(key, 0) - was.get(key, 0), 0)
    costs = [side.get("cost_usd") for side in (ours, theirs)]
    if any(c is None for c in costs) or ("cost_usd" in was and was["cost_usd"] is None):
        out["cost_usd"] = None      # unknown on one side: unknown, never a guess
    else:
        start = float(was.get("cost_usd") or 0.0)
        out["cost_usd"] = start + sum(max(float(c) - start, 0.0) for c in costs if c is not None)
    return out
