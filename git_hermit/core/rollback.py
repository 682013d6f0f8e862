"""File-wise rollback of one change: restore each file it touched to its parent's state.

Added files are deleted, deleted files restored, modified files get their old bytes and
mode back; the result is a new commit on the run's tip with ``Hermit-Reverts:``. The new
adapter must pass check_spec or nothing is written. The step driver reuses ``plan_revert``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from git_hermit.adapter.check_spec import Violation, check_adapter
from git_hermit.adapter.templates import load_template
from git_hermit.core.commits import step_message
from git_hermit.core.history import load_history
from git_hermit.core.runs import RunContext, step_ref
from git_hermit.errors import CheckFailed, GitStateError, InputError
from git_hermit.gitio import NOTES_REFS, FileChange, NotesStore, RefUpdate, Repo
from git_hermit.model.records import Verdict, dumps, loads


@dataclass(frozen=True)
class RevertPlan:
    change_commit: str
    onto: str
    commit: str                      # the new (unpublished) commit; == onto when nothing to do
    files: tuple[str, ...]           # repo-relative paths restored


@dataclass(frozen=True)
class RollbackResult:
    plan: RevertPlan
    step: int
    change_ids: tuple[str, ...]
    verdict: str | None


def plan_revert(repo: Repo, change_commit: str, onto: str, message: str) -> RevertPlan:
    """Build (not publish) a commit on ``onto`` restoring the files ``change_commit`` touched."""
    info = repo.commit_info(change_commit)
    if not info.parents:
        raise InputError(f"{change_commit[:12]} is a root commit; there is nothing before it to restore",
                         hint="roll back a change commit, not the seed")
    before = repo.ls_tree(info.parents[0])
    after = repo.ls_tree(change_commit)
    touched = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    current = repo.ls_tree(onto)
    changes: dict[str, FileChange | None] = {}
    for path in touched:
        old = before.get(path)
        if old is None:
            if path in current:
                changes[path] = None
        elif current.get(path) != old:
            _, content = repo.read_object(old.sha)
            changes[path] = FileChange(content, old.mode)
    if not changes:
        return RevertPlan(change_commit, onto, onto, tuple(touched))
    return RevertPlan(change_commit, onto, repo.write_commit(onto, changes, message), tuple(sorted(changes)))


def check_commit(repo: Repo, commit: str, adapter: str, template_id: str, *, hosts: bool = True) -> list[Violation]:
    """check_spec errors of the adapter at ``commit`` (materialised into a temp dir)."""
    with tempfile.TemporaryDirectory(prefix="hermit-check-") as tmp:
        repo.materialise(commit, adapter, Path(tmp))
        return [v for v in check_adapter(Path(tmp), load_template(template_id), hosts=hosts)
                if v.severity == "error"]


def find_change_commit(ctx: RunContext, target: str) -> tuple[str, tuple[str, ...]]:
    """A change id (``chg-2`` or ``step-3:chg-2``) or a revision → (commit, change ids on it)."""
    history = load_history(ctx)
    step_filter, _, change_id = target.rpartition(":")
    def wanted(step: int, cid: str | None) -> bool:
        return cid == change_id and (not step_filter or step_filter in (f"step-{step}", str(step)))

    candidates = [(sv.step, cv.commit, cv.change.id) for sv in history.steps for cv in sv.changes
                  if wanted(sv.step, cv.change.id)]
    # A commit without a manifest note is still found by its Hermit-Change trailer.
    noted = {sha for _, sha, _ in candidates}
    candidates += [(sv.step, commit.sha, change_id) for sv in history.steps for commit in sv.commits
                   if not commit.changes and commit.sha not in noted
                   and wanted(sv.step, dict(commit.info.trailers).get("Hermit-Change"))]
    if len(candidates) > 1:
        listing = ", ".join(f"step-{s}:{cid} ({sha[:10]})" for s, sha, cid in candidates)
        raise InputError(f"change id {change_id!r} is ambiguous: {listing}",
                         hint="qualify it with its step, e.g. step-3:chg-1, or give the commit")
    if candidates:
        return candidates[0][1], (candidates[0][2],)
    sha = ctx.repo.rev_parse(target)
    if sha is None:
        raise GitStateError(f"no change or revision named {target!r} in run {ctx.run!r}",
                         hint="see `git hermit log` for change ids and commits")
    if not ctx.repo.is_ancestor(sha, ctx.tip[1]):
        raise GitStateError(f"{sha[:12]} is not part of run {ctx.run!r}",
                            hint=f"roll back a commit reachable from hermit/{ctx.run}/step-{ctx.tip[0]:04d}")
    ids = tuple(cv.change.id for sv in history.steps for cv in sv.changes if cv.commit == sha)
    return sha, ids


def rollback(ctx: RunContext, target: str, reason: str) -> RollbackResult:
    repo = ctx.repo
    if not reason.strip():
        raise InputError("a rollback needs a reason", hint="pass --reason TEXT")
    change_commit, change_ids = find_change_commit(ctx, target)
    store = NotesStore(repo)
    verdict_text = store.read(NOTES_REFS["verdicts"], change_commit)
    verdict = loads("verdicts", verdict_text, where=change_commit[:12]) if verdict_text else None
    step, tip = ctx.tip
    label = ", ".join(change_ids) or change_commit[:12]
    trailers = [("Hermit-Reverts", change_commit)]
    if verdict is not None:
        trailers.append(("Hermit-Verdict", verdict.verdict))
    message = step_message(run=ctx.run, step=step, evolver=ctx.config.evolver_name,
                           summary=f"rollback {label}", body=reason.strip(), extra=trailers)
    plan = plan_revert(repo, change_commit, tip, message)
    if plan.commit == tip:
        raise InputError(f"nothing to roll back: the files of {label} are already as before it",
                         hint="see `git hermit show` for the change's files")
    problems = check_commit(repo, plan.commit, ctx.config.adapter, ctx.config.template)
    if problems:
        raise CheckFailed(f"rolling back {label} would break check_spec: {problems[0]}",
                          hint="nothing was written; fix the adapter by hand or roll back the dependent change too")
    repo.update_refs([RefUpdate(step_ref(ctx.run, step), plan.commit, tip)],
                     message=f"git hermit rollback {label}")
    if verdict is not None:
        updated = Verdict(**{**verdict.__dict__, "rollback_commit": plan.commit, "rollback_note": reason.strip()})
        store.write(NOTES_REFS["verdicts"], change_commit, dumps("verdicts", updated),
                    f"git hermit rollback {label}")
    return RollbackResult(plan=plan, step=step, change_ids=change_ids,
                          verdict=verdict.verdict if verdict else None)
