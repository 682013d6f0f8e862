"""Checks remembered by content: ``<git dir>/hermit/cache/<name>.json`` maps a key naming what was
checked (a config file's text, a note's blob id) to what the check found valid.

A read command (`log`) then skips parsing YAML and validating schemas it has done before; a key
names the content, and ``format`` names the checks (git-hermit's version and the schemas), so an
entry never goes stale — a changed file or schema is simply checked again. Best effort: a missing,
broken or read-only cache only means checking again.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def load(path: Path, format: str) -> dict[str, Any]:
    """The entries kept at ``path`` under ``format`` ({} when absent, broken or of another format)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != format or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def save(path: Path, format: str, entries: dict[str, Any]) -> None:
    """Replace the file atomically (concurrent readers see the old or the new one); errors are ignored."""
    import tempfile   # only when writing: a warm read writes nothing
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as handle:
            # dumps, not dump: json.dump streams through the pure-Python encoder (~20x slower)
            handle.write(json.dumps({"format": format, "entries": entries}, separators=(",", ":")))
        os.replace(temp, path)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(temp)
