"""The PluginFormat protocol and the data it speaks: what a target's format cannot carry
(Dropped), what it carries and where (Carried), what the plugin is called (PluginSpec) and what
was written (Written). Here, below hosts/base.py, so that the Host protocol names its plugin
format without importing the adapter; the shared pieces formats are built from stay in
adapter/plugins/base.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from git_hermit.model.inventory import Inventory


@dataclass(frozen=True)
class Dropped:
    """A component the target's plugin format cannot carry."""

    component: str
    detail: str          # which of it: the file, the names, the middleware functions
    reason: str          # why the host cannot take it from a plugin

    def line(self) -> str:
        return f"{self.component}: {self.detail} — {self.reason}"


@dataclass(frozen=True)
class Carried:
    """A component the plugin carries, and where (relative to the output directory)."""

    component: str
    where: str


@dataclass(frozen=True)
class PluginSpec:
    """What the plugin is called and where it will live."""

    name: str            # the plugin's (and its marketplace entry's) name, kebab-case
    version: str
    description: str
    python: str          # the interpreter the hooks run
    card: str            # CARD.md's text
    output: Path         # the directory the plugin ends up in (named in the README's commands)


@dataclass(frozen=True)
class Written:
    plugin_dir: str                   # the plugin's root, relative to the output directory
    carried: tuple[Carried, ...]
    install: tuple[str, ...]          # the host's commands that install it


class PluginFormat(ABC):
    """One host's plugin (or package) format."""

    target: ClassVar[str]             # convert --target value (the host's name)
    title: ClassVar[str]              # "Claude Code plugin"
    carries_all: ClassVar[bool] = False   # its format has a place for every component

    @abstractmethod
    def dropped(self, inv: Inventory) -> list[Dropped]:
        """The components of ``inv`` this format cannot carry (empty: a faithful conversion)."""

    @abstractmethod
    def write(self, inv: Inventory, adapter: Path, out: Path, spec: PluginSpec) -> Written:
        """Write the plugin of the adapter in ``adapter`` into the empty directory ``out``."""
