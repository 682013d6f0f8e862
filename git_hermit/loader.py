"""The one ``module:attribute`` loader (evolver plugins, scripted learners and agents), through
``pkgutil.resolve_name``."""

from __future__ import annotations

from typing import Any


def load(spec: str) -> Any:
    """The object ``spec`` names as ``package.module:attribute`` (dotted attributes allowed).
    Raises ImportError, AttributeError, or ValueError when ``spec`` has no ``:attribute`` part."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{spec!r} is not module:attribute")
    import pkgutil    # here: only a command that loads a plugin pays for it
    return pkgutil.resolve_name(spec)
