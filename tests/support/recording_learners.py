"""Scripted learners that record every input they get, for the continuation tests.

Each role's function writes what the learner was given — its prompt and every file of its
workspace (relative path → text, or ``-> target`` for a link) — to
``$HERMIT_TEST_CONTROL/inputs/<role>--<key>.json``, then answers as the evolver's own scripted
learner does (step_support for ahe, continual_learners, evo_learners). A test runs one scenario,
reads the inputs back and compares two scenarios (tests/support/share_support.py).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

import continual_learners
import evo_learners
from support import step_support


def _control() -> Path:
    return Path(os.environ["HERMIT_TEST_CONTROL"])


def _workspace_files(workspace: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    if not workspace.is_dir():
        return files
    for path in sorted(workspace.rglob("*")):
        rel = path.relative_to(workspace).as_posix()
        if path.is_symlink():
            files[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            files[rel] = path.read_bytes().decode("utf-8", "replace")
    return files


def _recorded(role: str, answer: Callable[[Any, str, str], str]) -> Callable[[Any, str, str], str]:
    def learner(workspace: Any, prompt: str, key: str) -> str:
        out = _control() / "inputs"
        out.mkdir(parents=True, exist_ok=True)
        record = {"role": role, "key": key, "prompt": prompt, "files": _workspace_files(Path(workspace))}
        name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{role}--{key}")
        (out / f"{name}.json").write_text(json.dumps(record, indent=1, sort_keys=True))
        return answer(workspace, prompt, key)
    learner.__name__ = role
    return learner


# ahe (tests/support/step_support.py's learners)
debugger = _recorded("debugger", step_support.debugger_session)
evolve = _recorded("evolve", step_support.evolve_session)
# continual-harness (tests/support/continual_learners.py)
policy = _recorded("policy", continual_learners.policy)
subagents = _recorded("subagents", continual_learners.subagents)
skills = _recorded("skills", continual_learners.skills)
memory = _recorded("memory", continual_learners.memory)
# evo-harness (tests/support/evo_learners.py)
reflect = _recorded("reflect", evo_learners.reflect)
topic_curator = _recorded("topic_curator", evo_learners.topic_curator)
general_curator = _recorded("general_curator", evo_learners.general_curator)
