"""`git hermit deploy`: deploy the run's adapter (work tree or a revision) for a host."""

from __future__ import annotations

import tempfile
from pathlib import Path

from git_hermit.adapter.deploy import DeployRecord, deploy
from git_hermit.config import load_config
from git_hermit.errors import InputError
from git_hermit.gitio import Repo


def deploy_adapter(repo: Repo, dest: Path, host: str, *, rev: str | None, run: str | None,
                   force: bool) -> DeployRecord:
    config = load_config(repo.work_tree, run)
    dest = dest.resolve()
    if rev is None:
        return deploy(repo.work_tree / config.adapter, dest, host, force=force)
    commit = repo.resolve_commit(rev)
    with tempfile.TemporaryDirectory(prefix="hermit-deploy-") as tmp:
        if repo.materialise(commit, config.adapter, Path(tmp)) == 0:
            raise InputError(f"{rev} has no {config.adapter}/ directory", hint="check the revision and --run")
        return deploy(Path(tmp), dest, host, force=force)
