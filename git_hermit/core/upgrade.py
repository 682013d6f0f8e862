"""`git hermit upgrade-runtime`: commit the hook runtime this git-hermit ships on the run's tip.

An adapter carries the runtime it was committed with (fixed files; runtimes.json knows each
version by hash) and keeps working with it. Upgrading is an ordinary, reviewable commit on the
run's step branch (``Hermit-Runtime: 1 -> 2``), made under the run lock like a rollback, checked
by check_spec before the branch moves; the next step's rollouts then measure it like any other
commit on the tip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from git_hermit.adapter.runtime import identify, upgrade_changes
from git_hermit.adapter.templates import load_template
from git_hermit.core.commits import step_message
from git_hermit.core.rollback import check_commit
from git_hermit.core.runs import RunContext, open_run, step_ref
from git_hermit.errors import CheckFailed, InputError
from git_hermit.gitio import FileChange, RefUpdate, Repo, RunLock

RUNTIME_TRAILER = "Hermit-Runtime"


@dataclass(frozen=True)
class UpgradeResult:
    step: int
    old: int
    new: int
    commit: str | None               # None: the adapter already carries the newest runtime
    files: tuple[str, ...] = ()      # repo-relative paths written or removed


def upgrade_runtime(repo: Repo, run: str | None, *, wait: bool = False,
                    on_wait: Callable[[str], None] | None = None) -> UpgradeResult:
    ctx = open_run(repo, run)
    with RunLock(repo, ctx.run, "git hermit upgrade-runtime", wait=wait, on_wait=on_wait):
        return _upgrade_locked(open_run(repo, ctx.run))


def _upgrade_locked(ctx: RunContext) -> UpgradeResult:
    repo = ctx.repo
    template = load_template(ctx.config.template)
    step, tip = ctx.tip
    adapter = ctx.config.adapter.strip("/")
    tree = repo.ls_tree(tip, adapter)

    def read(rel: str) -> bytes | None:
        entry = tree.get(rel)
        if entry is None or entry.type != "blob" or entry.mode == "120000":
            return None
        return repo.read_object(entry.sha)[1]

    status = identify(read, template.fixed)
    if status is None:
        raise InputError(f"the {template.id} template carries no hook runtime: there is nothing to upgrade",
                         hint="only adapters with a middleware.py (e.g. ahe) carry the hook runtime")
    if status.version is None:
        raise CheckFailed(f"the hook runtime in {adapter}/ at step-{step:04d} matches no known version "
                          "(a fixed file was changed by hand)",
                          hint="restore the fixed files (see `git hermit check`), then upgrade")
    if not status.outdated:
        return UpgradeResult(step, status.version, status.current, None)
    changes = upgrade_changes(read, template.fixed)
    files = {f"{adapter}/{rel}": (None if data is None else
                                  FileChange(data, tree[rel].mode if rel in tree else "100644"))
             for rel, data in changes.items()}
    body = (f"The hook runtime this git-hermit ships (version {status.current}) replaces version "
            f"{status.version}: " + ", ".join(f"{'removed' if data is None else 'updated'} {rel}"
                                            for rel, data in sorted(changes.items()))
            + ". The middleware and every learnable file are unchanged; the next step's rollouts measure "
              "this commit like any other change on the tip.")
    message = step_message(run=ctx.run, step=step, evolver=ctx.config.evolver_name,
                           summary=f"hook runtime {status.version} -> {status.current}", body=body,
                           extra=[(RUNTIME_TRAILER, f"{status.version} -> {status.current}")])
    commit = repo.write_commit(tip, files, message)
    problems = check_commit(repo, commit, ctx.config.adapter, ctx.config.template)
    if problems:
        raise CheckFailed(f"the upgraded adapter would break check_spec: {problems[0]}",
                          hint="nothing was written; fix the adapter (`git hermit check`), then upgrade")
    repo.update_refs([RefUpdate(step_ref(ctx.run, step), commit, tip)],
                     message=f"git hermit upgrade-runtime {status.version} -> {status.current}")
    return UpgradeResult(step, status.version, status.current, commit, tuple(sorted(files)))
