"""Scripted Refiner passes for the continual-harness tests (called in the `git hermit` process).

Each pass answers from ``$HERMIT_TEST_CONTROL/refiner.json`` (``{step: {pass: answer text}}``)
or, by default, with a small valid edit naming the step. Every call is appended to
``refiner.log``; a ``hold-refiner-<pass>`` file makes that pass block until it is removed.
"""

import json
import os
import time
from pathlib import Path


def _answer(workspace, prompt: str, key: str, default) -> str:
    control = Path(os.environ["HERMIT_TEST_CONTROL"])
    _, step, name = key.split("-", 2)
    with open(control / "refiner.log", "a") as log:
        log.write(key + "\n")
    with open(control / f"prompt-{key}.md", "w") as out:
        out.write(prompt)
    hold = control / f"hold-refiner-{name}"
    if hold.exists():
        (control / f"held-refiner-{name}").write_text("")
        while hold.exists():
            time.sleep(0.05)
    plans = json.loads((control / "refiner.json").read_text()) if (control / "refiner.json").is_file() else {}
    planned = plans.get(step, {}).get(name)
    return planned if planned is not None else default(Path(workspace), int(step))


def policy(workspace, prompt, key):
    def default(ws: Path, step: int) -> str:
        return "```markdown\n" + (ws / "AGENTS.md").read_text() + f"\n- Lesson of step {step}: answer tersely.\n```"
    return _answer(workspace, prompt, key, default)


def subagents(workspace, prompt, key):
    return _answer(workspace, prompt, key, lambda ws, step: json.dumps({
        "analysis": f"step {step}: a planner helps",
        "create": [{"name": f"planner-{step}", "description": "Plans the task before any edit.",
                    "instructions": "List the steps, then hand them back."}]}))


def skills(workspace, prompt, key):
    return _answer(workspace, prompt, key, lambda ws, step: json.dumps({
        "analysis": "checking the answer by hand repeats",
        "add": [{"name": f"check-answer-{step}", "description": "Check an answer before giving it.",
                 "body": "Run `python scripts/check.py ANSWER`.",
                 "scripts": {"check.py": "import sys\nprint(sys.argv[1:])\n"}}]}))


def memory(workspace, prompt, key):
    return _answer(workspace, prompt, key, lambda ws, step: json.dumps({
        "analysis": "record the window", "add": [{"topic": f"Window {step}", "note": f"Step {step} saw failures."}]}))
