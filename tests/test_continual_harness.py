"""The continual-harness evolver: its answer parser and delta validation, memory folding, the
window reader, and end to end through `git hermit step`/`train` with a `command` acting agent
and a scripted Refiner (per-pass commits, a dropped pass, windows, the spent stream, resume).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cli_helpers import GIT_HERMIT, Result, hermit
from conftest import git
from git_hermit.adapter.check_spec import check_adapter
from git_hermit.adapter.templates import load_template, write_seed
from git_hermit.errors import ConfigError
from git_hermit.evolvers.continual_harness import deltas, evidence
from git_hermit.evolvers.params import param_defaults
from git_hermit.evolvers.continual_harness.deltas import DeltaError, HarnessLayout
from git_hermit.evolvers.continual_harness.evolver import ContinualHarnessEvolver
from git_hermit.model.rollout import RolloutResult
from support.step_support import AGENT_SCRIPT, calls, kill_group, wait_for
from support.continual_harness_helpers import SUPPORT, TEMPLATE, _env, _hermit, make_continual_run  # noqa: F401


# ---------------------------------------------------------------------------------- parser units
def test_policy_answer_is_unfenced_unechoed_and_size_checked():
    assert deltas.parse_policy("```markdown\n# P\n\nbe brief\n```", 100) == "# P\n\nbe brief\n"
    assert deltas.parse_policy("IMPROVED BASE PROMPT:\n# P\n", 100) == "# P\n"
    with pytest.raises(DeltaError, match="empty"):
        deltas.parse_policy("```\n```", 100)
    with pytest.raises(DeltaError, match="over the limit of 8000"):
        deltas.parse_policy("x" * 8000, 8000)        # 8000 + the final newline
    assert len(deltas.parse_policy("x" * 7999, 8000)) == 8000


def test_json_answer_fenced_or_embedded_and_bad_json_rejected():
    assert deltas.parse_json_answer('```json\n{"a": 1}\n```') == {"a": 1}
    assert deltas.parse_json_answer('Here you go: {"a": [1]} hope it helps') == {"a": [1]}
    with pytest.raises(DeltaError, match="no JSON object"):
        deltas.parse_json_answer("no idea")
    with pytest.raises(DeltaError, match="does not parse"):
        deltas.parse_json_answer('{"a": [1,}')
    with pytest.raises(DeltaError, match="not an object"):
        deltas.parse_json_answer("[1, 2]")


def test_subagent_delta_shapes():
    d = deltas.parse_subagents(json.dumps({
        "analysis": "a", "create": [{"name": "triage", "description": "d", "instructions": "i"}],
        "update": [{"name": "reviewer", "instructions": "new"}], "retire": ["old"]}))
    assert [e.name for e in d.create] == ["triage"] and d.update[0].description is None and d.retire == ("old",)
    for bad, why in [({"create": [{"name": "!?", "description": "d", "instructions": "i"}]}, "no letter or digit"),
                     ({"create": [{"name": "x", "instructions": "i"}]}, "description"),
                     ({"update": [{"name": "x"}]}, "changes nothing"),
                     ({"create": {"name": "x"}}, "must be a list"),
                     ({"retire": [3]}, "retire")]:
        with pytest.raises(DeltaError, match=why):
            deltas.parse_subagents(json.dumps(bad))


def test_skill_delta_scripts_validated():
    d = deltas.parse_skills(json.dumps({"add": [{"name": "s", "description": "d", "body": "b",
                                                 "scripts": {"scripts/a.py": "print(1)", "b.sh": "echo"}}],
                                        "update": [{"name": "t", "scripts": {"old.py": None}}]}))
    assert d.create[0].scripts == {"scripts/a.py": "print(1)", "scripts/b.sh": "echo"}
    assert d.update[0].scripts == {"scripts/old.py": None}
    with pytest.raises(DeltaError, match="inside the skill"):
        deltas.parse_skills(json.dumps({"add": [{"name": "s", "description": "d", "body": "b",
                                                 "scripts": {"../evil.py": "x"}}]}))
    with pytest.raises(DeltaError, match="has no text"):
        deltas.parse_skills(json.dumps({"add": [{"name": "s", "description": "d", "body": "b",
                                                 "scripts": {"a.py": None}}]}))


def test_memory_delta_headings():
    d = deltas.parse_memory(json.dumps({"add": [{"topic": "T", "note": "n"}], "update": []}))
    assert d.add == (("T", "n"),)
    with pytest.raises(DeltaError, match="headings"):
        deltas.parse_memory(json.dumps({"add": [{"topic": "A", "note": "x\n## B\ny"}]}))


def test_memory_pass_can_retire_topics(tmp_path):
    d = deltas.parse_memory(json.dumps({"retire": ["Running commands", "ghost"],
                                        "add": [{"topic": "Ports", "note": "8123"}]}))
    assert d.retire == ("Running commands", "ghost")
    template = load_template(TEMPLATE)
    root = tmp_path / "adapter"
    write_seed(template, root)
    done = deltas.apply_memory(root, HarnessLayout.of(template), d, 3)
    assert done == ["retired 'Running commands'", "skipped retire 'ghost': no such topic", "added 'Ports'"]
    notes = deltas.Notes.parse((root / "memory/NOTES.md").read_text())
    assert notes.topics() == {"ports": "8123"} and notes.header.startswith("# Notes")
    assert [v for v in check_adapter(root, template) if v.severity == "error"] == []


def test_notes_fold_replaces_known_topics_and_appends_new():
    harness = "# Notes\n\nintro\n\n## Tests\n\nrun pytest\n\n## Build\n\nmake\n"
    session_a = harness.replace("run pytest", "run pytest -x (stop at first)") + "\n## Ports\n\nuse 8123\n"
    session_b = harness                                   # wrote nothing new
    text, folded, evicted = deltas.fold_session_notes(harness, harness, [session_a, session_b])
    assert evicted == ()
    assert folded == ["Tests", "Ports"]
    notes = deltas.Notes.parse(text)
    assert notes.header == "# Notes\n\nintro"
    assert [t for t, _ in notes.notes] == ["Tests", "Build", "Ports"]
    assert notes.topics()["tests"] == "run pytest -x (stop at first)"
    assert deltas.fold_session_notes(harness, harness, [session_b]) == (harness, [], ())


def test_deltas_applied_to_the_seed_keep_check_spec(tmp_path):
    template = load_template(TEMPLATE)
    root = tmp_path / "adapter"
    write_seed(template, root)
    layout = HarnessLayout.of(template)
    assert (layout.agents_root, layout.skills_root, layout.policy_copy) == ("sub_agents", ".agents/skills", "ADAPTER.md")
    deltas.apply_policy(root, layout, deltas.parse_policy("# Policy\n\nnew\n", layout.policy_chars))
    done = deltas.apply_component(root, layout.agents_root, layout.agent_file, deltas.parse_subagents(json.dumps({
        "create": [{"name": "triage", "description": "Sorts failures: first look.", "instructions": "Look."}],
        "update": [{"name": "reviewer", "description": "Reviews diffs."}, {"name": "ghost", "description": "x"}],
        "retire": ["nobody"]})), verb="created")
    assert done == ["created triage", "updated reviewer", "skipped update ghost: no such entry",
                    "skipped retire nobody: no such entry"]
    assert "You review a code change" in (root / "sub_agents/reviewer/AGENT.md").read_text()   # body kept
    deltas.apply_component(root, layout.skills_root, layout.skill_file, deltas.parse_skills(json.dumps({
        "add": [{"name": "probe", "description": "Probe it.", "body": "Run it.", "scripts": {"p.py": "print(1)"}}],
        "retire": ["run-tests"]})), verb="added")
    assert os.access(root / ".agents/skills/probe/scripts/p.py", os.X_OK)
    assert not (root / ".agents/skills/run-tests").exists()
    deltas.apply_memory(root, layout, deltas.parse_memory(json.dumps({
        "add": [{"topic": "Ports", "note": "8123"}], "update": [{"topic": "running commands", "note": "use timeout"}]})), 5)
    notes = deltas.Notes.parse((root / layout.memory).read_text()).topics()
    assert notes == {"running commands": "use timeout", "ports": "8123"}
    assert [v for v in check_adapter(root, template) if v.severity == "error"] == []


def test_window_reader_signatures_feedback_and_session_notes(tmp_path):
    root = tmp_path / "rollouts"
    ok = root / "t1" / "1"
    ok.mkdir(parents=True)
    (ok / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"type": "thread.started", "thread_id": "x"},
        {"type": "item.completed", "item": {"id": "1", "type": "command_execution", "command": "make test",
                                            "aggregated_output": "boom", "exit_code": 2, "status": "failed"}},
        {"type": "item.completed", "item": {"id": "2", "type": "agent_message", "text": "done"}}]))
    (ok / "memory").mkdir()
    (ok / "memory" / "NOTES.md").write_text("# Notes\n\n## T\n\nx\n")
    crashed = root / "t2" / "1"
    crashed.mkdir(parents=True)
    results = {"t1": [RolloutResult("t1", 1, "fail", 0.0, final_answer="done", verifier_output="expected 42",
                                    trajectory="trajectory.jsonl")],
               "t2": [RolloutResult("t2", 1, "exception", None, exception_type="AgentTimeout", timed_out=True)]}
    with_feedback = evidence.read_window(results, root, feedback=True)
    a, b = with_feedback.attempts
    assert any("make test" in s and "exited 2" in s for s in a.signatures), a.signatures
    assert a.verdict == "reward 0.0: expected 42" and a.session_notes.startswith("# Notes")
    assert b.signatures == ("the session timed out (AgentTimeout)", "no answer came") and b.session_notes is None
    assert evidence.read_window(results, root, feedback=False).attempts[0].verdict is None
    text = evidence.render_window(with_feedback)
    assert "### Task t1, attempt 1: fail" in text and "expected 42" in text


def test_step_tasks_windows_the_stream():
    # step_tasks reads config.params: the evolver's params with their defaults applied (config.py)
    def merged(**given):
        return {**param_defaults("continual-harness"), **given}

    ev = ContinualHarnessEvolver()
    tasks = tuple(f"t{i}" for i in range(1, 8))
    assert ev.step_tasks(tasks, 1, merged()) == ("t1", "t2", "t3")
    assert ev.step_tasks(tasks, 3, merged(step_size=3)) == ("t7",)
    assert ev.step_tasks(tasks, 2, merged(step_size=5)) == ("t6", "t7")
    assert ev.step_tasks(tasks, 4, merged()) == ()
    with pytest.raises(ConfigError, match="step_size"):
        ev.step_tasks(tasks, 1, merged(step_size="three"))


def _step_commits(repo: Path, step: int) -> list[str]:
    """Subjects of step ``step``'s commits, oldest first."""
    lo, hi = f"refs/heads/hermit/r/step-{step - 1:04d}", f"refs/heads/hermit/r/step-{step:04d}"
    return git(repo, "log", "--reverse", "--format=%s", f"{lo}..{hi}").splitlines()


def test_two_steps_commit_per_pass_drop_a_broken_pass_and_spend_the_stream(repo):
    control = make_continual_run(repo)
    # step 1's skills pass writes a helper that is not Python (check_spec fails it), and step 2's
    # memory pass answers no JSON: each is dropped with its reason, the other passes commit
    (control / "refiner.json").write_text(json.dumps({
        "1": {"skills": json.dumps({"analysis": "broken", "add": [{"name": "bad", "description": "Bad.", "body": "b",
                                                                  "scripts": {"bad.py": "def (:\n"}}]})},
        "2": {"memory": "I would rather not."}}))
    first = _hermit(repo, control, "step")
    assert first.returncode == 0, first.stderr + first.stdout
    assert sorted(calls(control, "agent")) == ["t1#1", "t2#1", "t3#1"]
    subjects = _step_commits(repo, 1)
    assert [s.split(": ", 1)[1].split(":")[0] for s in subjects] == ["policy", "subagents", "memory"], subjects
    assert all(s.startswith("hermit(continual-harness) step 1: ") for s in subjects)
    tip = "refs/heads/hermit/r/step-0001"
    trailers = git(repo, "log", "-1", "--format=%(trailers)", tip)
    assert "Hermit-Evolver: continual-harness" in trailers and "Hermit-Pass: memory" in trailers
    tree = git(repo, "ls-tree", "-r", "--name-only", tip, "adapter/").split()
    assert "adapter/sub_agents/planner-1/AGENT.md" in tree
    assert not any("skills/bad" in p for p in tree)
    assert git(repo, "show", f"{tip}:adapter/AGENTS.md") == git(repo, "show", f"{tip}:adapter/ADAPTER.md")
    assert "Lesson of step 1" in git(repo, "show", f"{tip}:adapter/AGENTS.md")
    analysis = json.loads(git(repo, "notes", "--ref=refs/notes/hermit/analysis", "show", tip))
    passes = analysis["passes"]
    assert passes["skills"]["status"] == "dropped" and "python-syntax" in passes["skills"]["reason"]
    assert git(repo, "for-each-ref", "refs/tags/hermit/r/best") == ""       # nothing is scored best
    prompt = (control / "prompt-step-1-subagents.md").read_text()
    assert "### Task t1, attempt 1: fail" in prompt and "reward 0.0" in prompt   # feedback on by default

    second = _hermit(repo, control, "step")
    assert second.returncode == 0, second.stderr + second.stdout
    assert sorted(calls(control, "agent"))[3:] == ["t4#1", "t5#1", "t6#1"]
    assert [s.split(": ", 1)[1].split(":")[0] for s in _step_commits(repo, 2)] == ["policy", "subagents", "skills"]
    analysis = json.loads(git(repo, "notes", "--ref=refs/notes/hermit/analysis", "show", "refs/heads/hermit/r/step-0002"))
    # an answer it cannot use is asked for again, three calls in all, then the pass is dropped
    assert analysis["passes"]["memory"] == {"status": "dropped", "changes": [], "asks": 3,
                                            "reason": "the answer holds no JSON object (asked 3 times)"}
    tree = git(repo, "ls-tree", "-r", "--name-only", "refs/heads/hermit/r/step-0002", "adapter/").split()
    assert "adapter/.agents/skills/check-answer-2/scripts/check.py" in tree
    assert "Lesson of step 2" in git(repo, "show", "refs/heads/hermit/r/step-0002:adapter/ADAPTER.md")

    spent = _hermit(repo, control, "train")
    assert spent.returncode == 0, spent.stderr
    assert "the training stream is spent" in spent.stdout + spent.stderr
    assert len(calls(control, "refiner")) == 10     # 4 + 4, and step 2's memory pass asked twice more


def test_a_killed_step_resumes_with_the_cached_pass_answers(repo):
    control = make_continual_run(repo, tasks=3)
    (control / "hold-refiner-memory").write_text("")
    proc = subprocess.Popen([*GIT_HERMIT, "step"], cwd=repo, env=_env(control), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: (control / "held-refiner-memory").exists(), "the memory pass", proc)
    finally:
        kill_group(proc)
    (control / "hold-refiner-memory").unlink()
    assert calls(control, "refiner") == ["step-1-policy", "step-1-subagents", "step-1-skills", "step-1-memory"]
    assert git(repo, "for-each-ref", "refs/heads/hermit/r/step-0001") == ""
    resumed = _hermit(repo, control, "step")
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    # only the pass that never answered is asked again
    assert calls(control, "refiner") == ["step-1-policy", "step-1-subagents", "step-1-skills",
                                         "step-1-memory", "step-1-memory"]
    assert len(_step_commits(repo, 1)) == 4
    assert sorted(calls(control, "agent")) == ["t1#1", "t2#1", "t3#1"]       # rollouts reused too


# ---------------------------------------------------------------------------------- issue 9
PLANTED = "PLANTED-JUDGE-7731"
# A verifier that writes its planted text on every task: t1 passes, t2 fails, t3 gives no
# reward (a judge exception, whose error line is the planted text).
JUDGE = """#!{python}
import json, os, sys
task = os.environ["HERMIT_TASK_ID"]
print("{planted} verdict on " + task + ": expected 42, reward follows")
if task != "t3":
    print(json.dumps({{"reward": 1.0 if task == "t1" else 0.0}}))
"""


def _step_with_planting_judge(repo: Path, **params: Any) -> tuple[Path, Any]:
    """A 3-task run whose judge prints a planted verdict (JUDGE), stepped once with ``params``."""
    control = make_continual_run(repo, tasks=3)
    judge = control / "judge.py"
    judge.write_text(JUDGE.format(python=sys.executable, planted=PLANTED))
    judge.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["judge"] = {"kind": "command", "command": [str(judge)], "timeout_s": 30}
    config["evolver"]["params"].update(params)
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return control, _hermit(repo, control, "step")


def test_feedback_false_hides_every_outcome_from_every_refiner_pass(repo):
    control, r = _step_with_planting_judge(repo, feedback=False)
    assert r.returncode == 0, r.stderr + r.stdout
    scores = json.loads(git(repo, "notes", "--ref=refs/notes/hermit/scores", "show", "refs/heads/hermit/r/step-0000"))
    assert {t: s["outcome"] for t, s in scores["tasks"].items()} == {"t1": "pass", "t2": "fail", "t3": "exception"}
    prompts = sorted(control.glob("prompt-step-1-*.md"))
    assert [p.name for p in prompts] == [f"prompt-step-1-{n}.md" for n in sorted(("policy", "subagents", "skills",
                                                                                    "memory"))]
    for path in prompts:
        text = path.read_text()
        assert "### Task t1, attempt 1\n" in text and "### Task t3, attempt 1\n" in text, path.name
        for leak in (PLANTED, "expected 42", "reward", "verdict", "judge", ": pass", ": fail", ": exception",
                     "RewardFileNotFound"):
            assert leak.lower() not in text.lower(), (path.name, leak)


def test_feedback_true_shows_the_verdict_of_tasks_below_one(repo):
    control, r = _step_with_planting_judge(repo)
    assert r.returncode == 0, r.stderr + r.stdout
    text = (control / "prompt-step-1-skills.md").read_text()
    assert "### Task t2, attempt 1: fail" in text and f"{PLANTED} verdict on t2" in text
    assert f"{PLANTED} verdict on t1" not in text        # a pass shows no verdict


def test_every_pass_dropped_says_why_in_the_commit_body(repo):
    control = make_continual_run(repo, tasks=3)
    (control / "refiner.json").write_text(json.dumps({"1": {"policy": "```\n```", "subagents": "no.", "skills": "[1]",
                                                            "memory": "no."}}))
    r = _hermit(repo, control, "step")
    assert r.returncode == 0, r.stderr + r.stdout
    message = git(repo, "log", "-1", "--format=%B", "refs/heads/hermit/r/step-0001")
    assert "no adapter changes" in message and "made no edits" not in message
    assert "policy pass dropped: the policy answer is empty" in message, message
    assert "skills pass dropped: the answer is a JSON list, not an object" in message, message


def test_train_runs_the_whole_stream_once_whatever_trainer_epochs_says(repo):
    control = make_continual_run(repo, tasks=7)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["trainer"]["epochs"] = 1
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = _hermit(repo, control, "train")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "training stopped: the training stream is spent" in r.stdout
    assert sorted(calls(control, "agent")) == [f"t{i}#1" for i in range(1, 8)]        # each task once
    assert git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/hermit/r/").split() == [
        f"hermit/r/step-{n:04d}" for n in range(4)]


# Passes a task when the deployed policy carries a lesson the Refiner wrote (the seed has none).
LESSON_JUDGE = """#!{python}
import json, os
from pathlib import Path
policy = Path(os.environ["HERMIT_WORKSPACE"], "AGENTS.md").read_text()
print(json.dumps({{"reward": 1.0 if "Lesson of step" in policy else 0.0}}))
"""


def test_log_shows_the_stream_score_and_train_ends_with_the_held_out_test(repo):
    control = make_continual_run(repo, tasks=8)
    judge = control / "judge.py"
    judge.write_text(LESSON_JUDGE.format(python=sys.executable))
    judge.chmod(0o755)
    (repo / "rows" / "train.txt").write_text("".join(f"t{i}#1\n" for i in range(1, 7)))
    (repo / "rows" / "test.txt").write_text("t7#1\nt8#1\n")
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["judge"] = {"kind": "command", "command": [str(judge)], "timeout_s": 30}
    config["data"]["test"] = "rows/test.txt"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = _hermit(repo, control, "train")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "training stopped: the training stream is spent" in r.stdout
    # the final snapshot (the tip: nothing is selected) and the seed, on the test split
    assert "held-out test: final" in r.stdout and "pass@1 1.000 vs seed" in r.stdout, r.stdout
    assert "difference +100.0 points" in r.stdout and "over 2 tasks" in r.stdout, r.stdout
    agent = calls(control, "agent")
    assert sorted(agent[6:]) == ["t7#1", "t7#1", "t8#1", "t8#1"]
    tip = git(repo, "rev-parse", "refs/heads/hermit/r/step-0002").strip()
    note = json.loads(git(repo, "notes", "--ref=refs/notes/hermit/scores", "show", tip))
    assert note["split"] == "test" and note["ci"]["delta"] == 100.0 and note["ci"]["baseline"] == git(
        repo, "rev-parse", "refs/heads/hermit/r/step-0000").strip()
    again = _hermit(repo, control, "train")                  # nothing left to run: everything reused
    assert again.returncode == 0 and "(4 rollouts reused)" in again.stdout, again.stdout + again.stderr
    assert len(calls(control, "agent")) == len(agent)

    log = _hermit(repo, control, "log")
    assert log.returncode == 0, log.stderr
    lines = log.stdout.splitlines()
    assert lines[0].startswith("note: each step's rollouts ran a different window") and "not comparable" in lines[0]
    step0 = next(line for line in lines if line.startswith("step    0"))
    step1 = next(line for line in lines if line.startswith("step    1"))
    assert "window pass@1 0.000 (3 tasks)  stream pass@1 0.000 (3 tasks)" in step0, step0
    assert "window pass@1 1.000 (3 tasks)  stream pass@1 0.500 (6 tasks)" in step1, step1
    assert "stream pass@1 0.500 over 6 tasks (2 window(s))" in lines
    held = [line for line in lines if line.startswith("held-out test:")]
    assert held and "step 2" in held[0] and "+100.0 points [+100.0, +100.0]" in held[0], lines
    data = json.loads(_hermit(repo, control, "log", "--json").stdout)
    assert [s["stream"]["pass_at_1"] if s["stream"] else None for s in data["steps"]] == [0.0, 0.5, None]
    assert data["stream"]["pass_at_1"] == 0.5 and data["stream"]["tasks"] == 6 and "not comparable" in data["stream"]["note"]
    assert data["held_out"]["ci"]["delta"] == 100.0 and data["held_out"]["seed_pass_at_1"] == 0.0


def test_check_says_pi_has_no_sub_agents(repo):
    proc = hermit(repo, "init", "--run", "r", "--template", TEMPLATE)
    assert proc.returncode == 0, proc.stderr
    r = hermit(repo, "check", "--no-preflight", "--host", "pi")     # the run's host is Codex: said for Pi when asked
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sub_agents/reviewer/AGENT.md:1: host-subagents: pi has no sub-agents: 'reviewer'" in r.stdout, r.stdout


def _archive_members(path: Path) -> dict[str, bytes]:
    import tarfile
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.parametrize("host", ["codex", "claude-code"])
def test_finalize_archive_writes_the_host_native_layout(repo, host):
    control = make_continual_run(repo, tasks=3)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["host"] = host
    config["evolver"]["params"]["final"] = "last"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert _hermit(repo, control, "step").returncode == 0
    archive = repo.parent / "final.tar.gz"
    r = _hermit(repo, control, "finalize", "--archive", str(archive))
    assert r.returncode == 0, r.stderr + r.stdout
    members = _archive_members(archive)
    context = "AGENTS.md" if host == "codex" else "CLAUDE.md"
    assert b"Lesson of step 1" in members[context]
    assert b"## Window 1" in members["memory/NOTES.md"]                         # where the policy says
    skills = ".agents/skills" if host == "codex" else ".claude/skills"
    assert f"{skills}/check-answer-1/SKILL.md" in members and f"{skills}/check-answer-1/scripts/check.py" in members
    agent = ".codex/agents/planner-1.toml" if host == "codex" else ".claude/agents/planner-1.md"
    assert b"Plans the task before any edit." in members[agent]
    assert not any(name.startswith("adapter/") or name == ".hermit-deploy.json" for name in members), sorted(members)
