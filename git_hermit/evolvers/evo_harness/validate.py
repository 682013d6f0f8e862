"""One curator level's edit judged as ONE atomic unit against the real snapshot diff (seed 001):
permissions (only ``skills/**``), ownership (native skills are protected: they cannot be edited,
deleted, gain provenance, or be left unmanaged by stripping it), level, provenance (a new or
revised skill cites only this batch's candidate experiences; a general one ≥ general_min_tasks
distinct tasks), and check_spec with the run's limits (counts, char budgets, shadowing).
It never runs candidate code and never calls a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from git_hermit.adapter.check_spec import FrontMatterError, check_adapter, parse_front_matter
from git_hermit.adapter.templates import Template, is_learnable
from git_hermit.model.files import FileChange

SKILLS_ROOT = "skills"
SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class LevelVerdict:
    """What a level's edit is: accepted (no reasons) or rejected whole (the reasons)."""

    level: str
    reasons: tuple[str, ...]
    files: dict[str, FileChange | None]                       # adapter-relative; None deletes
    written: dict[str, dict[str, Any]] = field(default_factory=dict)   # new/revised skill → its provenance
    deleted: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        return not self.reasons


def changed_files(before: Mapping[str, FileChange], after: Mapping[str, FileChange]) -> dict[str, FileChange | None]:
    return {p: after.get(p) for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)}


def _unit(path: str) -> str | None:
    """The skill a path belongs to: ``skills/<name>`` for a folder skill, the flat file itself
    for ``skills/<name>.md``; None outside the skills folder."""
    parts = path.split("/")
    if parts[0] != SKILLS_ROOT or len(parts) < 2:
        return None
    return "/".join(parts[:2])


def _owner(files: Mapping[str, FileChange], unit: str, key: str) -> tuple[str | None, Any, str | None]:
    """(``managed`` | ``native`` | ``broken`` | None when absent, the provenance block, a parse error)."""
    rel = unit if unit.endswith(".md") else f"{unit}/{SKILL_FILE}"
    change = files.get(rel)
    if change is None:
        return None, None, None
    try:
        fm = parse_front_matter(change.content.decode("utf-8", errors="replace"))
    except FrontMatterError as exc:
        return "broken", None, str(exc)
    if key in fm.data:
        return "managed", fm.data[key], None
    return "native", None, None


def validate_level(*, level: str, before: Mapping[str, FileChange], after: Mapping[str, FileChange],
                   after_dir: Path, template: Template, supported: Mapping[str, tuple[str, ...]],
                   limits: Mapping[str, int]) -> LevelVerdict:
    """``supported``: task id → its candidate experience ids in this batch (the only valid citations)."""
    files = changed_files(before, after)
    reasons: list[str] = []
    outside = [p for p in files if not is_learnable(template, p)]
    if outside:
        reasons.append(f"permissions: edits outside skills/ ({', '.join(outside[:5])})")
    # a link could make a skill read (and deploy) a file outside the library
    links = [p for p, change in files.items() if change is not None and change.mode == "120000"]
    if links:
        reasons.append(f"permissions: symbolic links are not skill files ({', '.join(links[:5])})")
    key = template.settings.get("provenance_key", "flashrsi")
    written: dict[str, dict[str, Any]] = {}
    deleted: list[str] = []
    for unit in sorted({u for u in map(_unit, files) if u is not None}):
        was, _, _ = _owner(before, unit, key)
        now, prov, parse_error = _owner(after, unit, key)
        left = any(_unit(p) == unit for p in after)
        if was == "native":
            reasons.append(f"ownership: {unit} is a native skill"
                           + (" and cannot gain provenance" if now == "managed" else "; curators may not change it"))
            continue
        # a baseline skill the parser cannot read, or baseline files with no SKILL.md, belong to
        # whoever wrote them: neither may be adopted (gain provenance), edited or removed
        if was == "broken" or (was is None and any(_unit(p) == unit for p in before)):
            reasons.append(f"ownership: {unit} is a baseline "
                           + ("skill whose front matter does not parse" if was == "broken" else "folder with no "
                              + SKILL_FILE) + "; curators may not adopt or change it")
            continue
        if unit.endswith(".md"):
            reasons.append(f"permissions: {unit} is a flat skill file; curators write {unit[:-3]}/{SKILL_FILE}")
            continue
        if now is None and not left and was == "managed":
            old_level = _level(_owner(before, unit, key)[1])
            if old_level != level:
                reasons.append(f"level: the {level} curator deleted {unit}, a {old_level} skill")
            deleted.append(unit.split("/", 1)[1])
            continue
        if now == "broken":
            reasons.append(f"format: {unit}/{SKILL_FILE}: {parse_error}")
            continue
        if now != "managed":
            reasons.append(f"ownership: {unit} would be left unmanaged"
                           + (" (its provenance was stripped)" if was == "managed" else f" (no {key} block)"))
            continue
        new_level = _level(prov)
        if new_level != level:
            reasons.append(f"level: {unit} is a {new_level} skill; the {level} curator writes only {level} skills")
            continue
        old_level = _level(_owner(before, unit, key)[1]) if was == "managed" else None
        if old_level not in (None, level):
            reasons.append(f"level: {unit} was a {old_level} skill; the {level} curator may not revise it")
            continue
        ids = prov.get("source_task_ids") if isinstance(prov, dict) else None
        if not isinstance(ids, list) or not ids:
            reasons.append(f"provenance: {unit} lists no source_task_ids")
            continue
        cited = [str(i) for i in ids]
        foreign = sorted(set(cited) - set(supported))
        if foreign:
            reasons.append(f"provenance: {unit} cites task(s) without a candidate experience in this batch: "
                           f"{', '.join(foreign[:5])}")
            continue
        need = int(limits.get("general_min_tasks", 3))
        if level == "general" and len(set(cited)) < need:
            reasons.append(f"provenance: general skill {unit} cites {len(set(cited))} distinct task(s); "
                           f"general_min_tasks is {need}")
            continue
        written[unit.split("/", 1)[1]] = {
            "level": level, "source_task_ids": sorted(set(cited)),
            "experiences": sorted(e for t in set(cited) for e in supported[t])}
    if not reasons and files:
        errors = [v for v in check_adapter(after_dir, template, hosts=True, limits=dict(limits))
                  if v.severity == "error"]
        reasons.extend(f"check_spec: {v}" for v in errors[:5])
    return LevelVerdict(level, tuple(reasons), files, written if not reasons else {}, tuple(deleted))


def _level(prov: Any) -> str | None:
    return prov.get("level") if isinstance(prov, dict) else None
