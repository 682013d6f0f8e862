"""What one demo-sized step (12 tasks × k=2) adds to the pushed repository: its records without
traces (target ≤ 50 KB), its traces (pushed only with `git hermit push --traces`), and the step
whole (its commits, notes and records), each as the bytes `git push` sends for it (a thin pack
against everything the remote already has: the steps before it).

Runs the offline demo (`git hermit demo`: 12 tasks × k=2, scripted agent and learners), then pushes
its history to a bare repository one step at a time — each step's refs at the values that step
published — and reads the bytes git reports for each push ("Writing objects: … X KiB").

    python bench/records_size.py
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = "demo"
NOTES = ("scores", "manifest", "verdicts", "provenance", "analysis")


def sh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr[-600:]}")
    return proc.stdout + proc.stderr


def history(repo: Path, ref: str) -> list[tuple[str, str]]:
    """(commit, subject) of a ref's first-parent history, oldest first."""
    out = sh("git", "log", "--first-parent", "--reverse", "--format=%H %s", ref, cwd=repo)
    return [tuple(line.split(" ", 1)) for line in out.splitlines()]  # type: ignore[misc]


def at_step(entries: list[tuple[str, str]], step: int) -> str | None:
    """The last commit a step up to ``step`` published (subjects say "git-hermit demo step N")."""
    found = None
    for sha, subject in entries:
        match = re.search(r"step (\d+)", subject)
        if match and int(match.group(1)) <= step:
            found = sha
    return found


def pushed_bytes(repo: Path, remote: Path, refs: dict[str, str]) -> int:
    """Bytes git sends pushing ``refs`` (sha → remote ref) to ``remote``: its "Writing objects" figure."""
    if not refs:
        return 0
    out = sh("git", "push", "--progress", "--atomic", "-f", str(remote), *(f"{sha}:{ref}" for ref, sha in refs.items()),
             cwd=repo)
    match = re.search(r"Writing objects: 100% \([^)]*\), ([\d.]+) (bytes|KiB|MiB)", out)
    if not match:
        return 0      # nothing new to send
    return int(float(match.group(1)) * {"bytes": 1, "KiB": 1024, "MiB": 1024 * 1024}[match.group(2)])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        demo = root / "demo"
        env = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "Bench",
               "GIT_COMMITTER_EMAIL": "b@e"}
        sh(sys.executable, "-m", "git_hermit", "demo", str(demo), cwd=root, env=env)
        records = history(demo, f"refs/hermit/{RUN}/records")
        traces = history(demo, f"refs/hermit/{RUN}/traces")
        notes = {kind: history(demo, f"refs/notes/hermit/{kind}") for kind in NOTES
                 if sh("git", "for-each-ref", f"refs/notes/hermit/{kind}", cwd=demo).strip()}
        steps = sorted({int(m.group(1)) for _, s in records if (m := re.search(r"step (\d+): records", s))})
        kinds = {"records": root / "records.git", "traces": root / "traces.git", "whole": root / "whole.git"}
        for remote in kinds.values():
            sh("git", "init", "-q", "--bare", str(remote), cwd=root)
        sizes: dict[str, list[int]] = {k: [] for k in kinds}
        print("step  records (notes + records ref)  traces  the step whole (+ its commits, + traces)")
        for n in steps:
            step_notes = {f"refs/notes/hermit/{k}": sha for k, entries in notes.items() if (sha := at_step(entries, n))}
            record = {f"refs/hermit/{RUN}/records": at_step(records, n), **step_notes}
            branch = f"refs/heads/hermit/{RUN}/step-{n:04d}"
            tip = sh("git", "for-each-ref", "--format=%(objectname)", branch, cwd=demo).strip()
            trace = {f"refs/hermit/{RUN}/traces": at_step(traces, n)}
            whole = {**record, **trace, **({branch: tip} if tip else {})}
            figures = {"records": pushed_bytes(demo, kinds["records"], {r: s for r, s in record.items() if s}),
                       "traces": pushed_bytes(demo, kinds["traces"], {r: s for r, s in trace.items() if s}),
                       "whole": pushed_bytes(demo, kinds["whole"], {r: s for r, s in whole.items() if s})}
            for k, v in figures.items():
                sizes[k].append(v)
            print(f"{n:>4}  {figures['records']:>10,} bytes               {figures['traces']:>7,}  {figures['whole']:>9,}")
        print(f"median of {len(steps)} steps: records {statistics.median(sizes['records']):,.0f} bytes, "
              f"max {max(sizes['records']):,} (target <= 50 KB = 51,200 bytes); traces "
              f"{statistics.median(sizes['traces']):,.0f} bytes; the step whole {statistics.median(sizes['whole']):,.0f} bytes")


if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    main()
