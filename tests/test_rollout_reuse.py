"""Rollouts reuse their scratch directory (issue 15.2): a step makes no new file in a rollout's
scratch once its directories exist, and a reused workspace holds exactly what a fresh one
would, whatever the previous rollout's agent did to it.

Each test runs `git hermit rollout` on a real repository with a ``command`` agent that records
what it finds (path, kind, mode, bytes, inode) under its rollout directory before it acts.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tracemalloc
from pathlib import Path

import yaml

from git_hermit.rollouts.executors import PREPARE_AHEAD
from git_hermit.rollouts.tasks import Task
from git_hermit.rollouts.worker import RolloutJob, execute_rollout
from git_hermit.supervise.scratch import drop_slots
from support.cli_helpers import hermit
from conftest import git
from support.rollouts_e2e_helpers import commit_candidate, make_project, result_files
from support.rollout_reuse_helpers import rows_of_k  # noqa: F401

# The agent snapshots its rollout directory (the workspace's parent: workspace, out, home).
SNAPSHOT = '''
import hashlib, json, stat
root = pathlib.Path(workspace).parent
seen = {}
for path in sorted(root.rglob("*")):
    info = path.lstat()
    kind = "link" if stat.S_ISLNK(info.st_mode) else "dir" if stat.S_ISDIR(info.st_mode) else "file"
    # files naming the workspace differ by its path only (a fresh deploy renders them so too)
    content = path.read_bytes().replace(str(root).encode(), b"<root>") if kind == "file" else None
    if path.name == ".hermit-deploy.json":      # its hashes are of those files, path and all
        record = json.loads(content)
        record["files"] = sorted(record["files"])
        content = json.dumps(record, sort_keys=True).encode()
    digest = hashlib.sha256(content).hexdigest() if content is not None else None
    seen[path.relative_to(root).as_posix()] = [kind, stat.S_IMODE(info.st_mode), digest, info.st_ino]
with open(LOG.parent / "snapshots.jsonl", "a") as handle:
    handle.write(json.dumps({"row": f"{task_id}#{attempt}", "root": str(root), "seen": seen}) + "\\n")
'''

# ... then does what an agent may do to its workspace, private home and output directory.
VANDAL = '''
ws = pathlib.Path(workspace)
outside = LOG.parent / "outside.txt"
(ws / "AGENTS.md").write_text("rewritten by " + task_id)           # a deployed file changed
for path in sorted(ws.rglob("*.py")):                               # a deployed file removed
    path.unlink()
    break
hooks = ws / ".codex" / "hooks.json"                                  # ... one made a symlink out
hooks.unlink()
hooks.symlink_to(outside)
(ws / ".codex").chmod(0o700)                                          # a deployed directory's mode
if int(task_id[1:]) % 2 == 0:             # read as the rollout's answer and its hook log: were they
    (ws / "answer.txt").write_text(task_id[1:])               # left behind, an odd task's rollout
    (ws / ".hermit-hooks").mkdir()                            # would fail and store a hook log
    (ws / ".hermit-hooks" / "hook-calls.jsonl").write_text("{}\\n")
(ws / "build" / "deep").mkdir(parents=True)
(ws / "build" / "deep" / "junk.bin").write_bytes(b"x" * 1000)
(pathlib.Path(os.environ["HOME"]) / ".secret-login").write_text("token")
(pathlib.Path(prompt_file).parent / "extra.log").write_text("left over")
print(task_id[1:])
'''


def _snapshots(log: Path) -> list[dict]:
    return [json.loads(line) for line in (log.parent / "snapshots.jsonl").read_text().splitlines()]


def _without_inodes(seen: dict, row: str) -> dict:
    # the task statement differs by task; bytecode keeps the path of the workspace the plan
    # was captured in (the deploy cache's, as before: importlib uses the source's path)
    return {rel: entry[:2] + ([None] if rel in ("workspace/task.md", "out/prompt.md") or rel.endswith(".pyc")
                              else entry[2:3])
            for rel, entry in seen.items() if not rel.startswith("out/trajectory")}


def test_a_reused_workspace_holds_what_a_fresh_one_does_whatever_the_last_agent_did(repo):
    log = make_project(repo, SNAPSHOT + VANDAL, n_tasks=6, k=2, trainer={"concurrency": 1})
    outside = log.parent / "outside.txt"
    outside.write_text("not the adapter's")
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["scores"]["pass_at_1"] == 1.0       # no rollout read the last one's answer.txt
    snapshots = _snapshots(log)
    assert len(snapshots) == 12
    # at most one directory per job in flight: the others were reused
    assert len({s["root"] for s in snapshots}) <= PREPARE_AHEAD * 1 < len(snapshots)
    first = _without_inodes(snapshots[0]["seen"], snapshots[0]["row"])
    assert "workspace/AGENTS.md" in first and "workspace/.codex/hooks.json" in first
    for snap in snapshots[1:]:
        assert _without_inodes(snap["seen"], snap["row"]) == first, snap["row"]
    assert outside.read_text() == "not the adapter's"    # reset never writes through a symlink
    for result in result_files(repo):
        stored = sorted(p.name for p in result.parent.iterdir())
        hook_log = ["hook-calls.jsonl"] if int(result.parent.parent.name[1:]) % 2 == 0 else []
        assert stored == sorted(hook_log + ["result.json", "trajectory.txt"]), result


def test_a_step_makes_no_new_file_in_a_rollouts_scratch_once_its_directories_exist(repo):
    """Every entry of a rollout's directory (~40: the deployed adapter, its bytecode, task.md,
    out/, home/) was a new inode per rollout, and each one made and removed is what costs on
    ext4 without a journal. Now the inodes seen across all rollouts are those of the reused
    directories: at most one set per job in flight (PREPARE_AHEAD x concurrency), whatever the
    number of rollouts; before, it grew by a set per rollout."""
    concurrency = 2
    log = make_project(repo, SNAPSHOT + "print(task_id[1:])\n", n_tasks=8, k=2,
                       trainer={"concurrency": concurrency})
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    snapshots = _snapshots(log)
    assert len(snapshots) == 16
    per_rollout = max(len(s["seen"]) for s in snapshots)
    assert per_rollout >= 20                     # the deployed adapter is in it
    inodes = {(s["root"], entry[3]) for s in snapshots for entry in s["seen"].values()}
    in_flight = PREPARE_AHEAD * concurrency
    assert len({s["root"] for s in snapshots}) <= in_flight
    assert len(inodes) <= in_flight * per_rollout, (len(inodes), per_rollout)
    # and the scratch is gone when the command ends
    roots = {Path(s["root"]) for s in snapshots}
    assert not any(root.exists() for root in roots)
    assert os.path.isdir(repo)


def _traced_peak_of_rollout(repo: Path, k: int) -> int:
    """tracemalloc's peak, in bytes, over `git hermit rollout` on 8 tasks x ``k`` (in process)."""
    rows_of_k(repo, k)      # a new commit: every rollout runs
    gc.collect()
    tracemalloc.start()
    try:
        r = hermit(repo, "rollout", "--split", "train")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.code == 0, r.err
    return peak


def test_a_steps_memory_grows_by_at_most_a_small_record_per_rollout(repo):
    """Memory flat in the number of rollouts: the same tasks with 4x the attempts (48 -> 192
    rollouts). What a rollout may leave in memory is its slotted result record (the evolvers
    read them), its job and row, its ledger entry and its score: ~0.7 KB measured at the peak.
    Before, each result and job also held its own copies (the judge config, usage, the commit)
    and the ledger file was built as one document: ~3.6 KB. Bound: 1.5 KB a rollout."""
    make_project(repo, "print(task_id[1:])\n", n_tasks=8, k=6, agent_command=["echo", "1"])
    _traced_peak_of_rollout(repo, 2)          # imports, caches, the deploy plan: not per rollout
    # the least of two runs: a run's peak may also hold garbage the collector had not reached yet
    small = min(_traced_peak_of_rollout(repo, 6) for _ in range(2))
    large = min(_traced_peak_of_rollout(repo, 24) for _ in range(2))
    per_rollout = (large - small) / (8 * 24 - 8 * 6)
    assert per_rollout <= 1536, f"{per_rollout:.0f} bytes more at the peak per extra rollout"


def test_a_directory_whose_workspace_could_not_be_set_up_is_not_handed_on(repo, tmp_path):
    """A rollout whose workspace setup failed (here a task file that is gone; a directory the
    agent made unwritable alike) has its directory removed, not reused by the next rollout."""
    assert hermit(repo, "init").code == 0
    commit = git(repo, "rev-parse", "HEAD").strip()
    seen = tmp_path / "seen.txt"
    agent = tmp_path / "agent.py"
    agent.write_text("import pathlib, sys\n"
                     f"open({str(seen)!r}, 'a').write(str(pathlib.Path(sys.argv[1]).parent) + '\\n')\n"
                     "print(1)\n")

    def job(files: dict[str, Path]) -> RolloutJob:
        return RolloutJob(task=Task(id="t0", prompt="p", expected="1", files=files), attempt=1, commit=commit,
                          adapter_prefix="adapter", host="codex",
                          agent_cfg={"backend": "command", "command": [sys.executable, str(agent), "{workspace}"]},
                          judge_cfg={"kind": "answer", "mode": "exact"}, judge_base_dir=str(tmp_path),
                          timeout_s=30, repo_path=str(repo))

    try:
        assert execute_rollout(job({})).result["outcome"] == "pass"
        first = Path(seen.read_text().split()[0])
        assert first.is_dir()                                    # kept for the next rollout
        failed = execute_rollout(job({"data.txt": tmp_path / "gone.txt"})).result
        assert failed["exception_type"] == "WorkspaceSetupError"
        assert not first.exists()
        assert execute_rollout(job({})).result["outcome"] == "pass"
        second = Path(seen.read_text().split()[1])
        assert second != first and second.is_dir()
    finally:
        drop_slots()
    assert not second.exists()


def test_a_tasks_statement_is_kept_once_beside_its_attempts_not_in_each(repo):
    """Each file made in the run directory is a new inode (the cost on ext4 without a journal):
    a task's statement is the same for all its attempts, so it is kept once, in the task's
    directory, and an attempt's directory holds only what that attempt made."""
    make_project(repo, "print(task_id[1:])\n", n_tasks=3, k=3)
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    results = result_files(repo)
    assert len(results) == 9
    for result in results:
        assert sorted(p.name for p in result.parent.iterdir()) == ["result.json", "trajectory.txt"], result
    tasks = {result.parent.parent for result in results}
    assert len(tasks) == 3
    for task in tasks:
        assert sorted(p.name for p in task.iterdir()) == ["1", "2", "3", "task.md"]
        assert (task / "task.md").read_text() == f"What is {task.name[1:]}?"


def test_a_command_running_two_batches_makes_its_rollout_directories_once(repo):
    """`eval --baseline` runs the candidate's rollouts, then the baseline's: the second batch
    reuses the first one's directories (each made costs ~40 inodes), and none outlives the command."""
    concurrency = 1
    log = make_project(repo, SNAPSHOT + "print(task_id[1:])\n", n_tasks=4, k=1,
                       rows={"train": ["t0#1"], "test": [f"t{i}#1" for i in range(4)]},
                       trainer={"concurrency": concurrency})
    baseline = commit_candidate(repo, "a candidate\n")
    r = hermit(repo, "eval", "HEAD", "--baseline", baseline, "--split", "test")
    assert r.code == 0, r.err
    snapshots = _snapshots(log)
    assert len(snapshots) == 8
    roots = {s["root"] for s in snapshots}
    assert len(roots) <= PREPARE_AHEAD * concurrency, roots      # not a set per batch
    assert not any(Path(root).exists() for root in roots)


def test_the_steps_of_a_train_reuse_the_first_steps_rollout_directories(repo, monkeypatch):
    """Each step's batch of rollouts made its directories again (~40 inodes each); within one
    `train` they are made (or taken from the parked ones) for the first batch only (counted in
    process: run_cli)."""
    from support.cli_helpers import run_cli
    from git_hermit.supervise import scratch
    from support.step_support import change, env_for, make_run, memory_lines, plan
    made: list[str] = []       # made, or taken from those an earlier command parked
    real, take = scratch.scratch_dir, scratch._take_parked

    def counting(prefix: str) -> Path:
        path = real(prefix)
        if prefix == "rollout-":
            made.append(str(path))
        return path

    def taking() -> Path | None:
        path = take()
        if path is not None:
            made.append(str(path))
        return path
    monkeypatch.setattr(scratch, "scratch_dir", counting)
    monkeypatch.setattr(scratch, "_take_parked", taking)
    answers = {"t1": "4", "t2": "7"}
    control = make_run(repo, answers, k=2, allow_early_stop=False, concurrency=1)
    plan(control, 1, append={"MEMORY.md": memory_lines(answers)}, changes=[change("chg-1", ["MEMORY.md"])])
    r = run_cli(repo, "train", "--epochs", "2", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert len(list((repo / ".hermit" / "runs").glob("*/evals/*/rollouts/*/*/result.json"))) >= 8   # two batches
    assert 0 < len(made) <= PREPARE_AHEAD * 1, made
    assert not any(Path(path).exists() for path in made)


LEFTOVERS = '''
(pathlib.Path(workspace) / "left-by-the-agent.txt").write_text("work of " + task_id)
(pathlib.Path(os.environ["HOME"]) / ".login-copy").write_text("token")
print(task_id[1:])
'''


def test_a_later_command_takes_the_rollout_directories_an_earlier_one_parked_tidied(repo, tmp_path):
    """A command's rollout directories outlive it, parked: the next command (a fresh process)
    runs its rollouts in them (the same directories) instead of making ~40 files each while scanning
    the ~40 each just freed. Parked, a directory holds nothing of its last task or agent: the
    workspace is the adapter's deployment alone, home is empty, out's files are empty."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}        # this test's own pool: other tests park directories too
    log = make_project(repo, SNAPSHOT + LEFTOVERS, n_tasks=4, k=1, trainer={"concurrency": 1})
    r = hermit(repo, "rollout", env=env, subprocess=True)
    assert r.code == 0, r.err
    parked = tmp / f"git-hermit-{os.getuid()}" / "parked"
    slots = sorted(parked.iterdir())
    assert 0 < len(slots) <= PREPARE_AHEAD * 1
    for slot in slots:
        workspace = slot / "workspace"
        assert (workspace / "AGENTS.md").is_file() and (workspace / ".hermit-deploy.json").is_file()
        assert not (workspace / "task.md").exists() and not (workspace / "left-by-the-agent.txt").exists()
        assert list((slot / "home").iterdir()) == []
        assert all(f.stat().st_size == 0 for f in (slot / "out").iterdir())
        assert oct(slot.stat().st_mode & 0o777) == "0o700"
    first = _snapshots(log)
    git(repo, "commit", "-q", "--allow-empty", "-m", "again")     # every rollout runs again, of HEAD
    r = hermit(repo, "rollout", "HEAD", env=env, subprocess=True)
    assert r.code == 0, r.err
    second = _snapshots(log)[len(first):]
    assert len(first) == len(second) == 4
    # the parked directories (a rename keeps their names), not new ones
    assert {Path(s["root"]).name for s in second} <= {slot.name for slot in slots}
    # and their workspaces' inodes, but for the one whose rollout captured this process's deploy
    # plan: a process holds none yet, so it deploys that workspace afresh once
    workspaces = {s["seen"]["workspace"][3] for s in first}
    assert len({s["seen"]["workspace"][3] for s in second} - workspaces) <= 1
    for snap in second:            # and reset: nothing of the last rollout, as in a fresh one
        assert "workspace/left-by-the-agent.txt" not in snap["seen"] and "home/.login-copy" not in snap["seen"]


def _take_all(tmpdir: str) -> list[str]:
    os.environ["TMPDIR"] = tmpdir
    from git_hermit.supervise import scratch
    taken = []
    while (path := scratch._take_parked()) is not None:
        taken.append(path.name)
    return taken


def test_two_processes_never_take_the_same_parked_directory(tmp_path):
    import multiprocessing
    parked = tmp_path / f"git-hermit-{os.getuid()}" / "parked"
    for i in range(40):
        (parked / f"rollout-{i:02d}" / "workspace").mkdir(parents=True)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        taken = pool.map(_take_all, [str(tmp_path)] * 2)
    assert sorted(taken[0] + taken[1]) == [f"rollout-{i:02d}" for i in range(40)]
    assert not set(taken[0]) & set(taken[1])


def test_parked_directories_unused_for_a_day_are_removed(tmp_path, monkeypatch):
    import tempfile
    import time
    from git_hermit.supervise import scratch
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    parked = tmp_path / f"git-hermit-{os.getuid()}" / "parked"
    old, recent = parked / "rollout-old", parked / "rollout-recent"
    for path in (old, recent):
        (path / "workspace").mkdir(parents=True)
    day_ago = time.time() - scratch.PARKED_MAX_AGE_S - 60
    os.utime(old, (day_ago, day_ago))
    assert old in scratch.clean_stale()
    assert not old.exists() and recent.is_dir()


def test_directories_kept_between_a_commands_batches_hold_nothing_of_the_last_task(repo, tmp_path, monkeypatch):
    """Inside ``slots_kept`` (``train`` between its steps, while the learners run) a batch's
    directories stay in the process for the next batch, tidied as parked ones are: the task's
    files and what the agent left are gone, the adapter's deployment stays (the same inodes).
    When the block ends they are parked, not removed."""
    import tempfile
    from git_hermit.supervise.scratch import PARKED, end_batch, scratch_root, slots_kept
    monkeypatch.setenv("TMPDIR", str(tmp_path))         # this test's own pool of parked directories
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert hermit(repo, "init").code == 0
    commit = git(repo, "rev-parse", "HEAD").strip()
    data = tmp_path / "data.txt"
    data.write_text("the task's own file\n")
    seen = tmp_path / "seen.txt"
    agent = tmp_path / "agent.py"
    agent.write_text("import pathlib, sys\nws = pathlib.Path(sys.argv[1])\n"
                     f"open({str(seen)!r}, 'a').write(str(ws) + '\\n')\n"
                     "(ws / 'left-by-the-agent.txt').write_text('x')\nprint(1)\n")
    job = RolloutJob(task=Task(id="t0", prompt="p", expected="1", files={"data.txt": data}), attempt=1, commit=commit,
                     adapter_prefix="adapter", host="codex",
                     agent_cfg={"backend": "command", "command": [sys.executable, str(agent), "{workspace}"]},
                     judge_cfg={"kind": "answer", "mode": "exact"}, judge_base_dir=str(tmp_path),
                     timeout_s=30, repo_path=str(repo))
    with slots_kept():
        assert execute_rollout(job).result["outcome"] == "pass"
        workspace = Path(seen.read_text().split()[0])
        deployed = (workspace / "AGENTS.md").stat().st_ino
        end_batch()
        assert workspace.is_dir() and (workspace / "AGENTS.md").stat().st_ino == deployed
        left = {p.name for p in workspace.iterdir()}
        assert not left & {"task.md", "data.txt", "left-by-the-agent.txt"}, left
        assert execute_rollout(job).result["outcome"] == "pass"
        assert Path(seen.read_text().split()[1]) == workspace       # kept for the next batch
        end_batch()                                                 # as each batch ends
    parked = scratch_root() / PARKED / workspace.parent.name
    assert (parked / "workspace" / "AGENTS.md").stat().st_ino == deployed
