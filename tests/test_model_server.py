"""The scripted model server over real HTTP: both wire formats, the script, the records."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from git_hermit.hostkit.model_server import (
    MESSAGES_API, RESPONSES_API, ScriptedModelServer, Turn, count_tool_results,
)


def post(url: str, body: dict) -> tuple[dict, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "x-api-key": "dummy"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(response.headers), response.read().decode()


def sse_events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


SCRIPT = [Turn.shell("echo hi > out.txt"), Turn.say("all done")]


def test_responses_plays_the_script_by_tool_results():
    with ScriptedModelServer(SCRIPT) as server:
        headers, text = post(server.base_url + "/v1/responses",
                             {"model": "m", "stream": True, "input": [{"type": "message", "role": "user",
                                                                       "content": [{"type": "input_text", "text": "go"}]}]})
        events = sse_events(text)
        assert headers["Connection"] == "close"
        assert [name for name, _ in events][0] == "response.created"
        done = [data["item"] for name, data in events if name == "response.output_item.done"]
        assert done[0]["type"] == "function_call" and done[0]["name"] == "exec_command"
        assert json.loads(done[0]["arguments"]) == {"cmd": "echo hi > out.txt"}
        completed = events[-1][1]["response"]
        assert events[-1][0] == "response.completed" and completed["usage"]["input_tokens"] > 0

        second_input = [{"type": "function_call", "call_id": done[0]["call_id"], "name": "exec_command",
                         "arguments": done[0]["arguments"]},
                        {"type": "function_call_output", "call_id": done[0]["call_id"], "output": "ok"}]
        _, text = post(server.base_url + "/v1/responses", {"model": "m", "stream": True, "input": second_input})
        item = [d["item"] for n, d in sse_events(text) if n == "response.output_item.done"][0]
        assert item["type"] == "message" and item["content"][0]["text"] == "all done"
        assert [r.tool_results for r in server.requests] == [0, 1]
        assert [r.turn_index for r in server.requests] == [0, 1]
        assert "authorization" not in server.requests[0].headers


def test_messages_counts_tool_results_before_trailing_system_entries():
    # Claude Code puts hook context as role:"system" entries after the tool_result.
    body = {"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        {"role": "system", "content": "PostToolUse:Bash hook additional context: NOTE"},
    ]}
    assert count_tool_results(MESSAGES_API, body) == 1
    with ScriptedModelServer(SCRIPT) as server:
        headers, text = post(server.base_url + "/v1/messages?beta=true", body)
        events = sse_events(text)
        assert headers["Connection"] == "close"
        assert [n for n, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                          "content_block_stop", "message_delta", "message_stop"]
        assert events[2][1]["delta"] == {"type": "text_delta", "text": "all done"}
        assert events[4][1]["delta"]["stop_reason"] == "end_turn"
        assert events[4][1]["usage"]["output_tokens"] > 0
        assert "NOTE" in server.requests[0].text()


def test_messages_tool_call_and_non_streamed_answer():
    with ScriptedModelServer(SCRIPT) as server:
        _, text = post(server.base_url + "/v1/messages", {"stream": True, "messages": [{"role": "user", "content": "go"}]})
        start = sse_events(text)[1][1]["content_block"]
        assert start["type"] == "tool_use" and start["name"] == "Bash"
        delta = sse_events(text)[2][1]["delta"]
        assert json.loads(delta["partial_json"])["command"] == "echo hi > out.txt"
        _, text = post(server.base_url + "/v1/messages", {"stream": False, "messages": [{"role": "user", "content": "go"}]})
        message = json.loads(text)
        assert message["content"][0]["input"]["command"] == "echo hi > out.txt"
        assert message["stop_reason"] == "tool_use"


def test_usage_is_deterministic_and_tracks_the_request_size():
    body = {"stream": True, "input": [{"type": "message", "role": "user", "content": "go"}]}
    bigger = {**body, "instructions": "x" * 4000}

    def usage(request_body: dict) -> dict:
        with ScriptedModelServer(SCRIPT) as server:
            _, text = post(server.base_url + "/v1/responses", request_body)
            return sse_events(text)[-1][1]["response"]["usage"]

    assert usage(body) == usage(body)
    assert usage(bigger)["input_tokens"] >= usage(body)["input_tokens"] + 1000


def test_callable_script_and_last_turn_repeats():
    seen = []

    def script(body: dict, tool_results: int) -> Turn:
        seen.append(tool_results)
        return Turn.say(f"results={tool_results}")

    with ScriptedModelServer(script) as server:
        _, text = post(server.base_url + "/v1/responses", {"stream": True, "input": []})
        assert "results=0" in text
    assert seen == [0]

    many = [{"type": "function_call_output", "call_id": str(i), "output": ""} for i in range(5)]
    assert count_tool_results(RESPONSES_API, {"input": many}) == 5
    with ScriptedModelServer(SCRIPT) as server:
        _, text = post(server.base_url + "/v1/responses", {"stream": True, "input": many})
        assert "all done" in text and server.requests[0].turn_index == 1


def test_unknown_routes_and_side_requests():
    with ScriptedModelServer(SCRIPT) as server:
        with pytest.raises(urllib.error.HTTPError) as excinfo:
            post(server.base_url + "/v1/embeddings", {})
        assert excinfo.value.code == 404
        _, text = post(server.base_url + "/v1/messages/count_tokens", {"messages": []})
        assert json.loads(text)["input_tokens"] >= 1
        assert server.model_requests() == []
        with urllib.request.urlopen(server.base_url + "/v1/models", timeout=10) as response:
            assert json.loads(response.read())["data"][0]["id"] == "scripted-model"


def test_server_binds_loopback_and_stops():
    server = ScriptedModelServer(SCRIPT)
    url = server.start()
    assert url.startswith("http://127.0.0.1:")
    server.stop()
    with pytest.raises(urllib.error.URLError):
        post(url + "/v1/responses", {"input": []})
