"""The repository is the run: a run continued on another machine after any step, or with its
`.hermit/` deleted between steps, gives every learner the same inputs (prompt and workspace files,
modulo absolute paths and wall-clock times) as the run made on one machine, for each evolver.

Machines are clones of a bare remote; each continues with `git hermit fetch`, `step`, `push`. The
scripted learners record what they were given (tests/support/recording_learners.py).
"""

from __future__ import annotations

import pytest

from support.share_support import Scenario, diff_inputs, normalise, read_inputs

EVOLVERS = ("ahe", "continual-harness", "evo-harness")


# what each evolver's learners must have been given by step 3 (so that equal inputs are not empty ones)
EXPECTED = {
    "ahe": ("evolve--step-3.json", ("state/evolution_history.md", "state/analysis/step_0002/overview.md",
                                   "state/queries/step_0002.md", "state/manifests/step_0002.json",
                                   "state/evaluations/step_0003.json", "state/stats/step_0001.json")),
    "continual-harness": ("memory--step-3-memory.json", ("AGENTS.md",)),
    "evo-harness": ("topic_curator--step-3-topic.json", ("EXPERIENCES.md",)),
}


def _inputs(scenario: Scenario, machines: str, *, wipe: bool = False) -> dict:
    scenario.reset()
    scenario.start(machines[0])
    for name in machines:
        scenario.step(name, wipe=wipe)
    found = read_inputs(scenario.control)
    name, files = EXPECTED[scenario.evolver]
    assert name in found, sorted(found)
    assert set(files) <= set(found[name]["files"]), sorted(found[name]["files"])
    if scenario.evolver == "ahe":       # every step's block of the history, from whichever machine ran it
        history = found[name]["files"]["state/evolution_history.md"]
        assert all(f"## Iteration {n} " in history for n in (1, 2, 3)), history
    return found


@pytest.fixture(scope="module")
def made_on_one_machine(tmp_path_factory):
    """evolver -> its run made on one machine ("aaa"), the learner inputs both tests compare with,
    with that run's machine paths already normalised: made once per module, not once per test
    (three steps of a run)."""
    made: dict[str, dict] = {}

    def inputs(evolver: str) -> dict:
        if evolver not in made:
            scenario = Scenario(tmp_path_factory.mktemp(f"one-machine-{evolver}"), evolver)
            found, roots = _inputs(scenario, "aaa"), scenario.roots()
            made[evolver] = {name: {**record, "prompt": normalise(record["prompt"], roots),
                                    "files": {rel: normalise(text, roots) for rel, text in record["files"].items()}}
                             for name, record in found.items()}
        return made[evolver]
    return inputs


@pytest.mark.parametrize("evolver", EVOLVERS)
def test_a_run_continued_on_other_machines_gives_its_learners_the_same_inputs(tmp_path, evolver, made_on_one_machine):
    scenario = Scenario(tmp_path, evolver)
    one_machine = made_on_one_machine(evolver)
    # a → b after step 1, b → a after step 2 (each a clone of the remote, fetching what the other pushed)
    two_machines = _inputs(scenario, "aba")
    assert diff_inputs(one_machine, two_machines, scenario.roots()) == []
    # every step in a fresh clone of the remote (a CI job's checkout)
    fresh = _inputs(scenario, "abc")
    assert diff_inputs(one_machine, fresh, scenario.roots()) == []


@pytest.mark.parametrize("evolver", EVOLVERS)
def test_deleting_dot_hermit_between_steps_changes_no_learner_input(tmp_path, evolver, made_on_one_machine):
    scenario = Scenario(tmp_path, evolver)
    one_machine = made_on_one_machine(evolver)
    wiped = _inputs(scenario, "aaa", wipe=True)
    assert diff_inputs(one_machine, wiped, scenario.roots()) == []
