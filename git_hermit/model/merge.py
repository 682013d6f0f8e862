"""Three-way, field-wise merge of two JSON records (pure: no I/O).

Notes on one commit that two clones changed are merged key by key against their common base:
a key only one side changed takes that side's value, nested objects merge recursively, and a
key both sides set to different values is a conflict naming its path — never a concatenation.
"""

from __future__ import annotations

from typing import Any

_ABSENT = object()


class FieldConflict(Exception):
    """Both sides changed one field differently; ``path`` names it (e.g. ``splits.test.pass_at_1``)."""

    def __init__(self, path: str, ours: Any, theirs: Any):
        super().__init__(path)
        self.path, self.ours, self.theirs = path, ours, theirs


def merge_json(base: Any, ours: Any, theirs: Any, path: str = "") -> Any:
    """The merge of ``ours`` and ``theirs`` given their common ``base`` (``_ABSENT``/None = no base)."""
    if _equal(ours, theirs):
        return ours
    if _equal(base, ours):
        return theirs
    if _equal(base, theirs):
        return ours
    if isinstance(ours, dict) and isinstance(theirs, dict):
        old = base if isinstance(base, dict) else {}
        merged: dict[str, Any] = {}
        for key in sorted(set(ours) | set(theirs) | set(old)):
            value = merge_json(old.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT),
                               f"{path}.{key}" if path else key)
            if value is not _ABSENT:
                merged[key] = value
        return merged
    raise FieldConflict(path or "(whole record)", ours, theirs)


def _equal(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return a == b and type(a) is type(b)


def merge_records(base: dict | None, ours: dict | None, theirs: dict | None) -> dict | None:
    """``merge_json`` for whole notes: a missing side is absent (a deleted note), not empty."""
    result = merge_json(_ABSENT if base is None else base, _ABSENT if ours is None else ours,
                        _ABSENT if theirs is None else theirs)
    return None if result is _ABSENT else result
