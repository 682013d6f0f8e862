"""What a remote may change of what this repository holds: the rules `fetch` and `push` apply.

A remote is untrusted. A note the remote adds (on a commit we hold no note for) is taken once it is
a valid record; a note we hold may only *grow*: fields added, rows added to a scores note (its
pass@k and usage recomputed, consistent with its own outcomes, usage never lower), a rollback named
on a verdict. Changing or deleting a field we hold (a verdict, an outcome, a score) is a rewrite:
refused and named (commit, record, field) unless the user accepts the remote's version. Invalid
notes (not JSON, or failing their schema) are refused whatever the user accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

from git_hermit.accounting import stats
from git_hermit.core.scores_notes import kept_by_rule
from git_hermit.errors import SchemaError

# Fields of a scores split recomputed from its rows (checked against them) or summed (never lower)
_SCORES_DERIVED = ("pass_at_1", "pass_at", "k", "partial", "duration_s")
_SCORES_SUMMED = ("usage", "usage_by_role")


@dataclass(frozen=True)
class Refusal:
    """One thing a remote would have changed that was refused (or, accepted, is reported)."""

    ref: str
    target: str          # the commit (a note's), the step, or the branch
    what: str            # a sentence naming the record and the fields
    kind: str            # "record" (a rewrite of what we hold) | "invalid" | "step"
    commits: tuple[str, ...] = ()    # a step's: the remote's commits refused on it, oldest first


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}.{i}" if path else str(i))
    else:
        yield path, value


def _flat(value: Any) -> dict[str, Any]:
    return dict(_leaves(value)) if value is not None else {}


def _allowed_scores_change(path: str) -> bool:
    """A scores note's field the merge recomputes or sums (checked otherwise), at the top or in a split."""
    parts = path.split(".")
    if parts[0] == "splits" and len(parts) > 2:
        parts = parts[2:]
    return parts[0] in _SCORES_DERIVED or parts[0] in _SCORES_SUMMED or (
        parts[0] == "tasks" and len(parts) > 2 and parts[2] in ("disagreed", "outcome"))


def rewrites(kind: str, base: dict[str, Any] | None, ours: dict[str, Any], merged: dict[str, Any] | None) -> list[str]:
    """The fields of ``ours`` the remote changed or removed in ``merged`` (a field ours had as in
    ``base``: we did not change it, they did), with the values here and there."""
    mine, theirs, was = _flat(ours), _flat(merged), _flat(base)
    excused = _disagreed_rows(ours, merged) if kind == "scores" else ()
    out = []
    for path, value in mine.items():
        if path in theirs and theirs[path] == value:
            continue
        if path.startswith(excused):
            continue              # a row both machines ran: the worse attempt kept, ours beside it
        if base is not None and was.get(path, _MISSING) != value:
            continue          # we changed it since the common base: the three-way merge's to settle
        if kind == "scores" and _allowed_scores_change(path):
            there_value = theirs.get(path)
            if _is_usage(path) and isinstance(value, (int, float)) and isinstance(there_value, (int, float)) \
                    and there_value < value - 1e-9:
                out.append(f"{_shown(path)} ({value} here, {there_value} there: spending never decreases)")
            continue
        there = json.dumps(theirs[path])[:60] if path in theirs else "removed"
        out.append(f"{_shown(path)} ({json.dumps(value)[:60]} here, {there} there)")
    return out


def _disagreed_rows(ours: dict[str, Any], merged: dict[str, Any] | None) -> tuple[str, ...]:
    """Path prefixes (``[splits.S.]tasks.T.attempts.I.``) of our rows the merge replaced by the rule for
    a row two machines ran differently: ours kept beside it in ``disagreed``, the worse one kept."""
    if not isinstance(merged, dict):
        return ()
    out = []
    pairs = [("", ours, merged)] + [(f"splits.{name}.", entry, (merged.get("splits") or {}).get(name))
                                    for name, entry in (ours.get("splits") or {}).items()]
    for prefix, mine, theirs in pairs:
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            continue
        mine_tasks, their_tasks = mine.get("tasks"), theirs.get("tasks")
        if not isinstance(mine_tasks, dict) or not isinstance(their_tasks, dict):
            continue          # a split's summary holds a count of tasks, not their rows
        for task, score in mine_tasks.items():
            other = their_tasks.get(task)
            if not isinstance(score, dict) or not isinstance(other, dict):
                continue
            beside: list[Any] = other["disagreed"] if isinstance(other.get("disagreed"), list) else []
            kept_attempts: list[Any] = other["attempts"] if isinstance(other.get("attempts"), list) else []
            for i, attempt in enumerate(score.get("attempts") or []):
                kept = kept_attempts[i] if i < len(kept_attempts) else None
                if (isinstance(attempt, dict) and isinstance(kept, dict) and kept != attempt
                        and {"attempt": i + 1, **attempt} in beside and kept_by_rule(kept, attempt)):
                    out.append(f"{prefix}tasks.{task}.attempts.{i}.")
    return tuple(out)


def _shown(path: str) -> str:
    """A field path for a message: its keys come from a remote's JSON, so escaped to plain ASCII."""
    return json.dumps(path)[1:-1]


def _is_usage(path: str) -> bool:
    parts = path.split(".")
    if parts[0] == "splits" and len(parts) > 2:
        parts = parts[2:]
    return parts[0] in _SCORES_SUMMED


_MISSING = object()


def inconsistent_scores(note: dict[str, Any]) -> list[str]:
    """Splits of a scores note whose pass@1 is not the one their own outcomes give."""
    out = []
    splits = [("", note)] + [(f"splits.{name}.", entry) for name, entry in (note.get("splits") or {}).items()
                             if isinstance(entry, dict)]
    for prefix, entry in splits:
        tasks = entry.get("tasks")
        if not isinstance(tasks, dict) or not tasks or not isinstance(entry.get("pass_at_1"), (int, float)):
            continue
        counts = {}
        for task, score in tasks.items():
            attempts = score.get("attempts") if isinstance(score, dict) else None
            if not isinstance(attempts, list) or not attempts:
                break
            counts[task] = (len(attempts), sum(1 for a in attempts if isinstance(a, dict) and a.get("outcome") == "pass"))
        else:
            expected = round(float(stats.exact_pass_at_1(counts)), 6)
            if abs(float(entry["pass_at_1"]) - expected) > 1e-6:
                out.append(f"{prefix}pass_at_1 is {entry['pass_at_1']} but its own outcomes give {expected}")
    return out


def check_note(kind: str, text: str, where: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the note's data, None) when it is a valid record of ``kind``; (None, why) when it is not."""
    from git_hermit.model.records import loads
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"is not JSON ({exc})"
    except RecursionError:
        return None, "is nested too deeply to read"
    if kind in ("scores", "manifest", "verdicts", "provenance", "analysis", "reviews"):
        try:
            loads(kind, text, where=where)
        except SchemaError as exc:
            return None, f"fails its schema ({exc.message})"
        except (RecursionError, ValueError) as exc:
            return None, f"cannot be read ({type(exc).__name__})"
    return (data if isinstance(data, dict) else None), (None if isinstance(data, dict) else "is not a JSON object")
