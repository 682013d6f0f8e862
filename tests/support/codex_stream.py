"""A deterministic ``codex exec --json`` event stream of a chosen size, for tests and benchmarks of
what a learner reads of a trajectory: reasoning, agent messages and command executions (most
succeed, every fifth exits 1) whose outputs end in a marker naming their number, so a reader can
tell which commands' output tails it was shown. The first reasoning holds ``FIRST_MARK`` and the
final message ``LAST_MARK``: the session's start and its end.
"""

from __future__ import annotations

import json

FIRST_MARK = "FIRST-OUTPUT-7f3a"
LAST_MARK = "FINAL-MESSAGE-9c2e"


def output_mark(number: int) -> str:
    return f"OUTPUT-TAIL-{number:03d}"


def codex_stream(target_bytes: int = 64 * 1024, output_chars: int = 900) -> tuple[str, int]:
    """The stream's text (about ``target_bytes``) and how many commands it holds."""
    lines = [{"type": "thread.started", "thread_id": "t-0001"}, {"type": "turn.started"}]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    number = 0
    while len(body) < target_bytes - 600:
        number += 1
        filler = " ".join(f"line {number}.{i} of the listing" for i in range(output_chars // 24))
        output = filler[:output_chars] + " " + output_mark(number)
        start = f" {FIRST_MARK}" if number == 1 else ""
        items = [{"id": f"r{number}", "type": "reasoning", "text": f"Step {number}: look at part {number}.{start}"},
                 {"id": f"c{number}", "type": "command_execution", "command": f"/bin/bash -lc 'cat part{number}.txt'",
                  "aggregated_output": output, "exit_code": 1 if number % 5 == 0 else 0,
                  "status": "failed" if number % 5 == 0 else "completed"}]
        if number % 4 == 0:
            items.append({"id": f"m{number}", "type": "agent_message", "text": f"Read {number} parts so far."})
        body += "".join(json.dumps({"type": "item.completed", "item": item}) + "\n" for item in items)
    body += json.dumps({"type": "item.completed", "item": {"id": "final", "type": "agent_message",
                                                           "text": f"The answer is 42. {LAST_MARK}"}}) + "\n"
    body += json.dumps({"type": "turn.completed", "usage": {"input_tokens": 9000, "cached_input_tokens": 4000,
                                                            "output_tokens": 700}}) + "\n"
    return body, number
