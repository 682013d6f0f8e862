"""The offline demo's bundled benchmark: sixteen small question-answering tasks in four
families (mixed units, CSV column totals, inclusive date ranges, means to 2 decimals) with
their task files, and the hermit.yaml blocks that run them. ``write_benchmark`` copies
them into a demo repository.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from git_hermit.demo.acting import run_scripted_agent
from git_hermit.demo.learners import debugger_session, evolve_session

EVOLVER, TEMPLATE = "ahe", "ahe@1.0"    # the demo is an ahe run, with its learners simulated (learners.py)
K = 2                           # rollouts per task, as AHE's k
TASKS_FILE = "tasks.jsonl"
TRAIN_ROWS = "rows/train.txt"
TEST_ROWS = "rows/test.txt"
FILES_DIR = "files"
# the scripted backend runs the function its config names: the demo names its own acting agent
AGENT_POLICY = f"{run_scripted_agent.__module__}:{run_scripted_agent.__qualname__}"
# ... and its simulated Agent Debugger and Evolve Agent, one function per ahe role
LEARNERS = {role: f"{fn.__module__}:{fn.__qualname__}"
            for role, fn in (("debugger", debugger_session), ("evolve", evolve_session))}


@dataclass(frozen=True)
class BenchmarkTask:
    id: str
    family: str
    split: str                  # train | test
    prompt: str
    answer: str
    files: dict[str, str] = field(default_factory=dict)   # workspace name -> path under dest


@dataclass(frozen=True)
class BenchmarkInfo:
    """What ``write_benchmark`` wrote, and the hermit.yaml blocks that use it."""

    dest: Path
    tasks: tuple[BenchmarkTask, ...]
    config: dict[str, Any]      # tasks, judge, data, agent, evolver blocks

    @property
    def train_tasks(self) -> list[str]:
        return [t.id for t in self.tasks if t.split == "train"]

    @property
    def test_tasks(self) -> list[str]:
        return [t.id for t in self.tasks if t.split == "test"]


def load_tasks() -> tuple[BenchmarkTask, ...]:
    """The bundled tasks, in file order."""
    text = resources.files(__package__).joinpath("data").joinpath(TASKS_FILE).read_text(encoding="utf-8")
    return tuple(BenchmarkTask(**json.loads(line)) for line in text.splitlines() if line.strip())


def hermit_config() -> dict[str, Any]:
    """The hermit.yaml blocks for the demo: scripted acting agent and scripted ahe learners."""
    return {
        "tasks": {"path": TASKS_FILE, "id_field": "id", "prompt_field": "prompt",
                  "answer_field": "answer", "files_field": "files"},
        # numeric with a tight relative tolerance: 5 does not pass for 4.95
        "judge": {"kind": "answer", "mode": "numeric", "tolerance": 0.001},
        "data": {"train": TRAIN_ROWS, "test": TEST_ROWS},
        "agent": {"backend": "scripted", "scripted": {"policy": AGENT_POLICY}},
        "evolver": {"name": EVOLVER, "base": "scripted", "scripted": dict(LEARNERS),
                    "params": {"k": K, "rollback": "auto", "target_pass_rate": 0.95}},
    }


def write_benchmark(dest: Path) -> BenchmarkInfo:
    """Write tasks.jsonl, the task files and the train/test rows files under ``dest``."""
    dest = Path(dest)
    tasks = load_tasks()
    data = resources.files(__package__).joinpath("data")
    (dest / FILES_DIR).mkdir(parents=True, exist_ok=True)
    (dest / "rows").mkdir(parents=True, exist_ok=True)
    records = []
    for task in tasks:
        for source in task.files.values():
            with resources.as_file(data.joinpath(source)) as path:
                shutil.copyfile(path, dest / source)
        record: dict[str, Any] = {"id": task.id, "prompt": task.prompt, "answer": task.answer}
        if task.files:
            record["files"] = dict(task.files)
        records.append(json.dumps(record, ensure_ascii=False))
    (dest / TASKS_FILE).write_text("\n".join(records) + "\n", encoding="utf-8")
    for split, rows_file in (("train", TRAIN_ROWS), ("test", TEST_ROWS)):
        rows = [f"{t.id}#{n}" for t in tasks if t.split == split for n in range(1, K + 1)]
        (dest / rows_file).write_text("\n".join(rows) + "\n", encoding="utf-8")
    return BenchmarkInfo(dest, tasks, hermit_config())
