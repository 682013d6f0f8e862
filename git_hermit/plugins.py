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
    from importlib.metadata import entry_points as found

    return tuple(sorted({(ep.name, ep.value) for ep in found(group=group)}))


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
