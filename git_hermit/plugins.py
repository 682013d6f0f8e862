"""Installed packages that add hosts or evolvers, through entry points (importlib.metadata).

A package declares, in its pyproject.toml::

    [project.entry-points."git_hermit.hosts"]
    my-host = "my_pkg.host:HOST"          # a hosts.base.Host instance (or its class)
    [project.entry-points."git_hermit.evolvers"]
    my-evolver = "my_pkg.my_evolver"      # an evolver folder: its __init__ defines SPEC; its
                                          # template/ (template.yaml + seed files) beside it

and git-hermit's registries (hosts/registry.py, evolvers/registry.py) and templates take them in,
with no file of git-hermit touched. This module imports nothing of git-hermit: it finds and loads,
and leaves what a broken plugin means to the registries (they skip it; `doctor` names it).

Every command (and a TAB's host completion) lists the hosts, so the entry points are read the way
importlib.metadata reads them (each sys.path folder's ``*.dist-info``/``*.egg-info``
``entry_points.txt``, the first distribution of a name winning) without importing it: its import
costs more than the scan (tests hold the two to the same answer).
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

HOSTS = "git_hermit.hosts"
EVOLVERS = "git_hermit.evolvers"
TEMPLATE_DIR = "template"        # an evolver plugin's template, inside its folder

# (group, entry point name, what went wrong): plugins that could not be loaded
FAILURES: list[tuple[str, str, str]] = []


@cache
def entry_points(group: str) -> tuple[tuple[str, str], ...]:
    """(name, value) of every installed entry point in ``group``, sorted by name."""
    found: dict[str, str] = {}
    for text in _entry_point_files():
        for name, value in _section(text, group):
            found.setdefault(name, value)   # importlib.metadata: the first distribution wins
    return tuple(sorted(found.items()))


@cache
def _entry_point_files() -> tuple[str, ...]:
    """The entry_points.txt of each distribution on sys.path, once per name, in path order."""
    import os
    import sys

    seen: set[str] = set()
    texts = []
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue   # a zip, a missing folder
        for entry in names:
            stem, dot, suffix = entry.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info"):
                continue
            dist = stem.split("-", 1)[0].lower().replace("-", "_").replace(".", "_")
            if dist in seen:
                continue
            try:
                with open(os.path.join(folder or ".", entry, "entry_points.txt"), encoding="utf-8") as fh:
                    texts.append(fh.read())
            except OSError:
                if os.path.isdir(os.path.join(folder or ".", entry)):
                    seen.add(dist)   # a distribution without entry points still shadows later ones
                continue
            seen.add(dist)
    return tuple(texts)


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of ``[group]`` in an entry_points.txt (an INI file)."""
    found, inside = [], False
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            found.append((name.strip(), value.strip()))
    return found


def load(value: str) -> Any:
    """``module:attr`` (or a bare module) → the object."""
    module, _, attr = value.partition(":")
    loaded: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        loaded = getattr(loaded, part)
    return loaded


def failed(group: str, name: str, exc: BaseException) -> None:
    FAILURES.append((group, name, f"{type(exc).__name__}: {exc}"))


def evolver_packages() -> tuple[tuple[str, str], ...]:
    """(entry point name, package) of the installed evolver plugins."""
    return entry_points(EVOLVERS)


def template_roots() -> tuple[Path, ...]:
    """The template folders the installed evolver plugins ship (``<folder>/template/``), found
    without importing the plugins."""
    roots = []
    for name, package in evolver_packages():
        try:
            spec = importlib.util.find_spec(package.partition(":")[0])
        except (ImportError, ValueError) as exc:
            failed(EVOLVERS, name, exc)
            continue
        for location in (spec.submodule_search_locations or ()) if spec else ():
            root = Path(location) / TEMPLATE_DIR
            if (root / "template.yaml").is_file():
                roots.append(root.resolve())
    return tuple(roots)
