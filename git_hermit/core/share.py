"""`git hermit fetch` and `git hermit push`: share runs through an ordinary git remote.

Both first bring the remote's ``hermit`` branches, tags, notes and run refs (records, pending
rollouts; traces with ``--traces``) into ``refs/hermit-remote/<remote>/…``. Fetch then reviews
them (core/share_rules.py: a remote is untrusted) and moves the local refs in one transaction,
never touching the user's branches: notes and records are merged (a note only grows; a rewrite of
a record we hold, an invalid note, a step that does not descend from the previous step, a commit
on an older step's measured branch are refused and named, unless ``--accept-remote`` takes the
remote's records); step branches fast-forward. Push merges the remote's notes and records the same
way, then sends the run's step branches, tags, notes, records, pending rollouts (and traces with
``--traces``), and the branch that holds the run's config, in ONE ``git push --atomic`` whose
leases are the remote state it merged with; if the remote moved meanwhile, it merges and retries.
"""

from __future__ import annotations

import gc
import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from git_hermit.core.history import check_note_blobs
from git_hermit.core.records import (MAX_RECORD_BYTES, RunRecords, STEP_FILE, STEPS, pending_ref, read_pending,
                                     records_ref, step_path, traces_ref)
from git_hermit.core.runs import list_runs, list_steps, seed_branch, step_ref
from git_hermit.core.scores_notes import RowDisagreement, merge_scores_notes
from git_hermit.core.share_rules import Refusal, check_note, inconsistent_scores, rewrites
from git_hermit.errors import GitStateError, NotesConflict, RefConflict
from git_hermit.gitio import (NOTES_REFS, PushedRef, RefUpdate, Repo, ZERO_SHA, configure_notes_rewrite, fetch_tracking,
                              merge_notes, pack_size, push_atomic)
from git_hermit.model.merge import FieldConflict, merge_records
from git_hermit.model.records import canonical_json

PUSH_ATTEMPTS = 5
REFUSE, ACCEPT, KEEP = "refuse", "accept", "keep"   # what to do with a remote's rewrite of our records
# Bounds on a remote's record directory (a record is JSON, Markdown or JSONL written by git-hermit)
MAX_RECORD_FILES = 20_000


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
    refused: tuple[Refusal, ...] = ()                   # what the remote would have changed, refused
    accepted: tuple[Refusal, ...] = ()                  # rewrites taken with --accept-remote


@dataclass(frozen=True)
class PushOutcome:
    remote: str
    pushed: tuple[PushedRef, ...]
    merged: tuple[RefMove, ...]     # local notes and records refs that took the remote's first
    attempts: int = 1
    warnings: tuple[str, ...] = field(default_factory=tuple)
    disagreements: tuple[RowDisagreement, ...] = ()
    traces: tuple[bool, int] | None = None   # (pushed, bytes) of the run's traces; None: there are none


def _kind_of(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


# ------------------------------------------------------------------------------------------ notes
def _resolver(kind: str, ref: str, policy: str, found: list[RowDisagreement], refused: list[Refusal],
              accepted: list[Refusal]) -> Callable[[str, str | None, str | None, str | None], str | None]:
    """What to keep of one note the remote changed: a new valid note is taken, a note we hold merges
    field by field and may only grow (share_rules); an invalid note or a rewrite is refused (kept as
    it is here and added to ``refused``), or with ``policy`` accept/keep taken or kept on purpose."""
    def resolve(target: str, base: str | None, ours: str | None, theirs: str | None) -> str | None:
        where = f"the {kind} note on commit {target[:12]}"
        data: dict[str, Any] | None = None
        if theirs is not None:
            data, why = check_note(kind, theirs, target[:12])
            if why is not None:
                refused.append(Refusal(ref, target, f"{where} on the remote {why}", "invalid"))
                return ours
        if ours is None:
            return theirs
        try:
            return _resolve_held(target, where, base, ours, theirs, data)
        except (ValueError, RecursionError) as exc:     # our own note (or the base) is damaged here
            refused.append(Refusal(ref, target, f"{where} cannot be merged: this repository's copy is damaged "
                                   f"({type(exc).__name__})", "invalid"))
            return ours

    def _resolve_held(target: str, where: str, base: str | None, ours: str, theirs: str | None,
                      data: dict[str, Any] | None) -> str | None:
        mine = json.loads(ours)
        if theirs is None:
            change = Refusal(ref, target, f"{where} was removed on the remote", "record")
            return _settle(change, policy, ours, None, refused, accepted)
        old = json.loads(base) if base is not None else None
        try:
            seen: list[RowDisagreement] = []
            merged = (merge_scores_notes(old, mine, data, seen) if kind == "scores"
                      else merge_records(old, mine, data))
        except FieldConflict as exc:
            raise NotesConflict(
                f"{where} was changed on both sides: field {exc.path!r} is "
                f"{json.dumps(exc.ours)[:60]} here and {json.dumps(exc.theirs)[:60]} on the remote",
                hint=f"keep one side with `git notes --ref=hermit/{kind} add -f -C <blob> {target[:12]}`, "
                     "or rerun what wrote it; nothing was changed") from None
        text = theirs if merged == data else (None if merged is None else canonical_json(merged))
        if text is not None:
            _, why = check_note(kind, text, target[:12])
            bad = inconsistent_scores(merged) if kind == "scores" and merged is not None else []
            if why is not None or bad:
                refused.append(Refusal(ref, target, f"{where} merged with the remote's "
                                       + (why or "is inconsistent: " + "; ".join(bad)), "invalid"))
                return ours
        fields = rewrites(kind, old, mine, merged)
        if fields:
            change = Refusal(ref, target, f"{where}: the remote changes " + "; ".join(fields[:4])
                             + (f" and {len(fields) - 4} more field(s)" if len(fields) > 4 else ""), "record")
            if policy != ACCEPT:
                return _settle(change, policy, ours, text, refused, accepted)
            accepted.append(change)
        found.extend(replace(d, commit=target) for d in seen)     # only once the whole note merged
        return text
    return resolve


def _settle(change: Refusal, policy: str, ours: str | None, theirs: str | None, refused: list[Refusal],
            accepted: list[Refusal]) -> str | None:
    if policy == ACCEPT:
        accepted.append(change)
        return theirs
    if policy == REFUSE:
        refused.append(change)
    return ours


@dataclass
class _Review:
    """What one fetch or push found, collected across refs."""

    policy: str
    updates: list[RefUpdate] = field(default_factory=list)
    moves: list[RefMove] = field(default_factory=list)
    found: list[RowDisagreement] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    accepted: list[Refusal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def move(self, repo: Repo, ref: str, new: str, old: str | None, how: str | None = None) -> None:
        self.updates.append(RefUpdate(ref, new, old or ZERO_SHA))
        self.moves.append(RefMove(ref, old, new, how or ("new" if old is None else "fast-forward"
                                                            if repo.is_ancestor(old, new) else "merged")))


def _review_notes(repo: Repo, remote_refs: dict[str, str], remote: str, review: _Review) -> None:
    notes = {r: sha for r, sha in remote_refs.items() if r.startswith("refs/notes/hermit/")}
    # the remote's notes validated as `log` reads them, once, filling its caches (the first `log`
    # after a fetch checks nothing again); a note this finds bad is refused by the resolver
    try:
        valid, _ = check_note_blobs(repo, notes)
    except (ValueError, RecursionError, GitStateError):
        valid = set()       # a damaged remote note: each is checked on its own below
    for ref in sorted(notes):
        ours, theirs = repo.read_ref(ref), notes[ref]
        before = len(review.refused)
        new = merge_notes(repo, ours, theirs, _resolver(_kind_of(ref), ref, review.policy, review.found,
                                                        review.refused, review.accepted),
                          f"git-hermit: merge {ref} from {remote}",
                          checked=valid.__contains__ if _kind_of(ref) != "provenance" else None)
        if new is None or len(review.refused) > before:   # a refused change: this ref stays as it is
            continue
        review.move(repo, ref, new, ours, "new" if ours is None else ("fast-forward" if new == theirs else "merged"))


# --------------------------------------------------------------------------------------- records
# lines of ``ls_tree_text``: "<mode> <size> <path>"
_NOT_PLAIN = re.compile(r"^(?!100644 )\S+ \S+ (\S.*)$", re.MULTILINE)     # a link, an executable, a submodule
# a ".", ".." or ".git" path component, or a name git quotes (control characters, a newline)
_UNSAFE = re.compile(r'^\S+ \S+ ((?:.*/)?(?:\.\.?|\.git)(?:/.*)?|".*)$', re.MULTILINE)
_LARGE = re.compile(r"^\S+ (\d{7,}) (.*)$", re.MULTILINE)                   # 1,000,000 bytes or more
_STEP_LINE = re.compile(r"^\S+ \S+ steps/(\d+)/", re.MULTILINE)
_SEVEN_DIGITS = re.compile(r" \d{7}")      # a size of 1,000,000 bytes or more somewhere
# at most this many new steps are listed by their own paths; more, the whole steps/ (one process either way)
_LISTED_BY_PATH = 64


def _record_problems(repo: Repo, commit: str, steps: list[int], run: str, *, records: bool,
                     root: str | None = None, trees: Mapping[int, str] | None = None) -> dict[int, str]:
    """Why each of a remote's step directories at ``commit`` cannot be taken ({step: why}; absent: it
    can): only plain files (no link, executable or submodule) at sane paths, records of at most
    MAX_RECORD_BYTES each (the bound core/records.py holds a read to, so a record that could not be
    read never enters our refs), at most MAX_RECORD_FILES of them, and for records a step.json naming
    this run and step (read through ``trees``, {step: its directory's tree}). One ``ls-tree -r`` of
    those steps only (sizes from the object headers) scanned as text and one batch read, whatever the
    number of steps (``root``: the whole tree is one step's, e.g. a pending ref's).

    Each rule has a fast test over the whole listing first (a count or a substring search, in C): a
    fresh clone's fetch lists 84,000 files of 1,000 steps, and only a listing that could break a rule
    is scanned line by line for it."""
    if not steps:
        return {}
    paths = None if root is not None else ([f"{step_path(n)}/" for n in steps] if len(steps) <= _LISTED_BY_PATH
                                           else [f"{STEPS}/"])
    text = repo.ls_tree_text(commit, paths)
    wanted = set(steps)
    lines = text.count("\n")

    def step_of(path: str) -> int | None:
        if root is not None:
            return steps[0]
        parts = path.strip('"').split("/", 2)
        return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() and int(parts[1]) in wanted else None
    maybe = {   # False: no line can match the rule's pattern
        _NOT_PLAIN: text.count("\n100644 ") + text.startswith("100644 ") != lines,
        # a "."/".."/".git" component starts with "." after "/" or after the size's space; git quotes with '"'
        _UNSAFE: "/." in text or " ." in text or '"' in text,
        _LARGE: records and _SEVEN_DIGITS.search(text) is not None,
    }
    problems: dict[int, str] = {}
    for pattern, why in ((_NOT_PLAIN, "is not a plain file: records are plain files"),
                         (_UNSAFE, "is not a safe path"),
                         (_LARGE, f"is over the {MAX_RECORD_BYTES:,} bytes a record may hold")):
        if not maybe[pattern]:
            continue
        for match in pattern.finditer(text):
            if pattern is _LARGE and (not records or int(match.group(1)) <= MAX_RECORD_BYTES):
                continue          # a trajectory (traces) may be larger: it is read unbounded, as a trace
            path = match.group(match.lastindex or 1)
            n = step_of(path)
            if n is not None and n not in problems:
                problems[n] = f"holds {json.dumps(path)}, which {why}"
    if root is None and lines > MAX_RECORD_FILES:      # files per step: one regex scan, counted in C
        counts = {int(n): count for n, count in Counter(_STEP_LINE.findall(text)).items() if n == f"{int(n):04d}"}
    else:
        counts = {n: lines for n in steps[:1]} if root is not None else {}
    for n, count in counts.items():
        if n in wanted and count > MAX_RECORD_FILES and n not in problems:
            problems[n] = f"holds {count:,} files (at most {MAX_RECORD_FILES:,})"
    if records:
        # by the step's own tree (a few entries), not ``<commit>:steps/NNNN/step.json``: that makes git
        # search the 1,000-entry steps tree once per step
        checked = [n for n in steps if n not in problems]
        blobs = repo.read_objects([f"{trees[n]}:{STEP_FILE}" if trees is not None and n in trees
                                   else f"{commit}:{step_path(n)}/{STEP_FILE}" for n in checked])
        for n, found in zip(checked, blobs):
            try:
                meta = json.loads(found[2]) if found and found[1] == "blob" else None
            except ValueError:
                meta = None
            if not isinstance(meta, dict) or meta.get("run") != run or meta.get("step") != n:
                problems[n] = f"has no {STEP_FILE} of run {run!r} step {n}"
    return problems


def _merge_record_ref(repo: Repo, run: str, ref: str, theirs: str | None, review: _Review, kept_steps: set[int],
                      skipped_steps: set[int], *, records: bool, remote: str) -> None:
    """Merge a remote's records (or traces) ref: step directories we lack are added once checked; a
    step directory we hold that the remote changed is a rewrite (refused, unless the step's branch
    diverged and stays ours: so does its directory); a refused step's directory is not taken; the
    final selection follows its latest finalize."""
    ours = repo.read_ref(ref)
    if theirs is None or theirs == ours or (ours is not None and repo.is_ancestor(theirs, ours)):
        return
    forward = ours is None or repo.is_ancestor(ours, theirs)
    base = ours if forward else repo.merge_base(ours, theirs)  # type: ignore[arg-type]
    mine = RunRecords(repo, run, ours, ref=ref).step_trees
    was = RunRecords(repo, run, base, ref=ref).step_trees
    other = RunRecords(repo, run, theirs, ref=ref).step_trees
    take: dict[str, tuple[str, str] | None] = {}
    left = 0                    # their changes not taken
    refused = False
    new = [n for n, tree in sorted(other.items()) if mine.get(n) != tree and not (n in mine and was.get(n) == tree)
           and n not in skipped_steps]
    problems = _record_problems(repo, theirs, new, run, records=records, trees=other)
    for n, tree in sorted(other.items()):
        if mine.get(n) == tree:
            continue
        if n in mine and was.get(n) == tree:      # only ours changed it since the base
            left += 1
            continue
        what = f"the {'records' if records else 'traces'} of step {n} ({ref.rsplit('/', 1)[1]})"
        if n in skipped_steps:
            left += 1
            continue
        problem = problems.get(n)
        if problem is not None:
            review.refused.append(Refusal(ref, str(n), f"{what} on the remote {problem}", "invalid"))
            refused, left = True, left + 1
            continue
        if n in mine:
            if n in kept_steps:       # its branch diverged and stays ours: so does its directory
                left += 1
                continue
            change = Refusal(ref, str(n), f"{what}: the remote's differ from this repository's", "record")
            if review.policy != ACCEPT:
                _settle(change, review.policy, None, None, review.refused, review.accepted)
                refused, left = refused or review.policy == REFUSE, left + 1
                continue
            review.accepted.append(change)
        take[step_path(n)] = ("040000", tree)
    final_theirs, final_ours, final_base = _final(repo, theirs), _final(repo, ours), _final(repo, base)
    if final_theirs is not None and final_theirs != final_ours:
        if final_ours is None or final_ours == final_base:
            take["final_selection.json"] = ("100644", final_theirs)
        else:
            left += 1
    if refused and review.policy == REFUSE:
        return                    # this ref stays as it is: the refusal is reported
    message = f"git-hermit: merge {ref} from {remote}"
    if forward and not left:
        review.move(repo, ref, theirs, ours, "new" if ours is None else "fast-forward")
        return
    tree = repo.write_tree(ours, take) if take or ours is None else repo.tree_of(ours)
    # a merge commit joins the histories, so the next fetch does not ask again about what it left
    review.move(repo, ref, repo.commit_tree(tree, ours, message, theirs), ours,
                "merged" if take else "merged (kept local)")


def _final(repo: Repo, commit: str | None) -> str | None:
    if not commit:
        return None
    found = repo.read_objects([f"{commit}:final_selection.json"])[0]
    return found[0] if found else None


def _review_records(repo: Repo, remote_refs: dict[str, str], remote: str, review: _Review,
                    steps: tuple[dict[str, set[int]], dict[str, set[int]]], *, traces: bool) -> None:
    kept, skipped = steps
    for run in _remote_runs(remote_refs):
        for ref, records in ((records_ref(run), True), (traces_ref(run), False)):
            if records or traces:
                _merge_record_ref(repo, run, ref, remote_refs.get(ref), review, kept.get(run, set()),
                                  skipped.get(run, set()), records=records, remote=remote)


def _remote_runs(remote_refs: dict[str, str]) -> list[str]:
    runs = set()
    for ref in remote_refs:
        parts = ref.split("/")
        if len(parts) == 4 and parts[:2] == ["refs", "hermit"]:
            runs.add(parts[2])
        elif len(parts) == 5 and parts[:3] == ["refs", "heads", "hermit"]:
            runs.add(parts[3])
    return sorted(runs)


def _review_pending(repo: Repo, remote_refs: dict[str, str], review: _Review) -> None:
    """A remote's pending rollouts are taken for a step this repository has not published, when it
    has none of its own for it (a job killed mid-step, restarted here)."""
    for run in _remote_runs(remote_refs):
        theirs = remote_refs.get(pending_ref(run))
        ours = repo.read_ref(pending_ref(run))
        if theirs is None or theirs == ours:
            continue
        steps = dict(list_steps(repo, run))
        found = _pending_of(repo, theirs)
        if found is None or found[0] in steps:
            continue        # damaged, or for a step published here: stale
        mine = read_pending(repo, run)
        if mine is not None and mine[1].step >= found[0]:
            if mine[1].step == found[0]:
                review.warnings.append(f"{pending_ref(run)}: the remote's rollouts of step {found[0]} differ from "
                                       "this repository's; kept local")
            continue
        problem = _record_problems(repo, theirs, [found[0]], run, records=False, root="").get(found[0])
        if problem is not None:
            review.refused.append(Refusal(pending_ref(run), str(found[0]),
                                          f"the pending rollouts of step {found[0]} on the remote {problem}", "invalid"))
            continue
        review.move(repo, pending_ref(run), theirs, ours, "new" if ours is None else "replaced (an older step's)")


def _pending_of(repo: Repo, commit: str) -> tuple[int, str] | None:
    found = repo.read_objects([f"{commit}:pending.json"])[0]
    try:
        data = json.loads(found[2]) if found else {}
        return int(data["step"]), str(data["evaluated"])
    except (ValueError, TypeError, KeyError):
        return None


# -------------------------------------------------------------------------------------- branches
def _review_branches(repo: Repo, remote_refs: dict[str, str], remote: str, review: _Review
                     ) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Step branches and tags: a new step must descend from the run's previous step; the latest step
    may move forward (a hand edit: the next step evaluates it); an older step's measured commit never
    moves (a reviewer's commit there, or a merge of the base branch, is refused and named); a
    diverged step stays local. Returns ({run: steps kept local because they diverged}, {run: steps
    refused}): their records follow the branch (kept, or not taken)."""
    kept: dict[str, set[int]] = {}
    skipped: dict[str, set[int]] = {}
    for run in _remote_runs(remote_refs):
        local = dict(list_steps(repo, run))
        theirs = dict(list_steps(repo, run, {r: s for r, s in remote_refs.items() if r.startswith("refs/heads/")}))
        latest = max(local) if local else None
        effective = dict(local)        # the tips after this fetch, step by step
        descends = _ancestry(repo, [sha for n, sha in theirs.items() if n not in local], list(local.values()))
        for n, sha in sorted(theirs.items()):
            ref = step_ref(run, n)
            mine = local.get(n)
            if mine == sha:
                continue
            if mine is None:
                parent = effective.get(n - 1)
                if n == 0 and not local:
                    effective[n] = sha
                    review.move(repo, ref, sha, None)
                elif parent is not None and descends(parent, sha):
                    effective[n] = sha
                    review.move(repo, ref, sha, None)
                else:
                    why = (f"there is no step {n - 1} here" if parent is None else
                           f"it does not descend from step {n - 1} ({parent[:10]})")
                    review.refused.append(Refusal(ref, sha, f"{ref.removeprefix('refs/heads/')} on {remote} "
                                                  f"({sha[:10]}) is not a step of this run: {why}", "step"))
                    skipped.setdefault(run, set()).add(n)
                continue
            if repo.is_ancestor(sha, mine):
                review.moves.append(RefMove(ref, mine, mine, "kept (local is ahead; `git hermit push` sends it)"))
                continue
            if not repo.is_ancestor(mine, sha):
                kept.setdefault(run, set()).add(n)
                review.warnings.append(f"{ref} diverged from {remote}'s ({mine[:10]} here, {sha[:10]} there): "
                                       "kept local")
                continue
            if n == latest:       # a hand edit of the latest step: the next step evaluates it
                effective[n] = sha
                review.move(repo, ref, sha, mine)
                continue
            # the branch's own commits (first parents): a merge's other side is another branch's work
            infos = list(reversed(repo.log(f"{mine}..{sha}", first_parent=True)))
            own = tuple(c.sha for c in infos if len(c.parents) == 1)
            merged = len(own) < len(infos)
            skipped.setdefault(run, set()).add(n)
            review.refused.append(Refusal(ref, sha, (
                f"{ref.removeprefix('refs/heads/')} on {remote} has commit(s) {', '.join(c.sha[:10] for c in infos)} "
                f"on top of step {n}'s measured commit {mine[:10]}"
                + (" (a merge of another branch into it: GitHub's Update branch)" if merged else "")
                + f"; step {n} is not the latest step (step {latest} is), so it keeps the commit step {n + 1} "
                  "measured"), "step", own or ("merge",)))
        # best/final tags: new, or moved forward
        for tag in ("best", "final"):
            ref = f"refs/tags/hermit/{run}/{tag}"
            there, here = remote_refs.get(ref), repo.read_ref(ref)
            if there is None or there == here:
                continue
            if here is None or repo.is_ancestor(here, there):
                review.move(repo, ref, there, here)
            elif repo.is_ancestor(there, here):
                review.moves.append(RefMove(ref, here, here, "kept (local is ahead; `git hermit push` sends it)"))
            else:
                review.warnings.append(f"{ref} diverged from {remote}'s ({here[:10]} here, {there[:10]} there): "
                                       "kept local")
    return kept, skipped


def _ancestry(repo: Repo, new: list[str], known: list[str]) -> Callable[[str, str], bool]:
    """``is_ancestor(a, b)`` for ``b`` among ``new`` commits, answered from one listing of their history
    down to ``known`` (a fresh clone's fetch asks it of a thousand steps); git answers the rest."""
    graph = repo.parents_of(new, known)

    def descends(ancestor: str, commit: str) -> bool:
        if commit not in graph:
            return repo.is_ancestor(ancestor, commit)
        seen, todo = set(), [commit]
        while todo:
            sha = todo.pop()
            if sha == ancestor:
                return True
            if sha in seen:
                continue
            seen.add(sha)
            if sha in graph:
                todo.extend(graph[sha])
        # not below ``commit`` in the new history: an ancestor only through a known commit
        return ancestor not in graph and any(repo.is_ancestor(ancestor, sha) for sha in seen - set(graph))
    return descends


def reapply_hint(refused: tuple[Refusal, ...], latest: dict[str, int]) -> str | None:
    """How to re-apply a reviewer's refused commits on the run's latest step (None: none was refused)."""
    steps = [r for r in refused if r.kind == "step" and r.commits]
    if not steps:
        return None
    run = steps[0].ref.split("/")[3]
    tip = f"hermit/{run}/step-{latest.get(run, 0):04d}"
    own = [c for c in steps[0].commits if c != "merge"]
    if not own:
        return (f"it only merges another branch into the step's: nothing to re-apply (step pull requests are stacked, "
                f"each on the previous step's branch); a change for the adapter goes on {tip}, the latest step")
    return (f"re-apply them on the run's latest step, whose next step evaluates them: `git switch {tip} && "
            f"git cherry-pick {' '.join(c[:12] for c in own)} && git hermit push`")


# ----------------------------------------------------------------------------------------- fetch
def fetch_runs(repo: Repo, remote: str = "origin", *, accept_remote: bool = False, keep_local: bool = False,
               traces: bool = False) -> FetchOutcome:
    """Every run's refs reviewed (share_rules) and moved in one local transaction; what was refused is
    in the outcome (the CLI exits 21 naming it), everything else moved."""
    # the review parses thousands of notes into a million objects, none in a cycle (reference counting
    # frees them): the cyclic collector's 146 passes over them were 30 ms of a 1,000-step fetch's CPU
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _fetch_runs(repo, remote, accept_remote=accept_remote, keep_local=keep_local, traces=traces)
    finally:
        if collecting:
            gc.enable()


def _fetch_runs(repo: Repo, remote: str, *, accept_remote: bool, keep_local: bool, traces: bool) -> FetchOutcome:
    remote_refs = fetch_tracking(repo, remote, traces=traces)
    configure_notes_rewrite(repo)      # a clone never ran init: make the notes readable and kept here too
    review = _Review(ACCEPT if accept_remote else KEEP if keep_local else REFUSE)
    _review_notes(repo, remote_refs, remote, review)
    steps = _review_branches(repo, remote_refs, remote, review)
    _review_records(repo, remote_refs, remote, review, steps, traces=traces)
    _review_pending(repo, remote_refs, review)
    repo.update_refs(review.updates, message=f"git hermit fetch {remote}")
    if review.updates:
        _warm_log(repo)
    return FetchOutcome(remote, tuple(review.moves), tuple(review.warnings), tuple(review.found),
                        tuple(review.refused), tuple(review.accepted))


def _warm_log(repo: Repo) -> None:
    """Read the default run's config as `git hermit log` does, so the first `log` after a fetch
    parses and validates no YAML: the notes were validated into its caches above. Its integrity
    checks of the refs are left to it: reading the whole history here was 0.05 s of a 1,000-step
    fetch's CPU to spare the first `log` 0.01 s. Best effort: a run `log` could not open (no config
    checked out, several runs) is left for `log` to name."""
    from git_hermit.core.runs import open_run
    from git_hermit.errors import HermitError
    try:
        open_run(repo, None)
    except HermitError:
        pass


# ------------------------------------------------------------------------------------------ push
def _run_refs(repo: Repo, run: str | None) -> dict[str, str]:
    """The local refs ``push`` sends: the run's (or every run's) step branches, tags and records
    (traces apart: ``--traces``)."""
    runs = [run] if run else list_runs(repo)
    refs: dict[str, str] = {}
    for name in runs:
        refs.update(repo.list_refs(f"refs/heads/hermit/{name}/", f"refs/tags/hermit/{name}/", f"refs/hermit/{name}/"))
    return {ref: sha for ref, sha in refs.items() if not ref.endswith("/traces")}


def _base_branches(repo: Repo, runs: list[str]) -> dict[str, str]:
    """{run: the branch its config is on (its seed's base branch)} where this repository has it."""
    found = {}
    for name in runs:
        branch = seed_branch(repo, name)
        if branch and repo.read_ref(f"refs/heads/{branch}"):
            found[name] = branch
    return found


def push_run(repo: Repo, remote: str = "origin", run: str | None = None, *, traces: bool = False) -> PushOutcome:
    """Merge the remote's notes and records, then push the runs' refs and their config's branch atomically."""
    if run is not None and not repo.list_refs(f"refs/heads/hermit/{run}/"):
        raise GitStateError(f"run {run!r} has no step branches here", hint="see `git hermit log --run NAME`")
    runs = [run] if run else list_runs(repo)
    bases = _base_branches(repo, runs)
    merged_all: list[RefMove] = []
    found_all: list[RowDisagreement] = []
    for attempt in range(1, PUSH_ATTEMPTS + 1):
        remote_refs = fetch_tracking(repo, remote, branches=tuple(f"refs/heads/{b}" for b in set(bases.values())),
                                     traces=traces)
        review = _Review(REFUSE)
        _review_notes(repo, remote_refs, remote, review)
        _review_records(repo, remote_refs, remote, review, ({}, {}), traces=traces)
        if review.refused:
            from git_hermit.errors import RemoteRefused
            first = review.refused[0]
            raise RemoteRefused(
                f"{remote!r} holds records that rewrite this repository's: {first.what}"
                + (f" (and {len(review.refused) - 1} more)" if len(review.refused) > 1 else "") + "; nothing was pushed",
                hint=f"see them with `git hermit fetch {remote}`; `fetch --keep-local` keeps this repository's (the next "
                     "push then restores them there), `--accept-remote` takes the remote's")
        if review.updates:
            repo.update_refs(review.updates, message=f"git hermit push {remote}: merge remote notes and records")
            merged_all += review.moves
            found_all += review.found        # merged here: a retry merges on top, so each row is told once
        wanted = _run_refs(repo, run)
        for ref in NOTES_REFS.values():
            sha = repo.read_ref(ref)
            if sha:
                wanted[ref] = sha
        sends: list[tuple[str | None, str, str | None]] = []
        warnings: list[str] = []
        latest = {name: max((n for n, _ in list_steps(repo, name)), default=0) for name in runs}
        for ref, sha in sorted(wanted.items()):
            theirs = remote_refs.get(ref)
            if theirs == sha:
                continue
            if theirs is not None and ref.startswith("refs/heads/") and not repo.is_ancestor(theirs, sha):
                step_run, n = _step_of(ref)
                if (repo.is_ancestor(sha, theirs) and step_run is not None and n is not None
                        and n < latest.get(step_run, 0)):
                    # commits on an older step there (a reviewer's): fetch refuses them; kept as they are
                    warnings.append(f"{remote}'s {ref.removeprefix('refs/heads/')} holds commits on top of the measured "
                                    f"step {n} ({theirs[:10]}); left as it is there (fetch refuses them)")
                    continue
                ahead = "has commits this clone lacks" if not repo.is_ancestor(sha, theirs) else "is ahead"
                raise GitStateError(f"{ref} on {remote!r} {ahead} ({theirs[:10]}); nothing was pushed",
                                    hint="run `git hermit fetch` first; a diverged step is never overwritten")
            if ref.endswith("/pending") and theirs is not None:
                mine_step = _pending_of(repo, sha)
                their_step = _pending_of(repo, theirs)
                if mine_step and their_step and their_step[0] > mine_step[0]:
                    continue      # the remote holds a later step's rollouts: never replaced by older ones
            sends.append((sha, ref, theirs))
        # the remote's pending rollouts of a step published here are stale: dropped with this push
        for name in runs:
            theirs = remote_refs.get(pending_ref(name))
            if theirs and pending_ref(name) not in wanted:
                pending = _pending_of(repo, theirs) if repo.rev_parse(theirs) else None
                if pending is not None and pending[0] <= latest.get(name, 0):
                    sends.append((None, pending_ref(name), theirs))
        for name, branch in sorted(bases.items()):
            send, warning = _base_send(repo, remote, name, branch, remote_refs)
            if warning:
                warnings.append(warning)
            if send is not None and all(ref != send[1] for _, ref, _ in sends):
                sends.append(send)
        trace_info = _traces(repo, runs, remote_refs, traces, sends)
        try:
            pushed = push_atomic(repo, remote, sends)
        except RefConflict:
            if attempt == PUSH_ATTEMPTS:
                raise
            time.sleep(random.uniform(0.05, 0.3) * attempt)    # let the other push finish, then re-merge
            continue
        return PushOutcome(remote, tuple(pushed), tuple(merged_all), attempt, tuple(warnings),
                           tuple(found_all), trace_info)
    raise AssertionError("unreachable")


def _step_of(ref: str) -> tuple[str | None, int | None]:
    parts = ref.split("/")
    if len(parts) == 5 and parts[:3] == ["refs", "heads", "hermit"] and parts[4].startswith("step-"):
        return parts[3], int(parts[4][5:]) if parts[4][5:].isdigit() else None
    return None, None


def _base_send(repo: Repo, remote: str, run: str, branch: str, remote_refs: dict[str, str]
               ) -> tuple[tuple[str, str, str | None] | None, str | None]:
    """The config's branch to push with the run (a fast-forward only), or why it is left as it is."""
    ref = f"refs/heads/{branch}"
    mine, theirs = repo.read_ref(ref), remote_refs.get(ref)
    if mine is None or mine == theirs:
        return None, None
    if theirs is None or repo.is_ancestor(theirs, mine):
        return (mine, ref, theirs), None
    if repo.is_ancestor(mine, theirs):
        return None, None          # the remote's is ahead: it holds this one's config already
    return None, (f"{remote}'s {branch} has diverged from yours, so run {run!r}'s config on it was not pushed: "
                  f"merge it (`git pull {remote} {branch}`) and push it, or a fresh clone cannot continue the run")


def _traces(repo: Repo, runs: list[str], remote_refs: dict[str, str], traces: bool,
            sends: list[tuple[str | None, str, str | None]]) -> tuple[bool, int] | None:
    """(pushed?, bytes the traces add to the remote); with ``traces`` they join ``sends``."""
    tips = {name: sha for name in runs if (sha := repo.read_ref(traces_ref(name)))}
    if not tips:
        return None
    if not traces:
        return False, 0
    new = {name: sha for name, sha in tips.items() if remote_refs.get(traces_ref(name)) != sha}
    for name, sha in new.items():
        theirs = remote_refs.get(traces_ref(name))
        if theirs is not None and not repo.is_ancestor(theirs, sha):
            continue   # merged above when possible; a remote's unmerged traces are left as they are
        sends.append((sha, traces_ref(name), theirs))
    known = [sha for name in new if (sha := remote_refs.get(traces_ref(name)))]
    return True, pack_size(repo, list(new.values()), known)
