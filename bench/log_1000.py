"""`git hermit log` on a synthetic 1,000-step run, beside the CLI's own start-up (target ≤ 2.5×).

Builds a run with git fast-import (N step branches, one change commit each with its manifest,
verdict and scores notes — 20 tasks × k=2 — written in one publication per notes ref), then times
`git hermit log` and `log --json` as a user runs them (a fresh process through the console script,
stdout a pipe), in the same run as their references: the CLI's start-up (`git-hermit --version`,
answered before click is imported, and `git-hermit --help`, a no-op click command) and ONE
`git log` of the run's commits. Each figure is a median of CPU seconds (the process's and its git
children's user + system time: steadier than wall time on a shared machine; wall is printed too)
with its ratio to the references. The first `log`, which checks every note and fills the cache in
``<git dir>/hermit/cache``, and the first `log --json`, which keeps each note's encoded JSON there,
are printed apart.

The package's bytecode is compiled first (as pip does when it installs a wheel), so no figure
includes compiling source. `bench/log_10000.py` is the same with --steps 10000 (target ≤ 1 s).

    python bench/log_1000.py [--steps 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git_hermit
from git_hermit.gitio import NOTES_REFS, NotesStore, Repo
from git_hermit.model.records import Attempt, Change, Manifest, Scores, TaskScore, dumps

try:   # the verdict note's record, under its name before and after the records were renamed
    from git_hermit.model.records import VerdictNote
except ImportError:
    from git_hermit.model.records import Verdict as VerdictNote


def sh(*args: str, cwd: Path, input: str | None = None) -> str:
    return subprocess.run(args, cwd=cwd, input=input, capture_output=True, text=True, check=True).stdout


def build(repo_dir: Path, steps: int) -> None:
    sh("git", "init", "-q", cwd=repo_dir)
    sh(*hermit_argv(), "init", "--run", "bench", cwd=repo_dir)
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
    records = _records_writer()
    if records is not None:     # each step's records (step.json), as a step publishes them
        add_steps, StepRecord = records
        update, _ = add_steps(repo, "bench", {n: {"step.json": StepRecord("bench", n, "ahe", tips[n - 1], tips[n]).to_json()}
                                              for n in range(1, steps + 1)}, "bench records")
        repo.update_refs([update])
    repo.close()


def _records_writer():
    """core/records.py's bulk writer and step record (None before records existed: `--vs` runs an older tree)."""
    try:
        from git_hermit.core.records import StepRecord, add_steps
    except ImportError:
        return None
    return add_steps, StepRecord


def hermit_argv() -> list[str]:
    """The console script a user runs (its launcher answers --version before importing click)."""
    script = Path(sys.executable).with_name("git-hermit")
    return [str(script)] if script.exists() else [shutil.which("git-hermit") or "git-hermit"]


def timed(argv: list[str], cwd: Path, repeat: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) per run; CPU is the child's user + system time, git's processes included
    (what the machine spent, steadier than wall time on a loaded machine)."""
    runs = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append((wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--target", type=float, default=None,
                        help="absolute target for `log` in seconds (log_10000.py: 1.0)")
    args = parser.parse_args()
    compileall.compile_dir(os.path.dirname(git_hermit.__file__), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        repo_dir = Path(tmp)
        start = time.perf_counter()
        build(repo_dir, args.steps)
        print(f"built a {args.steps:,}-step run in {time.perf_counter() - start:.1f} s")
        exe = hermit_argv()
        commands = {
            "log": [*exe, "log"],
            "log --json": [*exe, "log", "--json"],
            "--version": [*exe, "--version"],
            "--help": [*exe, "--help"],
            "git log": ["git", "log", "--format=%H %s%n%(trailers)", "refs/heads/hermit/bench/step-0000.."
                        f"refs/heads/hermit/bench/step-{args.steps:04d}"],
        }
        # The first `log` validates every note and hermit.yaml and fills <git dir>/hermit/cache; later
        # ones read what was checked from there (a note's blob id names its content).
        cold_wall, cold_cpu = timed(commands["log"], repo_dir, 1)[0]
        # the first `log --json` encodes each note's part and keeps it by blob id (log-json.txt there)
        cold_json_wall, cold_json_cpu = timed(commands["log --json"], repo_dir, 1)[0]
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.repeat):       # interleaved, so a change in the machine's load hits every figure
            for name, argv in commands.items():
                runs[name] += timed(argv, repo_dir, 1)
        cpu = {name: statistics.median(c for _, c in times) for name, times in runs.items()}
        wall = {name: statistics.median(w for w, _ in times) for name, times in runs.items()}
        lines = subprocess.run(commands["log"], cwd=repo_dir, capture_output=True, text=True).stdout.count("\n")
        target = f"; target <= {args.target:g} s" if args.target else ""
        startup_target = "" if args.target else " (target <= 2.5x)"   # the 1,000-step target
        print(f"medians of {args.repeat} runs each, CPU seconds (user + system, git included) and wall; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"git hermit log          cpu {cpu['log']:.3f} s  wall {wall['log']:.3f} s, {lines:,} lines{target}; "
              f"first run (fills the cache) cpu {cold_cpu:.3f} s wall {cold_wall:.3f} s")
        print(f"git hermit log --json   cpu {cpu['log --json']:.3f} s  wall {wall['log --json']:.3f} s -> "
              f"{cpu['log --json'] / cpu['log']:.2f}x log (target <= 1x); first run (fills its fragments) "
              f"cpu {cold_json_cpu:.3f} s wall {cold_json_wall:.3f} s")
        # the target is against the CLI's start-up (a no-op click command); --version is answered by
        # the launcher before click is imported, so it is printed for scale only
        for ref in ("--help", "--version"):
            what = "a no-op click command: the CLI's start-up" if ref == "--help" else \
                "the launcher's fast path, before click is imported: for scale, no target"
            print(f"reference: git-hermit {ref:<9} cpu {cpu[ref]:.3f} s ({what}) -> log "
                  f"{cpu['log'] / cpu[ref]:.1f}x{startup_target if ref == '--help' else ''}, "
                  f"log --json {cpu['log --json'] / cpu[ref]:.1f}x")
        print(f"reference: one git log of the run cpu {cpu['git log']:.3f} s wall {wall['git log']:.3f} s -> log is "
              f"{cpu['log'] / cpu['git log']:.1f}x one git call")

if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    main()
