"""Shared fixtures: real git repositories under an isolated configuration.

Every test runs with its own HOME / XDG dirs, no system git config, and a fixed identity
and dates, so results do not depend on the machine. Tests drive real git; nothing mocks it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

FIXED_DATE = "2026-01-01T00:00:00+00:00"


def pytest_sessionstart(session):
    """Compile git_hermit's modules once before any test runs (the controller, under xdist), as a
    regular install does: with PYTHONDONTWRITEBYTECODE set, an editable install is otherwise
    compiled from source by each of the suite's thousands of `git hermit` processes (~0.2 s of CPU
    for the modules a step imports, as much again as reading their bytecode)."""
    if hasattr(session.config, "workerinput"):
        return
    import compileall
    import importlib.util
    spec = importlib.util.find_spec("git_hermit")
    for location in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(location, quiet=1)


def _isolate(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME, XDG dirs and git config under ``home``; a fixed identity and dates."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", FIXED_DATE)
    monkeypatch.setenv("GIT_COMMITTER_DATE", FIXED_DATE)
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"):
        monkeypatch.delenv(var, raising=False)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")


@pytest.fixture(scope="session", autouse=True)
def isolated_session_env(tmp_path_factory):
    """The same isolation for session- and module-scoped fixtures, which run before any test's own
    (a fresh CI machine or Actions runner has no git identity: without this, a module fixture that
    commits fails with "unable to auto-detect email address")."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _isolate(tmp_path_factory.mktemp("session-home"), monkeypatch)
        yield


@pytest.fixture(autouse=True)
def isolated_git_env(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    _isolate(home, monkeypatch)
    yield home


def git(cwd: Path | str, *args: str, env: dict | None = None, check: bool = True) -> str:
    """Run real git in ``cwd`` and return stdout (tests' own helper, not the product's)."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    """An empty non-bare repository on branch main."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    return path


@pytest.fixture
def repo_with_history(repo) -> Path:
    """A repository with one commit on main (a README)."""
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def snapshot_state(path: Path) -> tuple[str, str]:
    """Refs (with notes refs) and work-tree status: compare before/after a failing command."""
    return (git(path, "for-each-ref"), git(path, "status", "--porcelain", "--ignored"))


@pytest.fixture(scope="session")
def demo_made(tmp_path_factory):
    """One `git hermit demo` run per test session (about 20 s) and its output (a cli_helpers.Result
    whose ``out`` is stdout and stderr on one pipe, in the order written); copy the repository
    before changing it.

    Under pytest-xdist the workers share one run: the first to need it makes it in the directory all
    workers' temporary directories live in, under a lock the others wait on, and leaves its output
    next to it (a second demo on a 2-core machine cost a worker half a minute). (``--dist loadgroup``
    would keep its tests on one worker, but xdist 3.8 under pytest 9 ignores the groups.)"""
    from support.review_support import shared_demo
    return shared_demo(tmp_path_factory)


@pytest.fixture(scope="session")
def demo_run(demo_made) -> Path:
    """The session's demo repository (see demo_made)."""
    return demo_made[0]


def stop_processes(procs: list) -> None:
    """Terminate the processes a test started, newest first; kill any that outlive 20 s."""
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
