"""Issue 24 item 6: each seed's setup, pasted into hermit.yaml. Keys git-hermit keeps elsewhere are
named together in one error, each with where it goes; ``task_field`` equal to the tasks' id field
is taken, another value points at ``tasks.id_field``; ``data.step_size`` for ahe covers every trial
row or is refused; and each block, translated as docs/configuration.md shows, runs a step (with
offline stand-ins for what needs a login or a network: the agent, the learners' base).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cli_helpers import hermit
from conftest import git
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn

SUPPORT = Path(__file__).parent / "support"

# The seeds' blocks verbatim (seeds 000 and 002: their Setup; seed 001, whose setup is an example
# config it links to, and seed 000's Parameters section: their parameter tables).
SEED_000_SETUP = """\
template: ahe@1.0
evolver:
  name: ahe_adapter
  params: {task_field: uid, k: 2, rollback: auto}   # the k rows of a task share task_field
  base: codex                                        # the Agent Debugger and the Evolve Agent
  model: {name: gpt-5.6-luna, login: chatgpt, effort: medium}
data:
  train: rows/train_k2.txt   # every training task k times: rows <task>#1 ... <task>#k
  step_size: 100             # one step = one AHE iteration over every trial row
trainer: {epochs: 10, allow_early_stop: true}        # the paper's ten iterations
sandbox: {enabled: true, network: restricted, allow: [chatgpt.com, auth.openai.com]}
"""
SEED_000_PARAMETERS = """\
params:
  backend: codex
  model: null
  login: null
  effort: null
  bin: null
  args: []
  prompt: START.md
  resume_prompt: null
  price: null
  home: null
  tools: [check_spec]
  web_search: false
  hide: null
  task_field: task
  k: null
  evolve_timeout_s: 7200
  timeout_as: exception
  target_pass_rate: 0.95
  stability_min_iterations: 3
  rollback: auto
  rollback_verdicts: [HARMFUL]
  final: best_ever
  explore: false
  debugger:
    enabled: true
    model: null
    effort: null
    bin: null
    args: null
    concurrency: 16
    timeout_s: 600
    retries: 3
    backoff_s: 2.0
    max_tasks: 90
    verifier_output: true
    verifier_tail_chars: 4000
    verifier_tail_lines: 60
    explode_traces: true
"""
SEED_001_PARAMETERS = """\
params: {batch_size: 4, max_steps: null, success_threshold: 1.0, general_min_tasks: 3, max_general_skills: 10,
         max_topic_skills: 30, max_skill_chars: 2000, max_library_chars: 48000, max_evidence_chars: 24000}
"""
SEED_002_SETUP = """\
template: continual-harness@1.0
data: {train: train.txt, step_size: 3}                              # the Refiner's window: a step's rollouts
agent: {name: ../utils/agent/codex_agent.py:OfficeQACodexAgent}      # an agent that runs `codex exec` with the tree deployed
evolver:
  name: continual_harness
  params: {feedback: true}
llm: {model: <backend>/<model>}                                     # the Refiner's model
"""

AGENT = """#!{python}
import sys
from pathlib import Path
Path(sys.argv[2], "answer.txt").write_text("42")
print("done")
"""


def setup_run(repo: Path, template: str, *, id_field: str = "uid", tasks: int = 3, k: int = 2,
              rows: str = "rows/train_k2.txt") -> dict[str, Any]:
    """A run of ``template`` whose tasks carry their id in ``id_field``; returns its config."""
    r = hermit(repo, "init", "--run", "r", "--template", template)
    assert r.code == 0, r.err
    (repo / "tasks.jsonl").write_text("".join(json.dumps({id_field: f"q{i}", "prompt": f"Question {i}?",
                                                          "answer": "42"}) + "\n" for i in range(1, tasks + 1)))
    (repo / rows).parent.mkdir(parents=True, exist_ok=True)
    (repo / rows).write_text("".join(f"q{i}#{n}\n" for i in range(1, tasks + 1) for n in range(1, k + 1)))
    agent = repo.parent / "agent.py"
    agent.write_text(AGENT.format(python=sys.executable))
    agent.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["tasks"] = {"path": "tasks.jsonl", "id_field": id_field, "prompt_field": "prompt", "answer_field": "answer"}
    config["agent"] = {"backend": "command", "timeout_s": 60, "command": [str(agent), "{prompt_file}", "{workspace}"]}
    return config


def paste(config: dict[str, Any], block: str, under: str | None = None) -> dict[str, Any]:
    """``config`` with the seed's block pasted over it (its top-level keys replace the config's)."""
    pasted = yaml.safe_load(block)
    if under is None:
        return {**config, **pasted}
    return {**config, under: {**config[under], **pasted}}


def write(repo: Path, config: dict[str, Any]) -> None:
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def error_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("error: "))


# ---------------------------------------------------------------------------------- seed 000
def test_seed_000_parameters_block_names_every_key_kept_elsewhere_in_one_error(repo):
    write(repo, paste(setup_run(repo, "ahe@1.0", id_field="id"), SEED_000_PARAMETERS, under="evolver"))
    r = hermit(repo, "check", "--no-preflight")
    assert r.code == 5, r.out + r.err
    line = error_line(r.err)
    assert "12 key(s) of the seeds' setup are kept elsewhere in git-hermit" in line and "more)" not in line
    for moved in ("evolver.params.backend → evolver.base", "evolver.params.model → evolver.model.name",
                  "evolver.params.login → evolver.model.login", "evolver.params.effort → evolver.model.effort",
                  "evolver.params.bin → evolver.model.bin", "evolver.params.args → evolver.model.args",
                  "evolver.params.home → evolver.model.home",
                  "evolver.params.price → prices: {<model>: {input, cached_input, output}}",
                  "evolver.params.task_field → tasks.id_field: task",
                  "evolver.params.prompt: remove it", "evolver.params.resume_prompt: remove it",
                  "evolver.params.tools: remove it"):
        assert moved in line, moved
    assert "hint: move each key where its arrow points" in r.err and "docs/configuration.md" in r.err


def test_seed_000_parameters_block_translated_is_accepted(repo):
    config = paste(setup_run(repo, "ahe@1.0", id_field="task"), SEED_000_PARAMETERS, under="evolver")
    moved = ("backend", "model", "login", "effort", "bin", "args", "prompt", "resume_prompt", "price", "home", "tools")
    config["evolver"]["params"] = {k: v for k, v in config["evolver"]["params"].items() if k not in moved}
    config["evolver"].update(base="codex", model={"name": "gpt-5.6-luna"})
    write(repo, config)
    r = hermit(repo, "check", "--no-preflight")
    assert r.code == 0, r.out + r.err


@pytest.mark.parametrize("id_field, accepted", [("uid", True), ("id", False)])
def test_task_field_is_taken_when_it_names_the_tasks_id_field(repo, id_field, accepted):
    write(repo, paste(setup_run(repo, "ahe@1.0", id_field=id_field), SEED_000_SETUP))
    r = hermit(repo, "check", "--no-preflight")
    if accepted:
        assert r.code == 0, r.out + r.err
    else:
        assert r.code == 5, r.out + r.err
        line = error_line(r.err)
        assert "evolver.params.task_field → tasks.id_field: uid" in line and "now 'id'" in line


def test_seed_000_setup_runs_with_offline_stand_ins(repo):
    """The seed's block as it is (its tasks carry uid); only what needs a ChatGPT login or the
    network is swapped for offline stand-ins: the learners' base and the sandbox."""
    config = paste(setup_run(repo, "ahe@1.0"), SEED_000_SETUP)
    config["evolver"]["base"] = "scripted"
    config["evolver"].pop("model")
    config.pop("sandbox")
    write(repo, config)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the seed's setup")
    r = hermit(repo, "step")
    assert r.code == 0, r.out + r.err
    scores = json.loads(git(repo, "notes", "--ref=refs/notes/hermit/scores", "show", "refs/heads/hermit/r/step-0000"))
    assert scores["k"] == 2 and sorted(scores["tasks"]) == ["q1", "q2", "q3"]       # every trial row, k = 2


def test_ahe_data_step_size_must_cover_every_trial_row(repo):
    config = paste(setup_run(repo, "ahe@1.0", tasks=60), SEED_000_SETUP)       # 60 tasks x 2 = 120 rows
    config["evolver"].update(base="scripted")
    config["evolver"].pop("model")
    config.pop("sandbox")
    write(repo, config)
    r = hermit(repo, "step")
    assert r.code == 5, r.out + r.err
    assert "data.step_size is 100, fewer than the 120 rows of rows/train_k2.txt: ahe runs every trial row" in r.err
    assert "set it to 120 or more" in r.err
    assert git(repo, "for-each-ref", "refs/heads/hermit/r/step-0001") == ""       # refused before anything ran


# ---------------------------------------------------------------------------------- seed 001
def test_seed_001_parameters_table_runs(repo):
    config = paste(setup_run(repo, "evo-harness@1.0", k=1, rows="rows/train.txt"), SEED_001_PARAMETERS,
                   under="evolver")
    config["evolver"].update(base="scripted", scripted={role: f"evo_learners:{role}"
                                                        for role in ("reflect", "topic_curator", "general_curator")})
    config["evolver"]["params"]["k"] = 1
    write(repo, config)
    control = repo.parent / "control"
    control.mkdir()
    r = hermit(repo, "step", env={"PYTHONPATH": str(SUPPORT), "HERMIT_TEST_CONTROL": str(control)})
    assert r.code == 0, r.out + r.err
    assert git(repo, "rev-parse", "--verify", "-q", "refs/heads/hermit/r/step-0001").strip()


def test_evo_harness_data_step_size_points_at_batch_size(repo):
    config = setup_run(repo, "evo-harness@1.0", k=1, rows="rows/train.txt")
    config["data"]["step_size"] = 4
    write(repo, config)
    r = hermit(repo, "check", "--no-preflight")
    assert r.code == 5, r.out + r.err
    assert "data.step_size → evolver.params.batch_size" in error_line(r.err)


# ---------------------------------------------------------------------------------- seed 002
def test_seed_002_setup_says_where_llm_and_agent_name_go(repo):
    config = paste(setup_run(repo, "continual-harness@1.0", k=1, rows="train.txt"), SEED_002_SETUP)
    write(repo, config)
    r = hermit(repo, "check", "--no-preflight")
    assert r.code == 5, r.out + r.err
    line = error_line(r.err)
    assert "2 key(s) of the seeds' setup are kept elsewhere" in line
    assert "(1) llm → evolver.base: llm with evolver.model: {name: <model>" in line
    assert "(2) agent.name → agent.backend: codex (it runs `codex exec` with the adapter deployed" in line


def test_seed_002_setup_translated_runs_with_its_llm_on_the_stand_in_server(repo):
    answers = {"You are an expert in prompt optimisation": "# Policy\n\n- Answer with the figure only.\n"}

    def refiner(body: dict[str, Any], tool_results: int) -> Turn:
        first = body["messages"][0]["content"]
        return Turn.say(next((a for marker, a in answers.items() if marker in first), '{"analysis": "fine"}'))

    with ScriptedModelServer(refiner) as server:
        base = setup_run(repo, "continual-harness@1.0", k=1, rows="train.txt")
        config = paste(base, SEED_002_SETUP)
        # the translation: llm → evolver.base + evolver.model; agent.name → agent.backend (here the
        # offline stand-in for codex: a command agent)
        config.pop("llm")
        config["agent"] = base["agent"]
        config["evolver"].update(base="llm", model={"name": server.model,
                                                    "provider": {"base_url": server.base_url + "/v1"}})
        write(repo, config)
        r = hermit(repo, "step")
        assert r.code == 0, r.out + r.err
        assert len(server.model_requests()) == 4                       # the four passes, on the seed's llm
    assert "Answer with the figure only." in git(repo, "show", "refs/heads/hermit/r/step-0001:adapter/AGENTS.md")


def test_seed_001_algorithm_block_says_it_is_the_evolver(repo):
    config = setup_run(repo, "evo-harness@1.0", k=1, rows="rows/train.txt")
    config["algorithm"] = {"worker": {"type": "llm"}}
    write(repo, config)
    r = hermit(repo, "check", "--no-preflight")
    assert r.code == 5, r.out + r.err
    assert "algorithm → evolver: {name, params, base: the Worker (codex or claude-code" in error_line(r.err)
