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


@dataclass(frozen=True)
class RateLimitPolicy:
    """``executor.rate_limit``: how often a rate-limited rollout is rerun, and the host's backoff
    (``backoff_s`` doubling per consecutive rate limit up to ``max_backoff_s``, with jitter)."""

    retries: int = 5
    backoff_s: float = 5.0
    max_backoff_s: float = 120.0

    @classmethod
    def from_config(cls, cfg: Any) -> "RateLimitPolicy":
        if cfg is None:
            return cls()
        if not isinstance(cfg, dict) or set(cfg) - {"retries", "backoff_s", "max_backoff_s"}:
            raise ConfigError(f"executor.rate_limit {cfg!r} is not valid",
                              hint="use {retries: 5, backoff_s: 5, max_backoff_s: 120}")
        try:
            policy = cls(**{key: type(getattr(cls, key))(value) for key, value in cfg.items()})
        except (TypeError, ValueError):
            raise ConfigError(f"executor.rate_limit {cfg!r} is not valid",
                              hint="retries is a count, backoff_s and max_backoff_s are seconds") from None
        if policy.retries < 0 or policy.backoff_s < 0 or policy.max_backoff_s < policy.backoff_s:
            raise ConfigError(f"executor.rate_limit {cfg!r} is not valid",
                              hint="retries >= 0 and 0 <= backoff_s <= max_backoff_s")
        return policy

    def delay_s(self, consecutive: int, rng: Callable[[], float]) -> float:
        """The wait after the ``consecutive``-th rate limit in a row: exponential, "equal jitter"
        (half fixed, half random) so workers that were limited together do not return together."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** max(0, consecutive - 1))
        return ceiling / 2 + rng() * ceiling / 2


@dataclass
class ExecutorHandle:
    executor: Executor
    kind: str
    workers: int
    ship: Callable[[str], tuple[dict[str, Any], tuple[Any, ...]]]   # commit → (job fields, extra submit args)
    _bundles: dict[str, Any] = field(default_factory=dict)
    rate_limit: RateLimitPolicy = field(default_factory=RateLimitPolicy)


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
    rate_limit = RateLimitPolicy.from_config((executor_cfg or {}).get("rate_limit"))
    if kind == "local":
        # twice the threads, half of them preparing the next workspaces; agents capped at concurrency
        pool = ThreadPoolExecutor(max_workers=PREPARE_AHEAD * concurrency, thread_name_prefix="hermit-rollout")
        try:
            yield ExecutorHandle(pool, "local", PREPARE_AHEAD * concurrency,
                                 lambda commit: ({"repo_path": str(repo.work_tree), "agent_slots": concurrency}, ()),
                                 rate_limit=rate_limit)
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
                                sum(client.nthreads().values()) or concurrency, lambda commit: ({}, ()),
                                rate_limit=rate_limit)

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
