"""The ``continual-harness`` evolver (seed 002): a Refiner that reads each step's window of
rollouts and edits the harness in four checked passes (policy, sub-agents, skills, memory),
one learner call and one commit per pass, with no score gate.
"""

from git_hermit.evolvers.registry import EvolverSpec

SPEC = EvolverSpec(
    name="continual-harness",
    evolver="git_hermit.evolvers.continual_harness.evolver:ContinualHarnessEvolver",
    template="continual-harness@1.0",
    roles=("policy", "subagents", "skills", "memory"),    # evolver.PASSES, in the order they run
    summary="a Refiner over each window of the stream: policy, sub-agents, skills, memory, one commit each",
    aliases=("continual_harness",),
    streaming=True,
    native_archive=True,
)
