"""The memory an acting agent writes during a rollout (continual-harness notes) is handed back."""

from __future__ import annotations

import sys

from support.cli_helpers import hermit
from support.project import build_project


AGENT = """
import sys, pathlib
workspace = pathlib.Path(sys.argv[2])
task = sys.argv[3]
if task == "t1":   # this session learns something and writes it down where its context file says
    notes = workspace / ".hermit-adapter" / "memory" / "NOTES.md"
    notes.write_text(notes.read_text() + "\\n## csv files\\nSkip the header row before summing.\\n")
print(1)
"""


def test_changed_session_memory_is_stored_beside_the_result(repo):
    build_project(repo, init_args=("--template", "continual-harness@1.0"), files={repo / "agent.py": AGENT},
                  tasks=[{"id": t, "prompt": "?", "answer": "1"} for t in ("t1", "t2")], rows={"train": ["t1", "t2"]},
                  config={"agent": {"backend": "command", "command": [sys.executable, str(repo / "agent.py"),
                                                                      "{prompt_file}", "{workspace}", "{task_id}"]},
                          "tasks": {"path": "tasks.jsonl"}})
    r = hermit(repo, "rollout")
    assert r.code == 0, r.err
    rollouts = next((repo / ".hermit" / "runs").glob("*/evals/*-train/rollouts"))
    assert "Skip the header row" in (rollouts / "t1" / "1" / "memory" / "NOTES.md").read_text()
    assert not (rollouts / "t2" / "1" / "memory").exists()      # unchanged memory is not copied
