"""`git hermit report --open`: step pull requests stacked on each other, updated with their verdicts.

Real runs (the scripted ahe learners of step_support) and a stateful gh stand-in
(tests/support/fake_gh.py) that keeps pull requests, labels and commit statuses and logs every call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import copy_demo
from support.step_support import RUN, change, env_for, make_run, plan

from support.fake_gh import FakeGitHub, install

ANSWERS = {"t1": "4", "t2": "7", "t3": "9"}


def _branch(n: int) -> str:
    return f"hermit/{RUN}/step-{n:04d}"


def _tip(repo: Path, n: int) -> str:
    return git(repo, "rev-parse", f"refs/heads/{_branch(n)}").strip()


@pytest.fixture
def gh(tmp_path):
    env = install(tmp_path / "bin", tmp_path / "github")
    return FakeGitHub(tmp_path / "github"), env


def _open(repo: Path, env: dict, *args: str) -> str:
    r = hermit(repo, "report", *args, "--open", env=env)
    assert r.code == 0, r.err
    return r.out


def _step(repo: Path, control: Path, n: int, task: str) -> None:
    plan(control, n, append={"MEMORY.md": f"- answer {task}: {ANSWERS[task]}\n"},
         changes=[change(f"chg-{n}", ["MEMORY.md"], fixes=[task])])
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.err


def _change_commit(repo: Path, n: int) -> str:
    """The commit of step n that declared chg-n (its manifest note)."""
    for sha in git(repo, "rev-list", f"{_branch(n - 1)}..{_branch(n)}").split():
        note = git(repo, "notes", "--ref", "refs/notes/hermit/manifest", "show", sha, check=False)
        if f'"chg-{n}"' in note:
            return sha
    raise AssertionError(f"no commit of step {n} declares chg-{n}")


def test_a_three_step_run_is_a_stack_and_each_pr_gets_its_verdicts(repo, gh):
    fake, env = gh
    control = make_run(repo, ANSWERS, k=1, allow_early_stop=False)
    _step(repo, control, 1, "t1")
    assert _open(repo, env, "1").strip() == "opened pull request https://github.com/acme/widgets/pull/1"
    _step(repo, control, 2, "t2")
    _open(repo, env, "2")
    _step(repo, control, 3, "t3")
    _open(repo, env, "3")

    prs = {p["head"]: p for p in fake.prs()}
    # stacked: each diff is that step's changes alone
    assert [(prs[_branch(n)]["base"], prs[_branch(n)]["number"]) for n in (1, 2, 3)] == [
        ("main", 1), (_branch(1), 2), (_branch(2), 3)]
    assert len(fake.argvs("pr", "create")) == 3
    # step 1's pull request, opened before anything judged it, was rewritten by step 2's publication
    one = prs[_branch(1)]
    assert one["title"].startswith("[EFFECTIVE] hermit r step 1"), one["title"]
    assert one["labels"] == ["hermit:effective"]
    row = next(line for line in one["body"].splitlines() if line.startswith("| `chg-1` |"))
    assert "EFFECTIVE" in row and "pending" not in row
    create_body = next(c["body"] for c in fake.calls() if c["argv"][:2] == ["pr", "create"]
                       and _branch(1) in c["argv"])
    assert "pending (next step)" in create_body         # what it said when opened
    # an example flip per change, from the scores note (so a clone shows it): the answers and outcomes
    assert "- `chg-1` fixed `t1`: before `I do not know` (fail) → after `4` (pass)" in one["body"], one["body"]
    note = json.loads(git(repo, "notes", "--ref", "refs/notes/hermit/scores", "show", _tip(repo, 1)))
    assert note["evaluation"]["examples"] == [{
        "change_id": "chg-1", "task": "t1", "kind": "fixed", "before": "I do not know", "before_outcome": "fail",
        "after": "4", "after_outcome": "pass", "judge": note["evaluation"]["examples"][0]["judge"]}]
    # and chg-1's commit carries a status GitHub shows beside it in the pull request
    [status] = fake.statuses(_change_commit(repo, 1))
    assert status["context"] == f"hermit/{RUN}" and status["state"] == "success"
    assert status["description"].startswith("chg-1 EFFECTIVE; step +") and "[" in status["description"]
    assert fake.pr(_branch(2))["title"].startswith("[EFFECTIVE] hermit r step 2")
    assert not fake.pr(_branch(3))["title"].startswith("[")        # step 3 is not judged yet
    assert fake.statuses(_change_commit(repo, 3)) == []

    # again: the pull requests are edited, not opened twice
    before = len(fake.argvs("pr", "create"))
    assert _open(repo, env, "3").strip().startswith("updated pull request https://github.com/acme/widgets/pull/3")
    assert len(fake.argvs("pr", "create")) == before and len(fake.prs()) == 3


def test_merged_and_closed_prs_leave_the_stack_and_the_later_ones_are_retargeted(repo, gh):
    fake, env = gh
    control = make_run(repo, ANSWERS, k=1, allow_early_stop=False)
    for n, task in ((1, "t1"), (2, "t2"), (3, "t3")):
        _step(repo, control, n, task)
        _open(repo, env, str(n))
    fake.merge(fake.pr(_branch(1))["number"])           # a reviewer merges the bottom of the stack
    r = hermit(repo, "report", "3", "--open", env=env)
    assert r.code == 0, r.err
    assert fake.pr(_branch(2))["base"] == "main" and fake.pr(_branch(3))["base"] == _branch(2)
    assert f"retargeted step 2's pull request to main" in r.err
    fake.close(fake.pr(_branch(2))["number"])            # and closes step 2's without merging
    _open(repo, env, "3")
    assert fake.pr(_branch(3))["base"] == "main"
    assert len(fake.prs()) == 3


def test_dry_run_prints_every_call_and_makes_none_but_the_listing(demo_run, tmp_path, gh):
    fake, env = gh
    demo = copy_demo(demo_run, tmp_path / "demo")
    git(demo, "remote", "add", "origin", "https://github.com/acme/widgets.git")
    r = hermit(demo, "report", "2", "--open", "--dry-run", env=env)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("gh pr list --state all")
    assert any(l.startswith("gh pr create --base hermit/demo/step-0001 --head hermit/demo/step-0002 --title '[")
               for l in lines), lines
    assert any(l.startswith("gh label create hermit:") for l in lines)
    assert any(l.startswith("gh api --method POST repos/acme/widgets/statuses/") and "context=hermit/demo" in l
               for l in lines), lines
    assert [c["argv"][:2] for c in fake.calls()] == [["pr", "list"]]     # only the read ran
    assert fake.prs() == []


def test_dry_run_without_open_is_a_usage_error(demo_run, tmp_path):
    demo = copy_demo(demo_run, tmp_path / "demo")
    r = hermit(demo, "report", "2", "--dry-run")
    assert r.code == 2 and r.err.startswith("error: --dry-run needs --open")


def test_a_gh_failure_is_one_error_naming_the_command(demo_run, tmp_path, gh):
    fake, env = gh
    demo = copy_demo(demo_run, tmp_path / "demo")
    state = json.loads((tmp_path / "github" / "state.json").read_text())
    state["repo"] = "someone/else"            # statuses of another repository: HTTP 404
    (tmp_path / "github" / "state.json").write_text(json.dumps(state))
    git(demo, "remote", "add", "origin", "https://github.com/acme/widgets.git")
    r = hermit(demo, "report", "2", "--open", env=env)
    assert r.code == 12, r.err
    assert r.err.startswith("error: gh failed: HTTP 404") and "hint:" in r.err and "Traceback" not in r.err


def test_unpredicted_regressions_come_first_in_the_report_and_show_in_log_and_show(repo, gh):
    fake, env = gh
    control = make_run(repo, ANSWERS, k=1, allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": "- answer t1: 4\n- answer t2: 7\n"},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1", "t2"])])
    assert hermit(repo, "step", env=env_for(control)).code == 0
    # step 2 breaks t2 and says it risks nothing
    plan(control, 2, append={"MEMORY.md": "- answer t3: 9\n- answer t2: 8\n"},
         changes=[change("chg-2", ["MEMORY.md"], fixes=["t3"])])
    assert hermit(repo, "step", env=env_for(control)).code == 0
    plan(control, 3, append={"MEMORY.md": "\n"}, changes=[change("chg-3", ["MEMORY.md"])])
    assert hermit(repo, "step", env=env_for(control)).code == 0
    text = hermit(repo, "report", "2").out
    sections = re.findall(r"^### (.+)$", text, re.M)
    assert sections[0] == "Unpredicted regressions", sections
    assert "no change of this step predicted as a risk: t2." in text
    log = hermit(repo, "log").out
    row = next(line for line in log.splitlines() if line.startswith("step    2"))
    assert "unpredicted regressions: t2" in row, log
    assert "unpredicted regressions (no change predicted them): t2" in hermit(repo, "show", _branch(2)).out
    # and step 2's pull request says it first too, once step 3 is published
    _open(repo, env, "2")
    _open(repo, env, "3")
    body = fake.pr(_branch(2))["body"]
    assert re.findall(r"^### (.+)$", body, re.M)[0] == "Unpredicted regressions"

