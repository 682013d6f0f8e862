"""`git hermit doctor`'s report: git, the notes setup of a real repository, the host CLIs."""

from __future__ import annotations

import json

import pytest

from conftest import git
from git_hermit.gitio.notes import NOTES_REFS, configure_notes_rewrite
from git_hermit.gitio.repo import Repo
from git_hermit.hostkit import doctor
from git_hermit.hosts import locate, registry


@pytest.fixture
def no_hosts(monkeypatch, tmp_path):
    """A machine without host CLIs: empty hosts dirs and a PATH without codex/claude."""
    monkeypatch.setenv("GIT_HERMIT_HOSTS_DIR", str(tmp_path / "none"))
    monkeypatch.setattr(locate, "default_hosts_dir", lambda: tmp_path / "none")
    monkeypatch.setattr(locate, "account_hosts_dir", lambda: tmp_path / "none")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def test_fresh_repository_lacks_the_notes_setup(repo_with_history, no_hosts):
    git(repo_with_history, "remote", "add", "origin", "https://example.invalid/r.git")
    report = doctor.doctor_report(Repo.discover(repo_with_history), run_hosts=False)
    assert report.git_version[0].isdigit()
    assert set(report.notes_rewrite_missing) == set(NOTES_REFS.values())
    assert report.remotes == (doctor.RemoteNotes("origin", False, False),)
    assert any("notes.rewriteRef" in p for p in report.problems)
    assert any("remote origin does not fetch" in p for p in report.problems)
    assert [(h.host, h.installed) for h in report.hosts] == [("codex", False), ("claude-code", False), ("pi", False)]
    text = doctor.render_text(report)
    assert "!! notes.rewriteRef: (none)" in text and "not installed" in text
    json.dumps(report.to_json())  # JSON-able for --json


def test_configured_repository_passes_the_notes_checks(repo_with_history, no_hosts):
    git(repo_with_history, "remote", "add", "origin", "https://example.invalid/r.git")
    git(repo_with_history, "config", "--add", "remote.origin.fetch", "+refs/notes/hermit/*:refs/notes/hermit/*")
    git(repo_with_history, "config", "--add", "remote.origin.push", "refs/notes/hermit/*")
    repo = Repo.discover(repo_with_history)
    configure_notes_rewrite(repo)
    report = doctor.doctor_report(repo, run_hosts=False)
    assert report.notes_rewrite_missing == ()
    assert report.remotes == (doctor.RemoteNotes("origin", True, True),)
    assert report.ok, report.problems
    assert "all good" in doctor.render_text(report)


def test_a_glob_rewrite_ref_covers_every_hermit_ref(repo_with_history, no_hosts):
    git(repo_with_history, "config", "--add", "notes.rewriteRef", "refs/notes/hermit/*")
    git(repo_with_history, "config", "notes.rewrite.rebase", "false")
    report = doctor.doctor_report(Repo.discover(repo_with_history), run_hosts=False)
    assert report.notes_rewrite_missing == ()
    assert report.problems == ("notes.rewrite.rebase is false: rebase drops hermit notes",)


def test_outside_a_repository_only_git_and_hosts_are_checked(no_hosts):
    report = doctor.doctor_report(None, run_hosts=False)
    assert report.repository is None and report.remotes == ()
    assert "not in a repository" in doctor.render_text(report)


def test_installed_hosts_report_their_version():
    found = {h: registry.find_host_cli(h) for h in (x.name for x in registry.hook_hosts())}
    if not all(found.values()):
        pytest.skip("the host CLIs are not installed (git hermit hosts install)")
    report = doctor.doctor_report(None, run_hosts=False)
    for status in report.hosts[:len(found)]:
        assert status.installed and status.version == locate.cli_version(found[status.host])
        assert status.conformance is None


@pytest.mark.hosts
def test_doctor_runs_one_conformance_session_per_host(tmp_path):
    if locate.find_node() is None or not all(registry.find_host_cli(h) for h in (x.name for x in registry.hook_hosts())):
        pytest.skip("node or a host CLI is not installed")
    report = doctor.doctor_report(None, run_hosts=True, work_dir=tmp_path)
    for status in report.hosts:
        if registry.get(status.host).wire is None:     # no hooks: installed or not, no conformance session
            assert status.conformance is None
            continue
        assert status.conformance["all_hold"], status.conformance
        assert len(status.conformance["session_seconds"]) == 1
    text = doctor.render_text(report)
    assert "ok memory:" in text and "ok deny:" in text
