"""A teammate's remote is untrusted: `fetch` never rewrites what this repository holds silently.

A remote whose notes build on ours and flip a verdict, change a score or an outcome, or hold an
invalid note; a remote step branch that does not descend from the run's previous step; a reviewer's
commit (or a merge of the base branch) on an older step's measured branch — each is refused with
exit 21, named (commit, record, field), and nothing of it enters the local refs, so the next push
cannot forward it. `--accept-remote` takes a remote's records on purpose; `--keep-local` keeps ours.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import bare_remote, clone, copy_demo

RUN = "demo"


@pytest.fixture
def shared(demo_run, tmp_path):
    """(origin with the demo run, the bare remote it pushed to, an attacker's clone that fetched it)."""
    origin = copy_demo(demo_run, tmp_path / "origin")
    remote = bare_remote(tmp_path / "remote.git")
    git(origin, "remote", "add", "origin", str(remote))
    assert hermit(origin, "push").code == 0
    attacker = clone(remote, tmp_path / "attacker")
    assert hermit(attacker, "fetch").code == 0
    return origin, remote, attacker


def _refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/", "refs/tags/", "refs/notes/",
               "refs/hermit/")


def _notes(repo, kind) -> dict:
    out = {}
    for line in git(repo, "notes", f"--ref=hermit/{kind}", "list").splitlines():
        _, target = line.split()
        out[target] = json.loads(git(repo, "notes", f"--ref=hermit/{kind}", "show", target))
    return out


def _set_note(repo, kind, target, text: str) -> None:
    path = repo.parent / f"note-{kind}.txt"
    path.write_text(text)
    git(repo, "notes", f"--ref=hermit/{kind}", "add", "-f", "-F", str(path), target)


def _publish_notes(attacker, kind) -> None:
    git(attacker, "push", "-q", "origin", f"refs/notes/hermit/{kind}:refs/notes/hermit/{kind}")


def _refused(result, *words) -> tuple[str, str]:
    assert result.code == 21, (result.out, result.err)
    error = next(line for line in result.err.splitlines() if line.startswith("error: "))
    hint = next(line for line in result.err.splitlines() if line.startswith("hint: "))
    for word in words:
        assert word in error, (word, error)
    assert "Traceback" not in result.err
    return error, hint


def test_a_remote_that_flips_a_verdict_is_refused_unless_accepted(shared):
    origin, remote, attacker = shared
    target, verdict = next((t, v) for t, v in _notes(attacker, "verdicts").items() if v["verdict"] == "HARMFUL")
    _set_note(attacker, "verdicts", target, json.dumps({**verdict, "verdict": "EFFECTIVE"}, indent=2, sort_keys=True))
    _publish_notes(attacker, "verdicts")      # the remote's notes history builds on ours
    before, log = _refs(origin), hermit(origin, "log").out
    error, hint = _refused(hermit(origin, "fetch"), target[:12], "verdict", "HARMFUL", "EFFECTIVE")
    assert "--accept-remote" in hint
    assert _refs(origin) == before and hermit(origin, "log").out == log
    assert _notes(origin, "verdicts")[target]["verdict"] == "HARMFUL"
    taken = hermit(origin, "fetch", "--accept-remote")
    assert taken.code == 0, taken.err
    assert "accepted the remote's change" in taken.out and target[:12] in taken.out
    assert _notes(origin, "verdicts")[target]["verdict"] == "EFFECTIVE"


def test_a_remote_that_changes_a_score_or_an_outcome_is_refused(shared):
    origin, remote, attacker = shared
    target, scores = next((t, s) for t, s in _notes(attacker, "scores").items() if s["pass_at_1"] > 0.5)
    _set_note(attacker, "scores", target, json.dumps({**scores, "pass_at_1": 0.001}, indent=2, sort_keys=True))
    _publish_notes(attacker, "scores")
    before = _refs(origin)
    _refused(hermit(origin, "fetch"), target[:12], "pass_at_1", "0.001")
    assert _refs(origin) == before
    # the outcomes rewritten with a pass@1 that matches them: still a rewrite of what we hold
    task, score = next((t, s) for t, s in scores["tasks"].items() if s["attempts"][0]["outcome"] == "pass")
    tasks = {**scores["tasks"], task: {**score, "attempts": [{**score["attempts"][0], "outcome": "fail", "reward": 0.0},
                                                               *score["attempts"][1:]]}}
    counts = [(len(s["attempts"]), sum(a["outcome"] == "pass" for a in s["attempts"])) for s in tasks.values()]
    lower = round(sum(c / n for n, c in counts) / len(counts), 6)
    _set_note(attacker, "scores", target, json.dumps({**scores, "tasks": tasks, "pass_at_1": lower},
                                                     indent=2, sort_keys=True))
    git(attacker, "push", "-q", "-f", "origin", "refs/notes/hermit/scores:refs/notes/hermit/scores")
    _refused(hermit(origin, "fetch"), target[:12], f"tasks.{task}.attempts.0.outcome")
    assert _refs(origin) == before


def test_invalid_notes_never_enter_the_local_refs_and_the_next_push_does_not_forward_them(shared, tmp_path):
    origin, remote, attacker = shared
    held = next(iter(_notes(attacker, "manifest")))
    _set_note(attacker, "manifest", held, "{not json")
    seed = git(attacker, "rev-parse", f"hermit/{RUN}/step-0000").strip()
    _set_note(attacker, "analysis", seed, json.dumps({"v": 1, "run": RUN}))      # fails its schema
    _publish_notes(attacker, "manifest")
    _publish_notes(attacker, "analysis")
    before = _refs(origin)
    for args in (("fetch",), ("fetch", "--accept-remote")):      # accepting never takes an invalid note
        result = hermit(origin, *args)
        _refused(result, "is not JSON" if "note on commit " + held[:12] in result.err.split("error: ")[1] else "schema")
        assert held[:12] in result.err and seed[:12] in result.err
        assert _refs(origin) == before
    second = bare_remote(tmp_path / "second.git")
    assert hermit(origin, "push", str(second)).code == 0
    for kind in ("manifest", "analysis"):
        assert git(second, "rev-parse", f"refs/notes/hermit/{kind}") == git(origin, "rev-parse", f"refs/notes/hermit/{kind}")


def test_push_refuses_to_merge_a_remote_that_rewrote_our_records_and_keep_local_restores_them(shared):
    origin, remote, attacker = shared
    target, verdict = next(iter(_notes(attacker, "verdicts").items()))
    _set_note(attacker, "verdicts", target, json.dumps({**verdict, "verdict": "INEFFECTIVE"}, indent=2, sort_keys=True))
    _publish_notes(attacker, "verdicts")
    before = git(remote, "rev-parse", "refs/notes/hermit/verdicts")
    _refused(hermit(origin, "push"), target[:12], "nothing was pushed")
    assert git(remote, "rev-parse", "refs/notes/hermit/verdicts") == before
    kept = hermit(origin, "fetch", "--keep-local")
    assert kept.code == 0, kept.err
    assert hermit(origin, "push").code == 0
    assert json.loads(git(remote, "notes", "--ref=hermit/verdicts", "show", target))["verdict"] == verdict["verdict"]


def test_a_step_branch_that_does_not_descend_from_the_previous_step_is_refused(shared):
    origin, remote, attacker = shared
    # a foreign "step 99" from an unrelated commit, and a step 5 grafted onto step 2
    git(attacker, "switch", "-q", "--orphan", "foreign")
    (attacker / "x.txt").write_text("not this run\n")
    git(attacker, "add", "x.txt")
    git(attacker, "commit", "-qm", "foreign")
    git(attacker, "push", "-q", "origin", f"HEAD:refs/heads/hermit/{RUN}/step-0099")
    git(attacker, "switch", "-q", f"hermit/{RUN}/step-0002")
    git(attacker, "commit", "-q", "--allow-empty", "-m", "a step 5 that skips steps 3 and 4")
    git(attacker, "push", "-q", "origin", f"HEAD:refs/heads/hermit/{RUN}/step-0005")
    before = _refs(origin)
    result = hermit(origin, "fetch")
    error, _ = _refused(result)
    assert "step-0099" in result.err and "no step 98" in result.err
    assert "step-0005" in result.err and "does not descend from step 4" in result.err
    assert _refs(origin) == before
    assert "99" not in hermit(origin, "report").out.split("step")[1][:4]


@pytest.mark.parametrize("how", ["commit", "update-branch"])
def test_a_reviewers_commit_on_an_older_step_never_rewrites_the_measured_step(shared, how):
    origin, remote, attacker = shared
    older = f"hermit/{RUN}/step-0002"
    measured = git(origin, "rev-parse", older).strip()
    git(attacker, "switch", "-q", older)
    if how == "commit":       # GitHub's "Commit suggestion" on step 2's pull request
        memory = attacker / "adapter" / "MEMORY.md"
        memory.write_text(memory.read_text() + "- a reviewer's suggestion\n")
        git(attacker, "commit", "-qam", "Apply suggestion from review")
    else:                     # GitHub's "Update branch": the base branch merged into the step's
        git(attacker, "switch", "-q", "main")
        (attacker / "NOTES.txt").write_text("work on main\n")
        git(attacker, "add", "NOTES.txt")
        git(attacker, "commit", "-qm", "work on main")
        git(attacker, "switch", "-q", older)
        git(attacker, "merge", "-q", "--no-edit", "main")
    suggestion = git(attacker, "rev-parse", "HEAD").strip()
    git(attacker, "push", "-q", "origin", f"HEAD:refs/heads/{older}")
    log = hermit(origin, "log").out
    result = hermit(origin, "fetch")
    error, hint = _refused(result, "step-0002", suggestion[:10], measured[:10], "step 3 measured")
    if how == "commit":
        assert "git cherry-pick" in hint and suggestion[:12] in hint and f"hermit/{RUN}/step-0004" in hint
    else:
        assert "Update branch" in error and "nothing to re-apply" in hint and "cherry-pick" not in hint
    assert git(origin, "rev-parse", older).strip() == measured
    assert hermit(origin, "log").out == log
    # pushing leaves the remote's branch as it is (no force), and sends the rest
    pushed = hermit(origin, "push")
    assert pushed.code == 0, pushed.err
    assert "left as it is" in pushed.err
    assert git(remote, "rev-parse", f"refs/heads/{older}").strip() == suggestion


def _push_forged_records(attacker, tmp_path, files: dict[str, tuple[str, bytes]]) -> None:
    """Push, from the attacker's clone, a records commit on top of the run's with ``files`` ({path:
    (mode, content)}) written into its tree by plumbing, as no git-hermit would write them."""
    ref = f"refs/hermit/{RUN}/records"
    index = {"GIT_INDEX_FILE": str(tmp_path / "index")}
    git(attacker, "read-tree", ref, env=index)
    for i, (name, (mode, content)) in enumerate(files.items()):
        blob = tmp_path / f"blob-{i}"
        blob.write_bytes(content)
        sha = git(attacker, "hash-object", "-w", str(blob)).strip()
        git(attacker, "update-index", "--add", "--cacheinfo", f"{mode},{sha},{name}", env=index)
    tree = git(attacker, "write-tree", env=index).strip()
    commit = git(attacker, "commit-tree", tree, "-p", ref, "-m", "forged records").strip()
    git(attacker, "push", "-q", "origin", f"{commit}:{ref}")


def test_a_remote_that_rewrites_a_steps_records_or_plants_a_link_in_them_is_refused(shared, tmp_path):
    origin, remote, attacker = shared
    record = json.loads(git(attacker, "show", f"refs/hermit/{RUN}/records:steps/0002/step.json"))
    forged = json.dumps({**record, "rollouts": 0}).encode()
    _push_forged_records(attacker, tmp_path, {"steps/0002/step.json": ("100644", forged),
                                              "steps/0009/step.json": ("120000", str(tmp_path / "index").encode())})
    before = _refs(origin)
    result = hermit(origin, "fetch")
    _refused(result)
    assert "the records of step 2" in result.err and "differ" in result.err
    assert "step 9" in result.err and "not a plain file" in result.err
    assert _refs(origin) == before


def test_a_remote_record_over_the_size_bound_is_refused_before_it_enters_our_refs(shared, tmp_path):
    origin, remote, attacker = shared
    step = json.dumps({"v": 1, "run": RUN, "step": 9, "evolver": "ahe"}).encode()
    huge = b"x" * (4 * 1024 * 1024 + 1)           # one byte over what a record may hold
    _push_forged_records(attacker, tmp_path, {"steps/0009/step.json": ("100644", step),
                                              "steps/0009/learner/history.md": ("100644", huge)})
    before = _refs(origin)
    result = hermit(origin, "fetch")
    _refused(result, "step 9", "steps/0009/learner/history.md", "4,194,304 bytes")
    assert _refs(origin) == before
    assert hermit(origin, "log").code == 0


def test_a_second_fetch_revalidates_nothing_it_holds_and_still_refuses_a_forged_record(shared, tmp_path,
                                                                                        monkeypatch):
    """Only what is new is validated (a note's blob id, a step directory's tree): a fetch of a run this
    repository already holds checks nothing again; a record the remote forged since is new, so it is
    checked and refused."""
    import git_hermit.model.records as model_records
    from git_hermit.core import share
    from git_hermit.gitio import Repo
    origin, remote, attacker = shared
    assert hermit(origin, "fetch").code == 0
    validated: list[bytes] = []
    listed: list[list[int]] = []
    read_note, check_steps = model_records.note_data, share._record_problems

    def counting_note_data(kind, raw):
        validated.append(raw if isinstance(raw, bytes) else raw.encode())
        return read_note(kind, raw)

    def counting_problems(repo, commit, steps, *args, **kwargs):
        listed.append(list(steps))
        return check_steps(repo, commit, steps, *args, **kwargs)
    monkeypatch.setattr(model_records, "note_data", counting_note_data)
    monkeypatch.setattr(share, "_record_problems", counting_problems)

    def fetch() -> share.FetchOutcome:
        with Repo.discover(origin) as repo:
            return share.fetch_runs(repo)
    again = fetch()
    assert not again.refused and validated == [] and [s for s in listed if s] == []
    # the attacker flips a verdict and rewrites step 2's step.json, and publishes both
    target, verdict = next((t, v) for t, v in _notes(attacker, "verdicts").items() if v["verdict"] == "HARMFUL")
    forged_note = json.dumps({**verdict, "verdict": "EFFECTIVE"}, indent=2, sort_keys=True)
    _set_note(attacker, "verdicts", target, forged_note)
    _publish_notes(attacker, "verdicts")
    record = json.loads(git(attacker, "show", f"refs/hermit/{RUN}/records:steps/0002/step.json"))
    _push_forged_records(attacker, tmp_path, {"steps/0002/step.json": ("100644", json.dumps({**record, "rollouts": 0}).encode())})
    before = _refs(origin)
    forged = fetch()
    assert {r.kind for r in forged.refused} == {"record"} and len(forged.refused) == 2, forged.refused
    assert any(target[:12] in r.what and "verdict" in r.what for r in forged.refused)
    assert any("the records of step 2" in r.what for r in forged.refused)
    # only the forged note was read and checked, only the forged step directory listed
    assert validated and all(b"EFFECTIVE" in raw for raw in validated), len(validated)
    assert [s for s in listed if s] == [[2]]
    assert _refs(origin) == before
    _refused(hermit(origin, "fetch"), target[:12], "verdict")
    assert _refs(origin) == before


def _push_forged_step(attacker, step: int, entries: list[tuple[str, str, str, bytes]]) -> None:
    """Publish a records commit whose ``steps/NNNN`` is a tree made by hand (``git mktree``, which
    takes names an index refuses: a ``.git`` component, a control character): ``entries`` are
    (mode, type, name, content or a nested tree's mktree input)."""
    ref = f"refs/hermit/{RUN}/records"

    def fed(args: list[str], data: bytes) -> str:
        proc = subprocess.run(["git", *args], cwd=attacker, input=data, capture_output=True, check=True)
        return proc.stdout.decode().strip()

    def mktree(lines: list[str]) -> str:
        return fed(["mktree", "-z"], "".join(line + "\0" for line in lines).encode())

    def blob(content: bytes) -> str:
        return fed(["hash-object", "-w", "--stdin"], content)
    lines = []
    for mode, kind, name, content in entries:
        sha = mktree([f"100644 blob {blob(content)}\tconfig"]) if kind == "tree" else blob(content)
        lines.append(f"{mode} {kind} {sha}\t{name}")
    step_tree = mktree(lines)
    steps = [line for line in git(attacker, "ls-tree", "-z", f"{ref}:steps").split("\0") if line]
    steps = [line for line in steps if not line.endswith(f"\t{step:04d}")] + [f"040000 tree {step_tree}\t{step:04d}"]
    root = [line for line in git(attacker, "ls-tree", "-z", ref).split("\0") if line and not line.endswith("\tsteps")]
    tree = mktree(root + [f"040000 tree {mktree(steps)}\tsteps"])
    commit = git(attacker, "commit-tree", tree, "-p", ref, "-m", "forged records").strip()
    git(attacker, "push", "-q", "origin", f"{commit}:{ref}")


@pytest.mark.parametrize("listing", ["by path", "whole steps/"])
@pytest.mark.parametrize("planted, why", [
    (("100755", "blob", "run.sh", b"#!/bin/sh\n"), "is not a plain file"),
    (("040000", "tree", ".git", b""), "is not a safe path"),
    (("100644", "blob", "..", b"x"), "is not a safe path"),
    (("100644", "blob", "a\x01b.json", b"{}"), "is not a safe path"),
    (("100644", "blob", "extra.md", b"x"), "holds 3 files (at most 2)"),
])
def test_a_remote_step_directory_breaking_a_rule_is_refused_however_it_is_listed(shared, monkeypatch, planted, why,
                                                                                  listing):
    """Every rule on a remote's record directory (plain files only, safe names, the file count) holds
    whether the new steps are listed by their paths or the whole ``steps/`` is (more than a few are
    new), and past each rule's fast test over the listing."""
    from git_hermit.core import share
    from git_hermit.gitio import Repo
    origin, remote, attacker = shared
    monkeypatch.setattr(share, "MAX_RECORD_FILES", 2)
    if listing == "whole steps/":
        monkeypatch.setattr(share, "_LISTED_BY_PATH", 0)
    step = json.dumps({"v": 1, "run": RUN, "step": 9, "evolver": "ahe"}).encode()
    _push_forged_step(attacker, 9, [("100644", "blob", "step.json", step), ("100644", "blob", "ledger.json", b"{}"),
                                    planted])
    before = _refs(origin)
    with Repo.discover(origin) as repo:
        outcome = share.fetch_runs(repo)
    refused = [r.what for r in outcome.refused]
    assert len(refused) == 1 and "step 9" in refused[0] and why in refused[0], refused


def _review_entry(commit: str, reviewer: str, association: str = "COLLABORATOR") -> dict:
    return {"command": "keep", "run": RUN, "step": 2, "reviewer": reviewer, "association": association, "pr": 3,
            "url": "https://github.com/o/r/pull/3#issuecomment-1", "at": "2026-12-02T06:30:00Z", "commit": commit}


def test_a_remote_cannot_forge_or_rewrite_a_reviewers_decision(shared):
    """A review note (`git hermit review`) travels like the others: a new valid entry merges by union,
    an entry naming no write access fails its schema and a changed entry we hold is a rewrite: refused."""
    origin, remote, attacker = shared
    target = git(attacker, "rev-parse", f"hermit/{RUN}/step-0001").strip()
    mine = {"v": 1, "entries": {"issue_comment:1:0": _review_entry(target, "alice")}}
    _set_note(origin, "reviews", target, json.dumps(mine))
    assert hermit(origin, "push").code == 0
    assert hermit(attacker, "fetch").code == 0
    theirs = {"v": 1, "entries": {**mine["entries"], "issue_comment:2:0": _review_entry(target, "bob", "MEMBER")}}
    _set_note(attacker, "reviews", target, json.dumps(theirs))
    _publish_notes(attacker, "reviews")
    assert hermit(origin, "fetch").code == 0                    # a new entry: merged
    assert set(_notes(origin, "reviews")[target]["entries"]) == {"issue_comment:1:0", "issue_comment:2:0"}
    before = _refs(origin)
    forged = {"v": 1, "entries": {**theirs["entries"], "issue_comment:3:0": _review_entry(target, "mallory", "NONE")}}
    _set_note(attacker, "reviews", target, json.dumps(forged))
    _publish_notes(attacker, "reviews")
    _refused(hermit(origin, "fetch", "--accept-remote"), target[:12], "schema")
    assert _refs(origin) == before
    rewritten = {"v": 1, "entries": {**theirs["entries"], "issue_comment:1:0": _review_entry(target, "mallory")}}
    _set_note(attacker, "reviews", target, json.dumps(rewritten))
    git(attacker, "push", "-q", "-f", "origin", "refs/notes/hermit/reviews:refs/notes/hermit/reviews")
    _refused(hermit(origin, "fetch"), target[:12], "reviewer")
    assert _refs(origin) == before
