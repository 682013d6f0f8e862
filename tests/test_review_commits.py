"""Commits that read well in a pull request: short subjects cut at a word, the whole description
in the body, a learner author, ADAPTER.md collapsed by GitHub, rollback evidence in the body,
and init's notes configuration."""

from __future__ import annotations

import pytest

from support.cli_helpers import hermit
from conftest import git
from git_hermit.core.commits import step_message, subject_line


def _commits(repo):
    out = git(repo, "log", "--format=%H%x00%an%x00%ae%x00%cn%x00%s%x00%B%x01", "hermit/demo/step-0004")
    return [dict(zip(("sha", "an", "ae", "cn", "subject", "body"), item.strip("\n").split("\0")))
            for item in out.split("\x01") if item.strip()]


def test_subjects_at_most_72_cut_at_a_word_with_the_description_in_the_body(demo_run):
    commits = [c for c in _commits(demo_run) if "hermit(" in c["subject"]]
    assert commits and all(len(c["subject"]) <= 72 for c in commits)
    cut = [c for c in commits if c["subject"].endswith("…")]
    assert cut, "the demo has descriptions longer than a subject"
    for c in cut:
        shown = c["subject"].split(": ", 2)[-1].removesuffix("…")
        words = c["body"].split("\n\n", 1)[1]
        assert shown in words                          # the body has the whole description
        following = words.split(shown, 1)[1]
        assert following[:1] in (" ", ",", ":", ";")  # cut where a word ended, not inside one


@pytest.mark.parametrize("summary", ["word " * 30, "a" * 100, "short"])
def test_subject_line_rule(summary):
    subject, cut = subject_line("hermit(ahe) step 12: chg-3: ", summary)
    assert len(subject) <= 72 and cut == (len("hermit(ahe) step 12: chg-3: " + summary.strip()) > 72)
    message = step_message(run="r", step=12, evolver="ahe", summary=summary, change_id="chg-3")
    assert " ".join(summary.split()) in " ".join(message.split())


def test_learner_commits_have_a_learner_author_and_the_user_as_committer(demo_run):
    commits = _commits(demo_run)
    changes = [c for c in commits if "Hermit-Manifest:" in c["body"]]
    assert changes and all(c["an"] == "git-hermit ahe learner (scripted)" for c in changes)
    assert all(c["ae"] == "learner@git-hermit.invalid" for c in changes)
    assert all(c["cn"] == "Test Committer" for c in changes)      # the user who ran the step
    rollbacks = [c for c in commits if "Hermit-Reverts:" in c["body"]]
    assert rollbacks and all(c["an"] != "git-hermit ahe learner (scripted)" for c in rollbacks)


def test_rollback_commit_body_carries_its_evidence(demo_run):
    rollback = next(c for c in _commits(demo_run) if "Hermit-Reverts:" in c["body"])
    body = rollback["body"]
    assert "predicted fixes that did not happen: units-1, units-2, units-3" in body
    assert "Tasks that regressed this step: mean-1, mean-2, mean-3" in body
    assert "pass@1 on the train split (k=2): 0.500" in body and "-> 0.375" in body
    assert "paired bootstrap 95% CI over 12 tasks" in body


def test_adapter_md_is_marked_generated_for_github(demo_run):
    assert git(demo_run, "check-attr", "linguist-generated", "adapter/ADAPTER.md").strip().endswith(": true")
    assert git(demo_run, "check-attr", "linguist-generated", "adapter/AGENTS.md").strip().endswith(": unspecified")
    seed = git(demo_run, "rev-parse", "hermit/demo/step-0000").strip()
    assert "linguist-generated" in git(demo_run, "show", f"{seed}:.gitattributes")


def test_init_keeps_existing_gitattributes_and_records_the_base_branch(repo_with_history):
    (repo_with_history / ".gitattributes").write_text("*.png binary")
    git(repo_with_history, "add", ".gitattributes")
    git(repo_with_history, "commit", "-q", "-m", "attrs")
    result = hermit(repo_with_history, "init", "--run", "r")
    assert result.code == 0, result.err
    text = (repo_with_history / ".gitattributes").read_text()
    assert text.startswith("*.png binary\n") and "/adapter/ADAPTER.md linguist-generated=true" in text
    assert git(repo_with_history, "status", "--porcelain").strip() == ""
    assert "Hermit-Base-Branch: main" in git(repo_with_history, "log", "-1", "--format=%B", "hermit/r/step-0000")


def test_init_sets_the_notes_config_that_keeps_them_readable(repo_with_history):
    assert hermit(repo_with_history, "init", "--run", "r").code == 0
    shown = git(repo_with_history, "config", "--get-all", "notes.displayRef").split()
    assert shown == ["refs/notes/hermit/manifes[t]", "refs/notes/hermit/verdict[s]"]   # globs: no warning
    assert git(repo_with_history, "config", "notes.rewriteMode").strip() == "overwrite"
    assert "refs/notes/hermit/scores" in git(repo_with_history, "config", "--get-all", "notes.rewriteRef")


def test_git_log_shows_a_changes_manifest_note(demo_run):
    out = git(demo_run, "log", "-1", "hermit/demo/step-0001")
    assert "Notes (hermit/manifest):" in out
