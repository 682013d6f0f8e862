"""Plugin formats: an adapter written as a host's own plugin or package, one module per host
(claude_code, codex, pi) behind base.PluginFormat, and the one table `convert --target` reads.
"""

from __future__ import annotations

from git_hermit.adapter.plugins import claude_code, codex, pi
from git_hermit.adapter.plugins.base import PluginFormat

FORMATS: dict[str, PluginFormat] = {fmt.target: fmt for fmt in (claude_code.FORMAT, codex.FORMAT, pi.FORMAT)}


def targets() -> tuple[str, ...]:
    return tuple(FORMATS)
