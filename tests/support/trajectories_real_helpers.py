"""Helpers of tests/test_trajectories_real.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
from pathlib import Path

def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _web_search_rollout(tmp_path: Path) -> Path:
    """A Codex 0.104 rollout holding a web_search_call, a commentary message and a call: the
    record shapes of madshn/localpush's sanitised rollouts (their licence is unknown, so the
    file itself is not copied here; shared/data/trajectories/ keeps its rule)."""
    t = "2026-02-23T11:42:{:02d}.000Z".format
    usage = {"input_tokens": 364963, "cached_input_tokens": 302208, "output_tokens": 5405,
             "reasoning_output_tokens": 2436, "total_tokens": 370368}
    rows = [
        {"timestamp": t(0), "type": "session_meta", "payload": {"id": "s1", "cli_version": "0.104.0-alpha.1",
                                                                 "originator": "Codex Desktop"}},
        {"timestamp": t(0), "type": "turn_context", "payload": {"turn_id": "t1", "model": "gpt-5.3-codex"}},
        {"timestamp": t(1), "type": "response_item", "payload": {"type": "reasoning", "summary": [],
                                                                  "content": None, "encrypted_content": "x"}},
        {"timestamp": t(2), "type": "response_item", "payload": {"type": "web_search_call", "status": "completed"}},
        {"timestamp": t(3), "type": "response_item", "payload": {
            "type": "message", "role": "assistant", "phase": "commentary",
            "content": [{"type": "output_text", "text": "Looking it up."}]}},
        {"timestamp": t(4), "type": "response_item", "payload": {
            "type": "function_call", "name": "write_stdin", "arguments": "{}", "call_id": "call_1"}},
        {"timestamp": t(5), "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": usage, "last_token_usage": usage}}},
        {"timestamp": t(6), "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "call_1", "output": "done"}},
    ]
    return write_jsonl(tmp_path / "rollout-web-search.jsonl", rows)

