"""A file's content as a commit would hold it: bytes and a git mode.

What evolvers, learners' edits, screening and the git layer pass around; not a git concept
itself (no object ids), so evolvers and adapters use it without importing gitio.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileChange:
    """New content of one path; for mode "120000" the content is the symlink's target."""

    content: bytes
    mode: str = "100644"
