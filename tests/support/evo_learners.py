"""Scripted evo-harness learners for tests, driven by a control directory (``HERMIT_TEST_CONTROL``):
every call is logged to ``<role>.log``; ``plan.json`` says, per ``"<step>-<role>"``, what the
curators write/delete under ``adapter/`` and which tasks the Worker skips; a ``fail-<role>``
file makes that role fail (an error the step must propagate)."""

import json
import os
from pathlib import Path


def _control() -> Path:
    return Path(os.environ["HERMIT_TEST_CONTROL"])


def _log(role: str, key: str, prompt: str) -> None:
    control = _control()
    with open(control / f"{role}.log", "a") as handle:
        handle.write(key + "\n")
    prompts = control / "prompts"
    prompts.mkdir(exist_ok=True)
    (prompts / f"{role}-{key.replace('#', '_')}.txt").write_text(prompt)
    if (control / f"fail-{role}").exists():
        raise RuntimeError(f"{role} told to fail")


def _plan(key: str) -> dict:
    path = _control() / "plan.json"
    return (json.loads(path.read_text()) if path.is_file() else {}).get(key, {})


def reflect(workspace, prompt, key):
    _log("reflect", key, prompt)
    task = key.split("#")[0]
    if task in _plan("reflect").get("skip", []):
        return '{"skip": true}'
    if task in _plan("reflect").get("answer", {}):
        return _plan("reflect")["answer"][task]
    return ("Here is the lesson:\n```json\n" + json.dumps({
        "lesson": f"Check the answer format before finishing ({task}).",
        "trigger": "when the task asks for a single value",
        "evidence": f"the run of {task} answered with the wrong value",
        "scope_hint": "topic: short answers"}) + "\n```\n")


def _curate(role: str, workspace, prompt, key) -> str:
    _log(role, key, prompt)
    step = key.split("-")[1]
    spec = _plan(f"{step}-{role}")
    adapter = Path(workspace) / "adapter"
    for rel, text in spec.get("write", {}).items():
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).write_text(text)
    for rel in spec.get("delete", []):
        (adapter / rel).unlink()
    return f"{role}: wrote {len(spec.get('write', {}))}, deleted {len(spec.get('delete', []))}"


def topic_curator(workspace, prompt, key):
    return _curate("topic_curator", workspace, prompt, key)


def general_curator(workspace, prompt, key):
    return _curate("general_curator", workspace, prompt, key)
