"""git-hermit: evolve a coding agent's adapter in a closed, git-native loop.

Layering (DESIGN §2): cli → core → (evolvers, rollouts, learners, adapter) → (model, gitio).
"""

__version__ = "0.1.0"
