"""Helpers of tests/test_deploy.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

from pathlib import Path

def ahe_adapter(root: Path) -> Path:
    adapter = root / "adapter"
    for rel, text in {
        "AGENTS.md": "# Rules\n\nRun `scripts/check.py`.\n",
        "ADAPTER.md": "# Rules\n",
        "MEMORY.md": "# Memory\n\n- a lesson\n",
        "middleware.py": "def session_start(inp):\n    return None\n",
        "scripts/check.py": "print('ok')\n",
        ".agents/skills/fix-tests/SKILL.md": "---\nname: fix-tests\ndescription: d\n---\nbody\n",
        ".agents/skills/fix-tests/scripts/run.sh": "echo run\n",
        "agents/reviewer.md": "---\nname: reviewer\ndescription: d\n---\nreview\n",
    }.items():
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).write_text(text)
    return adapter

