"""Live progress: the bar knows its total, messages print above it, and without a terminal
a quiet line every few percent; "running" never exceeds the agents allowed at once."""

from __future__ import annotations

import io
import re

from git_hermit.render.progress import rollout_progress
from git_hermit.rollouts.runner import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive(live, total: int, *, concurrency: int = 4, say_at: int | None = None) -> None:
    p = Progress(total=total, concurrency=concurrency)
    live(p)
    for i in range(total):
        p.running = min(2 * concurrency, total - i)     # prepare-ahead keeps twice as many in flight
        p.done = i + 1
        if say_at == i:
            live.say("step 1: the Debugger reads 3 tasks")
        live(p)


def test_without_a_terminal_one_line_every_ten_percent_and_again_for_the_next_batch():
    out = io.StringIO()
    with rollout_progress("rollouts", stream=out) as live:
        _drive(live, 200)
        _drive(live, 50)
    lines = out.getvalue().splitlines()
    assert len(lines) == 22, lines                       # 0%, 10% … 100%, twice
    assert lines[10].startswith("rollouts: 200/200 done (100%)") and lines[-1].startswith("rollouts: 50/50")
    assert not any(re.search(r"running ([5-9]|\d\d)", line) for line in lines)


def test_running_is_capped_at_the_concurrency_and_the_rest_is_preparing():
    out = io.StringIO()
    with rollout_progress("rollouts", stream=out) as live:
        live(Progress(total=10, running=8, concurrency=4))
    assert "running 4, preparing 4" in out.getvalue()


def test_bar_knows_its_total_and_messages_print_above_it():
    term = Terminal()
    with rollout_progress("rollouts", stream=term) as live:
        _drive(live, 30, say_at=10)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.getvalue())   # drop cursor and colour codes
    assert "None" not in text and "30/30" in text
    message_lines = [line for line in text.replace("\r", "\n").splitlines() if "the Debugger reads" in line]
    assert message_lines and all(line.strip() == "step 1: the Debugger reads 3 tasks" for line in message_lines)
    assert not re.search(r"running ([5-9]|\d\d)", text)
