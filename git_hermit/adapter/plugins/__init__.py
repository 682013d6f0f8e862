"""Plugin formats: an adapter written as a host's own plugin or package. The protocol is
model/plugin_format.py, the shared pieces base.py; each host's format is in its package (hosts/<host>/layout.py),
reached through ``Host.plugin_format``: the one table `convert --target` reads is built here.
"""

from __future__ import annotations

from git_hermit.hosts import registry
from git_hermit.model.plugin_format import PluginFormat


def formats() -> dict[str, PluginFormat]:
    """convert --target value → the host's plugin format (hosts without one are left out)."""
    return {fmt.target: fmt for host in registry.hosts() if (fmt := host.plugin_format()) is not None}


def targets() -> tuple[str, ...]:
    return tuple(formats())
