"""Screening of learner output before it becomes commit content: refused, never repaired.

Every evolver diffs a learner's edited adapter against what it was given and passes the diff to
``screen`` before check_spec reads it; the step driver screens every planned commit once more
before writing it, so no evolver commits what this refuses: secrets, symbolic links, files over
the size limits, binary files where the template expects text, and names git treats specially.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from git_hermit.adapter.templates import Template, glob_match
from git_hermit.model.files import FileChange
from git_hermit.redact import redact

DEFAULT_MAX_FILE_BYTES = 256 * 1024
DEFAULT_MAX_ADAPTER_BYTES = 2 * 1024 * 1024

# Names git gives a meaning of its own; `.git` is never committed, the others only where the
# template lists them under learner_output.git_files.
_DOT_GIT = {".git", "git~1"}
_GIT_FILES = {".gitmodules", ".gitattributes", ".gitignore", ".mailmap"}
# 8.3 short names Windows gives those files (git's is_ntfs_dot_generic: 6 letters or a hash, ~1..~4)
_NTFS_SHORT = {"gitmod": ".gitmodules", "gi7eba": ".gitmodules", "gitatt": ".gitattributes",
               "gi7d29": ".gitattributes", "gitign": ".gitignore", "gi250a": ".gitignore",
               "mailma": ".mailmap", "maba30": ".mailmap"}
_SHORT_NAME = re.compile(r"([a-z0-9]{6})~[1-4]\Z")
# code points HFS+ ignores when comparing names (git's is_hfs_dotgit list)
_HFS_IGNORED = dict.fromkeys([*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF])


@dataclass(frozen=True)
class Limits:
    """The size limits on learner output (hermit.yaml ``evolver.learner_output``)."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_adapter_bytes: int = DEFAULT_MAX_ADAPTER_BYTES

    @classmethod
    def of(cls, evolver_config: Mapping[str, Any] | None) -> "Limits":
        given = (evolver_config or {}).get("learner_output") or {}
        return cls(int(given.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES)),
                   int(given.get("max_adapter_bytes", DEFAULT_MAX_ADAPTER_BYTES)))


def contains_secret(text: str) -> bool:
    """True when redaction would change ``text``: it holds a secret the redactor knows."""
    return redact(text) != text


def git_special(part: str) -> str | None:
    """The name git reads ``part`` (one path segment) as, when it is one git treats specially."""
    name = part.translate(_HFS_IGNORED).lower().rstrip(". ")   # as HFS+ and NTFS would see it
    name = unicodedata.normalize("NFC", name)
    if name in _DOT_GIT:
        return ".git"
    if name in _GIT_FILES:
        return name
    short = _SHORT_NAME.match(name)
    return _NTFS_SHORT.get(short.group(1)) if short else None


def _hard_linked(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def _is_text(content: bytes) -> bool:
    if b"\0" in content:
        return False
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def screen(files: Mapping[str, FileChange | None], *, template: Template, limits: Limits,
           before: Mapping[str, FileChange] | None = None, directory: Path | None = None) -> list[str]:
    """Why the edit ``files`` (adapter-relative path → new content, None deletes) must be refused;
    empty when it may be committed. ``before`` (the adapter it applies to) enables the
    per-adapter size limit; ``directory`` (the edited adapter the files were read from) the
    hard-link check. Reasons name the path and the rule, never the offending content."""
    rules = template.settings.get("learner_output") or {}
    git_files = set(rules.get("git_files") or ())
    binary = tuple(rules.get("binary") or ())
    reasons: list[str] = []
    for path, change in sorted(files.items()):
        if change is None:
            continue                                   # deleting a file is always allowed
        shown = redact(path)
        if shown != path:
            reasons.append(f"{shown} holds a secret in its name")
            continue
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            reasons.append(f"{path!r} has a control character in its name")
            continue
        special = [git_special(part) for part in path.split("/")]
        if any(s == ".git" or (s is not None and s not in git_files) for s in special):
            reasons.append(f"{path} is a name git treats specially (.git, .gitmodules, .gitattributes …); "
                           "the template does not allow it")
            continue
        if change.mode == "120000":
            # the target is not shown: reading or naming it is what a link is for
            reasons.append(f"{path} is a symbolic link; an adapter holds regular files only")
            continue
        if directory is not None and _hard_linked(directory / path):
            # a hard link is a regular file sharing its inode: maybe a file of the host
            reasons.append(f"{path} is a hard link; an adapter holds regular files only")
            continue
        if len(change.content) > limits.max_file_bytes:
            reasons.append(f"{path} is over the limit of {limits.max_file_bytes:,} bytes per file "
                           f"({len(change.content):,} bytes)")
            continue
        text_expected = not any(glob_match(p, path) for p in binary)
        if text_expected and not _is_text(change.content):
            reasons.append(f"{path} is binary (a NUL byte or invalid UTF-8); the template expects text here")
            continue
        if contains_secret(change.content.decode("utf-8", errors="replace")):
            reasons.append(f"{path} holds a secret (its value is redacted from every record)")
    if before is not None:
        old = sum(len(c.content) for c in before.values())
        after = {**before, **files}
        new = sum(len(c.content) for c in after.values() if c is not None)
        if new > limits.max_adapter_bytes and new > old:
            reasons.append(f"the adapter would be {new:,} bytes, over the limit of {limits.max_adapter_bytes:,} "
                           "bytes per adapter")
    return reasons


def scrub(directory: Path, files: Mapping[str, FileChange | None]) -> None:
    """After a refusal: the refused edit's files in the learner's working copy lose their links
    and secrets, so a refused secret does not stay on disk under .hermit/ either. The caller
    records the refusal first: a rerun reuses it instead of screening the scrubbed copy."""
    for rel, change in files.items():
        path = directory / rel
        if change is None or not os.path.lexists(path):
            continue
        if os.path.islink(path) or _hard_linked(path):
            os.unlink(path)                            # never write through to the linked file
        elif os.path.isfile(path):
            text = Path(path).read_bytes().decode("utf-8", errors="surrogateescape")
            if contains_secret(text):
                Path(path).write_bytes(redact(text).encode("utf-8", errors="surrogateescape"))
