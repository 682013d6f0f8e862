"""Checks remembered by content: ``<git dir>/hermit/cache/<name>.json`` maps a key naming what was
checked (a config file's text, a note's blob id) to what the check found valid.

A read command (`log`) then skips parsing YAML and validating schemas it has done before; a key
names the content, and ``format`` names the checks (git-hermit's version and the schemas), so an
entry never goes stale — a changed file or schema is simply checked again. Every file starts with
the CRC-32 of the rest: a damaged or hand-edited cache (that did not recompute it) is not believed,
and is rebuilt from the notes. Best effort: a missing, broken or read-only cache only means checking
again.
"""

from __future__ import annotations

import contextlib
import json
import zlib
from pathlib import Path
from typing import Any, Callable


def _checked_bytes(path: Path) -> tuple[bytes, int] | None:
    """(the file, where its content starts after the CRC line) when the CRC holds; None when absent
    or damaged."""
    try:
        data = path.read_bytes()
        cut = data.index(b"\n")
    except (OSError, ValueError):
        return None
    # the checksum over the bytes as read (a memoryview: no copy of a file of several MB)
    return (data, cut + 1) if data[:cut] == b"%08x" % zlib.crc32(memoryview(data)[cut + 1:]) else None


def _with_crc(data: bytes) -> bytes:
    return b"%08x\n" % zlib.crc32(data) + data


def load(path: Path, format: str) -> dict[str, Any]:
    """The entries kept at ``path`` under ``format`` ({} when absent, damaged or of another format)."""
    found = _checked_bytes(path)
    if found is None:
        return {}
    try:
        data = json.loads(found[0][found[1]:])
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("format") != format or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def save(path: Path, format: str, entries: dict[str, Any]) -> None:
    """Replace the file atomically (concurrent readers see the old or the new one); errors are ignored."""
    try:
        # dumps, not dump: json.dump streams through the pure-Python encoder (~20x slower)
        data = json.dumps({"format": format, "entries": entries}, separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return
    _replace(path, _with_crc(data))


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path`` (readers see
    the old file or the new one); best effort: an error leaves the old file and no temporary one."""
    from git_hermit.atomic import write_atomic
    with contextlib.suppress(OSError):
        write_atomic(path, data)


class Fragments:
    """Encoded output kept by content: ``key`` (naming what the fragment is made of by content ids,
    such as commit and note blob ids) → a one-line fragment of bytes, under ``format`` (naming the
    code that encoded it). The file is plain text: ``format`` (as a JSON string) on its first line,
    the CRC-32 of the rest on the second, the keys on the third (space-separated), then each key's
    fragment on a line of its own, so reading it is one split, not a JSON decoding, and its
    fragments are written out as read. Best effort like load/save: a missing, broken, damaged (its
    checksum) or unwritable file only means encoding again. ``save`` keeps the keys used since
    loading, so entries no longer asked for go."""

    def __init__(self, path: Path, format: str) -> None:
        self.path, self.format = path, json.dumps(format).encode()   # one line, whatever the format's text
        self.entries: dict[str, bytes] = {}
        self.used: dict[str, bytes] = {}
        self.changed = False
        try:
            data = path.read_bytes()
            start = data.index(b"\n", data.index(b"\n") + 1) + 1
            lines = data.split(b"\n")
            keys = lines[2].decode("ascii").split(" ") if lines[2] else []
        except (OSError, ValueError, IndexError):
            return
        # the checksum over the bytes as read (a memoryview: no copy of a file of ~1 MB)
        if lines[0] != self.format or lines[1] != b"%08x" % zlib.crc32(memoryview(data)[start:]):
            return
        if len(keys) == len(lines) - 3:
            self.entries = dict(zip(keys, lines[3:]))

    def get(self, key: str) -> bytes | None:
        found = self.entries.get(key)
        if found is not None:
            self.used[key] = found
        return found

    def put(self, key: str, fragment: bytes) -> None:
        if b"\n" in fragment or not key.isascii() or " " in key or "\n" in key or not key:   # one line, one word
            return
        self.used[key] = fragment
        self.changed = True

    def save(self) -> None:
        """Rewrite the file atomically when an entry was added, or one went unused."""
        if not self.changed and len(self.used) == len(self.entries):
            return
        body = b"\n".join([" ".join(self.used).encode(), *self.used.values()])
        _replace(self.path, b"%s\n%08x\n%s" % (self.format, zlib.crc32(body), body))


def load_split(path: Path, format: str) -> tuple[dict[str, Any], Callable[[], dict[str, Any]]]:
    """Like load, for a file saved by save_split: its entries, and what decodes its body when first
    called ({} when absent, broken, damaged or of another format). A reader that needs only the
    entries (`log --json`, ~half of the notes cache) does not decode the body."""
    found = _checked_bytes(path)
    if found is None:
        return {}, dict
    data, start = found
    try:
        cut = data.index(b"\n", start)
        head = json.loads(data[start:cut])
    except (ValueError, RecursionError):
        return {}, dict
    if not isinstance(head, dict) or head.get("format") != format or not isinstance(head.get("entries"), dict):
        return {}, dict

    def decode() -> dict[str, Any]:
        try:
            value = json.loads(data[cut + 1:])
        except (ValueError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}
    return head["entries"], decode


def save_split(path: Path, format: str, entries: dict[str, Any], body: dict[str, Any]) -> None:
    """Save ``entries`` and ``body`` in one file (atomically, so the two always match): the entries
    on its first line after the CRC, the body on the next; errors are ignored."""
    try:
        text = json.dumps(body, separators=(",", ":")).encode()
        head = json.dumps({"format": format, "entries": entries}, separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return
    _replace(path, _with_crc(head + b"\n" + text))
