"""The ``evo-harness`` evolver (seed 001): one pass over the training stream in fixed batches,
reflection on each failed run, then a Topic Curator and a General Curator that edit native
``skills/<name>/SKILL.md`` files, each level validated and committed as one atomic unit.
"""

from git_hermit.evolvers.registry import EvolverSpec

SPEC = EvolverSpec(
    name="evo-harness",
    evolver="git_hermit.evolvers.evo_harness.evolver:EvoHarnessEvolver",
    template="evo-harness@1.0",
    roles=("reflect", "topic_curator", "general_curator"),
    summary="reflection on failed runs, then topic and general curators editing native skills",
    aliases=("evo_harness",),
    streaming=True,
    native_archive=True,
)
