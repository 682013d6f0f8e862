"""Live progress for long work: a rich bar on a terminal, a quiet line every few percent otherwise.

``rollout_progress`` yields a ``LiveProgress``: ``update`` is the rollouts' ``Progress.on_change``
and ``say`` prints a message — on a terminal above the bar (never glued to it), elsewhere as a
plain line. The bar appears with its total known; its ETA counts only rollouts run now (reused
ones finish instantly and would make it lie); "running" is capped at the agents allowed at
once, the rest of the jobs in flight being workspaces prepared ahead.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator, TextIO

from git_hermit.rollouts.runner import Progress

PLAIN_STEP_PERCENT = 10     # without a terminal: one line per this many percent


def _eta(progress: Progress) -> str:
    eta = progress.eta_s()
    return "—" if eta is None else f"{int(eta // 60)}m{int(eta % 60):02d}s"


def _counts(p: Progress) -> str:
    running = p.running if p.concurrency is None else min(p.running, p.concurrency)
    preparing = p.running - running
    text = f"running {running}"
    if preparing:
        text += f", preparing {preparing}"
    return f"{text}, not passed {p.failed}, reused {p.reused}"


class LiveProgress:
    """``update(progress)`` renders the rollouts' counts; ``say(message)`` prints one message."""

    def __init__(self, update: Callable[[Progress], None], say: Callable[[str], None]):
        self.update = update
        self.say = say

    def __call__(self, progress: Progress) -> None:   # usable directly as an on_progress callback
        self.update(progress)


@contextmanager
def rollout_progress(label: str, *, stream: TextIO | None = None) -> Iterator[LiveProgress]:
    """A bar on ``stream`` (stderr) when it is a terminal, quiet lines otherwise."""
    stream = stream or sys.stderr
    if stream.isatty():
        with _bar(label, stream) as live:
            yield live
        return
    yield _plain(label, stream)


@contextmanager
def _bar(label: str, stream: TextIO) -> Iterator[LiveProgress]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn
    console = Console(file=stream, force_terminal=True)
    bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
              TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), TextColumn("eta {task.fields[eta]}"),
              console=console, transient=False)
    with bar:
        # hidden until the first update brings the total: never "0/None"
        task = bar.add_task(label, total=1, visible=False, detail="", eta="—")

        def update(p: Progress) -> None:
            bar.update(task, total=max(p.total, 1), completed=p.done, visible=True, detail=_counts(p), eta=_eta(p))

        def say(message: str) -> None:
            console.print(message, markup=False, highlight=False, soft_wrap=True)
        yield LiveProgress(update, say)


def _plain(label: str, stream: TextIO) -> LiveProgress:
    printed = {"bucket": -1, "finished": False, "done": 0, "total": 0}

    def update(p: Progress) -> None:
        if p.done < printed["done"] or p.total != printed["total"]:   # the next batch (train's next step)
            printed.update(bucket=-1, finished=False)
        printed.update(done=p.done, total=p.total)
        if p.total <= 0 or printed["finished"]:
            return
        bucket = p.done * 100 // p.total // PLAIN_STEP_PERCENT
        if bucket == printed["bucket"] and p.done != p.total:
            return
        printed["bucket"] = bucket
        printed["finished"] = p.done == p.total
        print(f"{label}: {p.done}/{p.total} done ({p.done * 100 // p.total}%), {_counts(p)}, eta {_eta(p)}",
              file=stream, flush=True)

    def say(message: str) -> None:
        print(message, file=stream, flush=True)
    return LiveProgress(update, say)
