"""Helpers of tests/test_hook_runtime.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from git_hermit import resources
from git_hermit.adapter.deploy import deploy

AGENT_DIR = resources.hooks_dir() / "agent"

sys.path.insert(0, str(AGENT_DIR))       # the tests import hermit_hooks, the deployed runtime

# A placeholder middleware with the seed's interface; tests append overrides (later defs win).
MIDDLEWARE = '''\
import os
from hermit_hooks import HookResult
HERE = os.path.dirname(os.path.abspath(__file__))
def session_start(inp):
    with open(os.path.join(HERE, "MEMORY.md"), encoding="utf-8") as fh:
        entries = [line[2:] for line in fh.read().splitlines() if line.startswith("- ")]
    return HookResult(context="Memory:\\n" + "\\n".join(entries)) if entries else None
def before_tool(inp): return None
def after_tool(inp): return None
def stop(inp): return None
def before_model(inp): return None
'''


MEMORY = "# Memory\n\n- Run the tests with `make check`, not pytest directly.\n"


def make_adapter(root: Path, extra: str = "", memory: str = MEMORY) -> Path:
    adapter = root / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "AGENTS.md").write_text("# Rules\n\nBe careful.\n")
    (adapter / "MEMORY.md").write_text(memory)
    (adapter / "middleware.py").write_text(MIDDLEWARE + extra)
    return adapter


def deployed(tmp_path: Path, host: str = "claude-code", extra: str = "", **kw) -> Path:
    dest = tmp_path / "ws"
    deploy(make_adapter(tmp_path, extra, **kw), dest, host)
    return dest


def fire(dest: Path, event: str, payload, *, env: dict | None = None, raw: bytes | None = None):
    """Run the installed hook command for EVENT like the host: a shell, payload on stdin."""
    record = json.loads((dest / ".hermit-deploy.json").read_text())
    command = record["hook_command"].replace("EVENT", event)
    body = raw if raw is not None else json.dumps({**payload, "hook_event_name": event}).encode()
    done = subprocess.run(command, shell=True, input=body, capture_output=True, cwd=dest,
                          env={**os.environ, **(env or {})}, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def log_entries(dest: Path) -> list[dict]:
    path = dest / ".hermit-hooks" / "hook-calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


CLAUDE_BASE = {"session_id": "s1", "transcript_path": "/t.jsonl", "cwd": "/somewhere"}


CODEX_BASE = {**CLAUDE_BASE, "model": "gpt-5.6-luna"}

