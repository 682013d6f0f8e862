"""The one table of hosts: name → Host. Adding a host is one package and one line here, or, from
an installed package, a ``git_hermit.hosts`` entry point (git_hermit/plugins.py).

Everything that lists hosts (the CLI's choices, the config's allowed values, doctor, the
sandbox's default endpoints, the trajectory formats) asks this table.
"""

from __future__ import annotations

from pathlib import Path

from git_hermit import plugins
from git_hermit.hosts.base import Host

_HOSTS: dict[str, Host] = {}
_ALIASES: dict[str, str] = {}


def register(host: Host) -> Host:
    """Add ``host`` (replacing one of the same name); returns it."""
    _HOSTS[host.name] = host
    for alias in host.aliases:
        _ALIASES[alias] = host.name
    return host


def unregister(name: str) -> None:
    """Remove a host (tests register toy hosts and take them out again)."""
    host = _HOSTS.pop(name, None)
    for alias in host.aliases if host else ():
        _ALIASES.pop(alias, None)


def get(name: str) -> Host:
    """The host called ``name`` (or an alias of it); KeyError when none is."""
    return _HOSTS[_ALIASES.get(name, name)]


def known(name: str) -> bool:
    return _ALIASES.get(name, name) in _HOSTS


def names() -> tuple[str, ...]:
    return tuple(_HOSTS)


def hosts() -> tuple[Host, ...]:
    return tuple(_HOSTS.values())


def hook_hosts() -> tuple[Host, ...]:
    """The hosts that run the adapter's hooks (conformance and doctor check these)."""
    return tuple(h for h in _HOSTS.values() if h.wire is not None)


def learner_hosts() -> tuple[Host, ...]:
    return tuple(h for h in _HOSTS.values() if h.learner)


def binary_name(host: str) -> str:
    """The executable of a registered host (or alias); ValueError for an unknown name."""
    try:
        return get(host).binary
    except KeyError:
        raise ValueError(f"unknown host {host!r}; known: {', '.join(names())}") from None


def find_host_cli(host: str) -> Path | None:
    """A registered host's CLI, or None when it is not installed."""
    binary_name(host)
    return get(host).find()


def pinned_packages() -> dict[str, str]:
    return {h.name: h.package for h in _HOSTS.values()}


def host_for_format(fmt: str) -> Host | None:
    """The host whose sessions a trajectory format comes from."""
    return next((h for h in _HOSTS.values() if fmt in h.trajectory_formats), None)


# The built-in hosts, named as a plugin's entry point names its host and loaded the same way:
# a host package imports the layers above this table (its reader, its plugin layout), so the
# table names it rather than importing it. Order: the default host first.
BUILTIN = ("git_hermit.hosts.codex:HOST", "git_hermit.hosts.claude_code:HOST", "git_hermit.hosts.pi:HOST")


def _register_builtin() -> None:
    for value in BUILTIN:
        register(plugins.load(value))


def _register_plugins() -> None:
    """Hosts of installed packages; one that fails to load is skipped (doctor names it)."""
    for name, value in plugins.entry_points(plugins.HOSTS):
        try:
            host = plugins.load(value)
            host = host() if isinstance(host, type) else host
            if not isinstance(host, Host):
                raise TypeError(f"{value} is not a git_hermit.hosts.base.Host")
            if known(host.name):
                raise ValueError(f"its host name {host.name!r} is already registered")
            register(host)
        except Exception as exc:   # a plugin's bug must not take the CLI down
            plugins.failed(plugins.HOSTS, name, exc)


_register_builtin()
_register_plugins()
DEFAULT: str = names()[0]     # hermit.yaml's host and agent.backend when unset
