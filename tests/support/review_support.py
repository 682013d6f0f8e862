"""Shared pieces of the review tests (not a test module): one offline demo run per session,
copied per test, a bare repository as the remote, and clones of it.

The demo is made once (about 20 s) under its own isolated git configuration, like conftest's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from support.cli_helpers import GIT_HERMIT, Result, hermit
from conftest import FIXED_DATE, git

NODE_TOOLS = Path(os.environ.get("GIT_HERMIT_REVIEW_TOOLS", Path.home() / ".cache" / "git-hermit" / "review"))


def isolated_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                "GIT_AUTHOR_NAME": "Test Author", "GIT_AUTHOR_EMAIL": "author@example.com",
                "GIT_COMMITTER_NAME": "Test Committer", "GIT_COMMITTER_EMAIL": "committer@example.com",
                "GIT_AUTHOR_DATE": FIXED_DATE, "GIT_COMMITTER_DATE": FIXED_DATE})
    return env


def make_demo(root: Path) -> tuple[Path, Result]:
    """`git hermit demo` into root/demo (once per session: the real executable) and its output:
    stdout and stderr on one pipe, as a CI log holds them, so the output's ``out`` keeps the order
    the lines were written in (test_live_output reads it) and ``err`` is empty."""
    env = isolated_env(root / "home")
    proc = subprocess.run([*GIT_HERMIT, "demo", str(root / "demo")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:]
    return root / "demo", Result(proc.returncode, proc.stdout, "")


def shared_demo(tmp_path_factory) -> tuple[Path, Result]:
    """``make_demo`` once for all the session's xdist workers (see conftest's ``demo_made``): in the
    root every worker's base temporary directory is under, behind an exclusive ``flock``; a worker
    that comes later reads the first one's output. Without xdist, the session's own directory."""
    import fcntl
    import json
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent      # pytest-of-<user>/pytest-<n>, shared
    else:
        root = tmp_path_factory.getbasetemp()
    made = root / "shared-demo"
    with open(root / "shared-demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = made / "result.json"
            if not done.is_file():
                made.mkdir(exist_ok=True)
                directory, result = make_demo(made)
                done.write_text(json.dumps({"code": result.code, "out": result.out, "err": result.err}))
            saved = json.loads(done.read_text())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return made / "demo", Result(saved["code"], saved["out"], saved["err"])


def copy_demo(demo: Path, dest: Path) -> Path:
    shutil.copytree(demo, dest, symlinks=True)
    return dest


def bare_remote(path: Path) -> Path:
    git(path.parent, "init", "-q", "--bare", path.name)
    return path


def clone(remote: Path, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", str(remote), dest.name)
    return dest


CONFIG_FILES = ("hermit.yaml", "tasks.jsonl", "rows/train.txt", "rows/test.txt")


def teammate_clone(repo: Path, tmp_path: Path) -> Path:
    """Push ``repo``'s run to a new bare remote (its branch, then `git hermit push`: step refs,
    tags, notes) and clone it as a teammate would, fetching the notes and copying the same
    uncommitted config files (those of CONFIG_FILES that exist); the clone has none of
    ``.hermit/``."""
    remote = bare_remote(tmp_path / "remote.git")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "HEAD:refs/heads/main")
    assert hermit(repo, "push").code == 0
    other = clone(remote, tmp_path / "teammate")
    assert hermit(other, "fetch").code == 0
    for name in CONFIG_FILES:
        if (repo / name).exists():
            (other / name).parent.mkdir(parents=True, exist_ok=True)
            (other / name).write_text((repo / name).read_text())
    assert not (other / ".hermit" / "runs").exists()
    return other
