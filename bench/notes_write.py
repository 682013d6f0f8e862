"""Benchmark: write 1,000 notes in one NotesStore.write_many publication vs `git notes add` per note.

Prints the one-publication figure, the per-note reference (all calls, or a measured sample
extrapolated when --sample is given; the output says which), and the ratio.
Usage: python bench/notes_write.py [--notes N] [--sample K]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from notes_read import REF, isolated_env, make_run

from git_hermit.gitio import NotesStore, Repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=0, help="time only this many `git notes add` and extrapolate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hermit-bench-") as temp:
        isolated_env(Path(temp))
        path = Path(temp) / "repo"
        commits = make_run(path, args.notes)
        notes = {sha: f'{{"v": 1, "verdict": "EFFECTIVE", "n": {i}}}\n' for i, sha in enumerate(commits)}
        started = time.perf_counter()
        with Repo.discover(path) as repo:
            store = NotesStore(repo)
            store.write_many(REF, notes, "bench: verdicts")
            publications = store.last_attempts
        batched_s = time.perf_counter() - started
        with Repo.discover(path) as repo:
            assert NotesStore(repo).read_all(REF) == notes, "write_many lost or changed notes"
        reference = "refs/notes/plain"
        timed = commits[: args.sample] if args.sample else commits
        started = time.perf_counter()
        for sha in timed:
            subprocess.run(["git", "notes", "--ref", reference, "add", "-m", notes[sha].rstrip("\n"), sha],
                           cwd=path, check=True, capture_output=True)
        measured_s = time.perf_counter() - started
        per_note_s = measured_s * len(commits) / len(timed)
    how = "measured" if len(timed) == len(commits) else f"extrapolated from {len(timed)} measured calls"
    print(f"notes write, {len(commits)} notes")
    print(f"  write_many (one publication, {publications} CAS attempt): {batched_s:8.3f} s")
    print(f"  reference: {len(commits)} x `git notes add` ({how}): {per_note_s:8.3f} s")
    print(f"  ratio (reference / write_many):          {per_note_s / batched_s:8.1f}x faster")


if __name__ == "__main__":
    main()
