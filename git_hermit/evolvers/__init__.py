"""The evolvers: one folder each (ahe, continual_harness, evo_harness) and ``make_evolver``, the
one place a name becomes an evolver (core/step.py and core/preflight.py both ask here, so the
step driver and its preflight do not import each other).
"""

from __future__ import annotations

from git_hermit.errors import ConfigError


def make_evolver(name: str):
    if name == "ahe":
        from git_hermit.evolvers.ahe.evolver import AHEEvolver
        return AHEEvolver()
    if name == "continual-harness":
        from git_hermit.evolvers.continual_harness.evolver import ContinualHarnessEvolver
        return ContinualHarnessEvolver()
    if name == "evo-harness":
        from git_hermit.evolvers.evo_harness.evolver import EvoHarnessEvolver
        return EvoHarnessEvolver()
    raise ConfigError(f"unknown evolver {name!r}", hint="use ahe, continual-harness or evo-harness")
