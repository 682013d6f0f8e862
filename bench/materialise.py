"""Benchmark: materialise 100 rollout workspaces of a 30-file adapter, in ms each (target <= 5 ms).

Two figures per filesystem (a tmp dir on /dev/shm and one on the normal disk):
``Repo.materialise`` with one open repository (blob copy of the adapter at a commit), and the
worker's full ``prepare_workspace`` (open the repository, materialise, deploy for Codex,
copy task files, write task.md). Usage: python bench/materialise.py [--workspaces N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from notes_read import isolated_env

from git_hermit.adapter.deploy import deploy
from git_hermit.gitio import Repo
from git_hermit.rollouts.tasks import Task
from git_hermit.rollouts.worker import RolloutJob, prepare_workspace

TARGET_MS = 5.0
ADAPTER_FILES = 30


def make_repo(path: Path) -> str:
    """The seed adapter of `git hermit init`, padded to 30 files; returns the commit."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run([sys.executable, "-m", "git_hermit", "init"], cwd=path, check=True, capture_output=True)
    adapter = path / "adapter"
    present = sum(1 for p in adapter.rglob("*") if p.is_file())
    for i in range(ADAPTER_FILES - present):
        extra = adapter / "memory" / f"note-{i:02d}.md"
        extra.parent.mkdir(exist_ok=True)
        extra.write_text(f"# note {i}\n" + "lesson learned about the benchmark\n" * 60)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "padded adapter"], cwd=path, check=True)
    count = int(subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD", "adapter/"], cwd=path, check=True,
                               capture_output=True, text=True).stdout.count("\n"))
    assert count == ADAPTER_FILES, count
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()


def per_call_ms(count: int, call) -> float:
    started = time.perf_counter()
    for i in range(count):
        call(i)
    return (time.perf_counter() - started) / count * 1000


def measure(base: Path, workspaces: int) -> tuple[float, float, float]:
    repo_path = base / "repo"
    commit = make_repo(repo_path)
    out = base / "ws"
    with Repo.discover(repo_path) as repo:
        repo.materialise(commit, "adapter", out / "warm-up")
        blob_ms = per_call_ms(workspaces, lambda i: repo.materialise(commit, "adapter", out / f"m{i}"))
    assert sum(1 for p in (out / "m0").rglob("*") if p.is_file()) == ADAPTER_FILES
    job = RolloutJob(task=Task(id="t0", prompt="What is 6 times 7?", expected="42"), attempt=1, commit=commit,
                     adapter_prefix="adapter", host="codex", agent_cfg={"backend": "command", "command": ["true"]},
                     judge_cfg={"kind": "answer"}, judge_base_dir=str(base), timeout_s=60, repo_path=str(repo_path))

    def prepare(i: int) -> None:
        root = out / f"p{i}"
        root.mkdir()
        prepare_workspace(job, root)

    full_ms = per_call_ms(workspaces, prepare)
    assert (out / "p0" / "workspace" / "task.md").is_file()
    deploy_ms = per_call_ms(workspaces, lambda i: deploy(out / f"m{i}", out / f"d{i}", "codex"))
    return blob_ms, full_ms, deploy_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workspaces", type=int, default=100)
    args = parser.parse_args()
    print(f"materialise: {args.workspaces} workspaces of a {ADAPTER_FILES}-file adapter; "
          f"reference: target {TARGET_MS:.1f} ms each")
    for label, parent in (("/dev/shm", "/dev/shm"), ("disk (" + tempfile.gettempdir() + ")", None)):
        if parent and not Path(parent).is_dir():
            print(f"  {label}: not available, skipped")
            continue
        with tempfile.TemporaryDirectory(prefix="hermit-bench-", dir=parent) as temp:
            isolated_env(Path(temp))
            blob_ms, full_ms, deploy_ms = measure(Path(temp), args.workspaces)
        print(f"  {label}")
        print(f"    Repo.materialise (open repo, blob copy)      {blob_ms:7.2f} ms   ratio {blob_ms / TARGET_MS:5.2f}x the target")
        print(f"    prepare_workspace (open + materialise + deploy) {full_ms:5.2f} ms   ratio {full_ms / TARGET_MS:5.2f}x the target")
        print(f"      of which deploy alone (incl. its cached bytecode precompile) {deploy_ms:6.2f} ms")


if __name__ == "__main__":
    main()
