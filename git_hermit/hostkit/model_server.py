"""A scripted model server: the real host CLIs talk to it instead of a model provider.

It speaks OpenAI Responses SSE (``POST /v1/responses``, Codex), Anthropic Messages (SSE or
JSON, ``POST /v1/messages``, Claude Code, Pi, the Anthropic SDK) and OpenAI Chat Completions
(SSE or JSON, ``POST /v1/chat/completions``: vLLM, Ollama, llama.cpp and the OpenAI SDK), plays
a script of turns chosen by how many tool results the conversation already holds, records
every request body for assertions, and can first answer with scripted faults (a 429 with
Retry-After, a 500, a malformed body, a slow answer) to test retries and error reports.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

RESPONSES_API = "responses"
MESSAGES_API = "messages"
CHAT_API = "chat"

# Each host's name and input shape for its shell tool: Codex's exec_command takes "cmd",
# Claude Code's Bash and Pi's bash take "command".
_SHELL_TOOL = {RESPONSES_API: ("exec_command", "cmd"), MESSAGES_API: ("Bash", "command"),
               CHAT_API: ("shell", "command")}


@dataclass(frozen=True)
class Fault:
    """A scripted failure answered instead of the next conversation turn.

    ``status``: an HTTP error (429 with ``retry_after`` seconds, 500, 529 …); ``malformed``:
    a 200 whose body is not the API's JSON; ``delay_s``: wait this long before answering the
    turn normally (longer than the client's timeout: a timeout); ``after_tool_results``: answered
    only once the conversation holds that many tool results (a 429 after some billed turns)."""

    status: int | None = None
    retry_after: float | None = None
    malformed: bool = False
    delay_s: float = 0.0
    after_tool_results: int = 0


FAULT_TURN = -2   # RecordedRequest.turn_index of a request answered with a Fault


@dataclass(frozen=True)
class Turn:
    """One model answer: either a shell tool call (``command``) or a final ``text``."""

    text: str | None = None
    command: str | None = None
    tool: str | None = None          # override the shell tool's name (e.g. Pi's "bash")
    tool_input: dict[str, Any] | None = None   # override the whole tool input

    @staticmethod
    def shell(command: str) -> "Turn":
        return Turn(command=command)

    @staticmethod
    def say(text: str) -> "Turn":
        return Turn(text=text)

    @property
    def is_tool_call(self) -> bool:
        return self.command is not None or self.tool_input is not None


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, as the host sent it."""

    api: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    tool_results: int
    turn_index: int

    def text(self) -> str:
        """Every string the model would read (tool definitions left out), newline-joined."""
        return "\n".join(_strings({k: v for k, v in self.body.items() if k != "tools"}))


# A script is a list of turns (turn i answers a conversation holding i tool results; the
# last turn repeats) or a function of (request body, tool results) -> Turn.
Script = Sequence[Turn] | Callable[[dict[str, Any], int], Turn]


class ScriptedModelServer:
    """A local HTTP model that plays ``script``; use as a context manager or start()/stop()."""

    def __init__(self, script: Script, *, model: str = "scripted-model", faults: Sequence[Fault] = ()):
        self._script = script
        self._faults = list(faults)
        self.model = model
        self._requests: list[RecordedRequest] = []
        self._billed: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> str:
        """Bind 127.0.0.1 on a free port, serve in a thread, return the base URL."""
        if self._httpd is None:
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
            self._httpd.daemon_threads = True
            self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
            self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ScriptedModelServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (Claude Code appends /v1/messages; Codex wants …/v1)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def billed(self) -> list[tuple[int, int]]:
        """The (input, output) tokens each answered request reported, in order (faults bill none):
        what a provider would charge, for tests of what the hosts and hermit count."""
        with self._lock:
            return list(self._billed)

    def model_requests(self) -> list[RecordedRequest]:
        """Only the conversation requests (no token counts or model listings)."""
        return [r for r in self.requests if r.turn_index >= 0]

    # -- the script ------------------------------------------------------------------------
    def _choose(self, body: dict[str, Any], tool_results: int) -> tuple[int, Turn]:
        if callable(self._script):
            return tool_results, self._script(body, tool_results)
        index = min(tool_results, len(self._script) - 1)
        return index, self._script[index]

    def _next_fault(self, tool_results: int = 0) -> Fault | None:
        with self._lock:
            if self._faults and self._faults[0].after_tool_results <= tool_results:
                return self._faults.pop(0)
            return None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"


def count_tool_results(api: str, body: dict[str, Any]) -> int:
    """Tool results anywhere in the conversation (Claude Code puts system entries after them)."""
    if api == RESPONSES_API:
        return sum(
            1 for item in body.get("input") or []
            if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output")
        )
    if api == CHAT_API:
        return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")
    count = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(1 for block in content if isinstance(block, dict) and block.get("type") == "tool_result")
    return count


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _usage_numbers(server: ScriptedModelServer, raw_body: bytes, answer: str) -> tuple[int, int]:
    """Deterministic token counts: about four bytes a token, as providers roughly count; kept
    in ``server.billed()``."""
    numbers = len(raw_body) // 4 + 1, len(answer.encode()) // 4 + 1
    with server._lock:
        server._billed.append(numbers)
    return numbers


def _tool_call(api: str, turn: Turn) -> tuple[str, dict[str, Any]]:
    name, key = _SHELL_TOOL[api]
    if turn.tool_input is not None:
        return turn.tool or name, dict(turn.tool_input)
    tool_input = {key: turn.command}
    if api == MESSAGES_API and (turn.tool or name) == "Bash":
        tool_input["description"] = "Run a shell command"
    return turn.tool or name, tool_input


def _responses_events(server: ScriptedModelServer, turn: Turn, raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    response_id = server._next_id("resp")
    if turn.is_tool_call:
        name, tool_input = _tool_call(RESPONSES_API, turn)
        arguments = json.dumps(tool_input)
        call_id = server._next_id("call")
        item: dict[str, Any] = {"type": "function_call", "id": server._next_id("fc"), "call_id": call_id,
                "name": name, "arguments": arguments, "status": "completed"}
        body_events: list[tuple[str, dict[str, Any]]] = [
            ("response.output_item.added", {"output_index": 0, "item": {**item, "arguments": "", "status": "in_progress"}}),
            ("response.function_call_arguments.delta", {"output_index": 0, "item_id": item["id"], "delta": arguments}),
            ("response.function_call_arguments.done", {"output_index": 0, "item_id": item["id"], "arguments": arguments}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
        ]
        answer = arguments
    else:
        text = turn.text or ""
        item_id = server._next_id("msg")
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [part]}
        body_events = [
            ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}}),
            ("response.content_part.added", {"output_index": 0, "item_id": item_id, "content_index": 0,
                                             "part": {**part, "text": ""}}),
            ("response.output_text.delta", {"output_index": 0, "item_id": item_id, "content_index": 0, "delta": text}),
            ("response.output_text.done", {"output_index": 0, "item_id": item_id, "content_index": 0, "text": text}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
        ]
        answer = text
    input_tokens, output_tokens = _usage_numbers(server, raw, answer)
    base = {"id": response_id, "object": "response", "model": server.model}
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": input_tokens + output_tokens}
    return [
        ("response.created", {"response": {**base, "status": "in_progress", "output": []}}),
        ("response.in_progress", {"response": {**base, "status": "in_progress", "output": []}}),
        *body_events,
        ("response.completed", {"response": {**base, "status": "completed", "output": [item], "usage": usage}}),
    ]


def _messages_message(server: ScriptedModelServer, turn: Turn, raw: bytes) -> tuple[dict[str, Any], str]:
    """The whole assistant message (for a non-streamed answer) and the text it counts."""
    if turn.is_tool_call:
        name, tool_input = _tool_call(MESSAGES_API, turn)
        block = {"type": "tool_use", "id": server._next_id("toolu"), "name": name, "input": tool_input}
        answer, stop_reason = json.dumps(tool_input), "tool_use"
    else:
        block = {"type": "text", "text": turn.text or ""}
        answer, stop_reason = turn.text or "", "end_turn"
    input_tokens, output_tokens = _usage_numbers(server, raw, answer)
    message = {"id": server._next_id("msg"), "type": "message", "role": "assistant", "model": server.model,
               "content": [block], "stop_reason": stop_reason, "stop_sequence": None,
               "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
    return message, answer


def _messages_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    block = message["content"][0]
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    usage = message["usage"]
    return [
        ("message_start", {"type": "message_start", "message": {
            **message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": usage["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def _chat_completion(server: ScriptedModelServer, turn: Turn, raw: bytes) -> dict[str, Any]:
    """A whole Chat Completions answer (``object: chat.completion``)."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if turn.is_tool_call:
        name, tool_input = _tool_call(CHAT_API, turn)
        arguments = json.dumps(tool_input)
        message["tool_calls"] = [{"id": server._next_id("call"), "type": "function",
                                  "function": {"name": name, "arguments": arguments}}]
        answer, finish = arguments, "tool_calls"
    else:
        message["content"] = turn.text or ""
        answer, finish = turn.text or "", "stop"
    prompt_tokens, completion_tokens = _usage_numbers(server, raw, answer)
    return {"id": server._next_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
            "model": server.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0}}}


def _chat_chunks(completion: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The same answer as ``chat.completion.chunk`` objects (then ``data: [DONE]``)."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    choice, message = completion["choices"][0], completion["choices"][0]["message"]
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        delta = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
    else:
        delta = {"role": "assistant", "content": message["content"]}
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0].rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}],
                                      "models": []})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?")[0].rstrip("/")
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "body is not JSON"}})
                return
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("authorization", "x-api-key")}
            if path.endswith("/messages/count_tokens"):
                server._record(RecordedRequest(MESSAGES_API, path, headers, body, 0, -1))
                self._send_json(200, {"input_tokens": len(raw) // 4 + 1})
                return
            if path.endswith("/responses"):
                api = RESPONSES_API
            elif path.endswith("/chat/completions"):
                api = CHAT_API
            elif path.endswith("/messages"):
                api = MESSAGES_API
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            results = count_tool_results(api, body)
            fault = server._next_fault(results)
            if fault is not None:   # recorded as it arrives (turn -2), so tests can count it at once
                server._record(RecordedRequest(api, path, headers, body, results, FAULT_TURN))
                if fault.delay_s:   # a late answer: the client has timed out and gone by then
                    time.sleep(fault.delay_s)
                    self.close_connection = True
                else:
                    self._send_fault(fault)
                return
            index, turn = server._choose(body, results)
            server._record(RecordedRequest(api, path, headers, body, results, index))
            if api == RESPONSES_API:
                self._send_sse(_responses_events(server, turn, raw), with_type=True)
                return
            if api == CHAT_API:
                completion = _chat_completion(server, turn, raw)
                if body.get("stream"):
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._send_chat_stream(_chat_chunks(completion, include_usage=include_usage))
                else:
                    self._send_json(200, completion)
                return
            message, _ = _messages_message(server, turn, raw)
            if body.get("stream"):
                self._send_sse(_messages_events(message), with_type=False)
            else:
                self._send_json(200, message)

        def _send_fault(self, fault: Fault) -> None:
            if fault.malformed:
                self._send_raw(200, b"{this is not the API's JSON")
                return
            status = fault.status or 500
            extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            self._send_json(status, {"type": "error", "error": {"type": "scripted_fault", "message":
                                                                 f"scripted fault {status}"}}, headers=extra)

        def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True

        def _send_chat_stream(self, chunks: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers)

        def _send_sse(self, events: list[tuple[str, dict[str, Any]]], *, with_type: bool) -> None:
            # No Content-Length: the stream ends when the connection closes, which Claude Code
            # needs to see before it sends its next request.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for sequence, (name, data) in enumerate(events):
                payload = {"type": name, "sequence_number": sequence, **data} if with_type else data
                self.wfile.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler
