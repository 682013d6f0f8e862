"""A run's records in git: everything a later step, a learner or a reviewer reads, on the run's refs.

``refs/hermit/<run>/records`` is one commit per published step (and per finalize); its tree holds
``steps/NNNN/`` for step N — ``step.json`` (what it evaluated and published), ``ledger.json``
(everything it spent), ``rollouts/<task>/<attempt>/`` (result, hook audit, hook state) and
``learner/`` (the evolver's own records: ahe's state files, evo-harness's reflections and
levels, continual-harness's passes and report) — and ``final_selection.json``. Each step adds only
its own directory, so two clones' records merge by directory. ``refs/hermit/<run>/traces`` holds
the rollouts' trajectories in the same layout (``push --traces``); ``refs/hermit/<run>/pending``
an unfinished step's rollouts, whole, from the end of its rollout phase until it publishes.
One reader per record kind (``RunRecords``), the writers the step driver calls, and
``missing_records``: what a clone lacks of a run's history.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, NoReturn

from git_hermit.errors import DamagedRecord, GitStateError
from git_hermit.gitio import NOTES_REFS, RefUpdate, Repo, ZERO_SHA

STEPS = "steps"
STEP_FILE = "step.json"
LEDGER_FILE = "ledger.json"
ROLLOUTS = "rollouts"
LEARNER = "learner"
FINAL_FILE = "final_selection.json"
PENDING_FILE = "pending.json"
RESULT_FILE = "result.json"
# A rollout's own records (small): what it scored and billed, its hook audit and hook state. The
# rest of what the runner stored is its trace (traces ref): trajectory, stderr, session notes, task.
RECORD_NAMES = ("result.json", "hook-calls.jsonl", "rate-limited.jsonl")
RECORD_DIRS = ("hook-state/",)
TRACE_NAMES = ("agent.stderr", "memory/NOTES.md")
TASK_FILE = "task.md"
# The most one record file may hold (records are JSON, Markdown or JSONL; a trajectory is a trace)
MAX_RECORD_BYTES = 4 * 1024 * 1024


def records_ref(run: str) -> str:
    return f"refs/hermit/{run}/records"


def traces_ref(run: str) -> str:
    return f"refs/hermit/{run}/traces"


def pending_ref(run: str) -> str:
    return f"refs/hermit/{run}/pending"


def step_path(step: int) -> str:
    return f"{STEPS}/{step:04d}"


def records_location(run: str, step: int, path: str = "") -> str:
    """Where a record of step ``step`` lies in git, as ``git show`` takes it in any clone that
    fetched the run (``git show hermit/<run>/records:steps/0002/learner/…``)."""
    return f"hermit/{run}/records:{step_path(step)}/{path}"


@dataclass(frozen=True)
class StepRecord:
    """``steps/NNNN/step.json``: the step, the commit its rollouts ran (H_{N-1}) and the tip it
    published (H_N; None when it stopped training before learning), as they were when it ran —
    a later rollback or hand edit moves the branch, never this."""

    run: str
    step: int
    evolver: str
    evaluated: str
    tip: str | None
    stop: str | None = None
    rollouts: int = 0
    v: int = 1

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "StepRecord":
        try:
            raw = json.loads(data)
            return cls(run=str(raw["run"]), step=int(raw["step"]), evolver=str(raw["evolver"]),
                       evaluated=str(raw["evaluated"]), tip=raw.get("tip"), stop=raw.get("stop"),
                       rollouts=int(raw.get("rollouts", 0)), v=int(raw.get("v", 1)))
        except (ValueError, TypeError, KeyError) as exc:
            raise GitStateError(f"the step record {where} is damaged ({type(exc).__name__}: {exc})",
                                hint="fetch the run again from a remote that has it intact") from None


_CURRENT = "current"


class RunRecords:
    """A run's records ref (or its traces ref) at ``tip`` — by default as the ref is now; None: empty —
    read through the batch reader (no process per file)."""

    def __init__(self, repo: Repo, run: str, tip: str | None = _CURRENT, *, ref: str | None = None,
                 limit: int | None = MAX_RECORD_BYTES):
        self.repo, self.run = repo, run
        self.ref = ref or records_ref(run)
        self.limit = limit            # the most a file read may hold (None: any, a trace)
        self.tip = repo.read_ref(self.ref) if tip == _CURRENT else tip

    @cached_property
    def step_trees(self) -> dict[int, str]:
        """{step: its directory's tree} of every recorded step."""
        if self.tip is None:
            return {}
        found = self.repo.read_objects([f"{self.tip}:{STEPS}"])[0]
        if found is None or found[1] != "tree":
            return {}
        return {int(name): sha for mode, name, sha in self.repo._parse_tree(found[2])
                if mode == "040000" and name.isdigit() and name == f"{int(name):04d}"}   # only step_path's names

    def steps(self) -> list[int]:
        return sorted(self.step_trees)

    def steps_of(self, steps: Iterable[int]) -> dict[int, StepRecord]:
        wanted = [n for n in steps if n in self.step_trees]
        found = self._bounded(wanted, STEP_FILE)
        return {n: StepRecord.from_json(f[2], f"{step_path(n)}/{STEP_FILE}") for n, f in zip(wanted, found) if f}

    def ledgers(self, steps: Iterable[int]) -> dict[int, dict[str, Any]]:
        """{step: its ledger.json} of the recorded ones among ``steps``, in one batch read."""
        wanted = [n for n in steps if n in self.step_trees]
        found = self._bounded(wanted, LEDGER_FILE)
        out = {}
        for n, blob in zip(wanted, found):
            if blob is None:
                continue
            try:
                data = json.loads(blob[2])
            except ValueError:
                continue
            if isinstance(data, dict):
                out[n] = data
        return out

    def _bounded(self, steps: list[int], name: str) -> list[tuple[str, str, bytes] | None]:
        """Each step's file ``name`` (None: absent), its size checked before it is read (one
        ``--batch-check``): a record over ``limit`` is damage (DamagedRecord), never read into memory."""
        names = [f"{self.step_trees[n]}:{name}" for n in steps]
        if self.limit is not None and names:
            for n, size in zip(steps, self.repo.object_sizes(names)):
                if size is not None and size > self.limit:
                    self._over(f"{step_path(n)}/{name}", size)
        return self.repo.read_objects(names)

    def _over(self, where: str, size: int) -> NoReturn:
        raise DamagedRecord(f"the record {where} of run {self.run!r} is {size:,} bytes, over the "
                            f"{self.limit:,} a record may hold",
                            hint=f"git-hermit writes no such record: `git log {self.ref}` shows the commit that "
                                 f"added it; move the ref back before it (`git update-ref {self.ref} <commit>`)")

    def files(self, n: int, under: str = "") -> dict[str, bytes]:
        """Every file below ``steps/NNNN/<under>`` (keys relative to it), in one batch read."""
        return self._read({n: under}).get(n, {})

    def learner_files(self, before: int) -> dict[int, dict[str, bytes]]:
        """{step: its evolver's own records} of every recorded step before ``before``, oldest first."""
        return self._read({n: LEARNER for n in self.steps() if n < before})

    def _read(self, wanted: Mapping[int, str]) -> dict[int, dict[str, bytes]]:
        """The files of each step's directory below its path, their sizes checked first (a record
        fetched from a remote is bounded by ``limit`` before it is read into memory)."""
        listed = {n: {p: e for p, e in self.repo.ls_tree(self.step_trees[n], under).items() if e.type == "blob"}
                  for n, under in wanted.items() if n in self.step_trees}
        flat = [(n, path, entry.sha) for n, entries in listed.items() for path, entry in entries.items()]
        sizes = self.repo.object_sizes([sha for _, _, sha in flat]) if self.limit is not None else []
        for (n, path, _), size in zip(flat, sizes):
            if size is not None and self.limit is not None and size > self.limit:
                self._over("/".join(part.strip("/") for part in (step_path(n), wanted[n], path) if part), size)
        out: dict[int, dict[str, bytes]] = {n: {} for n in listed}
        for (n, path, _), blob in zip(flat, self.repo.read_objects([sha for _, _, sha in flat])):
            if blob is not None:
                out[n][path] = blob[2]
        return out

    def rollout_records(self, n: int) -> dict[str, bytes]:
        """Step ``n``'s rollout records: ``<task>/<attempt>/result.json``, hook audit and hook state."""
        return self.files(n, ROLLOUTS)


def trace_files(repo: Repo, run: str, step: int) -> dict[str, bytes]:
    """Step ``step``'s rollout traces (``<task>/<attempt>/<trajectory>`` …), from the traces ref."""
    return RunRecords(repo, run, ref=traces_ref(run), limit=None).files(step, ROLLOUTS)


# --------------------------------------------------------------------------------------- writers
def rollout_parts(rollouts_root: Path, directories: Iterable[tuple[str, str]]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(records, traces) of the rollouts in ``rollouts_root``'s ``(task dir, attempt)`` directories,
    keyed ``<task dir>/<attempt>/<name>`` (the task's statement as ``<task dir>/task.md``, a trace)."""
    records: dict[str, bytes] = {}
    traces: dict[str, bytes] = {}
    for task_dir, attempt in sorted(set(directories)):
        base = rollouts_root / task_dir / attempt
        if not (base / RESULT_FILE).is_file():
            continue
        statement = rollouts_root / task_dir / TASK_FILE
        if statement.is_file() and not statement.is_symlink():
            traces[f"{task_dir}/{TASK_FILE}"] = statement.read_bytes()
        try:
            result = json.loads((base / RESULT_FILE).read_bytes())
        except ValueError:
            result = {}
        trajectory = result.get("trajectory") if isinstance(result, dict) else None
        for path in sorted(base.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(base).as_posix()
            key = f"{task_dir}/{attempt}/{rel}"
            if rel in RECORD_NAMES or rel.startswith(RECORD_DIRS):
                records[key] = path.read_bytes()
            elif rel == trajectory or rel in TRACE_NAMES:
                traces[key] = path.read_bytes()
    return records, traces


def _subtree(repo: Repo, files: Mapping[str, bytes]) -> str:
    paths = sorted(files)
    shas = repo.write_blobs([files[p] for p in paths])
    return repo.write_tree(None, {p: ("100644", sha) for p, sha in zip(paths, shas)})


def add_directory(repo: Repo, ref: str, prefix: str, files: Mapping[str, bytes], message: str
                  ) -> tuple[RefUpdate, str]:
    """A commit on ``ref``'s tip whose ``prefix`` directory is ``files`` (replacing what was there):
    (the CAS update that publishes it, the commit). Moves no ref."""
    old = repo.read_ref(ref)
    sub = _subtree(repo, files)
    tree = repo.write_tree(old, {prefix: ("040000", sub)})
    commit = repo.commit_tree(tree, old, message)
    return RefUpdate(ref, commit, old or ZERO_SHA), commit


def add_steps(repo: Repo, run: str, steps: Mapping[int, Mapping[str, bytes]], message: str) -> tuple[RefUpdate, str]:
    """One records commit adding many steps' directories at once ({step: {path: bytes}}): for a run
    built or imported in bulk (a benchmark's, a test's), as ``add_directory`` does for one step."""
    old = repo.read_ref(records_ref(run))
    names = [(n, path) for n in sorted(steps) for path in sorted(steps[n])]
    shas = iter(repo.write_blobs([steps[n][path] for n, path in names]))
    tree = repo.write_tree(old, {f"{step_path(n)}/{path}": ("100644", next(shas)) for n, path in names})
    commit = repo.commit_tree(tree, old, message)
    return RefUpdate(records_ref(run), commit, old or ZERO_SHA), commit


def add_file(repo: Repo, ref: str, path: str, content: bytes, message: str) -> tuple[RefUpdate, str]:
    old = repo.read_ref(ref)
    sha = repo.write_blobs([content])[0]
    tree = repo.write_tree(old, {path: ("100644", sha)})
    commit = repo.commit_tree(tree, old, message)
    return RefUpdate(ref, commit, old or ZERO_SHA), commit


@dataclass(frozen=True)
class StepRecords:
    """What a step publishes besides its commits and notes: its records and traces directories."""

    record: StepRecord
    ledger: bytes
    rollouts: dict[str, bytes]
    traces: dict[str, bytes]
    learner: dict[str, bytes] = field(default_factory=dict)

    def record_files(self) -> dict[str, bytes]:
        files = {STEP_FILE: self.record.to_json(), LEDGER_FILE: self.ledger}
        files.update({f"{ROLLOUTS}/{k}": v for k, v in self.rollouts.items()})
        files.update({f"{LEARNER}/{k}": v for k, v in self.learner.items()})
        return files

    def updates(self, repo: Repo) -> tuple[list[RefUpdate], dict[str, str]]:
        """The ref updates (records, traces, and the pending ref dropped) and the new objects to hold."""
        run, n = self.record.run, self.record.step
        message = f"git-hermit {run} step {n}: records"
        records, records_commit = add_directory(repo, records_ref(run), step_path(n), self.record_files(), message)
        updates, held = [records], {"records": records_commit}
        if self.traces:
            traces, traces_commit = add_directory(repo, traces_ref(run), step_path(n),
                                                  {f"{ROLLOUTS}/{k}": v for k, v in self.traces.items()},
                                                  f"git-hermit {run} step {n}: traces")
            updates.append(traces)
            held["traces"] = traces_commit
        pending = repo.read_ref(pending_ref(run))
        if pending is not None:
            updates.append(RefUpdate(pending_ref(run), None, pending))
        return updates, held


# ------------------------------------------------------------------------ an unfinished step's rollouts
@dataclass(frozen=True)
class Pending:
    run: str
    step: int
    evaluated: str
    split: str = "train"
    v: int = 1


def read_pending(repo: Repo, run: str) -> tuple[str, Pending] | None:
    """(commit, what it holds) of the run's pending ref, None when there is none (or it is damaged)."""
    commit = repo.read_ref(pending_ref(run))
    if commit is None:
        return None
    found = repo.read_objects([f"{commit}:{PENDING_FILE}"])[0]
    try:
        raw = json.loads(found[2]) if found else {}
        return commit, Pending(str(raw["run"]), int(raw["step"]), str(raw["evaluated"]), str(raw.get("split", "train")))
    except (ValueError, TypeError, KeyError):
        return None


def publish_pending(repo: Repo, run: str, step: int, evaluated: str, rollouts_root: Path,
                    directories: Iterable[tuple[str, str]]) -> str | None:
    """Publish the finished rollouts of step ``step`` (whole: what the runner stored) on the pending
    ref, so a restart in any clone that fetched it re-runs none of them; None when nothing finished."""
    records, traces = rollout_parts(rollouts_root, directories)
    if not records:
        return None
    pending = Pending(run, step, evaluated)
    files = {PENDING_FILE: (json.dumps(asdict(pending), indent=2, sort_keys=True) + "\n").encode()}
    files.update({f"{ROLLOUTS}/{k}": v for k, v in {**records, **traces}.items()})
    old = repo.read_ref(pending_ref(run))
    tree = _subtree(repo, files)
    if old is not None and repo.tree_of(old) == tree:
        return old        # the same rollouts are already published
    commit = repo.commit_tree(tree, None, f"git-hermit {run} step {step}: finished rollouts")
    repo.update_refs([RefUpdate(pending_ref(run), commit, old or ZERO_SHA)], message=f"git hermit step {step}: rollouts")
    return commit


def restore_pending(repo: Repo, run: str, step: int, evaluated: str, rollouts_root: Path) -> int:
    """Write the pending ref's rollouts of step ``step`` (run at ``evaluated``) into ``rollouts_root``
    where this machine has none of their own (result.json last: it says the rollout finished); how
    many rollouts were restored."""
    from git_hermit.atomic import write_atomic
    found = read_pending(repo, run)
    if found is None or found[1].step != step or found[1].evaluated != evaluated or found[1].run != run:
        return 0
    commit = found[0]
    entries = {p: e for p, e in repo.ls_tree(commit, ROLLOUTS).items() if e.type == "blob"}
    by_attempt: dict[str, list[str]] = {}
    shared: list[str] = []
    for path in entries:
        parts = path.split("/")
        if any(part in ("", ".", "..", ".git") for part in parts):
            raise GitStateError(f"the pending rollouts of run {run!r} hold an unsafe path {path!r}",
                                hint=f"delete the ref: git update-ref -d {pending_ref(run)}")
        if len(parts) >= 3:
            by_attempt.setdefault("/".join(parts[:2]), []).append(path)
        else:
            shared.append(path)
    restored = 0
    for attempt_dir, paths in sorted(by_attempt.items()):
        if (rollouts_root / attempt_dir / RESULT_FILE).exists():
            continue          # finished here: this machine's own result stays
        blobs = repo.read_objects([entries[p].sha for p in paths])
        ordered = sorted(zip(paths, blobs), key=lambda item: item[0].endswith("/" + RESULT_FILE))
        for path, blob in ordered:
            if blob is not None:
                write_atomic(rollouts_root / path, blob[2])
        restored += 1
    for path, blob in zip(shared, repo.read_objects([entries[p].sha for p in shared])):
        if blob is not None and not (rollouts_root / path).exists():
            write_atomic(rollouts_root / path, blob[2])
    return restored


# ------------------------------------------------------------------------------- what a clone lacks
@dataclass(frozen=True)
class MissingRecords:
    """What this repository lacks of a run's history: notes refs, and steps without records."""

    run: str
    notes: tuple[str, ...]
    steps: tuple[int, ...]
    remote: str

    def __bool__(self) -> bool:
        return bool(self.notes or self.steps)

    def what(self) -> str:
        parts = []
        if self.notes:
            parts.append("its notes (" + ", ".join(self.notes) + ")")
        if self.steps:
            parts.append(f"the records of {_steps_text(self.steps)} ({records_ref(self.run)})")
        return " and ".join(parts)

    def command(self) -> str:
        return f"git hermit fetch {self.remote}"


def _steps_text(steps: tuple[int, ...]) -> str:
    if len(steps) == 1:
        return f"step {steps[0]}"
    if list(steps) == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}–{steps[-1]}"
    return "steps " + ", ".join(str(s) for s in steps)


def remote_name(repo: Repo) -> str:
    """The remote a clone fetches from: ``origin`` when configured, else REMOTE."""
    return "origin" if repo.config_get("remote.origin.url") else "REMOTE"


def missing_records(repo: Repo, run: str, steps: Iterable[int], refs: Mapping[str, str] | None = None
                    ) -> MissingRecords:
    """Which of a run's records this repository lacks, for its published ``steps`` (step 0, the
    seed, has none): the scores notes every step writes, and each step's records directory. The
    recorded steps of a records commit are kept in ``<git dir>/hermit/cache/records-steps.json``
    (a commit id names its content), so a read command that warns reads no object when warm."""
    from git_hermit import checked
    steps = [n for n in steps if n > 0]
    listed = refs if refs is not None else repo.list_refs("refs/notes/hermit/", f"refs/hermit/{run}/")
    notes: tuple[str, ...] = ()
    if steps:
        notes = tuple(ref for kind, ref in NOTES_REFS.items() if kind == "scores" and ref not in listed)
    tip = listed.get(records_ref(run))
    recorded: set[int] = set()
    if tip is not None:
        cache = repo.common_dir / "hermit" / "cache" / "records-steps.json"
        known = checked.load(cache, "records-steps/1")
        if isinstance(known.get(tip), list):
            recorded = set(known[tip])
        else:
            recorded = set(RunRecords(repo, run, tip).step_trees)
            checked.save(cache, "records-steps/1", {tip: sorted(recorded)})
    lacking = tuple(n for n in steps if n not in recorded)
    return MissingRecords(run, notes, lacking, remote_name(repo) if notes or lacking else "")
