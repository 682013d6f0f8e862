"""`git hermit log` on a synthetic 1,000-step run (target ≤ 0.5 s).

Builds a run with git fast-import (1,000 step branches, one change commit each with its
manifest, verdict and scores notes written in one publication per notes ref), then times
`git hermit log` and `log --json` as a user runs them (a fresh process), next to two
references: the CLI's own start-up (`git-hermit --version`) and ONE `git log` of the run.

    python bench/log_1000.py [--steps 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from git_hermit.gitio import NOTES_REFS, NotesStore, Repo
from git_hermit.model.records import (Attempt, Change, Manifest, Scores, TaskScore, VerdictNote, dumps)


def sh(*args: str, cwd: Path, input: str | None = None) -> str:
    return subprocess.run(args, cwd=cwd, input=input, capture_output=True, text=True, check=True).stdout


def build(repo_dir: Path, steps: int) -> None:
    sh("git", "init", "-q", cwd=repo_dir)
    sh("git", "hermit", "init", "--run", "bench", cwd=repo_dir)
    seed = sh("git", "rev-parse", "refs/heads/hermit/bench/step-0000", cwd=repo_dir).strip()
    stream = []
    for n in range(1, steps + 1):
        parent = f":{n - 1}" if n > 1 else seed
        msg = (f"hermit(ahe) step {n}: chg-1: tweak memory\n\nHermit-Run: bench\nHermit-Step: {n}\n"
               f"Hermit-Evolver: ahe\nHermit-Change: chg-1\n")
        data = f"- lesson {n}\n"
        stream += [f"commit refs/heads/hermit/bench/step-{n:04d}", f"mark :{n}",
                   f"committer Bench <b@e> {1_700_000_000 + n} +0000", f"data {len(msg.encode())}", msg,
                   f"from {parent}", f"M 100644 inline adapter/lessons/{n % 50}.md", f"data {len(data)}", data, ""]
    sh("git", "fast-import", "--quiet", cwd=repo_dir, input="\n".join(stream) + "\n")
    repo = Repo.discover(repo_dir)
    tips = {n: repo.read_ref(f"refs/heads/hermit/bench/step-{n:04d}") for n in range(0, steps + 1)}
    tasks = {f"task-{i}": TaskScore("pass" if i % 3 else "fail", (Attempt("pass", 1.0), Attempt("fail", 0.0)))
             for i in range(20)}
    change = Change("chg-1", "tweak memory", ("lessons/x.md",), "p", ("task-1",), ("task-2",), "memory")
    manifests, verdicts, scores = {}, {}, {}
    for n in range(1, steps + 1):
        manifests[tips[n]] = dumps("manifest", Manifest("bench", n, (change,)))
        verdicts[tips[n]] = dumps("verdicts", VerdictNote("bench", n + 1, "chg-1", "EFFECTIVE", ("task-1",), (), ()))
    for n in range(0, steps):
        scores[tips[n]] = dumps("scores", Scores("bench", n + 1, tips[n], "train", 2, 0.5, tasks))
    store = NotesStore(repo)
    for kind, notes in (("manifest", manifests), ("verdicts", verdicts), ("scores", scores)):
        store.write_many(NOTES_REFS[kind], notes, "bench notes")
    repo.close()


def timed(argv: list[str], cwd: Path, repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=True)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo_dir = Path(tmp)
        start = time.perf_counter()
        build(repo_dir, args.steps)
        print(f"built a {args.steps}-step run in {time.perf_counter() - start:.1f} s")
        exe = [sys.executable, "-m", "git_hermit"]
        log_med, log_min = timed([*exe, "log"], repo_dir, args.repeat)
        json_med, _ = timed([*exe, "log", "--json"], repo_dir, args.repeat)
        boot_med, _ = timed([*exe, "--version"], repo_dir, args.repeat)
        git_med, _ = timed(["git", "log", "--format=%H %s%n%(trailers)", "refs/heads/hermit/bench/step-0000.."
                            f"refs/heads/hermit/bench/step-{args.steps:04d}"], repo_dir, args.repeat)
        lines = subprocess.run([*exe, "log"], cwd=repo_dir, capture_output=True, text=True).stdout.count("\n")
        print(f"git hermit log         median {log_med:.3f} s (min {log_min:.3f} s), {lines} lines; target <= 0.5 s")
        print(f"git hermit log --json  median {json_med:.3f} s")
        print(f"reference: CLI start-up (--version) {boot_med:.3f} s -> log is {log_med / boot_med:.1f}x start-up")
        print(f"reference: one git log of the run   {git_med:.3f} s -> log is {log_med / git_med:.1f}x one git call")


if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    main()
