"""Benchmark: validating 3,000 scores notes with jsonschema-rs (what records use) against jsonschema
(what the configuration uses), the choice model/schema.py records (issue 26, item 5).

`git hermit log` on a long run validates every note blob it has not seen; the named package
(jsonschema) stays the validator wherever it is no more than 1.5x slower on a hot path, so it
validates hermit.yaml (one document, once per config text) and jsonschema-rs keeps the notes.
Prints both medians and the ratio. Usage: python bench/jsonschema_notes.py [--notes N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from git_hermit.model.records import Attempt, Scores, TaskScore, dumps
from git_hermit.model.schema import load_schema, python_validator_for


def note(n: int) -> object:
    tasks = {f"task-{i}": TaskScore("pass" if (i + n) % 3 else "fail",
                                    (Attempt("pass" if (i + n) % 3 else "fail", 1.0, tokens=100 + i),))
             for i in range(6)}
    rate = sum(t.outcome == "pass" for t in tasks.values()) / len(tasks)
    scores = Scores("bench", n + 1, f"{n:040x}", "train", 1, rate, tasks, usage={"input_tokens": 1000})
    return json.loads(dumps("scores", scores))


def median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--notes", type=int, default=3000)
    args = parser.parse_args()
    import jsonschema_rs
    schema = load_schema("scores")
    notes = [note(n) for n in range(args.notes)]
    rust = jsonschema_rs.validator_for(schema)
    python = python_validator_for(schema)
    assert all(rust.is_valid(n) for n in notes) and all(python.is_valid(n) for n in notes)
    fast = median_s(lambda: [rust.is_valid(n) for n in notes], runs=5)
    slow = median_s(lambda: [python.is_valid(n) for n in notes], runs=3)
    print(f"validate {args.notes:,} scores notes   jsonschema {slow * 1000:9.1f} ms   "
          f"jsonschema-rs {fast * 1000:7.1f} ms   ratio {slow / fast:6.1f}x")


if __name__ == "__main__":
    main()
