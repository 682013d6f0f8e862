"""Executors behind ``concurrent.futures.Executor``: local threads (default) or Dask.

``open_executor`` yields an executor plus how to ship adapters to it: local workers read
the repository directly; Dask workers get a git bundle of the commit, scattered once per
SHA (and cached on each worker by the rollout worker).
"""

from __future__ import annotations

import tempfile
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from git_hermit.errors import ConfigError
from git_hermit.gitio import RefUpdate, Repo


PREPARE_AHEAD = 2   # jobs in flight per agent slot: one running its agent, one preparing


@dataclass
class ExecutorHandle:
    executor: Executor
    kind: str
    workers: int
    ship: Callable[[str], tuple[dict[str, Any], tuple[Any, ...]]]   # commit → (job fields, extra submit args)
    _bundles: dict[str, Any] = field(default_factory=dict)


def _bundle_bytes(repo: Repo, commit: str) -> bytes:
    ref = f"refs/hermit-bundle/{commit}"
    repo.update_refs([RefUpdate(ref, commit, None)], message="git-hermit bundle")
    try:
        with tempfile.TemporaryDirectory(prefix="hermit-bundle-") as tmp:
            path = Path(tmp) / "adapter.bundle"
            repo.bundle_create(path, [ref])
            return path.read_bytes()
    finally:
        repo.update_refs([RefUpdate(ref, None, commit)], message="git-hermit bundle done")


@contextmanager
def open_executor(repo: Repo, executor_cfg: dict[str, Any], concurrency: int) -> Iterator[ExecutorHandle]:
    kind = (executor_cfg or {}).get("kind", "local")
    if kind == "local":
        # twice the threads, half of them preparing the next workspaces; agents capped at concurrency
        pool = ThreadPoolExecutor(max_workers=PREPARE_AHEAD * concurrency, thread_name_prefix="hermit-rollout")
        try:
            yield ExecutorHandle(pool, "local", PREPARE_AHEAD * concurrency,
                                 lambda commit: ({"repo_path": str(repo.work_tree), "agent_slots": concurrency}, ()))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    if kind != "dask":
        raise ConfigError(f"executor.kind {kind!r} is not supported", hint="use local or dask")
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("executor.kind dask needs the dask extra", hint="pip install 'git-hermit[dask]'") from None
    address = executor_cfg.get("address", "local")
    cluster = None
    agent_slots = None   # a remote cluster's threads are its own; each runs one agent
    if address == "local":
        workers = int(executor_cfg.get("workers", 2))
        agent_slots = max(1, concurrency // workers)
        cluster = LocalCluster(n_workers=workers, threads_per_worker=PREPARE_AHEAD * agent_slots,
                               processes=True, dashboard_address=None, host="127.0.0.1")
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        handle = ExecutorHandle(client.get_executor(), "dask",
                                sum(client.nthreads().values()) or concurrency, lambda commit: ({}, ()))

        def ship(commit: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
            # a Future passed as a submit argument is resolved to the bundle's bytes on the worker
            if commit not in handle._bundles:
                handle._bundles[commit] = client.scatter(_bundle_bytes(repo, commit), broadcast=True)
            return {"repo_path": None, "agent_slots": agent_slots}, (handle._bundles[commit],)

        handle.ship = ship
        yield handle
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
