"""JSON that git-hermit did not write itself this run (notes from a remote or a damaged repository,
a learner's answers), parsed within bounds: a size limit checked before parsing, a nesting limit,
strict UTF-8. Anything outside them is a ValueError naming the bound — never a RecursionError,
never a silently replaced byte.
"""

from __future__ import annotations

import json
from typing import Any


class TooDeep(ValueError):
    """JSON nested past ``limit`` levels (or past what the parser can recurse)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested too deeply (more than {limit} levels)")
        self.limit = limit


class TooLarge(ValueError):
    """JSON text over ``limit`` bytes (refused before it is parsed)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"too large ({size:,} bytes, the limit is {limit:,})")


def load_bounded(raw: bytes | str, *, max_depth: int, max_bytes: int | None = None) -> Any:
    """``json.loads`` within bounds: TooLarge over ``max_bytes``, UnicodeDecodeError (a ValueError)
    for bytes that are not UTF-8, json.JSONDecodeError, TooDeep past ``max_depth`` levels."""
    if max_bytes is not None and len(raw) > max_bytes:
        raise TooLarge(len(raw), max_bytes)
    text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    try:
        data = json.loads(text)
    except RecursionError:      # the C scanner's own guard: far past any limit worth having
        raise TooDeep(max_depth) from None
    # each level opens a bracket, so a text with no more brackets than the limit cannot nest deeper:
    # two scans in C decide it for most notes, and a fetch of 3,000 notes walks almost none of them
    if text.count("{") + text.count("[") <= max_depth:
        return data
    # level by level, only the containers kept (iterative: the check itself cannot recurse; a list
    # comprehension a level, not a Python step per value: a fetch checks thousands of notes)
    level = [data] if isinstance(data, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise TooDeep(max_depth)
        level = [v for value in level for v in (value.values() if isinstance(value, dict) else value)
                 if isinstance(v, (dict, list))]
    return data
