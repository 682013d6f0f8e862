"""Helpers of tests/test_agents.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

from pathlib import Path as _Path

TESTS = _Path(__file__).resolve().parents[1]

import json
import sys
import time
from pathlib import Path
import pytest
import yaml
from cli_helpers import hermit
from support.rollouts_e2e_helpers import make_project, result_files, scores_note
from git_hermit.errors import AgentError, ConfigError
from git_hermit.hosts.registry import find_host_cli
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.rollouts.agents import AgentContext, make_agent
from git_hermit.rollouts.process import KILL_GRACE_S, run_process

SECRET = "dummy-key-must-not-leak-4711"


def _agent_block(host: str, base_url: str) -> tuple[dict, dict]:
    if host == "codex":
        return ({"backend": "codex", "model": "scripted-model", "timeout_s": 120,
                 "provider": {"base_url": f"{base_url}/v1", "env_key": "SCRIPTED_API_KEY",
                              "wire_api": "responses"}},
                {"SCRIPTED_API_KEY": SECRET})
    return ({"backend": "claude-code", "model": "scripted-model", "timeout_s": 120,
             "provider": {"base_url": base_url}},
            {"ANTHROPIC_API_KEY": SECRET})

