"""Read a directory's files as a commit would hold them (``FileChange`` per relative path).

Shared by the git layer (``Repo.commit_directory``), init's seed, the evolvers' workspaces and
the adapter screens; it lives below them all so none of them imports another for it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from git_hermit.model.files import FileChange

__all__ = ["FileChange", "files_in_directory"]


def files_in_directory(directory: Path) -> dict[str, FileChange]:
    """Every file under ``directory`` (not ``.git``) as it would be committed: POSIX relative
    path → bytes and mode (100755 for executables, 120000 for symlinks, a linked directory too)."""
    found: dict[str, FileChange] = {}
    directory = Path(directory)
    for root, dirs, files in os.walk(directory):
        # os.walk lists symlinks to directories among dirs; they are committed as links.
        linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = sorted(d for d in dirs if d != ".git" and d not in linked)
        for name in sorted([*files, *linked]):
            if name == ".git":
                continue
            full = os.path.join(root, name)
            rel = os.path.relpath(full, directory).replace(os.sep, "/")
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = FileChange(os.fsencode(os.readlink(full)), "120000")
            elif stat.S_ISREG(info.st_mode):
                found[rel] = FileChange(Path(full).read_bytes(), "100755" if info.st_mode & stat.S_IXUSR else "100644")
    return found
