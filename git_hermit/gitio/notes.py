"""git notes under ``refs/notes/hermit/*``: batched reads and lossless concurrent writes.

A whole notes ref is read through the batch reader (no process per note). Writes build one
notes commit holding every entry and publish it by compare-and-swap; a writer that lost the
race re-applies its entries on the new tip, so concurrent writers never drop each other's
notes (plain ``git notes add`` can). A short file lock makes local writers take turns.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator

from ..errors import DamagedRecord, GitStateError, RefConflict
from .repo import RefUpdate, Repo, ZERO_SHA

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: CAS alone keeps writes correct
    fcntl = None  # type: ignore[assignment]

NOTES_REFS: dict[str, str] = {
    "scores": "refs/notes/hermit/scores",
    "manifest": "refs/notes/hermit/manifest",
    "verdicts": "refs/notes/hermit/verdicts",
    "provenance": "refs/notes/hermit/provenance",
    "analysis": "refs/notes/hermit/analysis",
    "reviews": "refs/notes/hermit/reviews",      # reviewers' /hermit commands (git hermit review)
}

_MAX_ATTEMPTS = 12
_LOCK_WAIT_S = 30.0


# Shown under each commit by plain `git log`: a change's declaration and its verdict are short and
# are what a reviewer asks; scores (per-task outcomes) and analysis (long overviews) are not. Each
# is a glob matching exactly its ref: git warns on every `git show` about a displayRef named outright
# that does not exist (right after `init`, and always in runs whose evolver writes no such note),
# and says nothing about a glob that matches nothing yet.
DISPLAY_REFS = ("refs/notes/hermit/manifes[t]", "refs/notes/hermit/verdict[s]")
_OLD_DISPLAY_REFS = ("refs/notes/hermit/manifest", "refs/notes/hermit/verdicts")   # what earlier versions set


def configure_notes_rewrite(repo: Repo) -> None:
    """Make the hermit notes survive rewrites and readable in `git log` (idempotent).

    - ``notes.rewriteRef`` (no default in git): amend and rebase copy the hermit notes;
    - ``notes.rewrite.amend|rebase = true``;
    - ``notes.rewriteMode = overwrite`` unless the user chose one: git's default ``concatenate``
      would join two JSON notes into one invalid note when a rebase squashes commits;
    - ``notes.displayRef`` for the manifest and verdict notes (``DISPLAY_REFS``).
    """
    settings: dict[str, list[str]] = {}      # read in one process: a configured clone writes nothing
    for line in repo.git("config", "--get-regexp", r"^notes\.", check=False).splitlines():
        key, _, value = line.partition(" ")
        settings.setdefault(key.lower(), []).append(value)
    present = set(settings.get("notes.rewriteref", []))
    for ref in NOTES_REFS.values():
        if ref not in present:
            repo.config_add("notes.rewriteRef", ref)
    for command in ("amend", "rebase"):
        if settings.get(f"notes.rewrite.{command}", [None])[-1] != "true":
            repo.config_set(f"notes.rewrite.{command}", "true")
    if "notes.rewritemode" not in settings:
        repo.config_set("notes.rewriteMode", "overwrite")
    shown = set(settings.get("notes.displayref", []))
    for old in _OLD_DISPLAY_REFS:
        if old in shown:
            repo.git("config", "--fixed-value", "--unset-all", "notes.displayRef", old)
    for ref in DISPLAY_REFS:
        if ref not in shown:
            repo.config_add("notes.displayRef", ref)


def _annotated_object(path: str) -> str | None:
    """The object a notes-tree path annotates (fan-out ``ab/cdef…`` joined); None for non-note files."""
    joined = path.replace("/", "")
    # strip() rather than a per-character test: a 10,000-step run has 30,000 notes to name
    if len(joined) in (40, 64) and not joined.strip("0123456789abcdef"):
        return joined
    return None


class NotesStore:
    """Reads and writes notes refs of one repository."""

    def __init__(self, repo: Repo):
        self.repo = repo
        self.use_local_lock = True  # tests turn it off to prove CAS alone loses nothing
        self.last_attempts = 0  # publications tried by the last write (1 = no conflict)

    # ----------------------------------------------------------------------------- reads
    def _note_paths(self, ref: str) -> tuple[str | None, dict[str, str]]:
        """(tip, {annotated sha: path in the notes tree}) of a notes ref."""
        tip = self.repo.read_ref(ref)
        if tip is None:
            return None, {}
        paths = {}
        for path in self.repo.ls_tree(tip):
            target = _annotated_object(path)
            if target:
                paths[target] = path
        return tip, paths

    def read_all(self, ref: str) -> dict[str, str]:
        """{annotated sha: note text} for a whole notes ref: batch reads only, whatever the number of notes."""
        tip = self.repo.read_ref(ref)
        if tip is None:
            return {}
        entries = {}
        for path, entry in self.repo.ls_tree(tip).items():
            target = _annotated_object(path)
            if target and entry.type == "blob":
                entries[target] = entry.sha
        targets = list(entries)
        blobs = self.repo.read_objects([entries[target] for target in targets])
        notes = {}
        for target, found in zip(targets, blobs):
            if found is None:
                raise GitStateError(f"note blob for {target} in {ref} is missing")
            notes[target] = found[2].decode("utf-8", "replace")
        return notes

    def read(self, ref: str, commit: str) -> str | None:
        """The note on one object (a full sha, or any revision naming a commit); None if it has none."""
        found = self.read_bytes(ref, commit)
        return None if found is None else found.decode("utf-8", "replace")

    def read_bytes(self, ref: str, commit: str, *, tip: str | None = None) -> bytes | None:
        """``read`` as the note's bytes (a reader that checks its UTF-8 itself). DamagedRecord when the
        notes ref points at something git cannot read as a notes commit. ``tip``: the ref's value as
        listed (``for-each-ref`` names a ref whose object is missing; a read through cat-file does not)."""
        target = self._resolve_targets([commit])[0]
        tip = tip or self.repo.read_ref(ref)
        if tip is None:
            return None
        # git-hermit stores notes flat: git finds <tip>:<sha> itself, without a 10,000-entry tree
        # being parsed here; a fanned-out tree (git notes add on many notes) is walked below.
        found = self.repo.read_objects([f"{tip}:{target}"])[0]
        if found is not None and found[1] == "blob":
            return found[2]
        # Notes trees fan out in 0 or more levels of 2-hex-digit directories: descend as needed.
        tree, remaining = f"{tip}^{{tree}}", target
        try:
            while remaining:
                entries = {name: (mode, sha) for mode, name, sha in self.repo.tree_entries(tree)}
                if remaining in entries and entries[remaining][0] != "040000":
                    return self.repo.read_object(entries[remaining][1])[1]
                if remaining[:2] in entries and entries[remaining[:2]][0] == "040000":
                    tree, remaining = entries[remaining[:2]][1], remaining[2:]
                    continue
                return None
        except GitStateError:
            raise DamagedRecord(f"{ref} points at {tip}, which git cannot read as a notes commit",
                                hint=f"restore it from another clone (`git hermit fetch`) or from `git reflog {ref}`; "
                                     "`git fsck` names what is damaged") from None
        return None

    # ----------------------------------------------------------------------------- writes
    @contextlib.contextmanager
    def _local_lock(self, ref: str) -> Iterator[None]:
        """Serialise writers on this machine (best effort, bounded wait; CAS is what keeps notes safe)."""
        if fcntl is None or not self.use_local_lock:
            yield
            return
        lock_dir = self.repo.common_dir / "hermit"
        lock_dir.mkdir(parents=True, exist_ok=True)
        # A leading dot keeps it apart from run locks (run names start with a letter or digit).
        path = lock_dir / f".notes-{ref.replace('/', '_')}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + _LOCK_WAIT_S
            locked = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    locked = True
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break  # a stuck writer must not stall us: fall back on CAS alone
                    time.sleep(0.005)
            try:
                yield
            finally:
                if locked:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _resolve_targets(self, commits: Iterable[str]) -> list[str]:
        resolved = []
        for commit in commits:
            is_sha = len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit)
            resolved.append(commit if is_sha else self.repo.resolve_commit(commit))
        return resolved

    def write_many(self, ref: str, notes: dict[str, str], message: str, remove: Iterable[str] = ()) -> str:
        """Add or replace ``notes`` and drop ``remove`` in ONE notes commit, published by compare-and-swap.

        On a conflict the ref is re-read and our entries re-applied on the new tip (bounded,
        jittered retries). Returns the new notes commit (the current tip, or "" if the ref does not
        exist, when there was nothing to change). Keys may be full shas or any commit revision.
        """
        if not ref.startswith("refs/notes/"):
            raise GitStateError(f"'{ref}' is not a notes ref", hint="notes refs start with refs/notes/")
        targets = self._resolve_targets(notes)
        texts = [notes[key] for key in notes]
        blob_shas = self.repo.write_blobs([text.encode("utf-8") for text in texts])
        new_entries = dict(zip(targets, blob_shas))
        removals = [t for t in self._resolve_targets(remove) if t not in new_entries]
        with self._local_lock(ref):
            for attempt in range(1, _MAX_ATTEMPTS + 1):
                self.last_attempts = attempt
                tip, paths = self._note_paths(ref)
                if not new_entries and not any(t in paths for t in removals):
                    return tip or ""
                commit = self._notes_commit(tip, paths, new_entries, removals, message)
                try:
                    self.repo.update_refs([RefUpdate(ref, commit, tip or ZERO_SHA)], message=message)
                    return commit
                except RefConflict:
                    # Another writer published first: back off (jittered, growing), rebuild on its tip.
                    import random   # only on a retry: a read command never needs it
                    time.sleep(random.uniform(0.5, 1.5) * min(0.005 * 2 ** attempt, 0.5))
        raise RefConflict(
            f"notes ref {ref} kept moving; gave up after {_MAX_ATTEMPTS} attempts",
            hint="many writers are updating these notes at once; retry the command",
        )

    def _notes_commit(self, tip: str | None, paths: dict[str, str], new_entries: dict[str, str],
                      removals: list[str], message: str) -> str:
        """A notes commit on ``tip``: each entry stored flat (any old fan-out path of it dropped)."""
        changes: dict[str, tuple[str, str] | None] = {}
        for target in [*new_entries, *removals]:
            old_path = paths.get(target)
            if old_path is not None and old_path != target:
                changes[old_path] = None
        for target in removals:
            if target in paths:
                changes[paths[target]] = None
        for target, blob in new_entries.items():
            changes[target] = ("100644", blob)
        return self.repo.commit_changes(tip, changes, message, skip_if_unchanged=False)

    def prepare(self, ref: str, notes: dict[str, str], message: str) -> tuple[str | None, str | None]:
        """Build (don't publish) a notes commit adding ``notes`` on the ref's current tip.

        Returns ``(new_commit, old_tip)`` for the caller's own ``update_refs`` transaction,
        which moves this notes ref together with branches and tags (CAS on ``old_tip``);
        ``(None, tip)`` when there is nothing to add. On a conflict, call again and retry.
        """
        if not ref.startswith("refs/notes/"):
            raise GitStateError(f"'{ref}' is not a notes ref", hint="notes refs start with refs/notes/")
        if not notes:
            return None, self.repo.read_ref(ref)
        targets = self._resolve_targets(notes)
        blob_shas = self.repo.write_blobs([notes[key].encode("utf-8") for key in notes])
        tip, paths = self._note_paths(ref)
        return self._notes_commit(tip, paths, dict(zip(targets, blob_shas)), [], message), tip

    def write(self, ref: str, commit: str, text: str, message: str) -> str:
        return self.write_many(ref, {commit: text}, message)


def notes_ref(kind: str) -> str:
    """Full ref name for a note kind ("scores", "manifest", …)."""
    try:
        return NOTES_REFS[kind]
    except KeyError:
        raise GitStateError(f"unknown note kind '{kind}'", hint=f"one of: {', '.join(NOTES_REFS)}") from None


# Given (target, base text, ours text, theirs text) of one annotated object whose note both sides
# changed, the merged text (raises to stop the merge: the caller names the record and field).
NoteResolver = Callable[[str, "str | None", "str | None", "str | None"], "str | None"]


def note_entries(repo: Repo, tip: str | None) -> dict[str, str]:
    """{annotated sha: note blob sha} of a notes commit (fan-out paths joined)."""
    if tip is None:
        return {}
    return {target: entry.sha for path, entry in repo.ls_tree(tip).items()
            if (target := _annotated_object(path)) and entry.type == "blob"}


def merge_notes(repo: Repo, ours: str | None, theirs: str | None, resolve: NoteResolver,
                message: str, *, checked: Callable[[str], bool] | None = None) -> str | None:
    """The notes commit that joins two notes histories (not published); None when ``ours`` stays.

    Every object whose note ``theirs`` changed since the merge base (added, edited, removed) is
    handed to ``resolve`` with the three texts — the remote is untrusted, so even a note only the
    other side changed is checked — and its answer is kept (None: no note). Notes only ours changed
    stay as they are. When every answer is the other side's note and ``theirs`` descends from
    ``ours``, the result is ``theirs`` (a fast-forward, no commit); else a merge commit on ``ours``.
    ``checked(blob)``: a note ours does not hold whose blob is known valid is taken without asking
    (a fresh clone's fetch reads no note twice). (git's own strategies would concatenate or line-sort
    the JSON.)
    """
    if theirs is None or theirs == ours:
        return None
    if ours is not None and repo.is_ancestor(theirs, ours):
        return None
    forward = ours is None or repo.is_ancestor(ours, theirs)
    base = ours if forward else repo.merge_base(ours, theirs)  # type: ignore[arg-type]
    base_e, our_e, their_e = note_entries(repo, base), note_entries(repo, ours), note_entries(repo, theirs)
    changed = [t for t in sorted(set(their_e) | set(base_e)) if their_e.get(t) != base_e.get(t)
               and their_e.get(t) != our_e.get(t)]
    taken = {t for t in changed if checked is not None and t not in our_e and t not in base_e
             and t in their_e and checked(their_e[t])}
    changed = [t for t in changed if t not in taken]
    wanted = [b for t in changed for b in (base_e.get(t), our_e.get(t), their_e.get(t)) if b]
    texts = iter(found[2].decode("utf-8", "replace") if found else None for found in repo.read_objects(wanted))
    answers: dict[str, str | None] = {}
    for target in changed:
        base_t, our_t, their_t = (next(texts) if b else None
                                  for b in (base_e.get(target), our_e.get(target), their_e.get(target)))
        answers[target] = resolve(target, base_t, our_t, their_t)
    kept_theirs = {t for t, text in answers.items()
                   if (text is None and t not in their_e) or (text is not None and t in their_e
                                                             and repo._blob_sha(text.encode("utf-8")) == their_e[t])}
    if forward and kept_theirs == set(answers):
        return theirs
    for target in taken:
        answers[target] = None    # placeholder: its blob is written as it is below

    # the result: ours, with every answer applied (their other changes, if any, were all answered)
    changes: dict[str, tuple[str, str] | None] = {}
    tip_paths = {t: path for path in (repo.ls_tree(ours) if ours else {}) if (t := _annotated_object(path))}
    written = {t: text for t, text in answers.items() if text is not None}
    shas = repo.write_blobs([text.encode("utf-8") for text in written.values()])
    for target, sha in zip(written, shas):
        _set(changes, tip_paths, target, sha)
    for target, text in answers.items():
        if target in taken:
            _set(changes, tip_paths, target, their_e[target])
        elif text is None and target in our_e:
            _set(changes, tip_paths, target, None)
    return repo.commit_changes(ours, changes, message, merge_parents=(theirs,))


def _set(changes: dict[str, tuple[str, str] | None], tip_paths: dict[str, str], target: str,
         blob: str | None) -> None:
    old_path = tip_paths.get(target)
    if old_path is not None and old_path != target:
        changes[old_path] = None
    changes[target] = None if blob is None else ("100644", blob)
