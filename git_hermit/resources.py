"""Locate the data folders (hooks/, schemas/, templates/) shipped with the package.

A wheel carries them as ``git_hermit/_data/<name>``; a source checkout (editable install,
tests) has them beside the package. Everything that reads them goes through here.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

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


def hook_wire_module(name: str) -> ModuleType:
    """Import one stdlib module of the shipped hooks/agent/ wire from its file.

    Loaded by path, never by adding hooks/agent/ to sys.path, so none of its file names can
    shadow an import elsewhere. Its sibling imports (hook_runner's of hermit_hooks) are
    loaded the same way first.
    """
    if name in sys.modules:
        return sys.modules[name]
    path = hooks_dir() / "agent" / f"{name}.py"
    if name != "hermit_hooks":
        hook_wire_module("hermit_hooks")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"git-hermit hook module {path} is missing from the installation")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
