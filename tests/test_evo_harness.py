"""The evo-harness evolver: level validation (each rejection reason, on real directories),
reflection parsing and evidence, stream windows, and end to end on the real `git hermit`
executable with a `command` acting agent and scripted learners (tests/support/evo_learners.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from conftest import git
from git_hermit.adapter.templates import load_template
from git_hermit.gitio import files_in_directory
from git_hermit.errors import ConfigError
from git_hermit.evolvers.evo_harness import reflection
from git_hermit.evolvers.evo_harness.evolver import EvoHarnessEvolver
from git_hermit.evolvers.evo_harness.params import DEFAULTS, EvoParams
from git_hermit.evolvers.evo_harness.validate import validate_level
from git_hermit.evolvers.params import param_defaults
from git_hermit.model.rollout import RolloutResult
from git_hermit.model.schema import schema_errors
from git_hermit.resources import templates_dir
from support.evo_harness_helpers import AGENT, RUN, SUPPORT, TEMPLATE, env, log, make_evo_run, plan, skill, tip  # noqa: F401


# --- validation ------------------------------------------------------------------------------
@pytest.fixture
def dirs(tmp_path):
    before = tmp_path / "before"
    shutil.copytree(templates_dir() / "evo-harness", before, ignore=shutil.ignore_patterns("template.yaml"))
    (before / "skills" / "old-topic").mkdir()
    (before / "skills" / "old-topic" / "SKILL.md").write_text(skill("old-topic", "topic", ["t0"]))
    after = tmp_path / "after"
    shutil.copytree(before, after)
    return before, after


SUPPORTED = {"t1": ("t1#1",), "t2": ("t2#1",), "t3": ("t3#1",)}


def judge(before: Path, after: Path, level: str = "topic", **limits):
    merged = {**EvoParams.read(DEFAULTS).limits(), **limits}
    return validate_level(level=level, before=files_in_directory(before), after=files_in_directory(after), after_dir=after,
                          template=load_template(TEMPLATE), supported=SUPPORTED, limits=merged)


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def test_a_valid_topic_level_is_accepted_with_its_provenance(dirs):
    before, after = dirs
    write(after, "skills/short-answers/SKILL.md", skill("short-answers", "topic", ["t1", "t2"]))
    write(after, "skills/old-topic/SKILL.md", skill("old-topic", "topic", ["t3"], body="- revised\n"))
    v = judge(before, after)
    assert v.accepted, v.reasons
    assert sorted(v.files) == ["skills/old-topic/SKILL.md", "skills/short-answers/SKILL.md"]
    assert v.written["short-answers"] == {"level": "topic", "source_task_ids": ["t1", "t2"],
                                          "experiences": ["t1#1", "t2#1"]}


def test_citing_a_task_outside_the_batch_rejects_the_whole_level(dirs):
    before, after = dirs
    write(after, "skills/good/SKILL.md", skill("good", "topic", ["t1"]))
    write(after, "skills/bad/SKILL.md", skill("bad", "topic", ["t1", "t9"]))
    v = judge(before, after)
    assert not v.accepted and v.written == {}
    assert any("provenance" in r and "t9" in r for r in v.reasons)


def test_a_revision_must_cite_this_batch_not_the_old_evidence(dirs):
    before, after = dirs
    write(after, "skills/old-topic/SKILL.md", skill("old-topic", "topic", ["t0"], body="- revised\n"))
    assert any("t0" in r for r in judge(before, after).reasons)


def test_a_general_skill_needs_general_min_tasks_distinct_tasks(dirs):
    before, after = dirs
    write(after, "skills/cross/SKILL.md", skill("cross", "general", ["t1", "t2"]))
    assert any("general_min_tasks is 3" in r for r in judge(before, after, "general").reasons)
    assert judge(before, after, "general", general_min_tasks=2).accepted


def test_a_level_writes_only_its_own_level(dirs):
    before, after = dirs
    write(after, "skills/cross/SKILL.md", skill("cross", "general", ["t1", "t2", "t3"]))
    assert any(r.startswith("level:") for r in judge(before, after, "topic").reasons)
    shutil.rmtree(after / "skills" / "cross")
    shutil.rmtree(after / "skills" / "old-topic")          # the general curator deletes a topic skill
    assert any("deleted skills/old-topic" in r for r in judge(before, after, "general").reasons)
    assert judge(before, after, "topic").deleted == ("old-topic",)


def test_char_budgets_reject_the_level(dirs):
    before, after = dirs
    write(after, "skills/long/SKILL.md", skill("long", "topic", ["t1"], body="- x\n" * 600))
    assert any("skill-size" in r for r in judge(before, after).reasons)
    write(after, "skills/long/SKILL.md", skill("long", "topic", ["t1"]))
    assert judge(before, after).accepted
    assert any("library-size" in r for r in judge(before, after, max_library_chars=300).reasons)


def test_budgets_count_every_file_of_a_skill_folder(dirs):
    """Seed 001: the budgets bound what is deployed, so helpers and references count too."""
    before, after = dirs
    write(after, "skills/short/SKILL.md", skill("short", "topic", ["t1"]))
    write(after, "skills/other/SKILL.md", skill("other", "topic", ["t2"]))
    assert judge(before, after).accepted
    write(after, "skills/short/references/blob.txt", "x" * 100_000)
    v = judge(before, after)
    assert not v.accepted and v.written == {}
    assert any("skill-size" in r and "skills/short" in r for r in v.reasons), v.reasons
    (after / "skills/short/references/blob.txt").unlink()
    write(after, "skills/short/scripts/helper.py", "print('x')\n" * 200)     # 2,200 characters
    assert any("skill-size" in r for r in judge(before, after).reasons)
    write(after, "skills/short/scripts/helper.py", "print('x')\n" * 30)
    assert judge(before, after).accepted
    # the library budget sums the helpers too: a budget the three skills' files fit without the
    # 330-character helper rejects the level once it is there
    with_helper = judge(before, after, max_library_chars=100_000)
    assert with_helper.accepted
    (after / "skills/short/scripts/helper.py").unlink()
    for budget in range(200, 2000, 10):
        if judge(before, after, max_library_chars=budget).accepted:
            break
    write(after, "skills/short/scripts/helper.py", "print('x')\n" * 30)
    assert any("library-size" in r for r in judge(before, after, max_library_chars=budget + 300).reasons)
    assert judge(before, after, max_library_chars=budget + 330).accepted


def test_the_skill_count_rejects_the_level(dirs):
    before, after = dirs
    write(after, "skills/one/SKILL.md", skill("one", "topic", ["t1"]))
    assert any("library-count" in r for r in judge(before, after, max_topic_skills=1).reasons)
    assert judge(before, after, max_topic_skills=2).accepted


def test_native_skills_are_protected(dirs):
    before, after = dirs
    native = "skills/verify-before-finishing/SKILL.md"
    text = (after / native).read_text()
    # taking a native skill over by adding provenance
    write(after, native, text.replace("---\n\n", "flashrsi:\n  algorithm: evo_harness\n  level: topic\n"
                                      "  source_task_ids: [t1]\n---\n\n", 1))
    assert any("native skill and cannot gain provenance" in r for r in judge(before, after).reasons)
    write(after, native, text + "\n- one more step\n")     # editing it
    assert any("native skill" in r for r in judge(before, after).reasons)
    (after / native).unlink()                                # deleting it
    assert any("native skill" in r for r in judge(before, after).reasons)


def test_a_baseline_skill_whose_front_matter_does_not_parse_is_protected(dirs):
    before, after = dirs
    broken = "skills/legacy/SKILL.md"
    for root in dirs:
        write(root, broken, "name: legacy\nno front matter here\n")
        write(root, "skills/loose/notes.md", "a baseline folder without SKILL.md\n")
    write(after, broken, skill("legacy", "topic", ["t1"]))          # adopted by adding provenance
    assert any("ownership" in r and "skills/legacy" in r for r in judge(before, after).reasons)
    write(after, broken, "name: legacy\nno front matter here, edited\n")
    assert any("ownership" in r and "skills/legacy" in r for r in judge(before, after).reasons)
    (after / broken).unlink()
    assert any("ownership" in r and "skills/legacy" in r for r in judge(before, after).reasons)
    write(after, broken, "name: legacy\nno front matter here\n")
    write(after, "skills/loose/SKILL.md", skill("loose", "topic", ["t1"]))   # taking over a baseline folder
    assert any("ownership" in r and "skills/loose" in r for r in judge(before, after).reasons)


def test_duplicate_front_matter_keys_are_a_validation_error(dirs, tmp_path):
    before, after = dirs
    text = skill("dup", "topic", ["t1"]).replace("---\n\n", "flashrsi:\n  algorithm: evo_harness\n  level: general\n"
                                                   "  source_task_ids: [t1, t2, t3]\n---\n\n", 1)
    write(after, "skills/dup/SKILL.md", text)
    v = judge(before, after)
    assert not v.accepted and any("duplicate" in r and "flashrsi" in r for r in v.reasons), v.reasons
    (after / "skills/dup/SKILL.md").write_text(skill("dup", "topic", ["t1"]).replace("name: dup\n", "name: dup\nname: x\n"))
    assert any("duplicate" in r and "'name'" in r for r in judge(before, after).reasons)
    r = hermit(tmp_path, "check", "--dir", str(after), "--template", TEMPLATE)
    assert r.code == 1 and "duplicate key 'name'" in r.out, r.out + r.err


def test_stripping_provenance_or_adding_an_unmanaged_skill_is_rejected(dirs):
    before, after = dirs
    write(after, "skills/old-topic/SKILL.md", skill("old-topic", None))
    assert any("provenance was stripped" in r for r in judge(before, after).reasons)
    shutil.copy(before / "skills/old-topic/SKILL.md", after / "skills/old-topic/SKILL.md")
    write(after, "skills/fresh/SKILL.md", skill("fresh", None))
    assert any("left unmanaged" in r for r in judge(before, after).reasons)


def test_edits_outside_skills_are_rejected(dirs):
    before, after = dirs
    write(after, "skills/good/SKILL.md", skill("good", "topic", ["t1"]))
    (after / "AGENTS.md").write_text((after / "AGENTS.md").read_text() + "\nAlways use skills.\n")
    v = judge(before, after)
    assert not v.accepted and any(r.startswith("permissions:") and "AGENTS.md" in r for r in v.reasons)


def test_symlinks_are_rejected(dirs):
    before, after = dirs
    (after / "skills" / "linked").mkdir()
    (after / "skills" / "linked" / "SKILL.md").symlink_to("../../AGENTS.md")
    assert any("symbolic links" in r for r in judge(before, after).reasons)


def test_a_new_folder_may_not_shadow_a_flat_skill(dirs):
    before, after = dirs
    for root in dirs:
        write(root, "skills/flat.md", skill("flat", None))
    write(after, "skills/flat/SKILL.md", skill("flat", "topic", ["t1"]))
    assert any("skill-shadow" in r for r in judge(before, after).reasons)


def test_a_flat_skill_file_is_not_a_curator_skill(dirs):
    before, after = dirs
    write(after, "skills/flat.md", skill("flat", "topic", ["t1"]))
    assert any("flat skill file" in r for r in judge(before, after).reasons)


# --- reflection, windows, params -------------------------------------------------------------
def test_reflection_parsing():
    ok = reflection.parse('noise ```json\n{"lesson": "L", "trigger": "T", "evidence": "' + "e" * 50
                          + '", "scope_hint": "topic"}\n``` more', evidence_limit=40)
    assert ok.experience["lesson"] == "L" and len(ok.experience["evidence"]) <= 40
    assert "truncated" in ok.experience["evidence"]
    assert reflection.parse('{"skip": true}', 100).skip
    assert reflection.parse('{"lesson": ""}', 100).problem
    assert reflection.parse("no json here", 100).problem


def test_evidence_is_redacted_and_cut(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "hermit-fake-secret-value-123456789")
    run = RolloutResult("t1", 1, "fail", 0.0, final_answer="hermit-fake-secret-value-123456789 " + "x" * 500,
                        verifier_output="expected 4")
    text = reflection.evidence(run, tmp_path, 300)
    assert "verysecret" not in text and "expected 4" in text
    assert len(text) <= 300 and "truncated" in text
    assert reflection.needs_reflection(run, 1.0)
    assert not reflection.needs_reflection(RolloutResult("t", 1, "pass", 1.0), 1.0)


def test_step_tasks_windows_and_max_steps():
    # step_tasks reads config.params: the evolver's params with their defaults applied (config.py)
    def merged(**given):
        return {**param_defaults("evo-harness"), **given}

    evolver, tasks = EvoHarnessEvolver(), tuple(f"t{i}" for i in range(1, 8))
    assert evolver.step_tasks(tasks, 1, merged()) == ("t1", "t2", "t3", "t4")
    assert evolver.step_tasks(tasks, 2, merged()) == ("t5", "t6", "t7")
    assert evolver.step_tasks(tasks, 3, merged()) == ()
    assert evolver.step_tasks(tasks, 2, merged(batch_size=2, max_steps=1)) == ()
    with pytest.raises(ConfigError):
        evolver.step_tasks(tasks, 1, merged(batch_size=0))


ANSWERS = {"t1": "1", "t2": "42", "t3": "3", "t4": "4", "t5": "5", "t6": "42"}


def test_train_end_to_end(repo):
    control = make_evo_run(repo, ANSWERS, {})
    plan(control, **{
        "1_topic_curator": {"write": {"skills/short-answers/SKILL.md": skill("short-answers", "topic", ["t1", "t3"])}},
        # one valid and one invalid general skill: the level is rejected whole
        "1_general_curator": {"write": {
            "skills/good-general/SKILL.md": skill("good-general", "general", ["t1", "t3", "t4"]),
            "skills/bad-general/SKILL.md": skill("bad-general", "general", ["t1", "t3", "t9"])}},
        "reflect": {"skip": ["t5"]}})
    r = hermit(repo, "step", env=env(control))
    assert r.code == 0, r.out + r.err                     # a rejected level is a normal, recorded outcome
    assert "general curator" in r.err and "t9" in r.err
    assert sorted(log(control, "agent")) == ["t1", "t2", "t3", "t4"]        # the first window of 4
    assert sorted(log(control, "reflect")) == ["t1#1", "t3#1", "t4#1"]      # only the failures
    prompt = (control / "prompts" / "reflect-t1_1.txt").read_text()
    assert "Task: t1 (attempt 1)" in prompt and "Outcome: fail" in prompt
    # the seed: the Worker reads the task with the trajectory and the feedback
    assert "## Task statement\nAnswer of t1?" in prompt
    rollout = repo / ".hermit" / "runs" / RUN / "evals" / f"{tip(repo, 0)[:12]}-train" / "rollouts" / "t1" / "1"
    assert (rollout.parent / "task.md").read_text() == "Answer of t1?"     # once per task
    assert "- verify-before-finishing [native]:" in prompt
    curator = (control / "prompts" / "topic_curator-step-1-topic.txt").read_text()
    assert "### t4#1 (task t4)" in curator and "Cite only these task ids: t1, t3, t4." in curator
    step1, seed = tip(repo, 1), tip(repo, 0)
    commits = git(repo, "rev-list", "--reverse", f"{seed}..{step1}").split()
    assert len(commits) == 1
    subject = git(repo, "log", "-1", "--format=%s", step1).strip()   # at most 72 chars, cut at a word
    assert subject.startswith("hermit(evo-harness) step 1: step-1-topic: topic curator") and len(subject) <= 72
    assert "topic curator: 1 skill(s) written" in git(repo, "log", "-1", "--format=%b", step1)
    tree = git(repo, "ls-tree", "-r", "--name-only", step1, "adapter/skills").split()
    assert "adapter/skills/short-answers/SKILL.md" in tree
    assert not any("general" in path for path in tree)
    analysis = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", step1))
    assert analysis["levels"]["topic"]["status"] == "accepted"
    assert analysis["levels"]["general"]["status"] == "rejected"
    assert any("bad-general" in r and "t9" in r for r in analysis["levels"]["general"]["reasons"])
    assert [e["id"] for e in analysis["experiences"]] == ["t1#1", "t3#1", "t4#1"]
    provenance = json.loads(git(repo, "notes", "--ref=hermit/provenance", "show", step1))   # on the level's commit
    assert schema_errors("provenance", provenance) == [] and provenance["step"] == 1
    assert provenance["skills"]["short-answers"] == {
        "level": "topic", "source_task_ids": ["t1", "t3"], "experiences": ["t1#1", "t3#1"]}
    assert git(repo, "rev-parse", "-q", "--verify", f"refs/tags/hermit/{RUN}/best", check=False).strip() == ""

    r = hermit(repo, "train", env=env(control))
    assert r.code == 0, r.out + r.err
    assert "the training stream is spent" in r.out
    assert sorted(log(control, "agent")[4:]) == ["t5", "t6"]                # the window advanced by 4
    # the batch ran one fixed snapshot: step 1 without the skill, step 2 with it deployed natively
    assert sorted(log(control, "seen")) == ["t1:", "t2:", "t3:", "t4:", "t5:short-answers", "t6:short-answers"]
    assert sorted(log(control, "reflect")) == ["t1#1", "t3#1", "t4#1", "t5#1"]
    assert log(control, "topic_curator") == ["step-1-topic"]               # t5 skipped: nothing to compile
    assert log(control, "general_curator") == ["step-1-general"]
    step2 = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip(repo, 2)))
    assert step2["reflections"] == {"t5#1": "skip"} and step2["levels"]["topic"]["status"] == "skipped"
    assert git(repo, "log", "-1", "--format=%s", tip(repo, 2)).strip().endswith("no adapter changes")
    assert git(repo, "rev-parse", "-q", "--verify", f"refs/heads/hermit/{RUN}/step-0003",
               check=False).strip() == ""


def test_a_failed_curator_stops_the_step_and_the_rerun_reuses_the_checkpoints(repo):
    control = make_evo_run(repo, {"t1": "1", "t2": "2", "t3": "3"}, {"batch_size": 3})
    plan(control, **{
        "1_topic_curator": {"write": {"skills/short-answers/SKILL.md": skill("short-answers", "topic", ["t2"])}},
        "1_general_curator": {"write": {"skills/cross/SKILL.md": skill("cross", "general", ["t1", "t2", "t3"])}}})
    (control / "fail-general_curator").write_text("")
    r = hermit(repo, "step", env=env(control))
    assert r.code == 12, r.out + r.err                    # AgentError: the Worker's error propagates
    assert "general curator session failed" in r.err
    assert git(repo, "rev-parse", "-q", "--verify", f"refs/heads/hermit/{RUN}/step-0001", check=False).strip() == ""
    (control / "fail-general_curator").unlink()
    r = hermit(repo, "step", env=env(control))
    assert r.code == 0, r.out + r.err
    assert sorted(log(control, "reflect")) == ["t1#1", "t2#1", "t3#1"]     # not re-called
    assert log(control, "topic_curator") == ["step-1-topic"]
    assert log(control, "general_curator") == ["step-1-general", "step-1-general"]
    # subjects are cut at 72 characters; the whole summary is in each message
    messages = git(repo, "log", "-z", "--format=%B", f"{tip(repo, 0)}..{tip(repo, 1)}").strip("\0").split("\0")
    assert len(messages) == 2
    assert "general curator: 1 skill(s) written" in messages[0]
    assert "topic curator: 1 skill(s) written" in messages[1]


def test_a_one_shot_learner_is_refused(repo):
    control = make_evo_run(repo, {"t1": "1"}, {})
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"]["base"] = "llm"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for command in ("step", "train"):
        r = hermit(repo, command, env=env(control))
        assert r.code == 5 and "needs a learner that edits files" in r.err, r.out + r.err
    assert log(control, "agent") == []                      # refused before any rollout was paid for
    assert not (repo / ".hermit" / "runs" / RUN / "evals").exists()


def test_both_levels_rejected_says_so_in_the_commit_body(repo):
    control = make_evo_run(repo, {"t1": "1", "t2": "2", "t3": "3"}, {"batch_size": 3})
    plan(control, **{
        "1_topic_curator": {"write": {"skills/bad-topic/SKILL.md": skill("bad-topic", "topic", ["t9"])}},
        "1_general_curator": {"write": {"skills/bad-general/SKILL.md": skill("bad-general", "general", ["t1"])}}})
    r = hermit(repo, "step", env=env(control))
    assert r.code == 0, r.out + r.err
    message = git(repo, "log", "-1", "--format=%B", tip(repo, 1))
    assert message.startswith("hermit(evo-harness) step 1: no adapter changes")
    assert "made no edits" not in message
    assert "topic level rejected" in message and "t9" in message, message
    assert "general level rejected" in message and "general_min_tasks" in message, message


def test_no_edits_says_the_learners_made_none(repo):
    control = make_evo_run(repo, {"t1": "1"}, {"batch_size": 1})
    r = hermit(repo, "step", env=env(control))
    assert r.code == 0, r.out + r.err
    message = git(repo, "log", "-1", "--format=%B", tip(repo, 1))
    assert "the learners made no edits" in message and "rejected" not in message, message


@pytest.mark.parametrize("max_steps, steps, reason", [(None, 3, "the training stream is spent"),
                                                      (2, 2, "2 step(s) done (max_steps)")])
def test_max_steps_null_is_the_whole_stream_whatever_trainer_epochs_says(repo, max_steps, steps, reason):
    answers = {f"t{i}": "42" for i in range(1, 6)}
    control = make_evo_run(repo, answers, {"batch_size": 2, "max_steps": max_steps})
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["trainer"] = {"epochs": 1}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = hermit(repo, "train", env=env(control))
    assert r.code == 0, r.out + r.err
    assert f"training stopped: {reason}" in r.out, r.out
    assert sorted(log(control, "agent")) == sorted(answers)[:2 * steps]
    assert git(repo, "rev-parse", "-q", "--verify", f"refs/heads/hermit/{RUN}/step-{steps:04d}", check=False).strip()
    assert not git(repo, "rev-parse", "-q", "--verify", f"refs/heads/hermit/{RUN}/step-{steps + 1:04d}",
                   check=False).strip()


# --- success_threshold (seed 001: reflect only on runs that failed or scored below it) ---------
@pytest.mark.parametrize("threshold, reflected", [
    (1.0, {"e", "r0", "r3", "r5", "r7", "r9", "t"}),        # the default: everything short of full marks
    (0.8, {"e", "r0", "r3", "r5", "r7", "t"}),
    (0.5, {"e", "r0", "r3", "t"}),                           # 0.5 itself is not below 0.5
    (0.0, {"e", "t"}),                                       # only the runs that failed to execute
    (1.5, {"e", "r0", "r3", "r5", "r7", "r9", "r10", "t"}),  # even a pass scored below the bar
])
def test_success_threshold_reflects_only_failed_runs_and_scores_below_it(threshold, reflected):
    runs = {"e": RolloutResult("e", 1, "exception", None, exception_type="AgentTimeout"),
            "t": RolloutResult("t", 1, "fail", None, exception_type="AgentTimeout"),   # timeout_as: fail
            "r0": RolloutResult("r0", 1, "fail", 0.0), "r3": RolloutResult("r3", 1, "fail", 0.3),
            "r5": RolloutResult("r5", 1, "fail", 0.5), "r7": RolloutResult("r7", 1, "fail", 0.7),
            "r9": RolloutResult("r9", 1, "fail", 0.9), "r10": RolloutResult("r10", 1, "pass", 1.0)}
    assert {name for name, run in runs.items() if reflection.needs_reflection(run, threshold)} == reflected


REWARDS = {"t1": 0.0, "t2": 0.3, "t3": 0.5, "t4": 0.7, "t5": 0.9, "t6": 1.0}
VERIFIER = """#!{python}
import json, os
print(json.dumps({{"reward": {rewards!r}[os.environ["HERMIT_TASK_ID"]]}}))
"""


@pytest.mark.parametrize("threshold, reflected", [
    (0.5, ["t1#1", "t2#1"]),
    (0.8, ["t1#1", "t2#1", "t3#1", "t4#1"]),
    (1.0, ["t1#1", "t2#1", "t3#1", "t4#1", "t5#1"]),
    (0.0, []),
])
def test_a_step_reflects_on_the_runs_below_success_threshold(repo, threshold, reflected):
    control = make_evo_run(repo, {t: "42" for t in REWARDS}, {"batch_size": 6, "success_threshold": threshold})
    verifier = control / "verifier.py"
    verifier.write_text(VERIFIER.format(python=sys.executable, rewards=REWARDS))
    verifier.chmod(0o755)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["judge"] = {"kind": "command", "command": [str(verifier)]}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = hermit(repo, "step", env=env(control))
    assert r.code == 0, r.out + r.err
    assert sorted(log(control, "agent")) == sorted(REWARDS)
    assert sorted(log(control, "reflect")) == reflected
    analysis = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip(repo, 1)))
    assert sorted(analysis["reflections"]) == reflected
