"""A scripted acting agent that bills a fixed usage per rollout (not a test module).

It runs inside the `git hermit` process (``agent.backend: scripted``), answers what the
deployed MEMORY.md tells it (as step_support's command agent does), logs each call to the
control directory and emits a Codex ``exec --json`` stream whose ``turn.completed`` carries
``USAGE``, so every rollout costs the same and a budget's arithmetic is exact. A machine can be
made to answer differently: ``HERMIT_TEST_ANSWER_<task>`` in its environment is the answer.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from support.step_support import control_dir

USAGE = {"input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 100, "reasoning_output_tokens": 0}
ROLLOUT_TOKENS = USAGE["input_tokens"] + USAGE["output_tokens"]
# USD per 1M tokens for the agent's model: one rollout costs 1000·10e-6 + 100·100e-6 = $0.02
PRICE = {"input": 10.0, "output": 100.0}
ROLLOUT_USD = 0.02


def fixed_usage_agent(workspace: Path, prompt: str, *, attempt: int, emit, run_hook) -> str:
    task = re.search(r"answer of task (\S+)\?", prompt).group(1)
    with open(control_dir() / "agent.log", "a") as log:
        log.write(f"{task}#{attempt}\n")
    emit({"type": "thread.started", "thread_id": str(uuid.uuid4())})
    emit({"type": "turn.started"})
    memory = Path(workspace, ".hermit-adapter", "MEMORY.md")
    text = memory.read_text() if memory.is_file() else ""
    found = re.findall(r"^- answer " + re.escape(task) + r": (.*)$", text, re.M)
    answer = os.environ.get(f"HERMIT_TEST_ANSWER_{task}") or (found[-1].strip() if found else "I do not know")
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": answer}})
    emit({"type": "turn.completed", "usage": dict(USAGE)})
    return answer
