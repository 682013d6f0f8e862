"""Benchmark: read every note of a 1,000-commit run with NotesStore.read_all vs one `git notes show` per commit.

Prints the batched figure, the per-commit reference, and their ratio. Runs in a throwaway
repository with an isolated git config. Usage: python bench/notes_read.py [--commits N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from git_hermit.gitio import NOTES_REFS, NotesStore, Repo

REF = NOTES_REFS["scores"]


def isolated_env(home: Path) -> None:
    os.environ.update({
        "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
    })
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        os.environ.pop(var, None)


def make_run(path: Path, count: int) -> list[str]:
    """A repository with ``count`` commits (fast-import), oldest first."""
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    stream = []
    for number in range(count):
        message = f"step {number}".encode()
        stream.append(f"commit refs/heads/main\ncommitter B <b@e> {1700000000 + number} +0000\n"
                      f"data {len(message)}\n".encode() + message + b"\n")
        body = f"{number}\n".encode()
        stream.append(f"M 644 inline adapter/AGENTS.md\ndata {len(body)}\n".encode() + body + b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=b"".join(stream), check=True)
    return subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=path, capture_output=True,
                          text=True, check=True).stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hermit-bench-") as temp:
        isolated_env(Path(temp))
        path = Path(temp) / "repo"
        commits = make_run(path, args.commits)
        with Repo.discover(path) as repo:
            notes = {sha: f'{{"v": 1, "pass_at_1": {i / len(commits):.4f}, "split": "train"}}\n'
                     for i, sha in enumerate(commits)}
            NotesStore(repo).write_many(REF, notes, "bench: scores")
        # Batched: a fresh Repo so the batch reader's start-up is included.
        started = time.perf_counter()
        with Repo.discover(path) as repo:
            batched = NotesStore(repo).read_all(REF)
        batched_s = time.perf_counter() - started
        assert batched == notes, "read_all returned different notes"
        started = time.perf_counter()
        for sha in commits:
            out = subprocess.run(["git", "notes", "--ref", REF, "show", sha], cwd=path, capture_output=True,
                                 text=True, check=True).stdout
            assert out == notes[sha]
        per_commit_s = time.perf_counter() - started
    print(f"notes read, {len(commits)} commits (one notes ref)")
    print(f"  read_all (discover + batch reader):   {batched_s * 1000:9.1f} ms")
    print(f"  reference: {len(commits)} x `git notes show`: {per_commit_s * 1000:9.1f} ms")
    print(f"  ratio (reference / read_all):          {per_commit_s / batched_s:9.1f}x faster")


if __name__ == "__main__":
    main()
