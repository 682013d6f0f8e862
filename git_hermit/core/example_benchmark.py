"""The starter benchmark `git hermit init --example` writes: a few tasks, their rows, a data file.

Small enough to read in a minute, shaped like a real one: JSONL tasks with an answer and a
file copied into the workspace, training rows k=2 (`<task>#1`, `<task>#2`) and a held-out
test split, judged by the `answer` judge the default hermit.yaml configures.
"""

from __future__ import annotations

import json

_CSV = "date,item,amount\n2026-01-03,coffee,3.50\n2026-01-04,lunch,12.00\n2026-01-09,books,24.90\n2026-02-01,coffee,3.50\n"

_TASKS = [
    {"id": "sum-amounts", "prompt": "What is the total of the amount column in expenses.csv? Answer with the number only.",
     "answer": "43.9", "files": ["data/expenses.csv"]},
    {"id": "count-coffee", "prompt": "How many rows of expenses.csv are coffee? Answer with the number only.",
     "answer": "2", "files": ["data/expenses.csv"]},
    {"id": "january-total", "prompt": "What was spent in January 2026 according to expenses.csv? Answer with the "
     "number only.", "answer": "40.4", "files": ["data/expenses.csv"]},
    {"id": "days-between", "prompt": "How many days are there from 2026-01-03 to 2026-02-01, counting both days? "
     "Answer with the number only.", "answer": "30"},
    {"id": "largest-item", "prompt": "Which item in expenses.csv has the largest amount? Answer with the item only.",
     "answer": "books", "files": ["data/expenses.csv"]},
    {"id": "feb-total", "prompt": "What was spent in February 2026 according to expenses.csv? Answer with the "
     "number only.", "answer": "3.5", "files": ["data/expenses.csv"]},
]
TRAIN = ["sum-amounts", "count-coffee", "january-total", "days-between"]
TEST = ["largest-item", "feb-total"]
K = 2


def example_files() -> dict[str, str]:
    """{repository path: text} of the starter benchmark."""
    return {
        "tasks.jsonl": "".join(json.dumps(task) + "\n" for task in _TASKS),
        "data/expenses.csv": _CSV,
        "rows/train.txt": "".join(f"{task}#{n}\n" for task in TRAIN for n in range(1, K + 1)),
        "rows/test.txt": "".join(f"{task}#1\n" for task in TEST),
    }
