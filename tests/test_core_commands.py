"""init / check / log / show / rollback through the real executable on real repositories."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from support.project import build_project
from conftest import git, snapshot_state

from git_hermit.adapter.templates import list_templates


def test_init_in_empty_repo_creates_seed_branch_and_config(repo):
    r = hermit(repo, "init", "--run", "demo")
    assert r.code == 0, r.err
    assert (repo / "hermit.yaml").read_text().startswith("# yaml-language-server: $schema=")
    assert (repo / "adapter" / "AGENTS.md").is_file()
    step0 = git(repo, "rev-parse", "refs/heads/hermit/demo/step-0000").strip()
    assert git(repo, "rev-parse", "HEAD").strip() == step0
    assert git(repo, "status", "--porcelain") == ""          # work tree matches the seed commit
    assert "/.hermit/" in (repo / ".git" / "info" / "exclude").read_text()
    rewrite = git(repo, "config", "--get-all", "notes.rewriteRef")
    assert "refs/notes/hermit/verdicts" in rewrite
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", step0)
    assert "Hermit-Run: demo" in trailers and "Hermit-Step: 0" in trailers


def test_init_in_repo_with_history_keeps_other_staged_work(repo_with_history):
    repo = repo_with_history
    (repo / "notes.txt").write_text("work in progress\n")
    git(repo, "add", "notes.txt")
    r = hermit(repo, "init")
    assert r.code == 0, r.err
    assert git(repo, "status", "--porcelain").strip() == "A  notes.txt"
    parent = git(repo, "rev-parse", "refs/heads/hermit/ahe/step-0000^").strip()
    assert parent == git(repo, "rev-parse", "HEAD^").strip()


def test_init_refuses_existing_run_and_leaves_state(repo):
    assert hermit(repo, "init", "--run", "x").code == 0
    before = snapshot_state(repo)
    r = hermit(repo, "init", "--run", "x")
    assert r.code == 7 and r.err.startswith("error: ") and "hint: " in r.err
    assert "Traceback" not in r.err
    assert snapshot_state(repo) == before


def test_second_run_gets_its_own_config_and_adapter(repo):
    assert hermit(repo, "init", "--run", "a").code == 0
    r = hermit(repo, "init", "--run", "b", "--template", "evo-harness@1.0")
    assert r.code == 0, r.err
    assert (repo / "hermit" / "b.yaml").is_file() and (repo / "adapter-b").is_dir()
    first = hermit(repo, "log")                   # two runs: the root hermit.yaml's is the default
    assert first.code == 0 and "hermit/a/step-NNNN" in first.out, first.err
    assert "hermit/b/step-NNNN" in hermit(repo, "log", "--run", "b").out


@pytest.mark.parametrize("template", list_templates())
def test_check_seed_passes_for_every_template(repo, template):
    assert hermit(repo, "init", "--template", template).code == 0
    r = hermit(repo, "check", "--static", "--no-preflight")   # the seed config names no tasks yet
    assert r.code == 0, r.out + r.err
    r = hermit(repo, "check", "HEAD", "--static", "--no-preflight", "--json")
    assert r.code == 0 and json.loads(r.out)["ok"] is True


def test_check_reports_broken_rule_with_location(repo):
    assert hermit(repo, "init").code == 0
    (repo / "adapter" / "ADAPTER.md").write_text("something else\n")
    r = hermit(repo, "check", "--static")
    assert r.code == 1
    assert any(line.startswith("ADAPTER.md:") for line in r.out.splitlines()), r.out


def test_check_outside_repo_with_dir(tmp_path, repo):
    assert hermit(repo, "init").code == 0
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    r = hermit(outside, "check", "--dir", str(repo / "adapter"), "--static")
    assert r.code == 0, r.out + r.err
    r = hermit(outside, "log")
    assert r.code == 3 and "not a git repository" in r.err.lower()


def test_log_json_on_fresh_run(repo):
    assert hermit(repo, "init", "--run", "r").code == 0
    r = hermit(repo, "log", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["run"] == "r" and [s["step"] for s in data["steps"]] == [0]
    assert data["steps"][0]["pass_at_1"] is None


def test_bad_config_is_one_line_with_exit_code(repo):
    build_project(repo, config={"surprise": 1})
    r = hermit(repo, "log")
    assert r.code == 5 and "surprise" in r.err and "Traceback" not in r.err


def _commit_change(repo: Path, run: str, step: int, files: dict[str, bytes | None], change_id: str,
                   mode_exec: set[str] = frozenset()) -> str:
    """Make a change commit on the run's step branch with plain git, as a learner's edit would be."""
    ref = f"refs/heads/hermit/{run}/step-{step:04d}"
    parent_ref = f"refs/heads/hermit/{run}/step-{step - 1:04d}"
    base = git(repo, "rev-parse", ref if _exists(repo, ref) else parent_ref).strip()
    wt = repo.parent / f"wt-{change_id}"
    git(repo, "worktree", "add", "-q", "--detach", str(wt), base)
    for rel, content in files.items():
        path = wt / "adapter" / rel
        if content is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            if rel in mode_exec:
                path.chmod(path.stat().st_mode | stat.S_IXUSR)
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", f"hermit(ahe) step {step}: {change_id}: edit\n\n"
        f"Hermit-Run: {run}\nHermit-Step: {step}\nHermit-Evolver: ahe\nHermit-Change: {change_id}\n")
    sha = git(wt, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", ref, sha)
    git(repo, "worktree", "remove", "--force", str(wt))
    return sha


def _exists(repo: Path, ref: str) -> bool:
    return git(repo, "rev-parse", "-q", "--verify", ref, check=False).strip() != ""


def _tree_listing(repo: Path, rev: str) -> str:
    return git(repo, "ls-tree", "-r", rev, "--", "adapter")


def test_rollback_restores_bytes_modes_added_and_deleted_files(repo):
    assert hermit(repo, "init", "--run", "r").code == 0
    before = _tree_listing(repo, "refs/heads/hermit/r/step-0000")
    change = _commit_change(repo, "r", 1, {
        "scripts/new_tool.py": b"print('new')\n",            # added
        "MEMORY.md": (repo / "adapter" / "MEMORY.md").read_bytes() + b"- a learned entry\n",  # modified
        "scripts/run.sh": b"#!/bin/sh\necho hi\n",          # added, executable
    }, "chg-1", mode_exec={"scripts/run.sh"})
    # a deletion in a second change
    agents = sorted((repo / "adapter" / "agents").glob("*.md"))
    deleted = {f"agents/{agents[0].name}": None} if agents else {}
    change2 = _commit_change(repo, "r", 1, deleted, "chg-2") if deleted else None
    r = hermit(repo, "rollback", change, "--reason", "it broke things", "--run", "r")
    assert r.code == 0, r.err
    tip = "refs/heads/hermit/r/step-0001"
    msg = git(repo, "log", "-1", "--format=%B", tip)
    assert f"Hermit-Reverts: {change}" in msg
    if change2:
        r = hermit(repo, "rollback", "chg-2", "--reason", "undo delete", "--run", "r")
        assert r.code == 0, r.err
    assert _tree_listing(repo, tip) == before          # exact blobs and modes, nothing extra
    assert git(repo, "status", "--porcelain") == ""    # work tree and index untouched


def test_rollback_bad_inputs_leave_everything_unchanged(repo):
    assert hermit(repo, "init", "--run", "r").code == 0
    change = _commit_change(repo, "r", 1, {"MEMORY.md": b"no header any more\n"}, "chg-1")
    before = snapshot_state(repo)
    for args, code in ((["nope", "--reason", "x"], 4),
                       ([change, "--reason", " "], 7),
                       (["refs/heads/hermit/r/step-0000", "--reason", "seed"], 7)):
        r = hermit(repo, "rollback", *args, "--run", "r")
        assert r.code == code, (args, r.code, r.err)
        assert "Traceback" not in r.err
        assert snapshot_state(repo) == before


def test_rollback_refused_when_result_fails_check(repo):
    assert hermit(repo, "init", "--run", "r").code == 0
    # chg-1 adds a skill; chg-2 (later) makes AGENTS.md point at... simulate dependency:
    # chg-1 writes a valid MEMORY.md, chg-2 breaks ADAPTER.md equality; rolling back chg-1
    # alone keeps chg-2's break, so check_spec fails and nothing is written.
    _commit_change(repo, "r", 1, {"ADAPTER.md": b"diverged\n"}, "chg-2")
    change = _commit_change(repo, "r", 1, {"scripts/extra.py": b"x = 1\n"}, "chg-1")
    before = snapshot_state(repo)
    r = hermit(repo, "rollback", change, "--reason", "x", "--run", "r")
    assert r.code == 1 and "check_spec" in r.err
    assert snapshot_state(repo) == before


def test_show_step_and_commit(repo):
    assert hermit(repo, "init", "--run", "r").code == 0
    r = hermit(repo, "show", "step-0", "--run", "r", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["step"] == 0 and len(data["commits"]) == 1
    r = hermit(repo, "show", "HEAD")
    assert r.code == 0 and "no git-hermit notes" in r.out
    r = hermit(repo, "show", "step-9", "--run", "r")
    assert r.code == 4 and "no step 9" in r.err
