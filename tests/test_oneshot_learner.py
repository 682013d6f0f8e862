"""One-shot learners as the Evolve Agent: files go into the prompt, edits come back as JSON.

The model is faked (``_complete``); everything around it — the prompt, parsing and applying
the edits into the learner workspace — is the real code.
"""

from __future__ import annotations

import json
from pathlib import Path

from git_hermit.learners import OneShotLearner
from git_hermit.model.learner import LearnerResult, Sampling
from git_hermit.model.rollout import Usage
from git_hermit.model.schema import schema_errors


class FakeModel(OneShotLearner):
    def __init__(self, role: str, reply: str):
        super().__init__(role, "openai", {"name": "fake"})
        self.reply, self.prompts = reply, []

    def _complete(self, messages: list[tuple[str, str]], timeout_s: float, sampling: Sampling) -> LearnerResult:
        prompt = messages[-1][1]
        self.prompts.append(prompt)
        return LearnerResult(self.reply, Usage(len(prompt) // 4, 0, 10), True, None, 0.0, "fake")


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "adapter" / "scripts").mkdir(parents=True)
    (ws / "adapter" / "AGENTS.md").write_text("# rules\n")
    (ws / "adapter" / "MEMORY.md").write_text("# Memory\n- old entry\n")
    (ws / "adapter" / "scripts" / "old.py").write_text("print('old')\n")
    (ws / "state" / "analysis").mkdir(parents=True)
    (ws / "state" / "analysis" / "overview.md").write_text("ROOT CAUSE: units were mixed\n")
    return ws


MANIFEST = {"iteration": 2, "changes": [{
    "id": "chg-1", "description": "remember to convert units", "files": ["MEMORY.md"],
    "failure_pattern": "mixed units", "predicted_fixes": ["units-1"], "risk_tasks": [], "component": "memory"}]}


def test_evolve_reply_edits_the_adapter_and_writes_the_manifest(tmp_path):
    ws = _workspace(tmp_path)
    reply = ("I added a memory entry.\n```json\n" + json.dumps({
        "files": {"MEMORY.md": "# Memory\n- old entry\n- convert units first\n", "scripts/old.py": None,
                  "adapter/scripts/new.py": "print('new')\n"},
        "manifest": MANIFEST}) + "\n```\n")
    learner = FakeModel("evolve", reply)
    result = learner.ask(ws, "Iteration 2 evaluation completed.", timeout_s=10, key="step-2")
    assert result.ok, result.error
    prompt = learner.prompts[0]
    assert "- old entry" in prompt and "ROOT CAUSE: units were mixed" in prompt and "```json" in prompt
    assert (ws / "adapter" / "MEMORY.md").read_text().endswith("- convert units first\n")
    assert not (ws / "adapter" / "scripts" / "old.py").exists()
    assert (ws / "adapter" / "scripts" / "new.py").read_text() == "print('new')\n"
    manifest = json.loads((ws / "state" / "change_manifest.json").read_text())
    assert manifest == MANIFEST and schema_errors("learner_manifest", manifest) == []


def test_edits_outside_the_adapter_are_refused(tmp_path):
    ws = _workspace(tmp_path)
    reply = "```json\n" + json.dumps({"files": {"../escape.txt": "x", "/etc/x": "y"}, "manifest": MANIFEST}) + "\n```"
    result = FakeModel("evolve", reply).ask(ws, "q", timeout_s=10, key="step-2")
    assert not result.ok and "outside the adapter" in result.error
    assert not (tmp_path / "escape.txt").exists()


def test_a_reply_without_edits_is_a_failed_session(tmp_path):
    ws = _workspace(tmp_path)
    result = FakeModel("evolve", "I would change the memory.").ask(ws, "q", timeout_s=10, key="step-2")
    assert not result.ok and "json block" in result.error
    assert not (ws / "state" / "change_manifest.json").exists()


def test_the_debugger_answers_from_its_prompt_only(tmp_path):
    ws = _workspace(tmp_path)
    learner = FakeModel("debugger", "ROOT CAUSE: the agent mixed units.")
    result = learner.ask(ws, "query", timeout_s=10, key="t1")
    assert result.ok and learner.prompts == ["query"]


def test_a_reply_that_cannot_be_written_or_parsed_is_a_problem_not_a_crash(tmp_path):
    from git_hermit.learners.oneshot_edits import apply_reply
    ws = _workspace(tmp_path)
    reply = "```json\n" + json.dumps({"files": {"scripts": "a directory", "MEMORY.md": "bad \ud800 text",
                                                "nul\u0000.md": "x"}}) + "\n```"
    problems = apply_reply(ws, reply)
    assert len(problems) == 3 and all(p.startswith("refused the edit of") for p in problems), problems
    assert (ws / "adapter" / "MEMORY.md").read_text() == "# Memory\n- old entry\n"
    deep = "```json\n" + '{"files":' * 5000 + "{}" + "}" * 5000 + "\n```"
    assert apply_reply(ws, deep) == ["the reply's json block is nested too deeply (more than 100 levels)"]
