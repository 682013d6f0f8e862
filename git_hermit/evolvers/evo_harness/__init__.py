"""The ``evo-harness`` evolver (seed 001): one pass over the training stream in fixed batches,
reflection on each failed run, then a Topic Curator and a General Curator that edit native
``skills/<name>/SKILL.md`` files, each level validated and committed as one atomic unit.
"""
