"""`git hermit push` and `fetch` of a synthetic 1,000-step run beside one plain `git push`/`git fetch`
of the same refs (target ≤ 3×), and `log` on the freshly fetched clone beside the CLI's start-up
(`git-hermit --help`, target ≤ 2.5×).

The run is bench/log_1000.py's (1,000 step branches, one change commit each, manifest, verdict and
scores notes, 20 tasks × k=2) with each step's records (``refs/hermit/bench/records``: step.json,
ledger.json, 40 rollout results with their hook audit, the learner's files). Every repeat pushes to
a fresh bare repository and fetches into a fresh clone of it, on the same disk; the plain git
references move exactly the refs git-hermit moves (`git push --atomic` of them; `git fetch` of the
same refspecs). The clone is made with ``git clone --no-local``, so it holds what a clone over the
network holds (the branches and tags' objects) and both fetches bring the notes and records; a
second pair fetches into a plain local clone, which hardlinks every object of the bare repository
(the notes' and records' too), so neither fetch transfers an object: git's is only its ref
negotiation and connectivity check, git-hermit's that plus every check of the remote's records. Figures are medians of CPU seconds (the process's and its git children's user +
system) with wall time beside, each paired with its reference in the same repeat.

    python bench/share_1000.py [--steps 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import log_1000  # noqa: E402

import git_hermit  # noqa: E402
from git_hermit.core.records import records_ref, step_path  # noqa: E402
from git_hermit.core.runs import seed_branch  # noqa: E402
from git_hermit.gitio import RefUpdate, Repo, ZERO_SHA  # noqa: E402

RUN = "bench"
REFSPECS = ("refs/heads/hermit/*", "refs/tags/hermit/*", "refs/notes/hermit/*", "refs/hermit/*")


def add_records(repo_dir: Path, steps: int) -> None:
    """Each step's records directory, one records commit per step as a step publishes it (its blobs
    written in one batch first: only the building is faster than a run's)."""
    repo = Repo.discover(repo_dir)
    tips = {n: repo.read_ref(f"refs/heads/hermit/{RUN}/step-{n:04d}") for n in range(steps + 1)}
    per_step: dict[int, dict[str, bytes]] = {}
    for n in range(1, steps + 1):
        files = {"step.json": json.dumps({"v": 1, "run": RUN, "step": n, "evolver": "ahe", "evaluated": tips[n - 1],
                                          "tip": tips[n], "stop": None, "rollouts": 40}, indent=2).encode(),
                 "ledger.json": json.dumps({"entries": [
                     {"role": "acting", "key": f"task-{i}#{a}", "model": "m", "step": n,
                      "usage": {"input_tokens": 9000 + n + i, "output_tokens": 120 + a}}
                     for i in range(20) for a in (1, 2)]}, indent=2).encode(),
                 "learner/history.md": f"## Iteration {n} — 2026-01-01 00:00\n\n- pass@1 0.5\n".encode(),
                 f"learner/state/stats/step_{n:04d}.json": json.dumps({"step": n, "pass_rate": 0.5}).encode()}
        for i in range(20):
            for a in (1, 2):
                files[f"rollouts/task-{i}/{a}/result.json"] = json.dumps(
                    {"v": 1, "task": f"task-{i}", "attempt": a, "commit": tips[n - 1], "outcome": "pass" if i % 3 else "fail",
                     "reward": 1.0 if i % 3 else 0.0, "usage": {"input_tokens": 9000 + n + i}}, indent=2).encode()
                files[f"rollouts/task-{i}/{a}/hook-calls.jsonl"] = "".join(
                    json.dumps({"event": e, "step": n, "task": i, "ms": 1.5}) + "\n"
                    for e in ("SessionStart", "UserPromptSubmit", "Stop")).encode()
        per_step[n] = files
    names = [(n, path) for n in per_step for path in sorted(per_step[n])]
    shas = iter(repo.write_blobs([per_step[n][path] for n, path in names]))
    old = tip = repo.read_ref(records_ref(RUN))      # log_1000.build's (each step's step.json)
    for n in per_step:
        tree = repo.write_tree(tip, {f"{step_path(n)}/{path}": ("100644", next(shas)) for path in sorted(per_step[n])})
        tip = repo.commit_tree(tree, tip, f"bench step {n}: records")
    assert tip is not None
    repo.update_refs([RefUpdate(records_ref(RUN), tip, old or ZERO_SHA)])
    repo.close()


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s: the child's and its children's user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} … failed: {proc.stderr.decode()[-600:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def sh(*args: str, cwd: Path) -> str:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--built", type=Path, help="a directory to build the run in once and reuse after")
    args = parser.parse_args()
    compileall.compile_dir(os.path.dirname(git_hermit.__file__), quiet=1)
    exe = log_1000.hermit_argv()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        origin = args.built / "origin" if args.built else root / "origin"
        start = time.perf_counter()
        if not (origin / ".git").is_dir():
            origin.mkdir(parents=True)
            log_1000.build(origin, args.steps)
            add_records(origin, args.steps)
        refs = sh("git", "for-each-ref", "--format=%(refname)", *(s.rstrip("*") for s in REFSPECS), cwd=origin).split()
        with Repo.discover(origin) as repo:
            base = seed_branch(repo, RUN) or "main"
        print(f"built a {args.steps:,}-step run in {time.perf_counter() - start:.1f} s: {len(refs):,} refs "
              f"(+ {base}, which holds hermit.yaml)")
        figures: dict[str, list[tuple[float, float]]] = {k: [] for k in
                                                         ("push", "git push", "fetch", "git fetch", "log", "--help",
                                                          "fetch (hardlinked clone)", "git fetch (hardlinked clone)")}
        for i in range(args.repeat):
            for name, argv in (("push", [*exe, "push"]),
                               ("git push", ["git", "push", "--quiet", "--atomic", "origin", base,
                                             *(f"{r}:{r}" for r in refs)])):
                bare = root / f"{name.replace(' ', '-')}-{i}.git"
                sh("git", "init", "-q", "--bare", str(bare), cwd=root)
                if "origin" in sh("git", "remote", cwd=origin).split():
                    sh("git", "remote", "remove", "origin", cwd=origin)
                sh("git", "remote", "add", "origin", str(bare), cwd=origin)
                figures[name].append(timed(argv, origin))
            served = root / f"push-{i}.git"          # what `git hermit push` made: both fetch from it
            for clone_how, suffix in (("--no-local", ""), ("--local", " (hardlinked clone)")):
                for name, argv in (("fetch", [*exe, "fetch"]),
                                   ("git fetch", ["git", "fetch", "--quiet", "origin",
                                                  *(f"+{s}:{s}" for s in REFSPECS)])):
                    clone = root / f"{name.replace(' ', '-')}-clone{clone_how}-{i}"
                    sh("git", "clone", "-q", clone_how, str(served), str(clone), cwd=root)
                    figures[name + suffix].append(timed(argv, clone))
            fetched = root / f"fetch-clone--no-local-{i}"
            figures["log"].append(timed([*exe, "log"], fetched))     # its first log: what fetch left
            figures["--help"].append(timed([*exe, "--help"], fetched))
        print(f"medians of {args.repeat} repeats, CPU seconds (user + system, git included) and wall; "
              f"load average {os.getloadavg()[0]:.1f}")

        def med(name: str, which: int) -> float:
            return statistics.median(f[which] for f in figures[name])
        for mine, ref, target in (("push", "git push", 3), ("fetch", "git fetch", 3),
                                  ("fetch (hardlinked clone)", "git fetch (hardlinked clone)", 3), ("log", "--help", 2.5)):
            what = "the first log of the fresh clone `git hermit fetch` made" if mine == "log" else f"git hermit {mine}"
            print(f"{what}: cpu {med(mine, 1):.3f} s wall {med(mine, 0):.3f} s; reference "
                  f"{'git-hermit --help (the CLI start-up)' if ref == '--help' else 'one plain ' + ref + ' of the same refs'}"
                  f": cpu {med(ref, 1):.3f} s wall {med(ref, 0):.3f} s -> {med(mine, 1) / med(ref, 1):.2f}x cpu, "
                  f"{med(mine, 0) / med(ref, 0):.2f}x wall (target <= {target}x)")


if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    # no `git gc --auto` in the background of either side (it would also outlive the run)
    os.environ.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "gc.auto", "GIT_CONFIG_VALUE_0": "0"})
    main()
