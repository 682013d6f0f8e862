"""Scripted learners for the redaction test: they record every prompt they are given."""

import json
import os
import re
from pathlib import Path


def _record(prompt: str) -> None:
    with open(os.environ["HERMIT_TEST_PROMPT_LOG"], "a") as handle:
        handle.write(prompt + "\n----\n")


def debugger(workspace, prompt, key):
    _record(prompt)
    # the learner reads the trajectories and hook audits the query points at
    for path in re.findall(r"`(/[^`]+)`", prompt):
        target = Path(path)
        files = [target] if target.is_file() else list(target.rglob("*")) if target.is_dir() else []
        for item in files:
            if item.is_file():
                _record(item.read_text(errors="replace"))
    return "ROOT CAUSE: the agent printed its environment instead of answering."


def evolve(workspace, prompt, key):
    _record(prompt)
    workspace = Path(workspace)
    # the learner reads everything it was given, as a real session might
    for path in workspace.rglob("*"):
        if path.is_file():
            _record(path.read_text(errors="replace"))
    memory = workspace / "adapter" / "MEMORY.md"
    memory.write_text(memory.read_text() + "- answer with the number only\n")
    (workspace / "state" / "change_manifest.json").write_text(json.dumps({
        "iteration": int(key.split("-")[1]), "changes": [{
            "id": "chg-1", "description": "answer with the number only", "files": ["MEMORY.md"],
            "failure_pattern": "noise in answers", "predicted_fixes": ["t1"], "risk_tasks": [],
            "component": "memory"}]}))
    return "done"
