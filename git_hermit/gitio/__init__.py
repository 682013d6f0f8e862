"""gitio: the only code in git-hermit that runs git.

Repository discovery, the persistent ``cat-file --batch`` reader, the one subprocess wrapper,
CAS ref transactions, batched notes, trailers, plumbing commits and the per-run lock.
"""

from typing import TYPE_CHECKING, Any

from ._process import set_debug
from .quarantine import discard_unpublished
from .notes import NOTES_REFS, NotesStore, configure_notes_rewrite, merge_notes, note_entries, notes_ref
from .repo import ZERO_SHA, CommitInfo, FileChange, RefUpdate, Repo, TreeEntry, files_in_directory, git_version, init_repository, open_cache_repo
from .trailers import (
    HERMIT_CHANGE, HERMIT_EVOLVER, HERMIT_MANIFEST, HERMIT_PREDICTS_FIX, HERMIT_REVERTS, HERMIT_RISK,
    HERMIT_REMOVES_LINES_OF, HERMIT_RUN, HERMIT_STEP, HERMIT_VERDICT, TRAILER_KEYS, format_message,
    normalise_trailer_value,
    parse_trailers, trailer_values,
)

__all__ = [
    "ZERO_SHA", "files_in_directory", "git_version", "init_repository", "open_cache_repo", "TreeEntry", "FileChange", "CommitInfo", "RefUpdate", "Repo", "set_debug",
    "NOTES_REFS", "NotesStore", "configure_notes_rewrite", "notes_ref", "merge_notes", "note_entries",
    "PushedRef", "fetch_tracking", "pack_size", "push_atomic", "remote_url", "tracking_prefix", "RunLock",
    "check_ref_locks",
    "KeepAlive", "drop_stale_keepalive", "discard_unpublished",
    "TRAILER_KEYS", "HERMIT_RUN", "HERMIT_STEP", "HERMIT_EVOLVER", "HERMIT_CHANGE", "HERMIT_PREDICTS_FIX",
    "HERMIT_RISK", "HERMIT_MANIFEST", "HERMIT_REVERTS", "HERMIT_VERDICT", "HERMIT_REMOVES_LINES_OF",
    "format_message", "parse_trailers", "normalise_trailer_value", "trailer_values",
]

# The lock, keep-alive and remote modules load when first named (PEP 562): a read command such
# as `log` needs none of them, and the lock alone pulls in socket, secrets and datetime.
_LAZY = {
    "KeepAlive": ("keep", "KeepAlive"), "drop_stale_keepalive": ("keep", "drop_stale"),
    "RunLock": ("lock", "RunLock"), "check_ref_locks": ("lock", "check_ref_locks"),
    "PushedRef": ("remote", "PushedRef"), "fetch_tracking": ("remote", "fetch_tracking"),
    "push_atomic": ("remote", "push_atomic"), "remote_url": ("remote", "remote_url"),
    "pack_size": ("remote", "pack_size"),
    "tracking_prefix": ("remote", "tracking_prefix"),
}

if TYPE_CHECKING:
    from .keep import KeepAlive, drop_stale as drop_stale_keepalive
    from .lock import RunLock, check_ref_locks
    from .remote import PushedRef, fetch_tracking, pack_size, push_atomic, remote_url, tracking_prefix


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value
