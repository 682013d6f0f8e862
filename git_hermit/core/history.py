"""A run's history from git in a constant number of git processes (for log and show).

One ``for-each-ref`` for the steps, one ``git log`` over the run's commits (grouped by their
Hermit-Step trailer), and one batched read per notes ref — never a git call per commit. A scores
note's summary (all but its per-task outcomes) is kept in ``<git dir>/hermit/cache/`` by the note's
blob id, so a long run's notes are parsed once, not on every `log`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Mapping

from git_hermit import __version__, checked
from git_hermit.core import integrity
from git_hermit.core.integrity import Damage
from git_hermit.core.runs import RunContext, best_tag, final_tag, parse_step_name
from git_hermit.errors import DamagedRecord, GitStateError, SchemaError
from git_hermit.gitio import HERMIT_REMOVES_LINES_OF, NOTES_REFS, CommitInfo, NotesStore, Repo, note_entries
if TYPE_CHECKING:   # the records module is imported where a record is made: a warm `log --json` makes none
    from git_hermit.model.records import Analysis, Change, Manifest, Provenance, Scores, TaskScore, VerdictNote
from git_hermit.model.schema import fingerprint


@dataclass(frozen=True)
class ChangeView:
    """A change a commit declared, with its verdict. ``change`` and ``verdict`` are made from the
    notes cache's data (change.to_dict() and verdict.to_dict() as it holds them) when first read:
    `log --json` passes that data through and never makes the records (a 10,000-step run: 20,000)."""

    commit: str
    rolled_back_by: str | None = None              # the rollback commit that reverted this change
    lines_removed_by: tuple[str, ...] = ()         # forced rollbacks of other changes that removed its edits
    change_data: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    verdict_data: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    made_change: Change | None = field(default=None, compare=False, repr=False)   # when there is no data
    made_verdict: VerdictNote | None = field(default=None, compare=False, repr=False)
    position: int | None = None   # its index in the manifest note's data, when change_data is from there
    verdict_damaged: bool = False   # its commit's verdict note is damaged (left out, named in a warning)

    @cached_property
    def change(self) -> Change:
        if self.made_change is not None:
            return self.made_change
        assert self.change_data is not None, "a ChangeView needs its change's record or data"
        from git_hermit.model.records import Change
        return Change.from_dict(self.change_data)

    @cached_property
    def verdict(self) -> VerdictNote | None:
        if self.verdict_data is None:
            return self.made_verdict
        from git_hermit.model.records import VerdictNote
        return VerdictNote.from_dict(self.verdict_data)

    # What the text `log` shows of a change, read from the data when there is some, without making
    # the records (from_dict keeps these fields as the data has them)
    @property
    def change_id(self) -> str:
        return self.change_data["id"] if self.change_data is not None else self.change.id

    @property
    def description(self) -> str:
        return self.change_data["description"] if self.change_data is not None else self.change.description

    @property
    def verdict_name(self) -> str | None:
        """The verdict (EFFECTIVE, HARMFUL, ...), None while it is pending."""
        if self.verdict_data is not None:
            return str(self.verdict_data["verdict"])
        return self.made_verdict.verdict if self.made_verdict is not None else None

    @property
    def rollback_commit(self) -> str | None:
        """The rollback commit the verdict note names."""
        if self.verdict_data is not None:
            return self.verdict_data.get("rollback_commit")
        return self.made_verdict.rollback_commit if self.made_verdict is not None else None


def _change_views(sha: str, manifest: Manifest | None, manifest_data: dict[str, Any] | None,
                  note: VerdictNote | None, note_data: dict[str, Any] | None, rolled_back_by: str | None,
                  lines_removed_by: tuple[str, ...], verdict_damaged: bool = False) -> tuple[ChangeView, ...]:
    """One commit's changes: from the cached data when there is some (a note's data is there unless
    to_dict does not give it back), else from the records made of the note."""
    listed: list[tuple[str, dict[str, Any] | None, Change | None, int | None]]
    if manifest_data is not None:
        listed = [(data["id"], data, None, i) for i, data in enumerate(manifest_data["changes"])]
    else:
        listed = [(ch.id, None, ch, None) for ch in manifest.changes] if manifest else []
    if note is None and note_data is not None and note_data.get("also"):
        from git_hermit.model.records import VerdictNote
        note = VerdictNote.from_dict(note_data)   # a change group's note: its members' verdicts come from it
    views = []
    for change_id, data, made, position in listed:
        if note_data is not None and note_data.get("change_id") == change_id:
            views.append(ChangeView(sha, rolled_back_by, lines_removed_by, change_data=data, made_change=made,
                                    verdict_data=note_data, position=position))
        else:
            views.append(ChangeView(sha, rolled_back_by, lines_removed_by, change_data=data, made_change=made,
                                    made_verdict=note.for_change(change_id) if note is not None else None,
                                    position=position, verdict_damaged=verdict_damaged))
    return tuple(views)


@dataclass(frozen=True)
class CommitView:
    info: CommitInfo
    reverts: str | None              # Hermit-Reverts target
    reverts_verdict: str | None      # Hermit-Verdict on a rollback commit
    undeclared: bool
    rolled_back_by: str | None = None              # the rollback commit that reverted its changes
    lines_removed_by: tuple[str, ...] = ()         # forced rollbacks of other changes that removed its edits
    # what makes its ChangeViews from its notes' data when `changes` is first read (`log --json` reads
    # a kept step's entry instead)
    make_changes: Callable[[], tuple[ChangeView, ...]] = field(default=tuple, compare=False, repr=False)

    @cached_property
    def changes(self) -> tuple[ChangeView, ...]:
        """The changes this commit declared, with their verdicts."""
        return self.make_changes()

    @property
    def sha(self) -> str:
        return self.info.sha


@dataclass(frozen=True)
class StepView:
    step: int
    commit: str                      # the step branch's tip (H_N)
    commits: tuple[CommitView, ...]  # the step's own commits, oldest first
    bad_notes: tuple[str, ...] = ()
    analysis_commit: str | None = None   # the commit with the step's analysis note (the tip it published)
    # H_N's scores note (written by step N+1's rollouts) as its cached summary, Scores.to_dict(tasks=False),
    # and what makes its record when `scores` is first read: `log --json` passes the data through
    scores_data: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    make_scores: Callable[[], Scores] | None = field(default=None, compare=False, repr=False)
    # what gives H_N's analysis note's data when first read (a kept `log --json` step reads none)
    make_analysis: Callable[[], dict[str, Any] | None] | None = field(default=None, compare=False, repr=False)
    disagreed: int = 0      # rows of the note's own split two machines ran with different outcomes
    # the note's own split's exception rows by type (AgentTimeout: 2): rollouts that measured nothing
    exceptions: dict[str, int] = field(default_factory=dict, compare=False)

    @cached_property
    def analysis_data(self) -> dict[str, Any] | None:
        return self.make_analysis() if self.make_analysis is not None else None

    @cached_property
    def analysis(self) -> Analysis | None:
        if self.analysis_data is None:
            return None
        from git_hermit.model.records import Analysis
        return Analysis.from_dict(self.analysis_data)

    @cached_property
    def scores(self) -> Scores | None:
        """Scores of H_N, None when it has no (valid) scores note."""
        return self.make_scores() if self.make_scores is not None else None

    @property
    def changes(self) -> list[ChangeView]:
        return [c for cv in self.commits for c in cv.changes]

    @property
    def rollbacks(self) -> list[CommitView]:
        return [cv for cv in self.commits if cv.reverts]


@dataclass(frozen=True)
class RunHistory:
    run: str
    steps: tuple[StepView, ...]
    best: str | None
    final: str | None
    extra: dict[str, Any] = field(default_factory=dict)
    # {kind: {commit: note blob}}: the blob ids name the notes' contents (`log --json`'s fragments)
    blobs: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)


def _trailer(info: CommitInfo, key: str) -> str | None:
    for k, v in info.trailers:
        if k.lower() == key.lower():
            return v
    return None


_CHECKED_KINDS = ("manifest", "verdicts", "analysis")
# Each notes ref's schema (records.RECORD_KINDS says the same; tests/test_scale.py checks): the caches'
# formats name them without importing the records
_SCHEMAS = {"manifest": "manifest", "verdicts": "verdict", "scores": "scores", "analysis": "analysis"}


class _Notes:
    """The manifest, verdicts and analysis notes' data, by commit, decoded from the notes cache when
    first asked for: a kept `log --json` step needs only the blob ids."""

    def __init__(self, entries: dict[str, dict[str, str]], kept: Callable[[], dict[str, dict[str, Any]]],
                 raw: dict[str, set[str]], hashes: dict[str, str] | None = None) -> None:
        self.entries, self._kept, self._raw = entries, kept, raw
        self.hashes = hashes or {}     # {manifest blob: sha256:…}

    @cached_property
    def dicts(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{kind: {commit: to_dict()}} of the manifest and verdicts notes whose cached data is that,
        and of every analysis note."""
        kept = self._kept()
        return {kind: {commit: kept[kind][blob] for commit, blob in self.entries[kind].items()
                       if blob in kept[kind] and blob not in self._raw.get(kind, ())}
                for kind in _CHECKED_KINDS}

    @cached_property
    def records(self) -> dict[str, dict[str, Any]]:
        """{kind: {commit: record}} of the manifest and verdicts notes whose data to_dict does not give
        back (their cached data is the note as read)."""
        kept = self._kept()
        records: dict[str, dict[str, Any]] = {kind: {} for kind in ("manifest", "verdicts")}
        for kind in ("manifest", "verdicts"):
            for commit, blob in self.entries[kind].items():
                if blob in self._raw[kind] and blob in kept[kind]:
                    from git_hermit.model.records import RECORD_KINDS
                    records[kind][commit] = RECORD_KINDS[kind][1].from_dict(kept[kind][blob])
        return records


def _notes_listing(repo: Repo, kind: str, tip: str | None) -> dict[str, str]:
    """{commit: blob} of a notes ref's tip; DamagedRecord naming the ref when git cannot read its tip."""
    try:
        return note_entries(repo, tip)
    except (GitStateError, DamagedRecord):
        raise DamagedRecord(f"{NOTES_REFS[kind]} points at {tip}, which git cannot read as a notes commit",
                            hint=f"restore it from another clone (`git hermit fetch`) or from "
                                 f"`git reflog {NOTES_REFS[kind]}`; `git fsck` names what is damaged") from None


def _read_note_blobs(repo: Repo, wanted: list[tuple[str, str, str]], bad: list[Damage]) -> list[bytes | None]:
    """The blobs of ``wanted`` [(kind, commit, blob)] in one batch; one git cannot give (missing,
    truncated, corrupt) is damage, named in ``bad``, and None."""
    if not wanted:
        return []
    try:
        found = repo.read_objects([blob for _, _, blob in wanted])
    except DamagedRecord:      # git stopped at one of them: ask one at a time which
        found = []
        for _, _, blob in wanted:
            try:
                found += repo.read_objects([blob])
            except DamagedRecord:
                found.append(None)
    out: list[bytes | None] = []
    for (kind, commit, blob), item in zip(wanted, found):
        if item is None or item[1] != "blob":
            bad.append(Damage(kind, commit, f"git cannot read its object {blob[:12]}"))
            out.append(None)
        else:
            out.append(item[2])
    return out


def _read_notes(repo: Repo, bad: list[Damage], read_ref: Callable[[str], str | None],
                bad_blobs: dict[str, str] | None = None) -> _Notes:
    """The manifest, verdicts and analysis notes (_Notes), with {kind: {commit: blob}} of every notes
    ref; a note that is damaged (unreadable, not JSON, too large or deep, failing its schema) is
    reported in ``bad``, not fatal.

    A note is read from git and validated once: its data is kept under its blob id (checked.py),
    which names its content, the cache's format naming the schemas; a manifest note's sha256 too
    (its commit's Hermit-Manifest trailer names it). Each notes ref's {commit: blob} is kept under
    the notes commit it was listed from, so an unchanged ref's tree is not read again. The data is
    the cache's second part, decoded only when a note's data is read.
    """
    file = repo.common_dir / "hermit" / "cache" / "notes.json"
    format = "notes/5:" + __version__ + ":" + ",".join(fingerprint(_SCHEMAS[k]) for k in _CHECKED_KINDS)
    known, load_kept = checked.load_split(file, format)
    def part(name: str, kind: str, empty: type) -> Any:   # a part of another shape is ignored
        value = known.get(name)
        value = value.get(kind) if isinstance(value, dict) else None
        return value if isinstance(value, empty) else empty()

    trees: dict[str, Any] = {kind: part("trees", kind, list) for kind in (*_CHECKED_KINDS, "scores")}
    kept_ids = {kind: set(part("kept", kind, list)) for kind in _CHECKED_KINDS}   # the blobs the data holds
    raw: dict[str, list[str]] = {kind: part("raw", kind, list) for kind in _CHECKED_KINDS}
    hashes: dict[str, str] = part("hashes", "manifest", dict)
    entries: dict[str, dict[str, str]] = {}
    changed = False
    for kind in (*_CHECKED_KINDS, "scores"):
        tip = read_ref(NOTES_REFS[kind])
        listed = trees.get(kind)
        if isinstance(listed, list) and len(listed) == 2 and listed[0] == tip and isinstance(listed[1], dict):
            entries[kind] = listed[1]
        else:
            entries[kind] = _notes_listing(repo, kind, tip)
            trees[kind] = [tip, entries[kind]]
            changed = True
    missing = [(kind, commit, blob) for kind in _CHECKED_KINDS for commit, blob in entries[kind].items()
               if blob not in kept_ids[kind]]
    new: dict[str, dict[str, Any]] = {kind: {} for kind in _CHECKED_KINDS}
    if missing:
        import hashlib   # only when a note is new: a warm `log` loads no OpenSSL
        from git_hermit.model.records import RECORD_KINDS, note_data
    # (no object reader started when nothing is missing: a warm `log` reads no object)
    for (kind, commit, blob), content in zip(missing, _read_note_blobs(repo, missing, bad)):
        if content is None:
            if bad_blobs is not None:
                bad_blobs[blob] = f"git cannot read its object {blob[:12]}"
            continue
        try:
            found = note_data(kind, content)
        except SchemaError as exc:
            bad.append(Damage(kind, commit, exc.message))
            if bad_blobs is not None:
                bad_blobs[blob] = exc.message
            continue
        record = RECORD_KINDS[kind][1].from_dict(found)
        data = record.to_dict()   # kept as to_dict gives it, when that reads back as the same record
        # (a note to_dict gives back unchanged, as git-hermit writes them, reads back as itself: one
        # dict comparison in place of a second from_dict, ~10 ms of a 1,000-step fetch)
        new[kind][blob] = data if data == found or RECORD_KINDS[kind][1].from_dict(data) == record else found
        if new[kind][blob] is not data:
            raw[kind].append(blob)
        if kind == "manifest":
            hashes[blob] = "sha256:" + hashlib.sha256(content).hexdigest()

    merged: list[dict[str, dict[str, Any]]] = []

    def part_of(loaded: dict[str, Any], kind: str) -> dict[str, Any]:
        value = loaded.get(kind)
        return value if isinstance(value, dict) else {}

    def kept() -> dict[str, dict[str, Any]]:   # the cached data and the notes checked now, decoded once
        if not merged:
            loaded = load_kept()
            merged.append({kind: {**(part_of(loaded, kind)), **new[kind]} for kind in _CHECKED_KINDS})
        return merged[0]

    if missing or changed:   # the blobs the refs hold now, and no others
        data = {kind: {blob: kept()[kind][blob] for blob in entries[kind].values() if blob in kept()[kind]}
                for kind in _CHECKED_KINDS}
        raw = {kind: sorted(set(raw[kind]) & set(data[kind])) for kind in _CHECKED_KINDS}
        hashes = {blob: hashes[blob] for blob in data["manifest"] if blob in hashes}
        checked.save_split(file, format, {"trees": trees, "raw": raw, "hashes": {"manifest": hashes},
                                          "kept": {kind: sorted(data[kind]) for kind in _CHECKED_KINDS}}, data)
    return _Notes(entries, kept, {kind: set(raw[kind]) for kind in _CHECKED_KINDS}, hashes)


def _summary_format() -> str:
    """The summaries are Scores.to_dict(tasks=False), whose shape follows the scores schema: a changed
    schema or git-hermit version makes a new cache. (Named without importing the records module: a
    warm `log --json` makes no record.)"""
    return "scores-summary/5:" + __version__ + ":" + fingerprint(_SCHEMAS["scores"])


def _summary_cache(repo: Repo) -> Any:
    return repo.common_dir / "hermit" / "cache" / "scores-summaries.json"


def _read_scores(repo: Repo, bad: list[Damage], entries: dict[str, str] | None = None,
                 bad_blobs: dict[str, str] | None = None
                 ) -> dict[str, tuple[dict[str, Any], Callable[[], Scores], int, dict[str, int]]]:
    """Every scores note as (its summary data, what makes its record, how many of its own split's rows
    two machines ran with different outcomes, its exception rows by type): the record's per-task
    outcomes read from git only when asked for (TaskScores.deferred). A damaged note is reported in
    ``bad`` and left out.

    A note's blob id names its content, so a summary cached under it never goes stale; notes not in
    the cache yet are read, validated and summarised in one batch, and the cache rewritten.
    """
    if entries is None:   # {commit: blob}
        entries = _notes_listing(repo, "scores", repo.read_ref(NOTES_REFS["scores"]))
    path = _summary_cache(repo)
    format = _summary_format()
    cached = checked.load(path, format)
    missing = [commit for commit, blob in entries.items() if blob not in cached]
    if missing:
        from git_hermit.model.records import TaskScores, loads
        wanted = [("scores", commit, entries[commit]) for commit in missing]
        for commit, content in zip(missing, _read_note_blobs(repo, wanted, bad)):
            if content is None:
                continue
            try:
                record = loads("scores", content)
            except SchemaError as exc:
                bad.append(Damage("scores", commit, exc.message.removeprefix("scores note is damaged: ")))
                if bad_blobs is not None:
                    bad_blobs[entries[commit]] = exc.message
                continue
            cached[entries[commit]] = {"data": record.to_dict(tasks=False), "tasks": len(record.tasks),
                                       "outcomes": record.tasks.outcomes() if isinstance(record.tasks, TaskScores)
                                       else {},
                                       "disagreed": record.tasks.disagreements() if isinstance(record.tasks, TaskScores)
                                       else sum(len(t.disagreed) for t in record.tasks.values()),
                                       "exceptions": exception_types(record.tasks)}
        checked.save(path, format, {blob: cached[blob] for blob in entries.values() if blob in cached})

    def loader(blob: str) -> Callable[[], Any]:
        def load() -> Any:
            from git_hermit.model.records import note_data
            found = repo.read_objects([blob])[0]
            if found is None:
                raise DamagedRecord(f"the scores note blob {blob} in {NOTES_REFS['scores']} went missing",
                                    hint="`git fsck`; fetch the run again")
            return note_data("scores", found[2])["tasks"]     # checked when its summary was made
        return load

    def maker(summary: dict[str, Any], blob: str) -> Callable[[], Scores]:
        def make() -> Scores:
            from git_hermit.model.records import Scores, TaskScores
            tasks = TaskScores.deferred(summary["tasks"], summary["outcomes"], loader(blob))
            return Scores.from_dict(summary["data"], tasks=tasks)
        return make

    out = {}
    for commit, blob in entries.items():
        summary = cached.get(blob)
        if summary is not None:
            out[commit] = (summary["data"], maker(summary, blob), int(summary.get("disagreed", 0)),
                           dict(summary.get("exceptions") or {}))
    return out


def check_note_blobs(repo: Repo, tips: dict[str, str]) -> tuple[set[str], dict[str, str]]:
    """Validate the manifest, verdicts, analysis and scores notes of notes commits ``tips`` ({notes ref:
    commit}, e.g. a remote's as fetched) as `log` reads them, filling the caches `log` reads (so the
    first `log` after a fetch checks nothing again): (the blobs found valid, {blob: why it is not})."""
    bad: list[Damage] = []
    problems: dict[str, str] = {}
    notes = _read_notes(repo, bad, tips.get, problems)
    _read_scores(repo, bad, notes.entries["scores"], problems)
    checked = {blob for kind in (*_CHECKED_KINDS, "scores") for blob in notes.entries[kind].values()}
    return checked - set(problems), problems


def exception_types(tasks: Mapping[str, TaskScore]) -> dict[str, int]:
    """A split's exception attempts by type (``Exception`` when a note names none)."""
    from git_hermit.model.records import TaskScores
    if isinstance(tasks, TaskScores):
        return tasks.exception_types()
    found: dict[str, int] = {}
    for score in tasks.values():
        for attempt in score.attempts:
            if attempt.outcome == "exception":
                name = attempt.exception_type or "Exception"
                found[name] = found.get(name, 0) + 1
    return dict(sorted(found.items()))


def _analysis_of(notes: _Notes, commit: str) -> Callable[[], dict[str, Any] | None]:
    return lambda: notes.dicts["analysis"].get(commit)


def _analysis_anchor(tip: str, commits: tuple[CommitView, ...] | list[CommitView], analysis: dict[str, str]
                     ) -> str | None:
    """The commit holding step N's analysis note: the tip it published, wherever the branch moved
    since (a rollback or hand edit on top: the newest of the step's own commits that has one)."""
    if tip in analysis:
        return tip
    return next((cv.sha for cv in reversed(commits) if cv.sha in analysis), None)


def _run_commits(ctx: RunContext) -> list[CommitInfo]:
    """The run's commits after the seed, oldest first, in one process; DamagedRecord naming the step
    ref git cannot list history from."""
    seed, tip = ctx.steps[0][1], ctx.tip[1]
    if tip == seed:
        return []
    try:
        return list(reversed(ctx.repo.log(f"{seed}..{tip}")))
    except (GitStateError, DamagedRecord):
        bad = next((f"refs/heads/hermit/{ctx.run}/step-{n:04d}" for n, sha in (ctx.steps[0], ctx.tip)
                    if ctx.repo.rev_parse(sha) != sha), None)
        raise DamagedRecord(f"{bad or 'a step branch of run ' + repr(ctx.run)} points at an object git cannot read "
                            "as a commit of the run", hint=integrity.repair_hint(ctx.run)) from None


def _step_of(commit: str, tips: dict[str, int], trailers: dict[str, dict[str, str]], run: str) -> int | None:
    """The step a note's commit belongs to: the step it is the tip of, else its Hermit-Step trailer."""
    if commit in tips:
        return tips[commit]
    said = trailers.get(commit)
    return parse_step_name(said.get("hermit-step") or "") if said and said.get("hermit-run") == run else None


def load_history(ctx: RunContext) -> RunHistory:
    repo = ctx.repo
    bad: list[Damage] = []
    notes = _read_notes(repo, bad, ctx.read_ref)
    blobs = notes.entries
    scores = _read_scores(repo, bad, blobs["scores"])
    commits = _run_commits(ctx)
    best, final = ctx.read_ref(best_tag(ctx.run)), ctx.read_ref(final_tag(ctx.run))
    # Whether the refs and notes hold together (integrity.py): kept under the refs they were checked at
    key = integrity.refs_key(ctx, {kind: ctx.read_ref(ref) for kind, ref in NOTES_REFS.items()})
    found = integrity.cached(repo, key)
    if found is None:
        integrity.check_steps(ctx, commits)
        summaries = {commit: data for commit, (data, *_) in scores.items()}

        def note(kind: str, commit: str) -> Any:
            if kind == "analysis":
                return notes.dicts["analysis"].get(commit)
            return notes.records[kind].get(commit) or notes.dicts[kind].get(commit)
        found = (integrity.note_damage(commits, {sha: n for n, sha in ctx.steps}, ctx.run, blobs, note,
                                               notes.hashes, summaries),
                 integrity.tag_warnings(ctx, best, final, summaries))
        integrity.keep(repo, key, *found)
    damage = [*bad, *found[0]]
    damaged = {(d.kind, d.commit) for d in damage}
    # Each commit's trailers by lower-cased key, the first of each kept (as _trailer reads them).
    keyed = []
    by_sha: dict[str, dict[str, str]] = {}
    for info in commits:
        trailers: dict[str, str] = {}
        for key, value in info.trailers:
            trailers.setdefault(key.lower(), value)
        keyed.append((info, trailers))
        by_sha[info.sha] = trailers
    # What each rollback commit says it did, from its trailers (the record GitHub shows too).
    rolled_back_by: dict[str, str] = {}
    lines_removed_by: dict[str, list[str]] = {}
    removes = HERMIT_REMOVES_LINES_OF.lower()
    for info, trailers in keyed:
        reverts = trailers.get("hermit-reverts")
        if reverts and trailers.get("hermit-run") == ctx.run:
            rolled_back_by[reverts] = info.sha
            for key, value in info.trailers:
                if key.lower() == removes:
                    lines_removed_by.setdefault(value, []).append(info.sha)
    by_step: dict[int, list[CommitView]] = {}
    for info, trailers in keyed:
        if trailers.get("hermit-run") != ctx.run:
            continue
        step = parse_step_name(trailers.get("hermit-step") or "")
        if step is None:
            continue
        sha = info.sha
        by = rolled_back_by.get(sha)
        removed = tuple(lines_removed_by.get(sha, ()))

        def changes(sha: str = sha, by: str | None = by, removed: tuple[str, ...] = removed
                    ) -> tuple[ChangeView, ...]:
            records, dicts = notes.records, notes.dicts
            if ("manifest", sha) in damaged:      # a damaged note is left out (its warning names it)
                return ()
            verdict_damaged = ("verdicts", sha) in damaged
            return _change_views(sha, records["manifest"].get(sha), dicts["manifest"].get(sha),
                                 None if verdict_damaged else records["verdicts"].get(sha),
                                 None if verdict_damaged else dicts["verdicts"].get(sha), by, removed,
                                 verdict_damaged)
        by_step.setdefault(step, []).append(CommitView(
            info=info, reverts=trailers.get("hermit-reverts"), reverts_verdict=trailers.get("hermit-verdict"),
            undeclared=(trailers.get("hermit-change") == "undeclared"), rolled_back_by=by,
            lines_removed_by=removed, make_changes=changes))
    # each warning on the step its note belongs to (the tip's when it belongs to none)
    tips = {sha: n for n, sha in ctx.steps}
    warnings: dict[int, list[str]] = {}
    for problem in damage:
        step = _step_of(problem.commit, tips, by_sha, ctx.run)
        warnings.setdefault(step if step in dict(ctx.steps) else ctx.tip[0], []).append(problem.message)
    for warning in found[1]:
        warnings.setdefault(ctx.tip[0], []).append(warning)
    views = []
    for n, sha in ctx.steps:
        data, make, disagreed, exceptions = (scores.get(sha) or (None, None, 0, {})) \
            if ("scores", sha) not in damaged else (None, None, 0, {})
        anchor = _analysis_anchor(sha, by_step.get(n, ()), blobs["analysis"])
        views.append(StepView(step=n, commit=sha, commits=tuple(by_step.get(n, ())), analysis_commit=anchor,
                              make_analysis=_analysis_of(notes, anchor) if anchor
                              and ("analysis", anchor) not in damaged else None,
                              bad_notes=tuple(warnings.get(n, ())), scores_data=data, make_scores=make,
                              disagreed=disagreed, exceptions=exceptions))
    return RunHistory(run=ctx.run, steps=tuple(views), best=best, final=final,
                      extra={"evolver": ctx.config.evolver_name}, blobs=blobs)


def json_fragments(repo: Repo, encoding: str) -> checked.Fragments:
    """`log --json`'s encoded notes, kept by blob id in ``<git dir>/hermit/cache/log-json.txt``; the
    format names ``encoding`` (the encoder's own version), git-hermit's version and the records'
    schemas, as the notes cache's does."""
    format = encoding + ":" + __version__ + ":" + ",".join(fingerprint(_SCHEMAS[k])
                                                          for k in ("manifest", "verdicts", "scores", "analysis"))
    return checked.Fragments(repo.common_dir / "hermit" / "cache" / "log-json.txt", format)


@dataclass(frozen=True)
class CommitRecords:
    """Everything git-hermit recorded on one commit (for `git hermit show`)."""

    info: CommitInfo
    step: int | None
    manifest: Manifest | None
    verdict: VerdictNote | None
    scores: Scores | None
    analysis: Analysis | None
    warnings: tuple[str, ...] = ()     # the damaged notes on it, left out (integrity.Damage.message)
    provenance: Provenance | None = None   # evo-harness: the skills a level commit wrote, and their tasks


def records_for(repo: Repo, commit: str, ctx: RunContext | None = None) -> CommitRecords:
    """One commit's notes, each read within bounds and checked against the commit (integrity.py):
    a damaged one is left out and named in ``warnings``. The notes refs are listed (``ctx``'s listing,
    else one for-each-ref), so a ref whose object is missing is named, not taken for no note."""
    from git_hermit.model.records import note_data, RECORD_KINDS
    store = NotesStore(repo)
    info = repo.commit_info(commit)
    listed = ctx.refs if ctx is not None and ctx.refs is not None else repo.list_refs("refs/notes/hermit/")
    damage: list[Damage] = []
    texts: dict[str, bytes] = {}
    found: dict[str, Any] = {}
    for kind in ("manifest", "verdicts", "scores", "analysis", "provenance"):
        tip = listed.get(NOTES_REFS[kind])
        try:
            text = store.read_bytes(NOTES_REFS[kind], info.sha, tip=tip)
        except DamagedRecord:
            if tip is not None and repo.rev_parse(tip) != tip:     # the notes ref itself: the whole kind
                _notes_listing(repo, kind, tip)
            damage.append(Damage(kind, info.sha, "git cannot read its object"))
            continue
        if text is None:
            continue
        try:
            found[kind] = note_data(kind, text)
            texts[kind] = text
        except SchemaError as exc:
            damage.append(Damage(kind, info.sha, exc.message))
    hashes = {}
    if "manifest" in texts:
        import hashlib
        hashes["shown"] = "sha256:" + hashlib.sha256(texts["manifest"]).hexdigest()
    tips = {sha: n for n, sha in ctx.steps} if ctx is not None else {}
    summaries = {info.sha: found["scores"]} if "scores" in found else {}
    damage += integrity.note_damage([info], tips, ctx.run if ctx is not None else None,
                                    {kind: {info.sha: "shown"} for kind in found},
                                    lambda kind, sha: found.get(kind), hashes, summaries)
    for bad in {d.kind for d in damage}:
        found.pop(bad, None)
    made = {kind: RECORD_KINDS[kind][1].from_dict(data) for kind, data in found.items()}
    return CommitRecords(info=info, step=parse_step_name(_trailer(info, "Hermit-Step") or ""),
                         manifest=made.get("manifest"), verdict=made.get("verdicts"), scores=made.get("scores"),
                         analysis=made.get("analysis"), warnings=tuple(d.message for d in damage),
                         provenance=made.get("provenance"))


def step_commits(ctx: RunContext, step: int) -> list[str]:
    """The commits step N made, oldest first: those after step N-1's tip on step N's branch that
    carry the run's ``Hermit-Step: N`` (one git process, whatever the run's length). DamagedRecord
    when step N's branch is no commit after step N-1's."""
    tip = ctx.step_commit(step)
    before = [sha for n, sha in ctx.steps if n < step]
    if not before:
        return []
    try:
        infos = ctx.repo.log(f"{before[-1]}..{tip}") if before[-1] != tip else []
    except (GitStateError, DamagedRecord):
        infos = None
    # step N-1's tip is an ancestor of step N's exactly when a commit listed has it as a parent
    if before[-1] != tip and (infos is None or not any(before[-1] in info.parents for info in infos)):
        what = "is no commit git can read" if infos is None else f"does not descend from step {step - 1}'s tip"
        raise DamagedRecord(f"refs/heads/hermit/{ctx.run}/step-{step:04d} points at {tip[:12]}, which {what}",
                            hint=integrity.repair_hint(ctx.run))
    return [info.sha for info in reversed(infos or [])
            if _trailer(info, "Hermit-Run") == ctx.run and parse_step_name(_trailer(info, "Hermit-Step") or "") == step]


RUN_TAGS = ("final", "best")    # `show final`: the run's tag hermit/<run>/final


def resolve_target(ctx: RunContext | None, repo: Repo, target: str) -> tuple[int | None, str]:
    """``step-N`` or ``final``/``best`` (need a run) or any revision → (step or None, commit sha)."""
    if target in RUN_TAGS and ctx is not None:
        tag = final_tag(ctx.run) if target == "final" else best_tag(ctx.run)
        commit = ctx.repo.read_ref(tag)
        if commit is None:
            raise GitStateError(f"run {ctx.run!r} has no {target} commit yet ({tag})",
                                hint="run `git hermit finalize`" if target == "final" else "run `git hermit step`")
        return next((n for n, sha in ctx.steps if sha == commit), None), commit
    if target.startswith("step-") or target.isdigit():
        step = parse_step_name(target)
        if ctx is None or step is None:
            raise GitStateError(f"cannot resolve {target!r} without a run", hint="pass --run NAME")
        return step, ctx.step_commit(step)
    return None, repo.resolve_commit(target)


def stream_scores(history: RunHistory) -> dict[int, dict[str, Any]]:
    """Per step with training scores: the cumulative stream pass@1 over every window rolled out up
    to it, seed 002's one number for a stream (the mean per-task pass@1 over all the stream's tasks
    so far, a task's latest window counting; None while no task has an attempt), with how many
    tasks that covers, the window's own tasks and the windows so far. `report` and `log` read it."""
    per_task: dict[str, float] = {}
    out: dict[int, dict[str, Any]] = {}
    for view in history.steps:
        scores = view.scores if view.scores is not None and view.scores.split == "train" else None
        if scores is None:
            continue       # a note written only by a held-out eval
        for task, score in scores.tasks.items():
            if score.attempts:
                per_task[task] = sum(a.outcome == "pass" for a in score.attempts) / len(score.attempts)
        out[view.step] = {"pass_at_1": round(sum(per_task.values()) / len(per_task), 6) if per_task else None,
                          "tasks": len(per_task), "window_tasks": len(scores.tasks), "windows": len(out) + 1}
    return out

