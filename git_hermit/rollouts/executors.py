"""Executors behind ``concurrent.futures.Executor``: local threads (default) or Dask.

``open_executor`` yields an executor plus how to ship adapters to it: local workers read
the repository directly; Dask workers get a git bundle of the commit, scattered once per
SHA (and cached on each worker by the rollout worker).
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from git_hermit.errors import ConfigError
from git_hermit.model.rate_limit import RateLimitPolicy
from git_hermit.gitio import RefUpdate, Repo

if TYPE_CHECKING:      # the dask extra: imported when a Dask executor connects
    from dask.distributed import Client, LocalCluster


PREPARE_AHEAD = 2   # jobs in flight per agent slot: one running its agent, one preparing


class ExecutorSettings(Protocol):
    """What the executors read of config.ExecutorConfig (typed, its defaults applied, in config.py,
    a layer above this one)."""

    @property
    def kind(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def workers(self) -> int: ...
    @property
    def rate_limit(self) -> RateLimitPolicy: ...


class RolloutHandle(Protocol):
    """What running rollouts needs of an executor: a local thread pool or a Dask cluster."""

    @property
    def kind(self) -> str: ...
    @property
    def rate_limit(self) -> RateLimitPolicy: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def workers(self) -> int: ...
    def ship(self, commit: str) -> tuple[dict[str, Any], tuple[Any, ...]]: ...
    def pause(self, host: str, until: float) -> None: ...
    def interrupt(self) -> None: ...


@dataclass
class ExecutorHandle:
    executor: Executor
    kind: str
    workers: int
    ship: Callable[[str], tuple[dict[str, Any], tuple[Any, ...]]]   # commit → (job fields, extra submit args)
    _bundles: dict[str, Any] = field(default_factory=dict)
    rate_limit: RateLimitPolicy = field(default_factory=RateLimitPolicy)

    def interrupt(self) -> None:
        """Ctrl-C: end the rollouts running elsewhere (local threads' children are ended by
        ``process.kill_all`` in this process)."""

    def pause(self, host: str, until: float) -> None:
        """No agent of ``host`` starts before ``until`` (``time.time()``), even one prepared already."""
        from git_hermit.rollouts.worker import pause_host
        pause_host(host, until)


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


def _end_running_rollouts(batch: str) -> int:
    """Run on every Dask worker at Ctrl-C: end the process trees of its running rollouts, and
    refuse any process to the rest of ``batch`` (rollouts still preparing, or queued)."""
    from git_hermit.supervise.process import kill_running
    return kill_running(batch)


class DaskHandle:
    """A Dask client opened on first use: a run whose every row is reused connects to nothing."""

    kind = "dask"

    def __init__(self, repo: Repo, settings: ExecutorSettings, concurrency: int):
        self._repo, self._settings, self._concurrency = repo, settings, concurrency
        rate_limit = settings.rate_limit
        self.rate_limit = rate_limit
        self._client: Client | None = None
        self._cluster: LocalCluster | None = None
        self._executor: Executor | None = None
        self._agent_slots: int | None = None    # a remote cluster's threads are its own; each runs one agent
        self._bundles: dict[str, Any] = {}
        self._futures: list[Any] = []
        self._workers: tuple[int, float] | None = None
        self._batch = uuid.uuid4().hex          # this command's rollouts, as a Ctrl-C names them

    def _connect(self) -> Client:
        if self._client is not None:
            return self._client
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise ConfigError("executor.kind dask needs the dask extra", hint="pip install 'git-hermit[dask]'") from None
        address = self._settings.address
        if address == "local":
            workers = self._settings.workers
            self._agent_slots = max(1, self._concurrency // workers)
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=PREPARE_AHEAD * self._agent_slots,
                                         processes=True, dashboard_address=None, host="127.0.0.1")
            self._client = Client(self._cluster)
        else:
            try:
                self._client = Client(address, timeout=30)
            except OSError as exc:
                raise ConfigError(f"cannot reach the Dask scheduler at {address} ({exc})",
                                  hint="start it (`dask scheduler`) and its workers, or set executor.address") from None
        return self._client

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = _Tracked(self._connect().get_executor(), self._futures)
        return self._executor

    @property
    def workers(self) -> int:
        """The cluster's threads, asked again every few seconds (workers may join or leave)."""
        now = time.monotonic()
        if self._workers is None or now - self._workers[1] > 5:
            self._workers = (sum(self._connect().nthreads().values()) or self._concurrency, now)
        return self._workers[0]

    def ship(self, commit: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
        # a Future passed as a submit argument is resolved to the bundle's bytes on the worker
        client = self._connect()
        shipped = self._bundles.get(commit)
        # lost: every worker holding it died (SIGKILL, OOM); a rollout naming it would be cancelled,
        # so it is shipped again, under a new key (the lost one's name stays lost to the scheduler)
        if shipped is None or shipped.status in ("lost", "cancelled", "error"):
            self._bundles[commit] = client.scatter(_bundle_bytes(self._repo, commit), broadcast=True,
                                                   hash=shipped is None)
        return {"repo_path": None, "agent_slots": self._agent_slots, "batch": self._batch}, (self._bundles[commit],)

    def pause(self, host: str, until: float) -> None:
        """Every worker holds back its prepared agents of ``host`` until ``until``."""
        if self._client is not None:
            from git_hermit.rollouts.worker import pause_host
            self._client.run(pause_host, host, until, wait=False)

    def interrupt(self) -> None:
        """Cancel the queued rollouts and end the running ones' processes on every worker."""
        if self._client is None:
            return
        client, futures = self._client, list(self._futures)

        def end() -> None:
            try:
                client.cancel(futures)
                client.run(_end_running_rollouts, self._batch, wait=True)
            except Exception:      # a worker already gone has nothing left to end
                pass
        # bounded: an unreachable worker must not keep Ctrl-C from returning
        worker = threading.Thread(target=end, daemon=True)
        worker.start()
        worker.join(10)

    def close(self) -> None:
        if self._client is not None:
            client = self._client

            def drop() -> None:
                try:     # the workers' rollout directories, kept for reuse between rollouts
                    from git_hermit.supervise.scratch import drop_slots
                    client.run(drop_slots, wait=True)
                except Exception:      # a worker gone has nothing left to drop
                    pass
            # bounded, as interrupt(): an unreachable worker must not hold the command's end
            worker = threading.Thread(target=drop, daemon=True)
            worker.start()
            worker.join(10)
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()


class _Tracked(Executor):
    """The client's executor, remembering its futures so Ctrl-C can cancel them."""

    def __init__(self, inner: Executor, futures: list[Any]):
        self._inner, self._futures = inner, futures

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = self._inner.submit(fn, *args, **kwargs)
        self._futures[:] = [f for f in self._futures if not f.done()] + [future]
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._inner.shutdown(wait=wait)


@contextmanager
def open_executor(repo: Repo, settings: ExecutorSettings, concurrency: int) -> Iterator[RolloutHandle]:
    """The executor hermit.yaml's ``executor:`` block (config.ExecutorConfig) describes."""
    kind, rate_limit = settings.kind, settings.rate_limit
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
    handle = DaskHandle(repo, settings, concurrency)
    try:
        yield handle
    finally:
        handle.close()
