"""Rows files and splits: which attempts of which tasks a split runs.

A rows file lists one row per line, ``<task>#<n>`` (attempt n of the task) or ``<task>``
(a row without ``#n`` is its own task, attempt 1). The k rows of a task share its id.
Owns ``Row``, ``Split``, ``load_split``, ``load_splits`` and ``make_rows``.

Rules (all checked before anything runs, reported as one InputError):
- blank lines and lines starting with ``#`` are ignored; surrounding whitespace is stripped;
- ``#n`` must be a positive integer; a ``#`` followed by anything else is part of the id;
- an id must name a loaded task; a (task, attempt) pair may appear once;
- a task's attempts are numbered #1 … #n without gaps (``t#1``, ``t#3`` is a row lost or mistyped);
- k unset: every task must have the same number of rows, which is k;
- k set: a task listed once without ``#n`` is expanded to attempts 1..k; any other task must
  have exactly k rows.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from git_hermit.errors import ConfigError, InputError

from .tasks import Task, listing as _listing

_ROW = re.compile(r"^(?P<task>.+)#(?P<attempt>\d+)$")
SPLIT_SETTINGS = frozenset({"step_size"})   # keys of hermit.yaml `data:` that are not splits


@dataclass(frozen=True)
class Row:
    row_id: str      # as written in the rows file (``task#n`` after expansion)
    task: str
    attempt: int


@dataclass(frozen=True)
class Split:
    name: str
    rows: tuple[Row, ...]     # file order
    k: int
    tasks: tuple[str, ...]    # order of first appearance


def parse_row(line: str) -> Row:
    """``task#3`` → Row('task#3', 'task', 3); ``task`` → Row('task', 'task', 1)."""
    text = line.strip()
    match = _ROW.match(text)
    if match and int(match["attempt"]) >= 1:
        return Row(text, match["task"], int(match["attempt"]))
    if match:
        raise InputError(f"row {text!r}: attempt numbers start at 1", "write <task>#1 … <task>#k")
    return Row(text, text, 1)


def load_split(path: Path, tasks: Mapping[str, Task], *, k: int | None = None,
               name: str = "train") -> Split:
    """Read a rows file and check it against the loaded tasks (see the module rules)."""
    if not path.is_file():
        raise InputError(f"rows file for split {name!r} not found: {path}", "check `data:` in hermit.yaml")
    if k is not None and k < 1:
        raise ConfigError(f"k must be at least 1, got {k}", "set k to the rollouts per task, or null")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"rows file {path.name}: not UTF-8 text (byte {exc.start + 1})",
                         "save the file as UTF-8") from None
    entries: list[tuple[int, str]] = [
        (number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")]
    if not entries:
        raise InputError(f"rows file {path.name} (split {name!r}) lists no rows", "one <task>#<n> per line")

    problems: list[str] = []
    rows: list[Row] = []
    bare: set[str] = set()
    seen: dict[tuple[str, int], int] = {}
    unknown: list[str] = []
    for number, text in entries:
        try:
            row = parse_row(text)
        except InputError as exc:
            problems.append(f"line {number}: {exc.message}")
            continue
        if row.task not in tasks and text in tasks:
            row = Row(text, text, 1)   # an id that itself ends in #<digits>
        if row.task not in tasks:
            unknown.append(row.task)
            continue
        if (row.task, row.attempt) in seen:
            problems.append(f"line {number}: duplicate row {row.task}#{row.attempt} "
                            f"(first on line {seen[row.task, row.attempt]})")
            continue
        seen[row.task, row.attempt] = number
        if row.row_id == row.task:
            bare.add(row.task)
        rows.append(row)
    if unknown:
        distinct = list(dict.fromkeys(unknown))
        problems.insert(0, f"{len(distinct)} unknown task id(s): {_listing(distinct)}")

    by_task: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_task[row.task].append(row)
    gaps = [f"{task} ({', '.join(f'#{n}' for n in attempts)}: no {', '.join(f'#{n}' for n in missing[:3])})"
            for task, task_rows in by_task.items()
            for attempts in [sorted(r.attempt for r in task_rows)]
            for missing in [sorted(set(range(1, attempts[-1] + 1)) - set(attempts))] if missing]
    if gaps:     # a task's k rows are its attempts #1 … #k: a gap is a row lost or mistyped
        problems.append(f"attempt numbers with gaps: {_listing(gaps)}; a task's k rows are <task>#1 … <task>#k")
    if k is not None:
        rows = _expand_bare(rows, by_task, bare, k)
        wrong = [f"{task} has {len(task_rows)}" for task, task_rows in by_task.items()
                 if not (task in bare and len(task_rows) == 1) and len(task_rows) != k]
        if wrong:
            problems.append(f"k={k} but {_listing(wrong)} row(s)")
    elif by_task:
        counts = {len(task_rows) for task_rows in by_task.values()}
        if len(counts) > 1:
            problems.append(f"tasks have between {min(counts)} and {max(counts)} rows; "
                            "every task needs the same number (k), or set k")
        k = max(counts)
    if problems:
        raise InputError(f"rows file {path.name} (split {name!r}): {_listing(problems)}",
                         "number each task's rows #1 … #k, without gaps" if gaps and len(problems) == 1 else
                         "rows are <task>#<n>, one per line, with ids from the tasks file")
    assert k is not None
    return Split(name, tuple(rows), k, tuple(by_task))


def _expand_bare(rows: list[Row], by_task: dict[str, list[Row]], bare: set[str], k: int) -> list[Row]:
    """A task listed once without #n runs k attempts: its row becomes task#1 … task#k in place."""
    expanded: list[Row] = []
    for row in rows:
        if row.task in bare and len(by_task[row.task]) == 1:
            expanded.extend(Row(f"{row.task}#{n}", row.task, n) for n in range(1, k + 1))
        else:
            expanded.append(row)
    return expanded


def load_splits(data: Mapping[str, Any], tasks: Mapping[str, Task], base_dir: Path, *,
                k: int | None = None) -> dict[str, Split]:
    """Every split the hermit.yaml ``data:`` block names (``train: rows/train_k2.txt`` …)."""
    splits: dict[str, Split] = {}
    for name, value in data.items():
        if name in SPLIT_SETTINGS:
            continue
        if not isinstance(value, str):
            raise ConfigError(f"data.{name}: expected a rows file path, got {value!r}",
                              "e.g. data: {train: rows/train_k2.txt, test: rows/test.txt}")
        splits[name] = load_split(base_dir / value, tasks, k=k, name=name)
    return splits


def make_rows(task_ids: Iterable[str], k: int) -> str:
    """The rows file text for k attempts of each task (bare ids when k is 1)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    lines = [task if k == 1 else f"{task}#{n}" for task in task_ids for n in range(1, k + 1)]
    return "".join(line + "\n" for line in lines)
