"""The evolver registry: one line per evolver, and the one place the rest of git-hermit asks.

Each evolver is a folder (a package) that declares itself once, in its ``__init__.py``, as
``SPEC = EvolverSpec(...)``; it owns there its params schema (``params.schema.json``), its
evolver class, its scripted learners, its template's id and its traits. Adding an evolver is
that folder plus one line in ``BUILTIN`` (or ``register("my.package")`` at run time), or, from an
installed package, a ``git_hermit.evolvers`` entry point naming its folder (git_hermit/plugins.py).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git_hermit import plugins
from git_hermit.errors import ConfigError

# One line per evolver: the package of its folder.
BUILTIN = (
    "git_hermit.evolvers.ahe",
    "git_hermit.evolvers.continual_harness",
    "git_hermit.evolvers.evo_harness",
)
DEFAULT = "ahe"          # the evolver `git hermit init` sets up when no --template is given


@dataclass(frozen=True)
class EvolverSpec:
    """What an evolver folder declares about itself (its ``SPEC``)."""

    name: str                                  # evolver.name in hermit.yaml ("continual-harness")
    evolver: str                               # "module:Class" of its Evolver, imported on first use
    template: str                              # the template id `init` writes for it ("ahe@1.0")
    roles: tuple[str, ...]                     # the learner roles it asks for (evolver.scripted keys)
    summary: str = ""                          # one line for help and the docs
    aliases: tuple[str, ...] = ()              # other spellings accepted in evolver.name
    # each step rolls out a new window of a stream: its windows' pass@1 are not comparable and it
    # keeps no best-ever tag (`log`/`show` say so; `finalize` defaults to the tip)
    streaming: bool = False
    # `finalize --archive` writes the host-native layout (what `deploy` writes) instead of the adapter
    native_archive: bool = False
    # role → "module:function" used when evolver.base is scripted and evolver.scripted names no function
    scripted: dict[str, str] = field(default_factory=dict)
    # "module:function" (manifest path → problems) behind `git hermit check --manifest`, if it writes one
    manifest_check: str | None = None
    package: str = ""                          # its folder's package (filled in by register)

    @property
    def folder(self) -> Path:
        module = importlib.import_module(self.package)
        return Path(module.__file__ or "").resolve().parent

    @property
    def params_schema_path(self) -> Path:
        return self.folder / "params.schema.json"

    @property
    def template_name(self) -> str:
        return self.template.split("@")[0]

    def make(self) -> Any:
        """A fresh instance of its Evolver (see evolvers/base.py)."""
        return _load(self.evolver)()


class _Registry:
    def __init__(self) -> None:
        self.specs: dict[str, EvolverSpec] = {}
        self.loaded = False

    def all(self) -> dict[str, EvolverSpec]:
        if not self.loaded:          # on first use: a command that names no evolver imports none
            self.loaded = True
            for package in BUILTIN:
                self.add(package)
            for name, package in plugins.evolver_packages():
                try:
                    self.add(package)
                except Exception as exc:   # a broken plugin is skipped (doctor names it)
                    plugins.failed(plugins.EVOLVERS, name, exc)
        return self.specs

    def add(self, package: str) -> EvolverSpec:
        try:
            spec = importlib.import_module(package).SPEC
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot register evolver package {package!r} ({exc})",
                              hint="its __init__.py must define SPEC = EvolverSpec(...)") from None
        if not isinstance(spec, EvolverSpec):
            raise ConfigError(f"{package}.SPEC is not an EvolverSpec", hint="see git_hermit/evolvers/registry.py")
        spec = EvolverSpec(**{**spec.__dict__, "package": package})
        for other in self.specs.values():
            if other.name != spec.name and {spec.name, *spec.aliases} & {other.name, *other.aliases}:
                raise ConfigError(f"evolver {spec.name!r} reuses a name of {other.name!r}",
                                  hint="give each evolver its own name and aliases")
        self.specs[spec.name] = spec
        return spec


_REGISTRY = _Registry()


def _all() -> dict[str, EvolverSpec]:
    return _REGISTRY.all()


def register(package: str) -> EvolverSpec:
    """Add the evolver whose folder is ``package`` (its ``__init__`` defines ``SPEC``); returns its spec."""
    _all()
    return _REGISTRY.add(package)


def unregister(name: str) -> None:
    """Forget a registered evolver (tests register toys and take them away again)."""
    _all().pop(name, None)


def names() -> list[str]:
    """The registered evolvers' names, in registration order."""
    return list(_all())


def specs() -> list[EvolverSpec]:
    return list(_all().values())


def canonical(name: str) -> str:
    """The registered name for ``name`` or one of its aliases; an unknown name is returned as is."""
    for spec in _all().values():
        if name == spec.name or name in spec.aliases:
            return spec.name
    return name


def find(name: str) -> EvolverSpec | None:
    return _all().get(canonical(name))


def get(name: str) -> EvolverSpec:
    """The spec of evolver ``name`` (or an alias); ConfigError naming the registered ones otherwise."""
    spec = find(name)
    if spec is None:
        raise ConfigError(f"unknown evolver {name!r}", hint="use " + ", ".join(names()))
    return spec


def for_template(template: str) -> EvolverSpec | None:
    """The evolver whose template is ``template`` (an id like ``ahe@1.0``, or a bare name)."""
    bare = template.split("@")[0]
    return next((s for s in _all().values() if template == s.template or bare == s.template_name), None)


def default_template() -> str:
    return get(DEFAULT).template


def make_evolver(name: str) -> Any:
    return get(name).make()


def _load(spec: str) -> Any:
    from git_hermit.loader import load
    return load(spec)


def load_function(spec: str) -> Any:
    """``module:function`` → the function (used for the registry's hooks, e.g. manifest_check)."""
    return _load(spec)
