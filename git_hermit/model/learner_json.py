"""JSON a learner wrote (manifests, answers), parsed so it cannot crash the step.

``json.loads`` raises RecursionError on deep nesting, and a record nested deeply enough fails
later when it is written; a learner's checkpointed answer would then crash every rerun. Here
both are a ValueError the caller records as a rejection (bounded_json does the parsing).
"""

from __future__ import annotations

from typing import Any

from git_hermit.model.bounded_json import TooDeep, load_bounded

__all__ = ["MAX_JSON_NESTING", "TooDeep", "load_json"]

MAX_JSON_NESTING = 100          # a manifest or answer deeper than this is not one a learner meant


def load_json(text: str) -> Any:
    """``json.loads`` for learner output: a ValueError (json.JSONDecodeError, or TooDeep) for
    anything that is not JSON a record can hold — never a RecursionError."""
    return load_bounded(text, max_depth=MAX_JSON_NESTING)
