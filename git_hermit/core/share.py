"""`git hermit fetch` and `git hermit push`: share runs through an ordinary git remote.

Both first bring the remote's ``hermit`` branches, tags and notes into
``refs/hermit-remote/<remote>/…``. Fetch then fast-forwards the local run refs and merges the
notes (field-wise, see ``model.merge``) in one local ref transaction, never touching the
user's branches. Push merges the remote's notes the same way, then sends the run's step
branches, its tags and the notes in ONE ``git push --atomic`` whose leases are the remote state
it merged with; if the remote moved meanwhile (another push), it fetches, merges and retries.
A row both machines ran with different outcomes is merged by rule (``core.scores_notes``), and
each such row is reported in the outcome's ``disagreements``.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from git_hermit.core.runs import list_runs
from git_hermit.core.scores_notes import RowDisagreement, merge_scores_notes
from git_hermit.errors import GitStateError, NotesConflict, RefConflict
from git_hermit.gitio import (NOTES_REFS, PushedRef, RefUpdate, Repo, ZERO_SHA, configure_notes_rewrite, fetch_tracking,
                              merge_notes, push_atomic)
from git_hermit.model.merge import FieldConflict, merge_records
from git_hermit.model.records import canonical_json, loads

PUSH_ATTEMPTS = 5


@dataclass(frozen=True)
class RefMove:
    ref: str
    old: str | None
    new: str | None
    how: str            # "new", "fast-forward", "merged", "kept (local is ahead)", "diverged: kept local", …


@dataclass(frozen=True)
class FetchOutcome:
    remote: str
    moves: tuple[RefMove, ...]
    warnings: tuple[str, ...] = ()
    disagreements: tuple[RowDisagreement, ...] = ()     # rows both sides ran differently: what was kept


@dataclass(frozen=True)
class PushOutcome:
    remote: str
    pushed: tuple[PushedRef, ...]
    merged: tuple[RefMove, ...]     # local notes refs that took the remote's notes first
    attempts: int = 1
    warnings: tuple[str, ...] = field(default_factory=tuple)
    disagreements: tuple[RowDisagreement, ...] = ()


def _kind_of(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _resolver(kind: str, found: list[RowDisagreement]) -> Callable[[str, str | None, str | None, str | None], str | None]:
    """Field-wise merge of one note both sides changed; a conflict names the commit, record, field.
    Rows of a scores note both sides ran differently are added to ``found``."""
    def resolve(target: str, base: str | None, ours: str | None, theirs: str | None) -> str | None:
        def parse(text: str | None) -> dict[str, Any] | None:
            return None if text is None else json.loads(text)
        try:
            seen: list[RowDisagreement] = []
            if kind == "scores":      # usage adds up; a row run on both machines is kept by rule
                merged = merge_scores_notes(parse(base), parse(ours), parse(theirs), seen)
            else:
                merged = merge_records(parse(base), parse(ours), parse(theirs))
        except FieldConflict as exc:
            raise NotesConflict(
                f"the {kind} note on commit {target[:12]} was changed on both sides: field {exc.path!r} is "
                f"{json.dumps(exc.ours)[:60]} here and {json.dumps(exc.theirs)[:60]} on the remote",
                hint=f"keep one side with `git notes --ref=hermit/{kind} add -f -C <blob> {target[:12]}`, "
                     "or rerun what wrote it; nothing was changed") from None
        except json.JSONDecodeError as exc:
            raise NotesConflict(f"the {kind} note on commit {target[:12]} is not JSON on one side: {exc}",
                                hint="repair the note, then retry; nothing was changed") from None
        found.extend(replace(d, commit=target) for d in seen)     # only once the whole note merged
        if merged is None:
            return None
        text = canonical_json(merged)
        if kind in ("scores", "manifest", "verdicts", "provenance", "analysis"):
            loads(kind, text, where=target[:12])   # the merged record must still be a valid record
        return text
    return resolve


def _merge_notes_updates(repo: Repo, remote_refs: dict[str, str], remote: str,
                         found: list[RowDisagreement]) -> tuple[list[RefUpdate], list[RefMove]]:
    """Local notes refs after merging the remote's: (CAS updates, what moved). Raises on a conflict."""
    updates, moves = [], []
    names = sorted({r for r in remote_refs if r.startswith("refs/notes/hermit/")})
    for ref in names:
        ours, theirs = repo.read_ref(ref), remote_refs[ref]
        new = merge_notes(repo, ours, theirs, _resolver(_kind_of(ref), found),
                          f"git-hermit: merge {ref} from {remote}")
        if new is None:
            continue
        updates.append(RefUpdate(ref, new, ours or ZERO_SHA))
        how = "new" if ours is None else ("fast-forward" if new == theirs else "merged")
        moves.append(RefMove(ref, ours, new, how))
    return updates, moves


def fetch_runs(repo: Repo, remote: str = "origin") -> FetchOutcome:
    """Every run's branches and tags fast-forwarded, every notes ref merged; one local transaction."""
    remote_refs = fetch_tracking(repo, remote)
    configure_notes_rewrite(repo)      # a clone never ran init: make the notes readable and kept here too
    found: list[RowDisagreement] = []
    updates, moves = _merge_notes_updates(repo, remote_refs, remote, found)
    warnings = []
    for ref, theirs in sorted(remote_refs.items()):
        if ref.startswith("refs/notes/"):
            continue
        ours = repo.read_ref(ref)
        if ours == theirs:
            continue
        if ours is None:
            updates.append(RefUpdate(ref, theirs, ZERO_SHA))
            moves.append(RefMove(ref, None, theirs, "new"))
        elif repo.is_ancestor(ours, theirs):
            updates.append(RefUpdate(ref, theirs, ours))
            moves.append(RefMove(ref, ours, theirs, "fast-forward"))
        elif repo.is_ancestor(theirs, ours):
            moves.append(RefMove(ref, ours, ours, "kept (local is ahead; `git hermit push` sends it)"))
        else:
            warnings.append(f"{ref} diverged from {remote}'s ({ours[:10]} here, {theirs[:10]} there): kept local")
    repo.update_refs(updates, message=f"git hermit fetch {remote}")
    return FetchOutcome(remote, tuple(moves), tuple(warnings), tuple(found))


def _run_refs(repo: Repo, run: str | None) -> dict[str, str]:
    """The local refs ``push`` sends: the run's (or every run's) step branches and tags."""
    runs = [run] if run else list_runs(repo)
    refs: dict[str, str] = {}
    for name in runs:
        refs.update(repo.list_refs(f"refs/heads/hermit/{name}/"))
        refs.update(repo.list_refs(f"refs/tags/hermit/{name}/"))
    return refs


def push_run(repo: Repo, remote: str = "origin", run: str | None = None) -> PushOutcome:
    """Merge the remote's notes, then push the run's branches, tags and all hermit notes atomically."""
    if run is not None and not repo.list_refs(f"refs/heads/hermit/{run}/"):
        raise GitStateError(f"run {run!r} has no step branches here", hint="see `git hermit log --run NAME`")
    merged_all: list[RefMove] = []
    found_all: list[RowDisagreement] = []
    for attempt in range(1, PUSH_ATTEMPTS + 1):
        remote_refs = fetch_tracking(repo, remote)
        found: list[RowDisagreement] = []
        updates, merged = _merge_notes_updates(repo, remote_refs, remote, found)
        if updates:
            repo.update_refs(updates, message=f"git hermit push {remote}: merge remote notes")
            merged_all += merged
            found_all += found        # merged here: a retry merges on top, so each row is told once
        wanted = _run_refs(repo, run)
        for ref in NOTES_REFS.values():
            sha = repo.read_ref(ref)
            if sha:
                wanted[ref] = sha
        sends: list[tuple[str, str, str | None]] = []
        for ref, sha in sorted(wanted.items()):
            theirs = remote_refs.get(ref)
            if theirs == sha:
                continue
            if theirs is not None and ref.startswith("refs/heads/") and not repo.is_ancestor(theirs, sha):
                ahead = "has commits this clone lacks" if not repo.is_ancestor(sha, theirs) else "is ahead"
                raise GitStateError(f"{ref} on {remote!r} {ahead} ({theirs[:10]}); nothing was pushed",
                                    hint="run `git hermit fetch` first; a diverged step is never overwritten")
            sends.append((sha, ref, theirs))
        try:
            pushed = push_atomic(repo, remote, sends)
        except RefConflict:
            if attempt == PUSH_ATTEMPTS:
                raise
            time.sleep(random.uniform(0.05, 0.3) * attempt)    # let the other push finish, then re-merge
            continue
        return PushOutcome(remote, tuple(pushed), tuple(merged_all), attempt, disagreements=tuple(found_all))
    raise AssertionError("unreachable")
