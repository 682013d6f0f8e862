"""The one atomic file writer: a temporary file beside the target, renamed over it, so a reader
(or a killed process) sees the old file or the new one, never half of either (DESIGN §3)."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (its directory made first). ``durable`` syncs the file
    to disk before the rename (a record that must survive a power cut, not a cache). A failure
    leaves the old file and no temporary one, and raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # named by process and thread: two writers of the same path never share a temporary file (a
    # leftover of a killed process is overwritten); open() keeps the umask's mode, as a plain write would
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_native_id()}.tmp")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
