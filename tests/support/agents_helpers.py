"""Helpers of tests/test_agents.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations


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

