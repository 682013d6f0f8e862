"""gitio.Repo against real git: discovery, reads, CAS ref transactions, plumbing commits, materialise."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from git_hermit.errors import GitStateError, NotARepository, RefConflict
from git_hermit.gitio import (
    ZERO_SHA, FileChange, RefUpdate, Repo, TreeEntry, format_message, open_cache_repo, set_debug,
)
from tests.conftest import git


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def index_bytes(path: Path) -> bytes:
    index = path / ".git" / "index"
    return index.read_bytes() if index.exists() else b""


# ----------------------------------------------------------------------------- discovery
def test_discover_from_subdirectory(repo_with_history, monkeypatch):
    sub = repo_with_history / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    with Repo.discover() as repo:
        assert repo.work_tree == repo_with_history.resolve()
        assert repo.git_dir == repo_with_history.resolve() / ".git"
        assert repo.common_dir == repo.git_dir
        assert repo.resolve_commit("HEAD") == head(repo_with_history)
    with Repo.discover(sub) as repo:  # what `git -C sub hermit …` amounts to
        assert repo.work_tree == repo_with_history.resolve()


def test_discover_from_linked_worktree(repo_with_history, tmp_path):
    linked = tmp_path / "linked"
    git(repo_with_history, "worktree", "add", "-q", "-b", "other", str(linked))
    with Repo.discover(linked) as repo:
        assert repo.work_tree == linked.resolve()
        assert repo.common_dir == repo_with_history.resolve() / ".git"
        assert repo.git_dir != repo.common_dir
        assert repo.head_branch() == "other"
        # Objects and refs are shared with the main worktree.
        assert repo.read_ref("refs/heads/main") == head(repo_with_history)


def test_discover_with_git_dir_env(repo_with_history, tmp_path, monkeypatch):
    expected = head(repo_with_history)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_DIR", os.path.relpath(repo_with_history / ".git", tmp_path))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo_with_history))
    with Repo.discover(elsewhere) as repo:
        assert repo.git_dir == repo_with_history.resolve() / ".git"
        assert repo.work_tree == repo_with_history.resolve()
        assert repo.rev_parse("HEAD") == expected
        # git processes run elsewhere still see the same repository.
        assert repo.git("rev-parse", "HEAD", cwd=elsewhere).strip() == expected


def test_discover_refuses_bare_and_outside(tmp_path, repo_with_history):
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo_with_history), str(bare))
    with pytest.raises(NotARepository) as info:
        Repo.discover(bare)
    assert "bare" in info.value.message and info.value.hint
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(NotARepository) as info:
        Repo.discover(outside)
    assert "not a git repository" in info.value.message and info.value.hint
    with pytest.raises(NotARepository) as info:
        Repo.discover(repo_with_history / ".git")
    assert ".git directory" in info.value.message


# ----------------------------------------------------------------------------- reads
def test_reads(repo_with_history):
    (repo_with_history / "d").mkdir()
    (repo_with_history / "d" / "x y.txt").write_bytes(b"spaced\n")
    git(repo_with_history, "add", ".")
    git(repo_with_history, "commit", "-q", "-m", "second\n\nbody\n\nHermit-Run: r1\nHermit-Step: 3")
    with Repo.discover(repo_with_history) as repo:
        tip = repo.resolve_commit("main")
        assert repo.rev_parse("nope") is None
        with pytest.raises(GitStateError):
            repo.resolve_commit("nope")
        assert repo.read_blob(tip, "d/x y.txt") == b"spaced\n"
        assert repo.read_blob(tip, "missing") is None
        assert repo.read_blob(tip, "d") is None
        assert repo.ls_tree(tip, "d") == {"x y.txt": TreeEntry("100644", "blob", repo.read_objects([f"{tip}:d/x y.txt"])[0][0])}
        assert set(repo.ls_tree(tip)) == {"README.md", "d/x y.txt"}
        assert repo.ls_tree(tip, "absent") == {}
        info = repo.commit_info(tip)
        assert info.subject == "second" and info.trailers == (("Hermit-Run", "r1"), ("Hermit-Step", "3"))
        assert info.author_date == "2026-01-01T00:00:00+00:00"
        history = repo.log("main")
        assert [c.sha for c in history] == git(repo_with_history, "rev-list", "main").split()
        assert history[0] == info
        assert [c.subject for c in repo.log("main", paths=["README.md"])] == ["initial"]
        assert len(repo.log("main", max_count=1)) == 1
        assert repo.is_ancestor(history[1].sha, tip) and not repo.is_ancestor(tip, history[1].sha)
        git(repo_with_history, "tag", "-a", "-m", "t", "v1")
        refs = repo.list_refs("refs/")
        assert refs["refs/heads/main"] == tip
        assert refs["refs/tags/v1"] == git(repo_with_history, "rev-parse", "v1").strip()  # tag object, not peeled
        repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0000", tip), RefUpdate("refs/heads/hermit/r/other", tip)])
        assert list(repo.list_refs("refs/heads/hermit/r/step-")) == ["refs/heads/hermit/r/step-0000"]
        assert set(repo.list_refs("refs/heads/hermit/")) == {"refs/heads/hermit/r/step-0000", "refs/heads/hermit/r/other"}
        assert repo.read_object(tip)[0] == "commit"
        assert repo.is_empty() is False and repo.head_branch() == "main"


def test_empty_repo(repo):
    with Repo.discover(repo) as r:
        assert r.is_empty() and r.head_branch() == "main"
        assert r.read_ref("HEAD") is None


def test_git_wrapper_errors_and_debug(repo_with_history, capsys):
    with Repo.discover(repo_with_history) as repo:
        with pytest.raises(GitStateError) as info:
            repo.git("rev-parse", "--verify", "no-such-rev")
        assert "rev-parse" in info.value.message and "fatal" in info.value.message
        assert repo.git("rev-parse", "--verify", "no-such-rev", check=False) == ""
        set_debug(True)
        try:
            repo.git("rev-parse", "HEAD")
        finally:
            set_debug(False)
        err = capsys.readouterr().err
        assert "git rev-parse HEAD  (" in err and " ms)" in err


def test_config_and_exclude(repo):
    with Repo.discover(repo) as r:
        assert r.config_get("hermit.x") is None and r.config_get_all("hermit.y") == []
        r.config_set("hermit.x", "1")
        r.config_add("hermit.y", "a")
        r.config_add("hermit.y", "b")
        assert r.config_get("hermit.x") == "1" and r.config_get_all("hermit.y") == ["a", "b"]
        assert r.info_exclude_add(".hermit/") is True
        assert r.info_exclude_add(".hermit/") is False
        assert (repo / ".git" / "info" / "exclude").read_text().splitlines().count(".hermit/") == 1
        (repo / ".hermit").mkdir()
        (repo / ".hermit" / "f").write_text("x")
        assert git(repo, "status", "--porcelain") == ""


# ----------------------------------------------------------------------------- ref transactions
def test_update_refs_transaction_and_cas_conflict(repo_with_history):
    with Repo.discover(repo_with_history) as repo:
        first = repo.resolve_commit("HEAD")
        second = repo.write_commit(first, {"f": FileChange(b"1")}, "second\n")
        repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0000", first, ZERO_SHA),
                          RefUpdate("refs/heads/hermit/r/step-0001", second, ZERO_SHA)])
        before = git(repo_with_history, "for-each-ref")
        # One stale old value: the whole transaction fails, including the valid update.
        with pytest.raises(RefConflict):
            repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0000", second, first),
                              RefUpdate("refs/heads/hermit/r/step-0001", first, first)])
        with pytest.raises(RefConflict):  # "must not exist" but it does
            repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0001", first, ZERO_SHA)])
        with pytest.raises(RefConflict):  # delete with a wrong old value
            repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0000", None, second)])
        assert git(repo_with_history, "for-each-ref") == before
        repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0000", None, first),
                          RefUpdate("refs/heads/hermit/r/step-0001", first, second)])
        assert repo.read_ref("refs/heads/hermit/r/step-0000") is None
        assert repo.read_ref("refs/heads/hermit/r/step-0001") == first
        # A directory/file ref conflict is a git state error, not a CAS conflict.
        with pytest.raises(GitStateError) as info:
            repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0001/x", first)])
        assert not isinstance(info.value, RefConflict)


# ----------------------------------------------------------------------------- plumbing commits
def test_plumbing_commits_leave_index_and_worktree_untouched(repo_with_history, tmp_path):
    work = repo_with_history
    (work / "README.md").write_text("edited, staged\n")
    git(work, "add", "README.md")
    (work / "README.md").write_text("edited again, unstaged\n")
    (work / "untracked.txt").write_text("u\n")
    status, index = git(work, "status", "--porcelain", "--ignored"), index_bytes(work)
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("a\n")
    with Repo.discover(work) as repo:
        base = repo.resolve_commit("HEAD")
        one = repo.write_commit(base, {"adapter/x": FileChange(b"x\n")}, "one\n")
        two = repo.commit_directory(one, source, "adapter", "two\n")
        assert set(repo.ls_tree(two)) == {"README.md", "adapter/sub/a.txt"}
        assert repo.commit_info(two).parents == (one,)
    assert git(work, "status", "--porcelain", "--ignored") == status
    assert index_bytes(work) == index
    assert head(work) == base
    assert (work / "README.md").read_text() == "edited again, unstaged\n"


def test_write_commit_changes_and_deletes(repo):
    with Repo.discover(repo) as r:
        root = r.write_commit(None, {"a/b.txt": FileChange(b"b"), "run.sh": FileChange(b"#!/bin/sh\n", "100755"),
                                     "link": FileChange(b"a/b.txt", "120000")},
                              format_message("root", trailers=[("Hermit-Run", "r")]))
        assert r.commit_info(root).parents == ()
        assert {p: e.mode for p, e in r.ls_tree(root).items()} == {
            "a/b.txt": "100644", "run.sh": "100755", "link": "120000"}
        child = r.write_commit(root, {"a/b.txt": None, "a": FileChange(b"now a file")}, "child\n")
        assert set(r.ls_tree(child)) == {"a", "run.sh", "link"}
        assert r.read_blob(child, "a") == b"now a file"
        assert r.read_ref("HEAD") is None  # no ref moved
        with pytest.raises(GitStateError):
            r.write_commit(root, {"../evil": FileChange(b"x")}, "bad\n")


def test_commit_directory_replaces_subtree_keeps_modes_and_skips_git(repo_with_history, tmp_path):
    source = tmp_path / "adapter"
    (source / "skills" / "s1").mkdir(parents=True)
    (source / "skills" / "s1" / "SKILL.md").write_text("skill\n")
    (source / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (source / "run.sh").chmod(0o755)
    os.symlink("skills/s1/SKILL.md", source / "link.md")
    os.symlink("skills", source / "dirlink")
    (source / ".git").mkdir()
    (source / ".git" / "HEAD").write_text("junk")
    with Repo.discover(repo_with_history) as repo:
        base = repo.resolve_commit("HEAD")
        first = repo.commit_directory(base, source, "adapter", "adapter v1\n")
        entries = repo.ls_tree(first, "adapter")
        assert {p: e.mode for p, e in entries.items()} == {
            "skills/s1/SKILL.md": "100644", "run.sh": "100755", "link.md": "120000", "dirlink": "120000"}
        assert repo.read_blob(first, "adapter/link.md") == b"skills/s1/SKILL.md"
        assert repo.read_blob(first, "README.md") == b"hello\n"  # outside the prefix: kept
        # Unchanged directory: the parent comes back, no empty commit.
        assert repo.commit_directory(first, source, "adapter", "again\n") == first
        (source / "run.sh").chmod(0o644)  # a mode change alone is a change
        (source / "link.md").unlink()
        second = repo.commit_directory(first, source, "adapter/", "adapter v2\n")
        assert second != first
        entries = repo.ls_tree(second, "adapter")
        assert "link.md" not in entries and entries["run.sh"].mode == "100644"


def test_materialise_exact_bytes_and_modes(repo, tmp_path):
    payload = bytes(range(256)) + b"\r\n\0tail"
    with Repo.discover(repo) as r:
        commit = r.write_commit(None, {
            "adapter/bin/tool": FileChange(b"#!/bin/sh\nexit 0\n", "100755"),
            "adapter/data.bin": FileChange(payload),
            "adapter/deep/er/file.md": FileChange("ünïcode\n".encode()),
            "adapter/current": FileChange(b"deep/er/file.md", "120000"),
            "other/ignored": FileChange(b"not under prefix"),
        }, "c\n")
        dest = tmp_path / "ws" / "adapter"
        assert r.materialise(commit, "adapter", dest) == 4
    assert (dest / "data.bin").read_bytes() == payload
    assert (dest / "deep/er/file.md").read_text() == "ünïcode\n"
    tool = (dest / "bin/tool").stat()
    assert tool.st_mode & stat.S_IXUSR and (dest / "bin/tool").read_bytes() == b"#!/bin/sh\nexit 0\n"
    assert not (dest / "data.bin").stat().st_mode & stat.S_IXUSR
    assert (dest / "current").is_symlink() and os.readlink(dest / "current") == "deep/er/file.md"
    assert (dest / "current").read_text() == "ünïcode\n"
    assert not (tmp_path / "ws" / "other").exists()
    # Round trip: committing the materialised directory reproduces the same tree.
    with Repo.discover(repo) as r:
        assert r.commit_directory(commit, dest, "adapter", "same\n") == commit
    assert subprocess.run(["sh", str(dest / "bin/tool")]).returncode == 0


def test_bundle_round_trip(repo_with_history, tmp_path):
    other = tmp_path / "worker"
    other.mkdir()
    git(other, "init", "-q")
    with Repo.discover(repo_with_history) as repo:
        sha = repo.write_commit(repo.resolve_commit("HEAD"), {"f": FileChange(b"shipped")}, "ship\n")
        repo.update_refs([RefUpdate("refs/heads/hermit/r/step-0001", sha, ZERO_SHA)])
        bundle = tmp_path / "step.bundle"
        repo.bundle_create(bundle, ["refs/heads/hermit/r/step-0001"])
    with Repo.discover(other) as worker:
        worker.bundle_fetch(bundle, "refs/heads/hermit/r/step-0001")
        assert worker.read_ref("refs/heads/hermit/r/step-0001") == sha
        assert worker.read_blob(sha, "f") == b"shipped"
    cache_path = tmp_path / "cache"
    with open_cache_repo(cache_path) as cache, open_cache_repo(cache_path) as again:  # re-opening is fine
        assert cache.work_tree == again.work_tree == cache_path.resolve()
        assert cache.rev_parse(sha) is None
        cache.bundle_fetch(bundle, "refs/heads/hermit/r/step-0001")
        assert cache.materialise(sha, "", tmp_path / "mat") == 2


def test_batch_reader_survives_fork_and_sees_new_refs(repo_with_history):
    with Repo.discover(repo_with_history) as repo:
        base = repo.resolve_commit("HEAD")
        git(repo_with_history, "branch", "later")  # made by another process after the reader started
        assert repo.read_ref("refs/heads/later") == base
        pid = os.fork()
        if pid == 0:  # child: must get its own cat-file, not share the parent's pipes
            ok = repo.resolve_commit("later") == base
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert repo.resolve_commit("HEAD") == base  # parent's reader still consistent


def test_batch_reader_is_thread_safe(repo):
    from concurrent.futures import ThreadPoolExecutor
    with Repo.discover(repo) as r:
        files = {f"f{i}": FileChange(f"content {i}\n".encode() * (i + 1)) for i in range(40)}
        commit = r.write_commit(None, files, "many\n")
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda i: r.read_blob(commit, f"f{i % 40}"), range(400)))
        assert results == [files[f"f{i % 40}"].content for i in range(400)]
        assert git(repo, "fsck", "--strict", "--no-dangling") == ""  # objects we wrote are well-formed


def test_commit_directory_without_parent_and_debug_names_batch(repo, tmp_path, capsys):
    source = tmp_path / "seed"
    source.mkdir()
    (source / "AGENTS.md").write_text("seed\n")
    set_debug(True)
    try:
        with Repo.discover(repo) as r:
            root = r.commit_directory(None, source, "adapter", "seed\n")
            assert r.ls_tree(root) == {"adapter/AGENTS.md": TreeEntry("100644", "blob", r.write_blobs([b"seed\n"])[0])}
    finally:
        set_debug(False)
    err = capsys.readouterr().err
    assert "git cat-file --batch  (persistent reader, started in " in err
    assert "git commit-tree " in err and "git read-tree --empty" in err


def test_batch_reader_restarts_after_git_dies(repo_with_history):
    with Repo.discover(repo_with_history) as repo:
        base = repo.resolve_commit("HEAD")
        repo._batch._proc.kill()  # a crashed reader must not poison later reads
        repo._batch._proc.wait()
        assert repo.resolve_commit("HEAD") == base


# ----------------------------------------------------------------------------- fsck of new objects
def test_fsck_new_objects_checks_what_a_strict_remote_would(repo_with_history):
    bad_modules = b'[submodule "x"]\n\tpath = x\n\turl = --upload-pack=touch${IFS}pwned\n'
    objects = lambda: git(repo_with_history, "count-objects", "-v")   # noqa: E731
    with Repo.discover(repo_with_history) as repo:
        base = repo.resolve_commit("HEAD")
        clean = repo.write_commit(base, {"adapter/a.md": FileChange(b"fine\n")}, "clean\n")
        assert repo.fsck_new_objects(clean, base) is None
        bad = repo.write_commit(clean, {"adapter/sub/.gitmodules": FileChange(bad_modules)}, "bad\n")
        before = objects()
        complaint = repo.fsck_new_objects(bad, clean)
        assert complaint is not None and "gitmodulesUrl" in complaint
        assert objects() == before                      # the check adds nothing to the repository
        assert repo.fsck_new_objects(clean, None) is None   # from the root: the whole history
