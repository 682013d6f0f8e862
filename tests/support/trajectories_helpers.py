"""Helpers of tests/test_trajectories.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
from pathlib import Path
from git_hermit.trajectories import Step, iter_steps, summarize

TESTS = Path(__file__).resolve().parents[1]   # tests/

FIXTURES = TESTS / "fixtures" / "trajectories"


def calls_of(steps: list[Step]):
    return [call for step in steps for call in step.tool_calls]


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


RECORDED = FIXTURES / "recorded"


SCRIPTED_ANSWER = "Done: out.txt contains hi."


def check_scripted_session(path: Path, fmt: str, shell_name: str) -> list:
    """The scripted session's facts, whichever way the host stored it; returns its calls."""
    summary = summarize(path)
    assert (summary.format, summary.malformed_lines, summary.truncated) == (fmt, 0, False)
    assert summary.final_answer == SCRIPTED_ANSWER
    assert (summary.tool_calls, summary.failed_tool_calls) == (2, 1)
    steps = list(iter_steps(path))
    if fmt in ("codex-rollout", "claude-session"):      # the stdout streams do not repeat the prompt
        assert "Create out.txt containing hi using the shell." in [s.message for s in steps if s.source == "user"]
    ok, bad = calls_of(steps)
    assert (ok.name, ok.kind, ok.failed) == (shell_name, "shell", False)
    assert (bad.name, bad.kind, bad.failed, bad.exit_code) == (shell_name, "shell", True, 1)
    assert "missing.txt: No such file or directory" in bad.output
    assert steps[-1].source == "agent" and steps[-1].message == SCRIPTED_ANSWER
    return [ok, bad]

