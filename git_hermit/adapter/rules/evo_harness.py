"""The evo-harness template's own rules: a managed skill carries a provenance block (seed 001)
and the skill library stays within its budgets (sizes, counts, general support, no shadowing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import yaml

from git_hermit.adapter.front_matter import FrontMatter
from git_hermit.adapter.rules.common import identity
from git_hermit.adapter.rules.view import AdapterView, RuleSet
from git_hermit.adapter.violations import Violation

RULES = RuleSet()

PROVENANCE_LEVELS = ("topic", "general")


@dataclass(frozen=True)
class _Skill:
    rel: str
    fm: FrontMatter
    provenance: Any           # the provenance block, None for a native (baseline) skill

    @property
    def level(self) -> str | None:
        return self.provenance.get("level") if isinstance(self.provenance, dict) else None


def _skills(a: AdapterView) -> list[_Skill]:
    key = a.setting("provenance_key")
    skills = []
    for rel in a.matching(a.template.files.get("skills")):
        fm = a.front_matter(rel)
        if fm is not None:  # front-matter reports the ones that do not parse
            skills.append(_Skill(rel, fm, fm.data.get(key)))
    return skills


def _skills_root(a: AdapterView) -> str:
    pattern = a.template.files.get("skills", "skills/*/SKILL.md")
    return pattern.split("/*/")[0]


@RULES.rule("provenance", "a managed skill's provenance block names the algorithm, its level and its source tasks")
def _provenance(a: AdapterView) -> Iterator[Violation]:
    key, algorithm = a.setting("provenance_key"), a.setting("provenance_algorithm")
    for skill in _skills(a):
        if key not in skill.fm.data:
            continue  # a native skill: not managed by the Curators
        prov, line = skill.provenance, skill.fm.line_of(key)

        def bad(message: str) -> Violation:
            return Violation(skill.rel, line, "provenance", message)

        if not isinstance(prov, dict):
            yield bad(f"'{key}' must be a mapping with algorithm, level and source_task_ids")
            continue
        if prov.get("algorithm") != algorithm:
            yield bad(f"'{key}.algorithm' is {prov.get('algorithm')!r}, not {algorithm!r}")
        if prov.get("level") not in PROVENANCE_LEVELS:
            yield bad(f"'{key}.level' is {prov.get('level')!r}; it must be one of {', '.join(PROVENANCE_LEVELS)}")
        ids = prov.get("source_task_ids")
        if not isinstance(ids, list) or not ids:
            yield bad(f"'{key}.source_task_ids' must be a non-empty list of the tasks that support the skill")
            continue
        invalid = [i for i in ids if isinstance(i, bool) or not isinstance(i, (str, int)) or not str(i).strip()]
        if invalid:
            yield bad(f"'{key}.source_task_ids' holds {invalid[0]!r}, which is not a task id")
        seen: set[str] = set()
        for task_id in map(str, ids):
            if task_id in seen:
                yield bad(f"'{key}.source_task_ids' lists task {task_id!r} twice")
            seen.add(task_id)


@RULES.rule("general-support", "a general skill cites at least general_min_tasks distinct tasks")
def _general_support(a: AdapterView) -> Iterator[Violation]:
    need, key = a.limit("general_min_tasks"), a.setting("provenance_key")
    for skill in _skills(a):
        if skill.level != "general" or not isinstance(skill.provenance.get("source_task_ids"), list):
            continue
        distinct = {str(i) for i in skill.provenance["source_task_ids"]}
        if len(distinct) < need:
            yield Violation(skill.rel, skill.fm.line_of(key), "general-support",
                            f"a general skill needs at least {need} distinct source tasks; it cites {len(distinct)}")


def _folder_chars(a: AdapterView, skill: _Skill) -> int:
    """Characters of every other file in a folder skill (scripts, references, data): the budgets
    bound what is deployed with the skill, not only its SKILL.md (seed 001). A file that is not
    UTF-8 text counts its bytes."""
    if "/" not in skill.rel:
        return 0
    folder = skill.rel.rsplit("/", 1)[0] + "/"
    total = 0
    for rel in a.files:
        if rel.startswith(folder) and rel != skill.rel:
            data = (a.root / rel).read_bytes()
            try:
                total += len(data.decode("utf-8"))
            except UnicodeDecodeError:
                total += len(data)
    return total


@RULES.rule("skill-size", "a managed skill's body and the other files of its folder stay within max_skill_chars")
def _skill_size(a: AdapterView) -> Iterator[Violation]:
    limit = a.limit("max_skill_chars")
    for skill in _skills(a):
        if skill.provenance is None:
            continue
        body, extra = len(skill.fm.body.strip()), _folder_chars(a, skill)
        if body + extra > limit:
            what = f"the body is {body} characters" + (f" and the folder's other files {extra}" if extra else "")
            yield Violation(skill.rel, skill.fm.body_line, "skill-size", f"{what}, over max_skill_chars {limit}")


def _library_chars(a: AdapterView, skill: _Skill) -> int:
    """Normalised YAML metadata plus body plus the folder's other files: what max_library_chars bounds."""
    metadata = yaml.safe_dump(skill.fm.data, sort_keys=True, allow_unicode=True)
    return len(metadata) + len(skill.fm.body.strip()) + _folder_chars(a, skill)


@RULES.rule("library-size", "the managed skills (every file of their folders) together stay within max_library_chars")
def _library_size(a: AdapterView) -> Iterator[Violation]:
    limit = a.limit("max_library_chars")
    total = sum(_library_chars(a, s) for s in _skills(a) if s.provenance is not None)
    if total > limit:
        yield Violation(_skills_root(a), 1, "library-size",
                        f"the managed skills total {total} characters (metadata, bodies and their folders' files), "
                        f"over max_library_chars {limit}")


@RULES.rule("library-count", "at most max_topic_skills topic and max_general_skills general skills")
def _library_count(a: AdapterView) -> Iterator[Violation]:
    counts = {level: 0 for level in PROVENANCE_LEVELS}
    for skill in _skills(a):
        if skill.level in counts:
            counts[skill.level] += 1
    for level in PROVENANCE_LEVELS:
        limit = a.limit(f"max_{level}_skills")
        if counts[level] > limit:
            yield Violation(_skills_root(a), 1, "library-count",
                            f"{counts[level]} {level} skills, over max_{level}_skills {limit}")


@RULES.rule("skill-shadow", "no skill folder shadows a flat skill file of the same name")
def _skill_shadow(a: AdapterView) -> Iterator[Violation]:
    root = _skills_root(a)
    for rel in a.matching(a.template.files.get("skills")):
        flat = f"{root}/{identity(rel)}.md"
        if a.is_file(flat):
            yield Violation(rel, 1, "skill-shadow",
                            f"shadows the flat skill {flat}: rename one of them or merge them")
