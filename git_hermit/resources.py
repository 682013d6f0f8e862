"""Locate the data folders (hooks/, schemas/, templates/) shipped with the package.

A wheel carries them as ``git_hermit/_data/<name>``; a source checkout (editable install,
tests) has them beside the package. Everything that reads them goes through here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the directory of a shipped data folder: 'hooks', 'schemas' or 'templates'."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"git-hermit data folder {name!r} is missing from the installation")


def hooks_dir() -> Path:
    return data_dir("hooks")


def schemas_dir() -> Path:
    return data_dir("schemas")


def templates_dir() -> Path:
    return data_dir("templates")
