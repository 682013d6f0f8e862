"""Configuration that does what it says (issue 8, items 13-15): every evolver's ``params`` is
validated against that evolver's own schema, ``init`` writes the template's own params,
``agent.env`` / ``agent.pass_env`` reach the acting agent (and nothing else of the user's
environment does), and ``task_field`` is refused rather than silently ignored.
All through the CLI on real repositories."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from support.step_support import RUN, calls, env_for, make_run, refs

ANSWERS = {"t1": "4", "t2": "7"}


def _refused(r, path: str) -> str:
    """Exit 5, one error line naming ``path``, one hint line, no traceback; the error line."""
    assert r.code == 5, (r.code, r.out, r.err)
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and path in errors[0], r.err
    assert any(line.startswith("hint:") for line in r.err.splitlines()), r.err
    assert "Traceback" not in r.err
    return errors[0]


def _set_params(repo: Path, params: dict) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"]["params"] = params
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


# --- item 13: ahe params ---------------------------------------------------------------------
@pytest.mark.parametrize("bad, path, says", [
    ({"rollback": "Auto"}, "evolver.params.rollback", "Auto"),
    ({"rollback_verdict": ["HARMFUL", "INEFFECTIVE"]}, "evolver.params.rollback_verdict", "rollback_verdicts"),
    ({"rollback_verdicts": ["HARMFULL"]}, "evolver.params.rollback_verdicts", "HARMFULL"),
    ({"final": "best"}, "evolver.params.final", "best"),
    ({"target_pass_rate": 1.5}, "evolver.params.target_pass_rate", "1.5"),
    ({"debugger": {"retrys": 2}}, "evolver.params.debugger.retrys", "retries"),
    ({"timeout_as": "failed"}, "evolver.params.timeout_as", "failed"),
])
def test_bad_ahe_params_are_refused_before_anything_runs(repo, bad, path, says):
    control = make_run(repo, ANSWERS, k=2)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    _set_params(repo, {**config["evolver"]["params"], **bad})
    before = refs(repo)
    r = hermit(repo, "step", env=env_for(control))
    line = _refused(r, path)
    assert says in line
    assert calls(control, "agent") == [] and calls(control, "evolve") == []   # nothing spent
    assert refs(repo) == before
    # every command reads the config, so a read-only one refuses the same way
    assert _refused(hermit(repo, "log"), path) == line


def test_good_ahe_params_with_seed_defaults_are_accepted(repo):
    control = make_run(repo, ANSWERS, k=2, params={
        "rollback": "agent", "rollback_verdicts": ["HARMFUL", "INEFFECTIVE"], "final": "last",
        "explore": False, "stability_min_iterations": 2, "timeout_as": "fail", "web_search": False,
        "hide": ["state/queries/*"],
        "debugger": {"enabled": False, "max_tasks": 5}})
    r = hermit(repo, "log")
    assert r.code == 0, r.err


def test_explore_true_is_refused_as_not_ported(repo):
    control = make_run(repo, ANSWERS, k=2, params={"explore": True})
    line = _refused(hermit(repo, "step", env=env_for(control)), "evolver.params.explore")
    assert calls(control, "agent") == []


def test_seed_learner_keys_in_params_are_refused_with_where_they_go(repo):
    control = make_run(repo, ANSWERS, k=2, params={"model": "gpt-5.6-luna"})
    r = hermit(repo, "step", env=env_for(control))
    _refused(r, "evolver.params.model")
    assert "evolver.model" in r.err


# --- item 13: the streaming evolvers' params, and init --------------------------------------
def _init(repo: Path, template: str) -> dict:
    proc = hermit(repo, "init", "--run", "r", "--template", template)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load((repo / "hermit.yaml").read_text())


@pytest.mark.parametrize("template, bad, path", [
    ("continual-harness@1.0", {"feedbak": False}, "evolver.params.feedbak"),
    ("continual-harness@1.0", {"feedback": "no"}, "evolver.params.feedback"),
    ("continual-harness@1.0", {"rollback": "auto"}, "evolver.params.rollback"),
    ("evo-harness@1.0", {"batch_sise": 2}, "evolver.params.batch_sise"),
    ("evo-harness@1.0", {"batch_size": 0}, "evolver.params.batch_size"),
])
def test_streaming_evolvers_refuse_unknown_and_bad_params(repo, template, bad, path):
    _init(repo, template)
    _set_params(repo, bad)
    _refused(hermit(repo, "step"), path)
    _refused(hermit(repo, "log"), path)


# each seed's own parameter list (seeds 000, 001, 002); `k` and `timeout_as` are the framework's,
# read by the rollouts of every evolver
SEED_PARAMS = {
    "ahe@1.0": {"k", "web_search", "hide", "evolve_timeout_s", "timeout_as", "target_pass_rate", "stability_min_iterations",
                "rollback", "rollback_verdicts", "final", "explore", "debugger"},
    "continual-harness@1.0": {"k", "timeout_as", "step_size", "feedback", "memory_max_changes",
                              "refiner_timeout_s"},
    "evo-harness@1.0": {"k", "timeout_as", "batch_size", "max_steps", "success_threshold", "general_min_tasks",
                        "max_general_skills", "max_topic_skills", "max_skill_chars", "max_library_chars",
                        "max_evidence_chars", "reflect_timeout_s", "curator_timeout_s"},
}


@pytest.mark.parametrize("template", sorted(SEED_PARAMS))
def test_init_writes_the_templates_own_params(repo, template):
    config = _init(repo, template)
    params = config["evolver"]["params"]
    assert params and set(params) <= SEED_PARAMS[template], params
    assert hermit(repo, "log").code == 0


# --- item 15: task_field ----------------------------------------------------------------------
@pytest.mark.parametrize("value", ["uid", "task"])
def test_task_field_other_than_the_id_field_is_refused_pointing_at_tasks_id_field(repo, value):
    control = make_run(repo, ANSWERS, k=2, params={"task_field": value})
    line = _refused(hermit(repo, "step", env=env_for(control)), "evolver.params.task_field")
    assert f"tasks.id_field: {value}" in line and "now 'id'" in line
    assert calls(control, "agent") == []


# --- item 14: agent.env and agent.pass_env ---------------------------------------------------
ENV_AGENT = '''#!{python}
import json, os, sys
from pathlib import Path
task, attempt = sys.argv[1:3]
Path({control!r}, f"env-{{task}}-{{attempt}}.json").write_text(json.dumps(dict(os.environ)))
print("I do not know")
'''


def _env_agent(repo: Path, control: Path, agent: dict) -> None:
    script = control / "env_agent.py"
    script.write_text(ENV_AGENT.format(python=sys.executable, control=str(control)))
    script.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"] = {"backend": "command", "timeout_s": 60, "command": [str(script), "{task_id}", "{attempt}"],
                       **agent}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def test_agent_env_and_pass_env_reach_the_agent_and_nothing_else(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    _env_agent(repo, control, {"env": {"FROM_CONFIG": "yes"}, "pass_env": ["HANDED_THROUGH"]})
    user_env = {**env_for(control), "HANDED_THROUGH": "value-1", "NOT_HANDED": "value-2"}
    r = hermit(repo, "rollout", env=user_env)
    assert r.code == 0, r.out + r.err
    seen = json.loads((control / "env-t1-1.json").read_text())
    assert seen["FROM_CONFIG"] == "yes"
    assert seen["HANDED_THROUGH"] == "value-1"
    assert "NOT_HANDED" not in seen and "HERMIT_TEST_CONTROL" not in seen   # the default stays closed
    assert seen["HOME"] != str(Path.home())                                   # still a private home


def test_pass_env_of_an_unset_variable_is_refused_before_any_rollout(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    _env_agent(repo, control, {"pass_env": ["HERMIT_NOT_SET_ANYWHERE"]})
    r = hermit(repo, "rollout", env=env_for(control))
    line = _refused(r, "agent.pass_env")
    assert "HERMIT_NOT_SET_ANYWHERE" in line
    assert not list(control.glob("env-*.json"))


def test_agent_env_may_not_replace_the_private_home(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    _env_agent(repo, control, {"env": {"HOME": "/root"}})
    _refused(hermit(repo, "rollout", env=env_for(control)), "agent.env.HOME")
    assert not list(control.glob("env-*.json"))
