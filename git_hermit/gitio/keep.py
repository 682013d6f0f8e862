"""Temporary refs that keep a command's unpublished objects reachable until it publishes them.

A step writes its commits and notes trees before the one ref transaction that publishes them;
until then nothing references them, and a ``git gc --prune=now`` run meanwhile would delete
them (the transaction would then point refs at missing objects). ``KeepAlive`` points refs
under ``refs/hermit-tmp/`` at them as soon as they exist and hands back the deletions that go
into the publishing transaction itself, so they stay reachable up to the moment the real refs do.
"""

from __future__ import annotations

import contextlib

from ..errors import HermitError
from .repo import RefUpdate, Repo

TMP_PREFIX = "refs/hermit-tmp/"


class KeepAlive:
    """Keep-alive refs ``<base>/<name>`` for one publication (e.g. ``refs/hermit-tmp/<run>/step-0003``)."""

    def __init__(self, repo: Repo, base: str):
        if not base.startswith(TMP_PREFIX):
            raise ValueError(f"keep-alive refs live under {TMP_PREFIX}, not {base}")
        self.repo = repo
        self.base = base.rstrip("/")
        self.held: dict[str, str] = {}          # full ref → object it points at

    def hold(self, objects: dict[str, str]) -> None:
        """Point ``<base>/<name>`` at each object (one ref transaction, no old-value check: ours alone)."""
        wanted = {f"{self.base}/{name}": sha for name, sha in objects.items()
                  if self.held.get(f"{self.base}/{name}") != sha}
        if not wanted:
            return
        self.repo.update_refs([RefUpdate(ref, sha, None) for ref, sha in wanted.items()],
                              message="git-hermit: keep unpublished objects")
        self.held.update(wanted)

    def releases(self) -> list[RefUpdate]:
        """Deletions of every held ref, to add to the publishing transaction."""
        return [RefUpdate(ref, None, sha) for ref, sha in self.held.items()]

    def published(self) -> None:
        """The publishing transaction deleted the refs."""
        self.held.clear()

    def drop(self) -> None:
        """Best effort after a failed publication: the objects stay unreferenced, as before."""
        if self.held:
            with contextlib.suppress(HermitError):
                self.repo.update_refs(self.releases(), message="git-hermit: drop keep-alive refs")
            self.held.clear()


def drop_stale(repo: Repo, base: str) -> None:
    """Delete keep-alive refs under ``base`` a killed command left behind (call under the run lock)."""
    stale = repo.list_refs(base.rstrip("/") + "/")
    if stale:
        repo.update_refs([RefUpdate(ref, None, sha) for ref, sha in stale.items()],
                         message="git-hermit: drop stale keep-alive refs")
