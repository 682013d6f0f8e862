"""Issue 24 item 5: what the continual-harness Refiner is shown and how its answers are used, as
the reference implementation does it (package hermit-harness, its continual_harness evolver):
each task's statement (``task_info_chars``), each trajectory's head and tail with command output
tails (``trace_chars``), the parameters ``components``, ``min_signals``, ``max_tokens`` and
``temperature`` honoured, a reply it cannot use asked for again, an over-long policy asked to be
compressed, loose sub-agent names normalised, the first ``memory_max_changes`` memory changes
applied, ``memory/NOTES.md`` capped (oldest notes evicted first), and "the session erred" for a
session that exited non-zero. Every prompt is captured by the scripted OpenAI-compatible model
server on 127.0.0.1 that the Refiner (``evolver.base: llm``) calls through `git hermit step`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.project import build_project
from git_hermit.adapter.templates import load_template
from git_hermit.evolvers.continual_harness import deltas
from git_hermit.evolvers.continual_harness.deltas import HarnessLayout
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn

from support.codex_stream import FIRST_MARK, LAST_MARK, codex_stream, output_mark

TEMPLATE = "continual-harness@1.0"
TIP = "refs/heads/hermit/r/step-0001"
# a task statement longer than task_info_chars: its head and its tail are shown, the middle cut
STATEMENT = "TASK-HEAD-51b0 Compute the figure. " + "Use the ledger in the workspace. " * 200 + " TASK-END-e47c"

# The acting agent: prints the task's Codex stream (the trajectory), answers 42, exits as told.
AGENT = """#!{python}
import sys
from pathlib import Path
control = Path({control!r})
task, workspace = sys.argv[1:3]
sys.stdout.write((control / f"stream-{{task}}.jsonl").read_text())
Path(workspace, "answer.txt").write_text("42")
if (control / "notes.md").exists():     # the session's own memory notes, handed back with it
    with open(Path(workspace, "memory", "NOTES.md"), "a") as notes:
        notes.write((control / "notes.md").read_text())
sys.exit(int((control / f"exit-{{task}}").read_text()) if (control / f"exit-{{task}}").exists() else 0)
"""

# The first words of each pass's prompt (prompts/*.md), to tell the passes apart at the server.
PASS_OPENINGS = {"policy": "You are an expert in prompt optimisation",
                 "subagents": "library of sub-agents", "skills": "Find reusable procedures (skills)",
                 "memory": "You are the curator of an autonomous agent's memory"}
EMPTY = {"policy": "# Policy\n\n- Answer with the figure only.\n", "subagents": '{"analysis": "fine"}', "skills": '{"analysis": "fine"}',
         "memory": '{"analysis": "fine"}'}


def pass_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]["content"]
    return next(name for name, opening in PASS_OPENINGS.items() if opening in first)


class Refiner:
    """The stand-in model: per pass, the replies of its conversation's rounds (the last repeats);
    a pass without a plan keeps the harness as it is."""

    def __init__(self, plans: dict[str, list[str]] | None = None):
        self.plans = plans or {}

    def __call__(self, body: dict[str, Any], tool_results: int) -> Turn:
        name = pass_of(body)
        rounds = self.plans.get(name) or [EMPTY[name]]
        return Turn.say(rounds[min(len(body["messages"]) // 2, len(rounds) - 1)])


def make_run(repo: Path, server: ScriptedModelServer, *, tasks: dict[str, str], params: dict[str, Any] | None = None,
             exits: dict[str, int] | None = None, stream_bytes: int = 64 * 1024) -> Path:
    control = repo.parent / "control"
    control.mkdir()
    stream, _ = codex_stream(stream_bytes)
    agent = control / "agent.py"
    build_project(repo, init_args=("--run", "r", "--template", TEMPLATE),
                  tasks=[{"id": t, "prompt": STATEMENT if i == 0 else f"Task {t}?", "answer": answer}
                         for i, (t, answer) in enumerate(tasks.items())],
                  rows={"train": [f"{t}#1" for t in tasks]},
                  files={**{control / f"stream-{task}.jsonl": stream for task in tasks},
                         **{control / f"exit-{task}": str(code) for task, code in (exits or {}).items()}},
                  scripts={agent: AGENT.format(python=sys.executable, control=str(control))},
                  config={"agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{task_id}", "{workspace}"]},
                          "evolver": {"name": "continual-harness", "base": "llm",
                                      "model": {"name": server.model, "provider": {"base_url": server.base_url + "/v1"}},
                                      "params": {"k": 1, "step_size": len(tasks), **(params or {})}}})
    return control


def step(repo: Path) -> Any:
    r = hermit(repo, "step")
    assert r.code == 0, r.out + r.err
    return r


def prompts(server: ScriptedModelServer) -> list[tuple[str, dict[str, Any]]]:
    return [(pass_of(q.body), q.body) for q in server.model_requests()]


def first_prompt(server: ScriptedModelServer, name: str) -> str:
    return next(body["messages"][0]["content"] for n, body in prompts(server) if n == name)


def trajectory_of(prompt: str, task: str) -> str:
    """The trajectory block the prompt shows for ``task``'s attempt 1."""
    section = prompt.split(f"### Task {task}, attempt 1", 1)[1]
    return section.split("**Trajectory:**\n```text\n", 1)[1].split("\n```", 1)[0]


def statement_of(prompt: str, task: str) -> str:
    return prompt.split(f"### Task {task}: the task statement\n```text\n", 1)[1].split("\n```", 1)[0]


def analysis(repo: Path) -> dict[str, Any]:
    return json.loads(git(repo, "notes", "--ref=refs/notes/hermit/analysis", "show", TIP))


# ------------------------------------------------------------------------------ what it reads
def test_the_refiner_reads_the_task_and_the_trajectory_head_and_tail_by_default(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42", "t2": "41"})
        step(repo)
        policy = first_prompt(server, "policy")
        bodies = [body for _, body in prompts(server)]
    # the task: task_info_chars (3000) of its statement, head and tail, the middle cut and marked
    statement = statement_of(policy, "t1")
    assert statement.startswith("TASK-HEAD-51b0") and statement.endswith("TASK-END-e47c")
    assert 2900 <= len(statement) <= 3000 and "characters cut" in statement
    assert "### Task t2: the task statement\n```text\nTask t2?\n```" in policy
    # the trajectory: trace_chars (12000) of a 64 KB stream, its start and its end kept
    view = trajectory_of(policy, "t1")
    assert 11_500 <= len(view) <= 12_000, len(view)
    assert FIRST_MARK in view and LAST_MARK in view and "characters cut" in view
    # every kept command shows its exit code and its output's tail, the successful ones too
    shown = [n for n in range(1, 80) if output_mark(n) in view]
    assert len(shown) >= 8 and any(n % 5 for n in shown)
    assert "[command exit 0] /bin/bash -lc 'cat part1.txt'" in view and "[command exit 1]" in view
    assert f"[reasoning] Step 1: look at part 1. {FIRST_MARK}" in view
    # max_tokens (32000) and temperature (null: the endpoint's default) reach every call
    assert bodies and all(b.get("max_tokens") == 32000 and "temperature" not in b for b in bodies)


def test_a_session_that_exited_non_zero_yet_was_judged_is_a_failure_signature(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42", "t2": "41"}, exits={"t2": 3}, stream_bytes=4096)
        step(repo)
        signatures = first_prompt(server, "subagents").split("## Failures detected", 1)[1]
    scores = json.loads(git(repo, "notes", "--ref=refs/notes/hermit/scores", "show", "refs/heads/hermit/r/step-0000"))
    assert scores["tasks"]["t2"]["outcome"] == "fail"                      # judged, not an exception
    assert re.search(r"^- task t2#1: the session erred: .*agent exited with status 3", signatures, re.M), signatures
    assert not re.search(r"^- task t1#1: the session erred", signatures, re.M)


def test_trace_chars_task_info_chars_and_sampling_are_honoured(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42"},
                 params={"trace_chars": 3000, "task_info_chars": 400, "max_tokens": 900, "temperature": 0.2})
        step(repo)
        policy = first_prompt(server, "policy")
        bodies = [body for _, body in prompts(server)]
    view, statement = trajectory_of(policy, "t1"), statement_of(policy, "t1")
    assert 2800 <= len(view) <= 3000 and FIRST_MARK in view and LAST_MARK in view
    assert 300 <= len(statement) <= 400 and statement.startswith("TASK-HEAD") and statement.endswith("TASK-END-e47c")
    assert all(b["max_tokens"] == 900 and b["temperature"] == 0.2 for b in bodies)


def test_task_info_chars_zero_shows_no_task_text(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"task_info_chars": 0, "components": ["policy"]})
        step(repo)
        assert "the task statement" not in first_prompt(server, "policy")


def test_components_choose_the_passes_and_their_order(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"components": ["memory", "policy"]})
        r = step(repo)
        assert [name for name, _ in prompts(server)] == ["memory", "policy"]
    assert "refiner memory:" in r.err + r.out and "refiner subagents" not in r.err + r.out
    assert list(analysis(repo)["passes"]) == ["memory", "policy"]


def test_min_signals_skips_a_quiet_window_without_calling_the_refiner(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"min_signals": 50})
        step(repo)
        assert server.model_requests() == []
    record = analysis(repo)
    assert record["passes"] == {} and "below min_signals=50" in record["skipped"]
    assert "skipped" in git(repo, "log", "-1", "--format=%B", TIP)


def test_min_signals_reached_runs_the_passes(repo):
    with ScriptedModelServer(Refiner()) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"min_signals": 1, "components": ["skills"]})
        step(repo)     # the stream's failing commands are signatures
        assert [name for name, _ in prompts(server)] == ["skills"]


# ------------------------------------------------------------------------- how answers are used
def test_an_unusable_reply_is_asked_for_again_and_a_loose_name_normalised(repo):
    good = json.dumps({"analysis": "checking units by hand failed twice",
                       "create": [{"name": "Unit Checker", "description": "Checks a figure's units.",
                                   "instructions": "Compare the units of every figure with the question's."}]})
    plans = {"subagents": ["I think a unit checker would help.", good]}
    with ScriptedModelServer(Refiner(plans)) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"components": ["subagents"]})
        step(repo)
        rounds = [body["messages"] for name, body in prompts(server) if name == "subagents"]
    assert len(rounds) == 2 and len(rounds[1]) == 3                # the conversation goes on
    assert rounds[1][1] == {"role": "assistant", "content": "I think a unit checker would help."}
    assert "could not be used: the answer holds no JSON object" in rounds[1][2]["content"]
    tree = git(repo, "ls-tree", "-r", "--name-only", TIP, "adapter/sub_agents").split()
    assert "adapter/sub_agents/unit-checker/AGENT.md" in tree
    outcome = analysis(repo)["passes"]["subagents"]
    assert outcome["status"] == "applied" and outcome["asks"] == 2
    # every reply was checkpointed as it came: a rerun replays them instead of asking again
    saved = json.loads((repo / ".hermit/runs/r/step-0001/refiner/subagents.json").read_text())
    assert [r["answered"] for r in saved["rounds"]] == plans["subagents"]
    assert saved["rounds"][0]["asked"] is None and "could not be used" in saved["rounds"][1]["asked"]
    assert outcome["changes"] == ["created unit-checker (named 'Unit Checker' in the answer)"]


def test_three_unusable_replies_drop_the_pass(repo):
    with ScriptedModelServer(Refiner({"skills": ["no idea"]})) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"components": ["skills"]})
        step(repo)
        assert len(server.model_requests()) == 3
    outcome = analysis(repo)["passes"]["skills"]
    assert outcome == {"status": "dropped", "changes": [], "asks": 3,
                       "reason": "the answer holds no JSON object (asked 3 times)"}


def test_an_over_long_policy_is_asked_once_to_compress(repo):
    long_policy = "# Policy\n\n" + "- Check every figure twice before answering.\n" * 200     # ~9,000 characters
    plans = {"policy": [long_policy, "# Policy\n\n- Check every figure twice before answering.\n"]}
    with ScriptedModelServer(Refiner(plans)) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"components": ["policy"]})
        step(repo)
        rounds = [body["messages"] for _, body in prompts(server)]
    assert len(rounds) == 2 and "over the limit of 8000" in rounds[1][2]["content"]
    assert "compressed to at most 6800 characters" in rounds[1][2]["content"]
    assert git(repo, "show", f"{TIP}:adapter/AGENTS.md") == "# Policy\n\n- Check every figure twice before answering.\n"


def test_a_policy_still_too_long_after_compressing_is_dropped(repo):
    long_policy = "# Policy\n\n" + "- Check every figure twice before answering.\n" * 200
    with ScriptedModelServer(Refiner({"policy": [long_policy]})) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"components": ["policy"]})
        step(repo)
        assert len(server.model_requests()) == 2
    outcome = analysis(repo)["passes"]["policy"]
    assert outcome["status"] == "dropped" and "still after it was asked to compress it" in outcome["reason"]


def test_the_first_memory_max_changes_changes_are_applied(repo):
    seven = {"analysis": "many facts", "add": [{"topic": f"Fact {i}", "note": f"fact number {i}"} for i in range(1, 8)]}
    with ScriptedModelServer(Refiner({"memory": [json.dumps(seven)]})) as server:
        make_run(repo, server, tasks={"t1": "42"}, params={"components": ["memory"]})
        step(repo)
    notes = deltas.Notes.parse(git(repo, "show", f"{TIP}:adapter/memory/NOTES.md")).topics()
    assert [f"fact {i}" in notes for i in range(1, 8)] == [True] * 5 + [False] * 2
    changes = analysis(repo)["passes"]["memory"]["changes"]
    assert changes[5:] == ["skipped add 'Fact 6': over memory_max_changes=5",
                           "skipped add 'Fact 7': over memory_max_changes=5"]


def test_the_memory_file_is_capped_the_oldest_notes_evicted_first(repo):
    fresh = {"analysis": "new facts", "add": [{"topic": f"New {i}", "note": "n" * 3000} for i in range(1, 5)]}
    with ScriptedModelServer(Refiner({"memory": [json.dumps(fresh)]})) as server:
        control = make_run(repo, server, tasks={"t1": "42"}, params={"components": ["memory"]})
        # the session leaves 36 notes of ~1 KB: folded first, they bring the memory near its cap
        (control / "notes.md").write_text("".join(f"\n## Old {i}\n\n{'o' * 1000}\n" for i in range(1, 37)))
        step(repo)
        memory_prompt = first_prompt(server, "memory")
    assert "of its 40,000-byte cap: it is nearly full" in memory_prompt
    folded = [t for t, _ in deltas.Notes.parse(git(repo, "show", f"{TIP}~1:adapter/memory/NOTES.md")).notes]
    assert folded[-36:] == [f"Old {i}" for i in range(1, 37)]
    text = git(repo, "show", f"{TIP}:adapter/memory/NOTES.md")
    topics = [t for t, _ in deltas.Notes.parse(text).notes]
    assert len(text.encode()) <= 40_000
    assert topics[-4:] == ["New 1", "New 2", "New 3", "New 4"]          # the new notes kept
    evicted = [t for t in folded if t not in topics]
    assert len(evicted) >= 8 and evicted == folded[:len(evicted)]       # the oldest first
    changes = analysis(repo)["passes"]["memory"]["changes"]
    assert [c for c in changes if c.startswith("evicted")] == [
        f"evicted {t!r} (the file's cap is 40000 bytes)" for t in evicted]


# ------------------------------------------------------------------------------------ units
def test_notes_fit_evicts_oldest_and_cuts_a_lone_oversize_note():
    notes = deltas.Notes("# Notes", tuple((f"T{i}", "x" * 100) for i in range(10)))
    kept, evicted = notes.fit(600)
    assert len(kept.render().encode()) <= 600 and evicted == tuple(f"T{i}" for i in range(len(evicted)))
    assert [t for t, _ in kept.notes] == [f"T{i}" for i in range(len(evicted), 10)]
    lone, cut = deltas.Notes("# Notes", (("Big", "y" * 5000),)).fit(1000)
    assert len(lone.render().encode()) <= 1000 and cut == ("Big (cut)",) and "cut to fit" in lone.render()


def test_fold_of_session_notes_keeps_the_cap(tmp_path):
    layout = HarnessLayout.of(load_template(TEMPLATE))
    harness = "# Notes\n\n" + "".join(f"## Old {i}\n\n{'o' * 1000}\n\n" for i in range(40))
    text, folded, evicted = deltas.fold_session_notes(harness, harness, [harness + "## Fresh\n\nfrom a session\n"],
                                                      layout.memory_bytes)
    assert folded == ["Fresh"] and evicted[:1] == ("Old 0",) and len(text.encode()) <= layout.memory_bytes
    assert text.rstrip().endswith("from a session")


@pytest.mark.parametrize("given, name", [("Unit Checker", "unit-checker"), ("unit_checker", "unit-checker"),
                                         ("  --Plan  B--", "plan-b"), ("x" * 80, "x" * 64), ("ß-Test", "ss-test")])
def test_names_are_normalised(given: str, name: str):
    assert deltas.normalise_name(given) == name


def test_max_tokens_or_temperature_for_a_session_refiner_is_refused(repo):
    def codex_refiner_with_a_temperature(config: dict[str, Any]) -> None:
        config["evolver"]["base"] = "codex"
        config["evolver"]["params"]["temperature"] = 0.3

    build_project(repo, init_args=("--run", "r", "--template", TEMPLATE), edit=codex_refiner_with_a_temperature)
    r = hermit(repo, "step")
    assert r.code != 0 and "evolver.params.temperature applies to a one-shot Refiner, not a codex session" in r.err


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_conversation_and_its_sampling_reach_the_chat_apis(tmp_path, monkeypatch, api):
    from git_hermit.learners import OneShotLearner
    from git_hermit.model.learner import Exchange, Sampling
    monkeypatch.setenv("HERMIT_TEST_KEY", "not-a-real-key")
    with ScriptedModelServer([Turn.say("second answer")]) as server:
        url = server.base_url + ("/v1" if api == "openai" else "")
        learner = OneShotLearner("skills", api, {"name": server.model, "provider": {"base_url": url,
                                                                                     "env_key": "HERMIT_TEST_KEY"}})
        reply = learner.ask(tmp_path, "Reply again, as JSON.", timeout_s=30, key="k",
                            earlier=(Exchange("The first question.", "first answer"),),
                            sampling=Sampling(max_tokens=900, temperature=0.2))
        body = server.model_requests()[0].body
    assert reply.ok and reply.text == "second answer"
    contents = [(m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
                for m in body["messages"]]
    assert contents == [("user", "The first question."), ("assistant", "first answer"),
                        ("user", "Reply again, as JSON.")]
    assert body["max_tokens"] == 900 and body["temperature"] == 0.2
