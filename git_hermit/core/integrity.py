"""Whether a run's refs and notes hold together, so a read command never shows a damaged record
as if it were sound.

Refs (``check_steps``): step numbers without a gap, each step branch a commit of the run's history,
each after the step before it. A broken one is a DamagedRecord (exit 18) naming the ref. Notes
(``note_damage``): each note agrees with the commit it annotates — a manifest with its commit's
``Hermit-Manifest`` hash, a verdict with the changes its commit declares and a later step, a scores
note with its ``commit``, an analysis note with its step; the best tag on the best-scoring step. A
note that does not is damaged: it is left out and named in a warning. Both checks run in Python
over what `log` reads anyway (no git process); their outcome is kept under the refs it was made
from (``<git dir>/hermit/cache/integrity.json``), so an unchanged run is not checked again.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from git_hermit import __version__, checked
from git_hermit.core.runs import RunContext, best_tag, final_tag, parse_step_name, step_ref
from git_hermit.errors import DamagedRecord
from git_hermit.gitio import CommitInfo, Repo

_FORMAT = "integrity/1:" + __version__
_KINDS = ("manifest", "verdicts", "scores", "analysis")


@dataclass(frozen=True)
class Damage:
    """One damaged note: its notes ref's kind, the commit it annotates and what is wrong."""

    kind: str
    commit: str
    reason: str

    @property
    def message(self) -> str:
        return (f"the {self.kind} note on {self.commit[:12]} is damaged: {self.reason}; it is left out "
                f"(remove it with `git notes --ref=hermit/{self.kind} remove {self.commit[:12]}`, or fetch it again)")


def repair_hint(run: str) -> str:
    return (f"restore the ref from another clone (`git hermit fetch`) or from `git reflog`; "
            f"`git for-each-ref refs/heads/hermit/{run}/` lists the run's steps")


def check_steps(ctx: RunContext, commits: list[CommitInfo]) -> None:
    """DamagedRecord unless the steps are numbered 0..N and each step's branch is a commit after the
    step before it. ``commits``: the run's history after the seed (``git log seed..tip``), any order."""
    numbers = [n for n, _ in ctx.steps]
    missing = sorted(set(range(numbers[-1] + 1)) - set(numbers))
    if missing:
        raise DamagedRecord(f"run {ctx.run!r} has no branch {step_ref(ctx.run, missing[0])} between its steps "
                            f"(steps {', '.join(map(str, numbers[:8]))}{'…' if len(numbers) > 8 else ''} exist)",
                            hint=repair_hint(ctx.run))
    parents = {info.sha: info.parents for info in commits}
    seed = ctx.steps[0][1]
    seen: set[str] = set()
    previous = seed
    for n, tip in ctx.steps[1:]:
        if tip != previous and not _reaches(tip, previous, parents, seen):
            what = ("is no commit of the run's history" if tip not in parents
                    else f"does not descend from step {n - 1}'s {previous[:12]}")
            raise DamagedRecord(f"{step_ref(ctx.run, n)} points at {tip[:12]}, which {what}",
                                hint=repair_hint(ctx.run))
        previous = tip


def _reaches(tip: str, target: str, parents: Mapping[str, tuple[str, ...]], seen: set[str]) -> bool:
    """Whether ``target`` is an ancestor of ``tip`` within ``parents``, walking only commits no earlier
    walk saw: when every earlier step is an ancestor of the one after it, the commits between
    ``target`` and ``tip`` are new to the walk, so the whole check visits each commit once."""
    if tip not in parents:
        return False
    stack = [tip]
    while stack:
        sha = stack.pop()
        if sha == target:
            return True
        if sha in seen or sha not in parents:
            continue
        seen.add(sha)
        stack.extend(parents[sha])
    return False


def _declared(manifest: Any) -> set[str] | None:
    if manifest is None:
        return None
    changes = manifest.get("changes") if isinstance(manifest, dict) else [c.to_dict() for c in manifest.changes]
    return {str(c.get("id")) for c in changes or ()}


def note_damage(commits: list[CommitInfo], tips: Mapping[str, int], run: str | None,
                entries: Mapping[str, Mapping[str, str]], data: Callable[[str, str], Any],
                hashes: Mapping[str, str], scores: Mapping[str, dict[str, Any]]) -> list[Damage]:
    """The notes that disagree with the commits they annotate (``commits``: those it may judge; a note
    on another commit is not shown, so not judged). ``tips``: {step tip: step}; ``entries``: {kind:
    {commit: blob}}; ``data(kind, commit)``: a manifest, verdict or analysis note's data (or record),
    None when there is none or it failed its schema; ``hashes``: {manifest blob: sha256:…};
    ``scores``: {commit: the scores note's summary data}."""
    trailers: dict[str, dict[str, str]] = {}
    for info in commits:
        keyed: dict[str, str] = {}
        for key, value in info.trailers:
            keyed.setdefault(key.lower(), value)
        trailers[info.sha] = keyed
    found: list[Damage] = []
    for commit, blob in entries.get("manifest", {}).items():
        expected = trailers.get(commit, {}).get("hermit-manifest")
        if expected and data("manifest", commit) is not None and hashes.get(blob) not in (None, expected.strip()):
            found.append(Damage("manifest", commit, "it does not match the commit's Hermit-Manifest "
                                                    "trailer (another commit's note, or an edited one)"))
    bad_manifests = {d.commit for d in found}
    for commit in entries.get("verdicts", {}):
        said = trailers.get(commit)
        note = data("verdicts", commit)
        if said is None or note is None:
            continue
        note = note if isinstance(note, dict) else note.to_dict()
        declared = None if commit in bad_manifests else _declared(data("manifest", commit))
        judged = [str(note.get("change_id")), *(str(a.get("change_id")) for a in note.get("also") or ())]
        step = parse_step_name(said.get("hermit-step") or "")
        if declared is not None and not set(judged) <= declared:
            found.append(Damage("verdicts", commit, f"it judges {', '.join(sorted(set(judged) - declared))}, "
                                                    "which the commit does not declare"))
        elif step is not None and isinstance(note.get("step"), int) and note["step"] <= step:
            found.append(Damage("verdicts", commit, f"it was written by step {note['step']}, not after the "
                                                    f"commit's step {step}"))
    for commit, summary in scores.items():
        if (commit in tips or commit in trailers) and summary.get("commit") != commit:
            found.append(Damage("scores", commit, f"it holds the scores of {str(summary.get('commit'))[:12]}"))
    for commit in entries.get("analysis", {}):
        step = tips.get(commit)
        if step is None and commit in trailers:
            step = parse_step_name(trailers[commit].get("hermit-step") or "")
        note = data("analysis", commit)
        if step is None or note is None:
            continue
        note = note if isinstance(note, dict) else note.to_dict()
        if note.get("step") != step or (run is not None and note.get("run") != run):
            found.append(Damage("analysis", commit, f"it is run {note.get('run')!r} step {note.get('step')}'s "
                                                    f"analysis, on step {step}'s tip"))
    return found


def tag_warnings(ctx: RunContext, best: str | None, final: str | None,
                 scores: Mapping[str, dict[str, Any]]) -> list[str]:
    """What is wrong with the best and final tags: not on a step of the run, or (best) on a step
    that scored lower than another (the tag moves only to a strictly higher pass@1)."""
    tips = {sha: n for n, sha in ctx.steps}
    warnings = []
    for name, sha in ((best_tag(ctx.run), best), (final_tag(ctx.run), final)):
        if sha is not None and sha not in tips:
            warnings.append(f"{name} points at {sha[:12]}, which is no step of run {ctx.run!r}")
    if best is not None and best in tips:
        def whole(sha: str) -> float | None:
            summary = scores.get(sha)
            if not summary or summary.get("split") != "train" or summary.get("partial"):
                return None
            value = summary.get("pass_at_1")
            return float(value) if isinstance(value, (int, float)) else None
        mine = whole(best)
        top = max(((whole(sha), n) for sha, n in tips.items() if whole(sha) is not None), default=None)
        if mine is not None and top is not None and top[0] is not None and top[0] > mine + 1e-9:
            warnings.append(f"{best_tag(ctx.run)} points at step {tips[best]} (pass@1 {mine:.3f}), but step "
                            f"{top[1]} scored {top[0]:.3f}: the tag is not the run's best")
    return warnings


def refs_key(ctx: RunContext, notes_tips: Mapping[str, str | None]) -> str:
    """Names what the checks were made from: the run's step tips, its tags and the notes refs' tips
    (by two checksums of them and their length: a 10,000-step run's refs are half a megabyte)."""
    parts = [f"{n}:{sha}" for n, sha in ctx.steps]
    parts += [f"{kind}:{notes_tips.get(kind) or '-'}" for kind in (*_KINDS, "provenance")]
    parts += [ctx.read_ref(best_tag(ctx.run)) or "-", ctx.read_ref(final_tag(ctx.run)) or "-"]
    text = " ".join(parts).encode()
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}-{len(text)}-{ctx.run}"


def cached(repo: Repo, key: str) -> tuple[list[Damage], list[str]] | None:
    """The checks' outcome kept under ``key``, or None when they must run."""
    kept = checked.load(repo.common_dir / "hermit" / "cache" / "integrity.json", _FORMAT)
    if kept.get("key") != key:
        return None
    try:
        return ([Damage(str(k), str(c), str(r)) for k, c, r in kept.get("notes", [])],
                [str(w) for w in kept.get("tags", [])])
    except (TypeError, ValueError):
        return None


def keep(repo: Repo, key: str, damage: list[Damage], warnings: list[str]) -> None:
    checked.save(repo.common_dir / "hermit" / "cache" / "integrity.json", _FORMAT,
                 {"key": key, "notes": [[d.kind, d.commit, d.reason] for d in damage], "tags": warnings})

