"""The ``continual-harness`` evolver (seed 002): a Refiner that reads each step's window of
rollouts and edits the harness in four checked passes (policy, sub-agents, skills, memory),
one learner call and one commit per pass, with no score gate.
"""
