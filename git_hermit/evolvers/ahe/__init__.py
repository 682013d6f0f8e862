"""The ``ahe`` evolver (AHE Adapter, seed 000): rollouts classified and diffed, an Agent Debugger
per task, an Evolve Agent that edits the adapter and declares its changes in a manifest, verdicts
on the previous step's changes, rollbacks, a best-ever tag and the target stop.
"""

from git_hermit.evolvers.registry import EvolverSpec

SPEC = EvolverSpec(
    name="ahe",
    evolver="git_hermit.evolvers.ahe.evolver:AHEEvolver",
    template="ahe@1.0",
    roles=("debugger", "evolve"),
    summary="Agent Debugger + Evolve Agent with a change manifest, verdicts, rollbacks and a best-ever tag",
    aliases=("ahe_adapter",),
    manifest_check="git_hermit.evolvers.ahe.groups:manifest_overlaps",
)
