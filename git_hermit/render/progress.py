"""Live progress for long work: a rich bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from git_hermit.rollouts.runner import Progress

PLAIN_EVERY_S = 5.0


def _eta(progress: Progress) -> str:
    eta = progress.eta_s()
    return "—" if eta is None else f"{int(eta // 60)}m{int(eta % 60):02d}s"


@contextmanager
def rollout_progress(label: str, *, stream=None) -> Iterator[Callable[[Progress], None]]:
    """Yield a callback for ``Progress.on_change`` that renders to ``stream`` (stderr)."""
    stream = stream or sys.stderr
    if stream.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeRemainingColumn
        bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.fields[detail]}"), TimeRemainingColumn(), console=Console(file=stream),
                  transient=False)
        with bar:
            task = bar.add_task(label, total=None, detail="")

            def update(p: Progress) -> None:
                bar.update(task, total=p.total, completed=p.done,
                           detail=f"running {p.running}, not passed {p.failed}, reused {p.reused}")
            yield update
        return
    last = [0.0]

    def plain(p: Progress) -> None:
        now = time.monotonic()
        if p.done == p.total or now - last[0] >= PLAIN_EVERY_S or p.done == p.reused:
            if p.done == p.total and last[0] < 0:
                return
            last[0] = -1.0 if p.done == p.total else now
            print(f"{label}: {p.done}/{p.total} done, {p.running} running, {p.failed} not passed, "
                  f"{p.reused} reused, eta {_eta(p)}", file=stream, flush=True)
    yield plain
