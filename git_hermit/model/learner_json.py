"""JSON a learner wrote (manifests, answers), parsed so it cannot crash the step.

``json.loads`` raises RecursionError on deep nesting, and a record nested deeply enough fails
later when it is written; a learner's checkpointed answer would then crash every rerun. Here
both are a ValueError the caller records as a rejection.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_NESTING = 100          # a manifest or answer deeper than this is not one a learner meant


class TooDeep(ValueError):
    """Learner JSON nested past MAX_JSON_NESTING levels (or past what the parser can recurse)."""

    def __init__(self) -> None:
        super().__init__(f"nested too deeply (more than {MAX_JSON_NESTING} levels)")


def load_json(text: str) -> Any:
    """``json.loads`` for learner output: a ValueError (json.JSONDecodeError, or TooDeep) for
    anything that is not JSON a record can hold — never a RecursionError."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise TooDeep() from None
    stack = [(data, 1)]
    while stack:                                       # iterative: the check itself cannot recurse
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_NESTING:
                raise TooDeep()
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return data
