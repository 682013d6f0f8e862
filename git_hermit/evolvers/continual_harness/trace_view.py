"""The Refiner's view of one trajectory: each step of the readers' normalised form as a line or two
(reasoning, the agent's messages, every command with its exit code and the tail of its output,
file changes, other tool calls, errors), then cut to ``trace_chars`` keeping the head (how the
session set out) and the tail (how it ended), the cut marked. A file no reader knows (a
``command`` agent's stdout) is cut the same way as plain text (evidence.py reads the file).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from git_hermit.trajectories import Step

# What one line keeps of a long text: its end, where a command's result or a message's point lies.
OUTPUT_TAIL = 600          # a command's or tool's output
MESSAGE_TAIL = 1200        # an assistant or user message
REASONING_TAIL = 400
INPUT_TAIL = 300           # a command line, a tool's arguments, an error
HEAD_SHARE = 2 / 5         # of a cut view: the head's share; the tail keeps the rest


def tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text`` (stripped), "…" marking a cut."""
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def clip_middle(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and its tail, the middle cut and marked."""
    if len(text) <= limit:
        return text
    mark = f"\n[… {len(text)} characters cut …]\n"        # the widest the count can be
    room = limit - len(mark)
    if room < 20:
        return text[:limit]
    mark = f"\n[… {len(text) - room} characters cut …]\n"
    head = int(room * HEAD_SHARE)
    return text[:head] + mark + text[len(text) - (room - head):]


def _indented(text: str) -> str:
    return text.replace("\n", "\n    ")


def _arguments(value: Any) -> str:
    if isinstance(value, dict):
        for key in ("command", "cmd"):
            if isinstance(value.get(key), (str, list)):
                command = value[key]
                return command if isinstance(command, str) else " ".join(map(str, command))
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def step_lines(steps: Iterable[Step]) -> list[str]:
    """Every step as lines; the first user message (the task, which the Refiner reads above) and
    system notices are left out, an error of either kept."""
    lines: list[str] = []
    task_seen = False
    for step in steps:
        if step.source == "user" and not task_seen:
            task_seen = True
        elif step.source == "user" and step.message:
            lines.append(f"[user] {_indented(tail(step.message, MESSAGE_TAIL))}")
        elif step.source not in ("user", "system"):
            if step.reasoning:
                lines.append(f"[reasoning] {_indented(tail(step.reasoning, REASONING_TAIL))}")
            if step.message:
                lines.append(f"[assistant] {_indented(tail(step.message, MESSAGE_TAIL))}")
            for call in step.tool_calls:
                arguments = _indented(tail(_arguments(call.input), INPUT_TAIL))
                if call.kind == "shell":
                    status = f"exit {call.exit_code}" if call.exit_code is not None else (
                        "failed" if call.failed else "no exit code")
                    lines.append(f"[command {status}] {arguments}")
                elif call.kind == "patch":
                    lines.append(f"[file change] {arguments}")
                else:
                    lines.append(f"[tool {call.name}{' failed' if call.failed else ''}] {arguments}")
                if call.output and call.output.strip() and call.kind != "patch":
                    lines.append(f"  output: {_indented(tail(call.output, OUTPUT_TAIL))}")
        if step.error:
            lines.append(f"[error] {_indented(tail(step.error, INPUT_TAIL))}")
    return lines
