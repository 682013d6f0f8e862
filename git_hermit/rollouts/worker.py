"""One rollout, start to finish, as a self-contained job an executor can run anywhere.

A ``RolloutJob`` carries everything (task, commit, agent and judge config); the worker
materialises the adapter at the commit (from the local repository, or from a git bundle
shipped once per SHA and cached), deploys it for the host, runs the agent, judges, and
returns small JSON plus the trajectory and hook-log bytes. The driver writes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager

from git_hermit.errors import NO_SPACE_ERRNOS
from git_hermit.model.rollout import RolloutResult
from git_hermit.agents.agent_files import left_file
from git_hermit.agents import AgentContext, make_agent
from git_hermit.agents.hosts import RATE_LIMITED
from git_hermit.rollouts.deploy_cache import deploy_reset, reset_to_plan
from git_hermit.rollouts.judges import judge_timeout_s, make_judge
from git_hermit.rollouts.tasks import Task
from git_hermit.supervise.process import in_batch
from git_hermit.supervise.scratch import clean_stale_once, rollout_slot

if TYPE_CHECKING:
    from git_hermit.gitio import Repo

TASK_FILE = "task.md"
# Memory the acting agent itself writes while it works (continual-harness's notes): handed back
# with the trajectory when a session changed it, wherever the agent wrote it.
SESSION_MEMORY = "memory/NOTES.md"
HOOK_LOG = ".hermit-hooks/hook-calls.jsonl"
# The hook runner's per-session state (hook_runner.save_state), handed back as hook-state/<name>:
# a record of the rollout (core/records.py), so it is small and bounded here.
HOOK_STATE_DIR = ".hermit-hooks/state"
HOOK_STATE = "hook-state"
HOOK_STATE_MAX_FILES = 32
HOOK_STATE_MAX_BYTES = 64 * 1024
STDERR_TAIL_BYTES = 20_000
# A rollout that did not pass while its workspace's, home's or output's filesystem had less than this
# left failed for lack of space, not for its task: not a result (the runner stops the batch, exit 19).
DISK_FULL = "DiskFull"
LOW_SPACE_BYTES = 1024 * 1024
TRAJECTORY_LIMIT = 256 * 1024 * 1024    # what a rollout hands back of its event stream, at most
_cache_lock = threading.Lock()
# One adapter is deployed at a time: each of its ~70 file operations releases the GIL, and with
# every thread of the pool doing the same the GIL changes hands at each (thousands of futex calls
# a rollout); behind this lock the waiting threads sleep instead. The kernel work is the same.
_setup_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class RolloutJob:
    task: Task
    attempt: int
    commit: str
    adapter_prefix: str
    host: str
    agent_cfg: dict[str, Any]             # config.AgentConfig.block(): a dict, as the job crosses the Dask boundary
    judge_cfg: dict[str, Any]
    judge_base_dir: str
    timeout_s: float
    repo_path: str | None = None          # a local repository holding ``commit``; else a bundle is passed
    agent_slots: int | None = None        # agents running at once in this worker process (None: no cap)
    prices: dict[str, Any] = field(default_factory=dict)
    sandbox: Any = None                   # a sandbox.SandboxSpec (hermit.yaml's sandbox:), or None
    agent_env: dict[str, str] = field(default_factory=dict)   # agent.env + the pass_env values, resolved by the driver
    batch: str = ""                       # the driver's batch id: a Ctrl-C there ends it (process.kill_running)

    @property
    def key(self) -> str:
        return f"{self.task.id}#{self.attempt}"


@dataclass(frozen=True)
class RolloutOutput:
    result: dict[str, Any]
    files: dict[str, bytes]


_repos: dict[str, Any] = {}
_repos_lock = threading.Lock()
_gates: dict[int, threading.BoundedSemaphore] = {}


def _agent_gate(slots: int | None) -> ContextManager[object]:
    """The worker process's cap on running agents. Executors run more jobs than slots, so the
    next workspaces are prepared while agents run and an agent starts the moment a slot frees
    (without it, a wave of finishing agents queues a wave of preparations behind the GIL)."""
    if slots is None:
        return contextlib.nullcontext()
    with _repos_lock:
        return _gates.setdefault(slots, threading.BoundedSemaphore(slots))


_host_pauses: dict[str, float] = {}     # host -> wall-clock time until which none of its agents starts


HOLD_S = 30.0   # a rate-limited agent holds its host here until the driver says how long (its backoff)


def pause_host(host: str, until: float) -> None:
    """The driver's backoff for ``host``: agents of it already prepared in this process wait
    until ``until`` (``time.time()``) before they start."""
    with _repos_lock:
        _host_pauses[host] = until


def _wait_for_host(host: str) -> None:
    while True:
        with _repos_lock:
            left = _host_pauses.get(host, 0.0) - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))


def _local_repo(path: str) -> Repo:
    """One open Repo per repository per worker process: its cat-file batch reader is
    thread-safe and reused, which saves two process starts per rollout."""
    from git_hermit.gitio import Repo
    with _repos_lock:
        repo = _repos.get(path)
        if repo is None:
            repo = _repos[path] = Repo.discover(Path(path))
        return repo


_adapters: dict[tuple[str, str, str], Path] = {}
_adapter_locks: dict[tuple[str, str, str], threading.Lock] = {}


def _cached_adapter(job: RolloutJob, bundle: bytes | None) -> Path:
    """The adapter at the commit, materialised once per worker process (read-only to rollouts:
    deploy copies it into each workspace), which saves ~30 file operations a rollout."""
    key = (job.repo_path or "", job.commit, job.adapter_prefix)
    with _repos_lock:
        lock = _adapter_locks.setdefault(key, threading.Lock())
    with lock:
        path = _adapters.get(key)
        if path is not None and path.is_dir():
            return path
        from git_hermit.supervise.scratch import process_dir
        path = Path(tempfile.mkdtemp(prefix=f"adapter-{job.commit[:12]}-", dir=process_dir()))
        try:
            _adapter_source(job, path, bundle)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        _adapters[key] = path
        return path


def _adapter_source(job: RolloutJob, dest: Path, bundle: bytes | None) -> None:
    from git_hermit.gitio import open_cache_repo
    if job.repo_path is not None:
        count = _local_repo(job.repo_path).materialise(job.commit, job.adapter_prefix, dest)
    else:
        cache_dir = Path(tempfile.gettempdir()) / "git-hermit-worker-cache"
        cache_dir.mkdir(parents=True, exist_ok=True)
        # one fetch per SHA: the thread lock serialises a worker's threads, the file lock the
        # worker processes of one machine, which share this cache (and would race on the fetch)
        with _cache_lock, open(cache_dir.parent / "git-hermit-worker-cache.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            cache = open_cache_repo(cache_dir)
            if cache.rev_parse(job.commit) is None:
                bundle_file = cache.git_dir / f"incoming-{job.commit}.bundle"
                if bundle is None:
                    cache.close()
                    raise FileNotFoundError(f"no repository and no bundle for commit {job.commit[:12]}")
                bundle_file.write_bytes(bundle)
                cache.bundle_fetch(bundle_file, f"refs/hermit-bundle/{job.commit}")
                bundle_file.unlink()
        try:
            count = cache.materialise(job.commit, job.adapter_prefix, dest)
        finally:
            cache.close()
    if count == 0:
        raise FileNotFoundError(f"commit {job.commit[:12]} has no {job.adapter_prefix}/ directory")


def prepare_workspace(job: RolloutJob, root: Path, bundle: bytes | None = None) -> Path:
    """Adapter at the commit + the task's files + task.md, deployed for the host. ``root`` may
    hold an earlier rollout's workspace: it is reset to exactly what a fresh one would hold."""
    adapter = _cached_adapter(job, bundle)
    workspace = root / "workspace"
    keep = frozenset([TASK_FILE, *job.task.files])   # overwritten below: their inodes are reused
    with _setup_lock:     # not the task's files: their size is the task's (a lock would serialise big copies)
        deploy_reset(adapter, workspace, job.host, commit=job.commit, keep=keep)   # rendered once per commit and host
    for name, source in job.task.files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (workspace / TASK_FILE).write_text(job.task.prompt)
    return workspace


def _prepare_slot(root: Path) -> tuple[Path, Path]:
    """The rollout's ``out`` and ``home``, empty (a pooled slot's were emptied on release)."""
    out, home = root / "out", root / "home"
    out.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    return out, home


def _release_slot(root: Path, setup_failed: bool = False) -> None:
    """What must not outlive a rollout goes now: the private home (copied login files), the
    verifier's directory, anything else made beside the workspace. In ``out`` the files every
    agent run opens afresh (``OUT_FILES``) are emptied, not removed, so the next run reuses
    their inodes; everything else there is removed. A directory whose workspace could not be
    set up (e.g. made unwritable) raises: the slot is removed instead of reused."""
    if setup_failed:
        raise OSError(f"{root}: the workspace could not be set up")
    with os.scandir(root) as entries:
        listed = list(entries)
    for entry in listed:
        if entry.name == "workspace" and entry.is_dir(follow_symlinks=False):
            continue                  # reset by the next rollout, to that rollout's deploy
        if entry.name in ("out", "home") and entry.is_dir(follow_symlinks=False):
            _empty(Path(entry.path), truncate=entry.name == "out")
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


# Files an agent run writes into ``out`` every time, truncating (the command agent's prompt and
# stdout, a host agent's event stream, stderr): an empty one left there is overwritten, and one
# is only read when that run names it (an empty stderr reads as none).
OUT_FILES = frozenset({"prompt.md", "trajectory.txt", "trajectory.jsonl", "agent.stderr"})


def _empty(directory: Path, *, truncate: bool) -> None:
    with os.scandir(directory) as entries:
        listed = list(entries)
    for entry in listed:
        info = entry.stat(follow_symlinks=False)
        if truncate and entry.name in OUT_FILES and stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            if info.st_size:
                os.truncate(entry.path, 0)
        elif stat.S_ISDIR(info.st_mode):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def execute_rollout(job: RolloutJob, bundle: bytes | None = None) -> RolloutOutput:
    """Run one rollout in a scratch directory; never raises for the agent's or judge's failures."""
    with in_batch(job.batch):
        return _execute_rollout(job, bundle)


def _tidy_slot(root: Path, job: RolloutJob, deployed: list[Path]) -> None:
    """Fit a released slot to be parked for a later batch: its workspace holds the adapter's
    deployment alone (``out`` and ``home`` were emptied at release). ``deployed``: the adapter
    copy the workspace was deployed from, if it was."""
    if not deployed:
        raise OSError(f"{root}: no workspace was deployed there")
    reset_to_plan(deployed[0], root / "workspace", job.host, commit=job.commit)


def _execute_rollout(job: RolloutJob, bundle: bytes | None) -> RolloutOutput:
    start = time.monotonic()
    clean_stale_once()      # what a killed worker process left on this machine (once per process)
    setup_failed: list[bool] = []
    deployed: list[Path] = []
    with rollout_slot("rollout-", lambda root: _release_slot(root, bool(setup_failed)),
                      lambda root: _tidy_slot(root, job, deployed)) as root:
        out, home = _prepare_slot(root)
        base = RolloutResult(task=job.task.id, attempt=job.attempt, outcome="exception",
                             commit=job.commit, agent=job.agent_cfg["backend"])
        try:
            workspace = prepare_workspace(job, root, bundle)
            deployed.append(_cached_adapter(job, bundle))
        except Exception as exc:
            setup_failed.append(True)      # this directory is not handed to the next rollout
            kind = DISK_FULL if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS else "WorkspaceSetupError"
            result = base.with_(exception_type=kind, error=f"{type(exc).__name__}: {exc}",
                                duration_s=time.monotonic() - start)
            return RolloutOutput(result.to_dict(), {})
        agent = make_agent(job.agent_cfg)
        agent.check_available()
        ctx = AgentContext(rollout_dir=out, workspace=workspace, home=home, prompt=job.task.prompt,
                           timeout_s=job.timeout_s, attempt=job.attempt, task_id=job.task.id, host=job.host,
                           sandbox=job.sandbox, extra_env=job.agent_env)
        with _agent_gate(job.agent_slots):
            _wait_for_host(job.host)
            run = agent.run(ctx)
            if run.exception_type == RATE_LIMITED:
                # before the slot frees: the next agent must not start until the driver's backoff
                with _repos_lock:
                    _host_pauses[job.host] = max(_host_pauses.get(job.host, 0.0), time.time() + HOLD_S)
        result = base.with_(usage=run.usage, final_answer=run.final_answer, duration_s=run.duration_s,
                            timed_out=run.timed_out, error=run.error, trajectory=run.trajectory)
        # a timeout is stored as the exception it is; `timeout_as` scores it when the results are read
        if run.timed_out or run.exception_type is not None:
            result = result.with_(outcome="exception", exception_type=run.exception_type)
        else:
            judge = make_judge(job.judge_cfg, base_dir=Path(job.judge_base_dir))
            verdict = judge.judge(job.task, workspace, run.final_answer,
                                  timeout_s=judge_timeout_s(job.judge_cfg),
                                  verifier_dir=root / "verifier")
            result = verdict.apply(result)
        full = _out_of_space(workspace, home, out) if result.outcome != "pass" else None
        if full is not None:
            result = result.with_(outcome="exception", exception_type=DISK_FULL, error=full)
        # the task statement stays with the rollout: learners read it with the trajectory
        files: dict[str, bytes] = {TASK_FILE: job.task.prompt.encode("utf-8")}
        # What the agent left is read without following a link (agent_files): a link or special
        # file in its workspace, its home or beside them is refused, and the refusal recorded.
        refused: list[str] = []

        def take(root: Path, relative: str, name: str, limit: int = TRAJECTORY_LIMIT) -> bytes | None:
            found = left_file(root, relative, limit=limit)
            if found.refused:
                refused.append(found.refused)
            if found.data is not None:
                files[name] = found.data
            return found.data

        if run.trajectory:
            take(out, run.trajectory, run.trajectory)
        if take(workspace, HOOK_LOG, "hook-calls.jsonl") is not None:
            result = result.with_(hook_log="hook-calls.jsonl")
        files.update(_hook_state(workspace))
        notes = _session_memory(_cached_adapter(job, bundle), workspace, refused)
        if notes is not None:
            files[SESSION_MEMORY] = notes
        stderr = left_file(out, ctx.stderr_path.name)
        if stderr.refused:
            refused.append(stderr.refused)
        if stderr.data:
            files["agent.stderr"] = stderr.data[-STDERR_TAIL_BYTES:]
        if refused:
            why = "refused " + "; refused ".join(dict.fromkeys(refused))
            result = result.with_(error=f"{result.error}; {why}" if result.error else why)
        return RolloutOutput(result.to_dict(), files)


def _hook_state(workspace: Path) -> dict[str, bytes]:
    """The hook middleware's state files, as ``hook-state/<name>``: regular files only (a link the
    agent planted is never followed), the first HOOK_STATE_MAX_FILES by name, each cut to
    HOOK_STATE_MAX_BYTES (the runner redacts them like every rollout file)."""
    folder = workspace / HOOK_STATE_DIR
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return {}
        names = sorted(os.listdir(folder))
    except OSError:
        return {}
    found: dict[str, bytes] = {}
    for name in names:
        if len(found) >= HOOK_STATE_MAX_FILES:
            break
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                found[f"{HOOK_STATE}/{name}"] = handle.read(HOOK_STATE_MAX_BYTES)
    return found


def _out_of_space(*paths: Path) -> str | None:
    """What to say when one of ``paths`` is on a filesystem with (almost) no space or inode left."""
    for path in paths:
        try:
            fs = os.statvfs(path)
        except OSError:
            continue
        free = (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) * fs.f_frsize   # root writes into the reserve
        inodes = fs.f_ffree if fs.f_files else None
        if free < LOW_SPACE_BYTES or inodes == 0:
            what = f"{free:,} bytes free" if free < LOW_SPACE_BYTES else "no inode free"
            return f"the rollout ended with {what} on the device holding {path}: it failed for lack of space"
    return None


def _session_memory(adapter: Path, workspace: Path, refused: list[str]) -> bytes | None:
    """The session's memory notes if it changed them (at the workspace root or in the deployed
    copy); a link or special file there is refused (its reason added to ``refused``)."""
    original = adapter / SESSION_MEMORY
    if not original.is_file():
        return None
    before = original.read_bytes()
    for relative in (SESSION_MEMORY, f".hermit-adapter/{SESSION_MEMORY}"):
        found = left_file(workspace, relative)
        if found.refused:
            refused.append(found.refused)
        elif found.data is not None and found.data != before:
            return found.data
    return None
