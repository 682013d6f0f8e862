"""`git hermit push` / `fetch`: a run shared through a bare remote reads the same in a clone;
concurrent pushes of two runs both land; notes merge field-wise and a real conflict stops."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from support.cli_helpers import GIT_HERMIT, hermit
from conftest import git
from support.review_support import bare_remote, clone, copy_demo


@pytest.fixture
def shared(demo_run, tmp_path):
    """(origin clone with the demo run and a remote 'origin', the bare remote) after one push."""
    origin = copy_demo(demo_run, tmp_path / "origin")
    remote = bare_remote(tmp_path / "remote.git")
    git(origin, "remote", "add", "origin", str(remote))
    git(origin, "push", "-q", "origin", "main")
    result = hermit(origin, "push")
    assert result.code == 0, result.err
    return origin, remote


def _note(repo, kind, rev):
    return json.loads(git(repo, "notes", f"--ref=hermit/{kind}", "show", rev))


def _set_note(repo, kind, rev, data):
    path = repo.parent / f"note-{kind}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    git(repo, "notes", f"--ref=hermit/{kind}", "add", "-f", "-F", str(path), rev)


def _add_split(repo, rev, split, pass_at_1, tasks) -> dict:
    """Add a split's score to the scores note on ``rev`` in ``repo``; returns the note written."""
    scores = _note(repo, "scores", rev)
    scores["splits"] = {**scores.get("splits", {}), split: {"k": 1, "pass_at_1": pass_at_1, "tasks": tasks}}
    _set_note(repo, "scores", rev, scores)
    return scores


def test_push_says_what_moved_and_sends_branches_tags_notes(shared):
    origin, remote = shared
    refs = git(remote, "for-each-ref", "--format=%(refname)").split()
    for ref in ("refs/heads/hermit/demo/step-0000", "refs/heads/hermit/demo/step-0004",
                "refs/tags/hermit/demo/best", "refs/tags/hermit/demo/final",
                "refs/notes/hermit/scores", "refs/notes/hermit/manifest", "refs/notes/hermit/verdicts"):
        assert ref in refs
    again = hermit(origin, "push")
    assert again.code == 0 and "up to date" in again.out


def test_fresh_clone_reads_the_run_as_its_origin_does(shared, tmp_path):
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    before = hermit(other, "log")
    assert before.code == 4          # a plain clone has no step branches nor notes
    fetched = hermit(other, "fetch")
    assert fetched.code == 0, fetched.err
    assert "refs/notes/hermit/scores: new" in fetched.out
    assert git(other, "rev-parse", "main") == git(origin, "rev-parse", "main")   # the user's branch untouched
    for args in (("log",), ("log", "--json"), ("show", "step-2"), ("show", "step-4", "--json"),
                 ("report", "2"), ("report", "step-4", "--format", "json"), ("report", "1", "--format", "html")):
        here, there = hermit(origin, *args), hermit(other, *args)
        assert here.code == there.code == 0, (args, there.err)
        assert here.out == there.out, args
    assert "predictions so far" in hermit(other, "log").out
    # eval re-runs what it cannot reuse (the clone has no .hermit/ working files): same figures
    args = ("eval", "hermit/demo/final", "--baseline", "hermit/demo/step-0000", "--split", "test")
    here, there = hermit(origin, *args, timeout=300), hermit(other, *args, timeout=300)
    assert here.code == there.code == 0 and here.out == there.out, there.err


def test_fetch_fast_forwards_a_step_and_merges_notes_on_different_commits(shared, tmp_path):
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    # the origin adds a note on a commit; the teammate one on another; both survive
    seed = git(origin, "rev-parse", "hermit/demo/step-0000").strip()
    tip = git(origin, "rev-parse", "hermit/demo/step-0004").strip()
    _add_split(origin, seed, "valid", 0.5, 2)
    assert hermit(origin, "push").code == 0
    _add_split(other, tip, "extra", 1.0, 2)
    pushed = hermit(other, "push")
    assert pushed.code == 0, pushed.err
    assert "merged origin's refs/notes/hermit/scores (merged)" in pushed.out
    assert hermit(origin, "fetch").code == 0
    for repo in (origin, other):
        assert _note(repo, "scores", seed)["splits"]["valid"]["pass_at_1"] == 0.5
        assert _note(repo, "scores", tip)["splits"]["extra"]["pass_at_1"] == 1.0
    assert hermit(origin, "log").out == hermit(other, "log").out


def test_same_note_changed_on_both_sides_merges_field_wise(shared, tmp_path):
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    seed = git(origin, "rev-parse", "hermit/demo/step-0000").strip()
    mine = _add_split(origin, seed, "a", 0.25, 4)
    assert hermit(origin, "push").code == 0
    _add_split(other, seed, "b", 0.75, 4)
    assert hermit(other, "push").code == 0
    merged = json.loads(git(remote, "notes", "--ref=hermit/scores", "show", seed))
    assert merged["splits"]["a"]["pass_at_1"] == 0.25 and merged["splits"]["b"]["pass_at_1"] == 0.75
    assert merged["pass_at_1"] == mine["pass_at_1"]


def test_notes_conflict_stops_the_push_naming_commit_and_record(shared, tmp_path):
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    seed = git(origin, "rev-parse", "hermit/demo/step-0000").strip()
    mine = _note(origin, "scores", seed)
    _set_note(origin, "scores", seed, {**mine, "pass_at_1": 0.123})
    assert hermit(origin, "push").code == 0
    _set_note(other, "scores", seed, {**mine, "pass_at_1": 0.456})
    before_remote = git(remote, "for-each-ref")
    before_local = git(other, "for-each-ref", "refs/notes", "refs/heads", "refs/tags")
    result = hermit(other, "push")
    assert result.code == 15, result.err
    lines = result.err.strip().splitlines()
    assert lines[0].startswith("error: ") and seed[:12] in lines[0] and "scores" in lines[0]
    assert "pass_at_1" in lines[0] and lines[1].startswith("hint: ")
    assert git(remote, "for-each-ref") == before_remote
    assert git(other, "for-each-ref", "refs/notes", "refs/heads", "refs/tags") == before_local


def test_concurrent_pushes_of_two_runs_both_land(shared, tmp_path):
    origin, remote = shared
    clones = []
    for name in ("alpha", "beta"):
        repo = clone(remote, tmp_path / f"clone-{name}")
        assert hermit(repo, "fetch").code == 0
        assert hermit(repo, "init", "--run", name).code == 0
        seed = git(repo, "rev-parse", f"hermit/{name}/step-0000").strip()
        demo_seed = git(repo, "rev-parse", "hermit/demo/step-0000").strip()
        note = _note(repo, "scores", demo_seed)
        _set_note(repo, "scores", seed, {**note, "run": name, "commit": seed})
        clones.append((name, repo, seed))
    procs = [subprocess.Popen([*GIT_HERMIT, "push", "--run", name], cwd=repo, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ))
             for name, repo, _ in clones]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    refs = git(remote, "for-each-ref", "--format=%(refname)").split()
    for name, _, seed in clones:
        assert f"refs/heads/hermit/{name}/step-0000" in refs
        assert json.loads(git(remote, "notes", "--ref=hermit/scores", "show", seed))["run"] == name
    assert git(remote, "notes", "--ref=hermit/scores", "list", git(remote, "rev-parse", "hermit/demo/step-0004").strip())


def test_push_refuses_a_step_branch_that_diverged(shared, tmp_path):
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    git(remote, "update-ref", "refs/heads/hermit/demo/step-0004", git(remote, "rev-parse", "hermit/demo/step-0003").strip())
    git(other, "commit", "-q", "--allow-empty", "-m", "x")
    git(other, "update-ref", "refs/heads/hermit/demo/step-0003", git(other, "rev-parse", "HEAD").strip())
    result = hermit(other, "push")
    assert result.code == 4 and "step-0003" in result.err and "hint:" in result.err


def test_unknown_remote_is_one_error_line(shared):
    origin, _ = shared
    result = hermit(origin, "fetch", "nowhere")
    assert result.code == 4 and result.err.startswith("error: cannot reach remote 'nowhere'")


def test_a_clone_continuing_the_run_counts_the_origins_predictions(shared, tmp_path):
    """The run's prediction precision/recall comes from notes, not from the origin's working files."""
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    tip = git(origin, "rev-parse", "hermit/demo/step-0004").strip()
    expected = _note(origin, "scores", tip)["evaluation"]["precision_recall"]["run"]
    stepped = hermit(other, "step", timeout=300)     # re-evaluates the tip: the demo's last step again
    assert stepped.code == 0, stepped.err
    again = _note(other, "scores", tip)["evaluation"]["precision_recall"]
    assert again["run"]["counts"] == expected["counts"]
    assert hermit(other, "log").out.splitlines()[-1] == hermit(origin, "log").out.splitlines()[-1]


def test_doctor_counts_git_hermit_fetch_as_fetching_the_notes(shared, tmp_path):
    _, remote = shared
    other = clone(remote, tmp_path / "teammate")
    before = hermit(other, "doctor", "--json")
    assert "remote origin does not fetch" in before.out and "git hermit fetch origin" in before.out
    assert hermit(other, "fetch").code == 0
    assert "remote origin does not fetch" not in hermit(other, "doctor", "--json").out


def test_a_push_that_loses_the_race_fetches_merges_and_retries(shared, tmp_path):
    """Deterministic race: the remote's notes move between our fetch and our push (a pre-receive
    hook publishes another clone's notes once); the push retries on the new notes and keeps both."""
    origin, remote = shared
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    seed = git(other, "rev-parse", "hermit/demo/step-0000").strip()
    tip = git(other, "rev-parse", "hermit/demo/step-0004").strip()
    theirs = _note(other, "scores", seed)
    _set_note(other, "scores", seed, {**theirs, "splits": {**theirs.get("splits", {}), "x": {"k": 1, "pass_at_1": 0.5, "tasks": 1}}})
    git(other, "push", "-q", "origin", "refs/notes/hermit/scores:refs/side/scores")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"""#!/bin/sh
if [ ! -f {tmp_path}/raced ]; then
  touch {tmp_path}/raced
  env -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES \\
    git update-ref refs/notes/hermit/scores "$(git rev-parse refs/side/scores)"
fi
""")
    hook.chmod(0o755)
    mine = _note(origin, "scores", tip)
    _set_note(origin, "scores", tip, {**mine, "splits": {**mine.get("splits", {}), "y": {"k": 1, "pass_at_1": 1.0, "tasks": 1}}})
    result = hermit(origin, "push")
    assert result.code == 0, result.err
    assert (tmp_path / "raced").exists() and "pushed on attempt 2" in result.out
    assert json.loads(git(remote, "notes", "--ref=hermit/scores", "show", seed))["splits"]["x"]["pass_at_1"] == 0.5
    assert json.loads(git(remote, "notes", "--ref=hermit/scores", "show", tip))["splits"]["y"]["pass_at_1"] == 1.0


def test_a_remote_that_refuses_the_push_is_one_error_not_a_retry(shared, tmp_path):
    origin, remote = shared
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho x >> {tmp_path}/calls\nexit 1\n")
    hook.chmod(0o755)
    tip = git(origin, "rev-parse", "hermit/demo/step-0004").strip()
    mine = _note(origin, "scores", tip)
    _set_note(origin, "scores", tip, {**mine, "splits": {**mine.get("splits", {}), "y": {"k": 1, "pass_at_1": 1.0, "tasks": 1}}})
    result = hermit(origin, "push")
    assert result.code == 4 and "pre-receive hook declined" in result.err and "hint:" in result.err
    assert (tmp_path / "calls").read_text().count("x") == 1
