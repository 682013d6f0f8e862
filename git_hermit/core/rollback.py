"""Rollback of one change (its whole change group) as a new commit on the run's tip.

A three-way revert that keeps later work; on a conflict it refuses naming the later commits,
and ``--force`` is the file-wise restore, naming the commits whose edits it removes
(``Hermit-Removes-Lines-Of``). The result must pass check_spec or nothing is written.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from git_hermit.adapter.check_spec import Violation, check_adapter
from git_hermit.adapter.templates import load_template
from git_hermit.core.commits import step_message
from git_hermit.core.history import load_history
from git_hermit.core.runs import RunContext, open_run, step_ref
from git_hermit.errors import CheckFailed, GitStateError, InputError, RevertConflict
from git_hermit.gitio import HERMIT_REMOVES_LINES_OF, NOTES_REFS, CommitInfo, FileChange, NotesStore, RefUpdate, Repo, RunLock
from git_hermit.model.records import VerdictNote, dumps, loads


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
    change_ids: tuple[str, ...]      # every change on the reverted commit (a group goes whole)
    verdict: str | None
    named: tuple[str, ...] = ()      # the change(s) the user asked for
    removed_lines_of: tuple[str, ...] = ()   # --force: later commits whose edits were removed


def _filewise_changes(repo: Repo, change_commit: str, onto: str) -> tuple[dict[str, FileChange | None], tuple[str, ...]]:
    """What restoring every file ``change_commit`` touched to its parent's state changes on ``onto``."""
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
    return changes, tuple(touched)


def plan_revert(repo: Repo, change_commit: str, onto: str, message: str) -> RevertPlan:
    """Build (not publish) a commit on ``onto`` restoring the files ``change_commit`` touched (file-wise)."""
    changes, touched = _filewise_changes(repo, change_commit, onto)
    if not changes:
        return RevertPlan(change_commit, onto, onto, touched)
    return RevertPlan(change_commit, onto, repo.write_commit(onto, changes, message), tuple(sorted(changes)))


def _commit_label(info: CommitInfo) -> str:
    trailers = dict(info.trailers)
    step, change = trailers.get("Hermit-Step"), trailers.get("Hermit-Change")
    name = f"step-{step}:{change}" if step and change else (f"step-{step}" if step else "")
    return f"{name} ({info.sha[:10]})" if name else info.sha[:10]


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
    # (a change group's trailer lists its members: "chg-1, chg-2")
    candidates += [(sv.step, commit.sha, change_id) for sv in history.steps for commit in sv.commits
                   if not commit.changes and commit.sha not in noted
                   and any(wanted(sv.step, cid.strip())
                           for cid in (dict(commit.info.trailers).get("Hermit-Change") or "").split(","))]
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


def rollback(repo: Repo, run: str | None, target: str, reason: str, *, force: bool = False,
             wait: bool = False, on_wait: Callable[[str], None] | None = None,
             reviewed: tuple[tuple[str, str], ...] = (), footer: str = "") -> RollbackResult:
    """`git hermit rollback`: under the run lock (like `step`), re-reading the run once it is held.
    With ``wait``, a lock another process holds is waited for instead of refused. ``reviewed``:
    trailers naming the reviewer who asked for it (`git hermit review`), ``footer`` a last body line."""
    ctx = open_run(repo, run)
    with RunLock(repo, ctx.run, "git hermit rollback", wait=wait, on_wait=on_wait):
        return _rollback_locked(open_run(repo, ctx.run), target, reason, force=force, reviewed=reviewed,
                                footer=footer)


def _rollback_locked(ctx: RunContext, target: str, reason: str, *, force: bool = False,
                     reviewed: tuple[tuple[str, str], ...] = (), footer: str = "") -> RollbackResult:
    repo = ctx.repo
    if not reason.strip():
        raise InputError("a rollback needs a reason", hint="pass --reason TEXT")
    change_commit, named = find_change_commit(ctx, target)
    if not repo.commit_info(change_commit).parents:
        raise InputError(f"{change_commit[:12]} is a root commit; there is nothing before it to restore",
                         hint="roll back a change commit, not the seed")
    # a rollback never reverts part of a change group: every change on the commit goes
    on_commit = tuple(cv.change.id for sv in load_history(ctx).steps for cv in sv.changes if cv.commit == change_commit)
    change_ids = tuple(dict.fromkeys((*named, *on_commit)))
    others = [i for i in change_ids if i not in named]
    store = NotesStore(repo)
    verdict_text = store.read(NOTES_REFS["verdicts"], change_commit)
    verdict = loads("verdicts", verdict_text, where=change_commit[:12]) if verdict_text else None
    step, tip = ctx.tip
    label = ", ".join(named) or change_commit[:12]
    trailers = [("Hermit-Reverts", change_commit)]
    if verdict is not None:
        trailers.append(("Hermit-Verdict", verdict.verdict))
    body = reason.strip()
    if others:
        body += (f"\n\n{', '.join(others)} {'is' if len(others) == 1 else 'are'} rolled back with {label}: "
                 "they are one change group (one commit), and a rollback never reverts part of a change.")

    tree, conflicts = repo.revert_tree(change_commit, tip)
    removed: list[CommitInfo] = []
    if conflicts:
        later = [c for c in repo.log(f"{change_commit}..{tip}", paths=list(conflicts)) if not _is_rollback(c)]
        if not force:
            raise RevertConflict(
                f"rolling back {label} conflicts with later work on {', '.join(conflicts)}: "
                + (", ".join(_commit_label(c) for c in reversed(later)) or "later commits")
                + " changed the same lines",
                hint="roll those back too (newest first), or pass --force to restore the files as they were "
                     f"before {label}, removing those commits' edits to them")
        files, _ = _filewise_changes(repo, change_commit, tip)
        removed = [c for c in repo.log(f"{change_commit}..{tip}", paths=sorted(files)) if not _is_rollback(c)]
        trailers += [(HERMIT_REMOVES_LINES_OF, c.sha) for c in reversed(removed)]
        body += "\n\n--force: a file-wise restore of the change's files" + (
            "; it also removes the edits of " + ", ".join(_commit_label(c) for c in reversed(removed))
            + " to them." if removed else ".")
    if footer:
        body += "\n\n" + footer
    trailers += list(reviewed)
    summary = f"rollback {', '.join(change_ids) or change_commit[:12]}"
    message = step_message(run=ctx.run, step=step, evolver=ctx.config.evolver_name,
                           summary=summary, body=body, extra=trailers)
    if conflicts:
        plan = plan_revert(repo, change_commit, tip, message)
    else:
        current, result_files = repo.ls_tree(tip), repo.ls_tree(tree)
        changed = tuple(sorted(p for p in set(current) | set(result_files) if current.get(p) != result_files.get(p)))
        plan = RevertPlan(change_commit, tip, repo.commit_tree(tree, tip, message) if changed else tip, changed)
    if plan.commit == tip:
        raise InputError(f"nothing to roll back: the edits of {label} are no longer on the run's tip",
                         hint="see `git hermit show` for the change's files")
    problems = check_commit(repo, plan.commit, ctx.config.adapter, ctx.config.template)
    if problems:
        raise CheckFailed(f"rolling back {label} would break check_spec: {problems[0]}",
                          hint="nothing was written; fix the adapter by hand or roll back the dependent change too")
    repo.update_refs([RefUpdate(step_ref(ctx.run, step), plan.commit, tip)],
                     message=f"git hermit rollback {label}")
    if verdict is not None:
        def note(v: VerdictNote) -> VerdictNote:
            why = reason.strip() if v.change_id in named or not named else f"rolled back with {label}: {reason.strip()}"
            return replace(v, rollback_note=why)
        updated = replace(note(verdict), rollback_commit=plan.commit, also=tuple(note(v) for v in verdict.also))
        store.write(NOTES_REFS["verdicts"], change_commit, dumps("verdicts", updated),
                    f"git hermit rollback {label}")
    return RollbackResult(plan=plan, step=step, change_ids=change_ids, named=named,
                          verdict=verdict.verdict if verdict else None,
                          removed_lines_of=tuple(c.sha for c in reversed(removed)))


def _is_rollback(info: CommitInfo) -> bool:
    return any(k == "Hermit-Reverts" for k, _ in info.trailers)
