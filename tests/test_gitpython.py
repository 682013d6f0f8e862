"""The user's named packages, used for real (issue 26, item 5): GitPython runs `git init`, reads the
configuration and carries push/fetch with its progress reporting; jsonschema validates hermit.yaml.
Both are run-time dependencies, imported only where used: a warm `log` and completion load neither.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.scale_support import build_run

TOP = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=TOP)


def test_gitpython_and_jsonschema_are_run_time_dependencies():
    project = tomllib.loads((TOP / "pyproject.toml").read_text())["project"]
    names = {req.split(">")[0].split("=")[0].lower() for req in project["dependencies"]}
    assert {"gitpython", "jsonschema"} <= names


def test_init_and_config_reads_go_through_gitpython_without_a_git_process(tmp_path):
    code = """
import sys
from pathlib import Path
from git_hermit.gitio import init_repository, set_debug
repo = init_repository(Path(sys.argv[1]))
set_debug(True)
print(repo.config_get("core.bare"), "git" in sys.modules)
"""
    proc = _python(code, str(tmp_path / "made"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["false", "True"]
    assert (tmp_path / "made" / ".git").is_dir()
    assert "git config" not in proc.stderr          # the value came from GitPython's parser


def test_config_reads_give_what_git_config_gives(repo, tmp_path):
    from git_hermit.gitio import Repo
    included = tmp_path / "included.cfg"
    included.write_text("[notes]\n\trewriteRef = refs/notes/included\n")
    with open(os.environ["GIT_CONFIG_GLOBAL"], "a") as handle:
        handle.write("[notes]\n\trewriteRef = refs/notes/global\n[remote \"origin\"]\n\turl = /global/url\n")
    git(repo, "config", "--add", "notes.rewriteRef", "refs/notes/local")
    git(repo, "config", "include.path", str(included))
    git(repo, "remote", "add", "origin", "/local/url")
    git(repo, "remote", "add", "Mixed", "/mixed/url")
    git(repo, "config", "notes.rewrite.amend", "false")
    ours = Repo.discover(repo)
    for key in ("notes.rewriteRef", "NOTES.REWRITEREF", "remote.origin.url", "remote.Mixed.url", "remote.mixed.url",
                "remote.origin.fetch", "notes.rewrite.amend", "no.such.key", "user.email"):
        expected = git(repo, "config", "--get-all", key, check=False).splitlines()
        assert ours.config_get_all(key) == expected, key
        assert ours.config_get(key) == (expected[-1] if expected else None), key


@pytest.fixture
def pushed_pair(repo_with_history, tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    for i in range(30):
        (repo_with_history / f"f{i}.txt").write_text(f"file {i}\n" * 200)
    git(repo_with_history, "add", ".")
    git(repo_with_history, "commit", "-q", "-m", "files")
    return repo_with_history, remote


def test_push_and_fetch_run_through_gitpython_with_its_progress(pushed_pair, capsys):
    from git_hermit.gitio import Repo, fetch_tracking, push_atomic, set_debug
    from git_hermit.gitio._gitpython import transfer
    work, remote = pushed_pair
    ours = Repo.discover(work)
    head = git(work, "rev-parse", "HEAD").strip()
    seen: list[tuple[int, str]] = []
    done = transfer(ours.work_tree, ours._env, "push", ["--porcelain", str(remote), f"{head}:refs/heads/hermit/r/step-0001"],
                    progress=lambda op, cur, total=None, message="": seen.append((op, str(cur))))
    assert done.returncode == 0, done.stderr
    from git.util import RemoteProgress
    assert any(op & RemoteProgress.WRITING for op, _ in seen), seen          # git's progress, parsed by GitPython
    assert b"refs/heads/hermit/r/step-0001" in done.stdout
    set_debug(True)
    try:
        capsys.readouterr()
        pushed = push_atomic(ours, str(remote), [(head, "refs/heads/hermit/r/step-0002", None)])
        found = fetch_tracking(ours, str(remote))
    finally:
        set_debug(False)
    assert [p.ref for p in pushed] == ["refs/heads/hermit/r/step-0002"] and pushed[0].moved
    assert found["refs/heads/hermit/r/step-0002"] == head
    err = capsys.readouterr().err
    assert "git push --atomic" in err and "(GitPython, " in err and "git fetch --no-tags" in err


def test_a_refused_push_keeps_its_error_through_gitpython(pushed_pair):
    from git_hermit.errors import GitStateError, RefConflict
    from git_hermit.gitio import Repo, push_atomic
    work, remote = pushed_pair
    ours = Repo.discover(work)
    head = git(work, "rev-parse", "HEAD").strip()
    push_atomic(ours, str(remote), [(head, "refs/heads/hermit/r/step-0001", None)])
    older = git(work, "rev-parse", "HEAD~1").strip()
    with pytest.raises(RefConflict):      # a stale lease: the remote has the ref already
        push_atomic(ours, str(remote), [(older, "refs/heads/hermit/r/step-0001", None)])
    assert git(remote, "rev-parse", "refs/heads/hermit/r/step-0001").strip() == head
    with pytest.raises(GitStateError, match="cannot reach remote"):
        from git_hermit.gitio import fetch_tracking
        fetch_tracking(ours, str(work.parent / "no-such-remote"))


def test_the_configuration_is_validated_by_jsonschema(tmp_path):
    code = """
import sys
from git_hermit.config import parse_config
from git_hermit.errors import ConfigError
try:
    parse_config("adapter: adapter\\ntemplate: oneshot-edits\\nunknown_key: 1\\n")
except ConfigError as err:
    print(err)
print("jsonschema" in sys.modules)
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert "hermit.yaml:" in proc.stdout and "'unknown_key' was unexpected" in proc.stdout
    assert proc.stdout.split()[-1] == "True"


def test_a_warm_log_and_completion_import_neither_gitpython_nor_jsonschema(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    build_run(repo, "a", 2)
    assert hermit(repo, "log", subprocess=True).code == 0
    warm = hermit(repo, "log", env={"PYTHONPROFILEIMPORTTIME": "1"}, subprocess=True)
    assert warm.code == 0, warm.err
    imported = {line.split("|")[-1].strip() for line in warm.err.splitlines() if line.startswith("import time:")}
    assert imported and not {"git", "jsonschema"} & imported
    complete = hermit(repo, env={"_GIT_HERMIT_COMPLETE": "bash_complete", "COMP_WORDS": "git-hermit lo",
                                 "COMP_CWORD": "1", "PYTHONPROFILEIMPORTTIME": "1"}, subprocess=True)
    imported = {line.split("|")[-1].strip() for line in complete.err.splitlines() if line.startswith("import time:")}
    assert imported and not {"git", "jsonschema"} & imported


def test_on_a_terminal_the_transfer_progress_is_one_line_redrawn():
    import io
    from git.util import RemoteProgress
    from git_hermit.gitio._gitpython import _terminal_progress
    stream = io.StringIO()
    draw = _terminal_progress(stream)
    draw(RemoteProgress.WRITING | RemoteProgress.BEGIN, 1, 30, "")
    draw(RemoteProgress.WRITING | RemoteProgress.END, 30, 30, "done")
    assert stream.getvalue() == "\rWriting objects: 1/30 \033[K\rWriting objects: 30/30 done\033[K\n"
