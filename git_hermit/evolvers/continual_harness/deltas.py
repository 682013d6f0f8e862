"""The Refiner's answers, parsed and applied: the policy text, and the create / update / retire
deltas of sub-agents, skills and memory notes (JSON), each validated before it touches a file.
A structural problem makes the answer unusable (``DeltaError``: the Refiner is asked again);
an item naming an entry that does not exist is skipped and reported, as upstream skips a
failing item and keeps the rest. A name the answer spells loosely ("Unit Checker") is
normalised (``unit-checker``); memory changes past ``memory_max_changes`` are skipped, the
first ones applied; the memory file stays within its byte cap, its oldest notes evicted first.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, overload

import yaml

from git_hermit.adapter.front_matter import (DESCRIPTION_MAX, NAME_MAX, NAME_PATTERN, FrontMatterError,
                                             parse_front_matter)
from git_hermit.model.learner_json import TooDeep, load_json

POLICY_ECHO = "IMPROVED BASE PROMPT:"
_FENCE_OPEN = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n")
_FENCE_CLOSE = re.compile(r"\n?```\s*\Z")


class DeltaError(ValueError):
    """The answer of a pass cannot be applied at all; the message says why, in one line."""


class OverLimit(DeltaError):
    """The new policy is longer than its limit (the Refiner may be asked once to compress it)."""

    def __init__(self, length: int, limit: int):
        super().__init__(f"the new policy is {length} characters, over the limit of {limit}")
        self.length = length
        self.limit = limit


@dataclass(frozen=True)
class HarnessLayout:
    """Where the harness's components live in the adapter (from the template's ``files``)."""

    policy: str = "AGENTS.md"
    policy_copy: str | None = "ADAPTER.md"
    policy_chars: int = 8000
    agents_root: str = "sub_agents"
    agent_file: str = "AGENT.md"
    skills_root: str = ".agents/skills"
    skill_file: str = "SKILL.md"
    memory: str = "memory/NOTES.md"
    memory_bytes: int = 40_000       # the memory file's cap (template limit ``memory_bytes``)

    @classmethod
    def of(cls, template: Any) -> "HarnessLayout":
        def split(pattern: str | None, root: str, leaf: str) -> tuple[str, str]:
            parts = (pattern or "").split("/")
            return ("/".join(parts[:-2]), parts[-1]) if len(parts) >= 3 and parts[-2] == "*" else (root, leaf)
        files = template.files or {}
        agents_root, agent_file = split(files.get("agents"), cls.agents_root, cls.agent_file)
        skills_root, skill_file = split(files.get("skills"), cls.skills_root, cls.skill_file)
        return cls(template.context_file, template.context_export,
                   int(template.limits.get("context_chars", cls.policy_chars)),
                   agents_root, agent_file, skills_root, skill_file, files.get("memory") or cls.memory,
                   int(template.limits.get("memory_bytes", cls.memory_bytes)))


# ---------------------------------------------------------------------------------- parsing
def strip_fences(text: str) -> str:
    """Upstream's clean-up: strip, drop one leading ```lang line and one trailing ```, strip."""
    text = text.strip()
    text = _FENCE_OPEN.sub("", text, count=1)
    return _FENCE_CLOSE.sub("", text, count=1).strip()


def parse_json_answer(text: str) -> dict[str, Any]:
    """The JSON object of an answer: fences dropped, else the span from the first ``{`` to the last ``}``."""
    body = strip_fences(text)
    try:
        data = load_json(body)
    except TooDeep as exc:
        raise DeltaError(f"the answer's JSON is {exc}") from None
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise DeltaError("the answer holds no JSON object") from None
        try:
            data = load_json(body[start:end + 1])
        except TooDeep as exc:
            raise DeltaError(f"the answer's JSON is {exc}") from None
        except ValueError as exc:     # json.JSONDecodeError, or e.g. an integer too long to convert
            why = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise DeltaError(f"the answer's JSON does not parse ({why})") from None
    if not isinstance(data, dict):
        raise DeltaError(f"the answer is a JSON {type(data).__name__}, not an object")
    return data


def parse_policy(text: str, limit: int) -> str:
    """The policy pass's answer: the whole new policy, at most ``limit`` characters."""
    body = strip_fences(text)
    if body.startswith(POLICY_ECHO):   # the prompt's closing cue echoed back
        body = strip_fences(body[len(POLICY_ECHO):])
    if not body:
        raise DeltaError("the policy answer is empty")
    body += "\n"
    if len(body) > limit:
        raise OverLimit(len(body), limit)
    return body


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise DeltaError(f"'{key}' must be a list, not {type(value).__name__}")
    return value


@overload
def _text(item: dict[str, Any], key: str, where: str, *, required: Literal[True]) -> str: ...
@overload
def _text(item: dict[str, Any], key: str, where: str, *, required: bool) -> str | None: ...
def _text(item: dict[str, Any], key: str, where: str, *, required: bool) -> str | None:
    value = item.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DeltaError(f"{where}: '{key}' must be a non-empty string")
    return value.strip()


def normalise_name(raw: str) -> str:
    """A name as the harness spells it: lowercase letters and digits joined by single hyphens
    ("Unit Checker" and "unit_checker" are ``unit-checker``), at most NAME_MAX characters;
    "" when nothing of it is left."""
    name = re.sub(r"[^a-z0-9]+", "-", raw.casefold()).strip("-")
    return name[:NAME_MAX].rstrip("-")


def _name(item: Any, where: str) -> tuple[str, str | None]:
    """The item's name, normalised, and the name as the answer spelt it when that differed."""
    if not isinstance(item, dict):
        raise DeltaError(f"{where} must be an object")
    given = _text(item, "name", where, required=True)
    name = normalise_name(given)
    if not name:
        raise DeltaError(f"{where}: name {given!r} holds no letter or digit")
    return name, (None if name == given else given)


def _description(item: dict[str, Any], where: str, *, required: bool) -> str | None:
    text = _text(item, "description", where, required=required)
    if text is not None and len(text) > DESCRIPTION_MAX:
        raise DeltaError(f"{where}: description is {len(text)} characters, over {DESCRIPTION_MAX}")
    return text


def _retire(data: dict[str, Any], *, normalise: bool = True) -> tuple[str, ...]:
    names = _list(data, "retire")
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise DeltaError("'retire' must list names (strings)")
    return tuple((normalise_name(n) or n.strip()) if normalise else n.strip() for n in names)


def _analysis(data: dict[str, Any]) -> str:
    value = data.get("analysis", "")
    return value.strip() if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class Entry:
    """A sub-agent or a skill: its name, description, body, and (skills) helper scripts.
    ``None`` fields of an update keep what the entry had; a script mapped to None is deleted."""

    name: str
    description: str | None = None
    body: str | None = None
    scripts: dict[str, str | None] = field(default_factory=dict)
    asked_as: str | None = None     # the name as the answer spelt it, when normalising changed it


@dataclass(frozen=True)
class ComponentDelta:
    analysis: str
    create: tuple[Entry, ...]
    update: tuple[Entry, ...]
    retire: tuple[str, ...]


def parse_subagents(text: str) -> ComponentDelta:
    """``{"analysis", "create": [{name, description, instructions}], "update": [{name,
    description?, instructions?}], "retire": [name]}``."""
    data = parse_json_answer(text)
    create = []
    for i, it in enumerate(_list(data, "create")):
        name, asked_as = _name(it, f"create[{i}]")
        create.append(Entry(name, _description(it, f"create[{i}]", required=True),
                            _text(it, "instructions", f"create[{i}]", required=True), asked_as=asked_as))
    update = []
    for i, it in enumerate(_list(data, "update")):
        name, asked_as = _name(it, f"update[{i}]")
        entry = Entry(name, _description(it, f"update[{i}]", required=False),
                      _text(it, "instructions", f"update[{i}]", required=False), asked_as=asked_as)
        if entry.description is None and entry.body is None:
            raise DeltaError(f"update[{i}] ({entry.name}) changes nothing: give description and/or instructions")
        update.append(entry)
    return ComponentDelta(_analysis(data), tuple(create), tuple(update), _retire(data))


def _scripts(item: dict[str, Any], where: str, *, allow_delete: bool) -> dict[str, str | None]:
    raw = item.get("scripts") or {}
    if not isinstance(raw, dict):
        raise DeltaError(f"{where}: 'scripts' must map a path under scripts/ to its text")
    out: dict[str, str | None] = {}
    for rel, content in raw.items():
        path = PurePosixPath(str(rel))
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise DeltaError(f"{where}: script path {rel!r} must be relative, inside the skill's scripts/")
        if path.parts[0] == "scripts":
            path = PurePosixPath(*path.parts[1:])
        if content is None and not allow_delete:
            raise DeltaError(f"{where}: script {rel!r} has no text")
        if content is not None and not isinstance(content, str):
            raise DeltaError(f"{where}: script {rel!r} must be text")
        out[f"scripts/{path.as_posix()}"] = content
    return out


def parse_skills(text: str) -> ComponentDelta:
    """``{"analysis", "add": [{name, description, body, scripts: {path: text}}], "update": [{name,
    description?, body?, scripts?: {path: text | null}}], "retire": [name]}``."""
    data = parse_json_answer(text)
    add = []
    for i, it in enumerate(_list(data, "add")):
        name, asked_as = _name(it, f"add[{i}]")
        add.append(Entry(name, _description(it, f"add[{i}]", required=True), _text(it, "body", f"add[{i}]", required=True),
                         _scripts(it, f"add[{i}]", allow_delete=False), asked_as=asked_as))
    update = []
    for i, it in enumerate(_list(data, "update")):
        name, asked_as = _name(it, f"update[{i}]")
        entry = Entry(name, _description(it, f"update[{i}]", required=False),
                      _text(it, "body", f"update[{i}]", required=False),
                      _scripts(it, f"update[{i}]", allow_delete=True), asked_as=asked_as)
        if entry.description is None and entry.body is None and not entry.scripts:
            raise DeltaError(f"update[{i}] ({entry.name}) changes nothing")
        update.append(entry)
    return ComponentDelta(_analysis(data), tuple(add), tuple(update), _retire(data))


@dataclass(frozen=True)
class MemoryDelta:
    analysis: str
    add: tuple[tuple[str, str], ...]        # (topic, note)
    update: tuple[tuple[str, str], ...]
    retire: tuple[str, ...] = ()            # topics


def parse_memory(text: str) -> MemoryDelta:
    """``{"analysis", "add": [{topic, note}], "update": [{topic, note}], "retire": [topic]}``
    (how many of them apply is ``apply_memory``'s: the first ``memory_max_changes``)."""
    data = parse_json_answer(text)

    def notes(key: str) -> tuple[tuple[str, str], ...]:
        out = []
        for i, it in enumerate(_list(data, key)):
            where = f"{key}[{i}]"
            if not isinstance(it, dict):
                raise DeltaError(f"{where} must be an object")
            topic, note = _text(it, "topic", where, required=True), _text(it, "note", where, required=True)
            if "\n" in topic or topic.startswith("#"):
                raise DeltaError(f"{where}: the topic must be one line of text without '#'")
            if any(line.lstrip().startswith("#") for line in note.splitlines()):
                raise DeltaError(f"{where}: a note may not contain '#' headings (one topic per note)")
            out.append((topic, note))
        return tuple(out)

    return MemoryDelta(_analysis(data), notes("add"), notes("update"), _retire(data, normalise=False))


# ---------------------------------------------------------------------------------- memory notes
@dataclass(frozen=True)
class Notes:
    """``memory/NOTES.md`` split into its header (title and preamble) and ``## <topic>`` notes."""

    header: str
    notes: tuple[tuple[str, str], ...]      # (topic, body) in file order

    @classmethod
    def parse(cls, text: str) -> "Notes":
        header: list[str] = []
        notes: list[tuple[str, list[str]]] = []
        in_fence = False
        for line in text.splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                in_fence = not in_fence
            if not in_fence and line.startswith("## "):
                notes.append((line[3:].strip(), []))
            elif notes:
                notes[-1][1].append(line)
            else:
                header.append(line)
        return cls("\n".join(header).strip(), tuple((t, "\n".join(b).strip()) for t, b in notes))

    def render(self) -> str:
        parts = [self.header] if self.header else []
        parts += [f"## {topic}\n\n{body}" for topic, body in self.notes]
        return "\n\n".join(parts) + "\n"

    def topics(self) -> dict[str, str]:
        return {_key(t): b for t, b in self.notes}

    def fit(self, max_bytes: int) -> tuple["Notes", tuple[str, ...]]:
        """These notes within ``max_bytes`` (UTF-8) once rendered: the oldest notes (the file's
        first) are evicted first; a last note still too big alone is cut, the cut marked.
        Returns the notes and the topics evicted or cut."""
        notes, evicted = list(self.notes), []
        while notes and len(Notes(self.header, tuple(notes)).render().encode()) > max_bytes:
            if len(notes) == 1:
                topic, body = notes[0]
                mark = "\n[… cut to fit the memory file's cap …]"
                room = max_bytes - len(Notes(self.header, ((topic, ""),)).render().encode()) - len(mark.encode())
                notes = [(topic, body.encode()[:max(0, room)].decode(errors="ignore").rstrip() + mark)]
                evicted.append(f"{topic} (cut)")
                break
            evicted.append(notes.pop(0)[0])
        return Notes(self.header, tuple(notes)), tuple(evicted)

    def upsert(self, topic: str, body: str) -> tuple["Notes", str]:
        """A known topic replaced in place, a new one appended; returns (notes, 'updated'|'added'|'same')."""
        key = _key(topic)
        for i, (t, b) in enumerate(self.notes):
            if _key(t) == key:
                if b == body.strip():
                    return self, "same"
                notes = (*self.notes[:i], (t, body.strip()), *self.notes[i + 1:])
                return Notes(self.header, notes), "updated"
        return Notes(self.header, (*self.notes, (topic.strip(), body.strip()))), "added"


def _key(topic: str) -> str:
    return " ".join(topic.casefold().split())


def fold_session_notes(harness: str, baseline: str, sessions: list[str],
                       max_bytes: int | None = None) -> tuple[str, list[str], tuple[str, ...]]:
    """Fold the notes sessions left into the harness's memory: a note a session wrote or changed
    (relative to ``baseline``, what the session was given) replaces the known topic or is appended;
    the result kept within ``max_bytes`` (``Notes.fit``). Returns the new text, the topics folded
    in order, and the topics evicted to fit."""
    notes, given = Notes.parse(harness), Notes.parse(baseline).topics()
    folded: list[str] = []
    for text in sessions:
        for topic, body in Notes.parse(text).notes:
            if not body or given.get(_key(topic)) == body:
                continue
            notes, what = notes.upsert(topic, body)
            if what != "same":
                folded.append(topic)
    if not folded:
        return harness, folded, ()
    evicted: tuple[str, ...] = ()
    if max_bytes is not None:
        notes, evicted = notes.fit(max_bytes)
    return notes.render(), folded, evicted


# ---------------------------------------------------------------------------------- applying
def _front_matter_file(name: str, description: str, body: str) -> str:
    head = yaml.safe_dump({"name": name, "description": description}, sort_keys=False, allow_unicode=True,
                          width=10_000)
    return f"---\n{head}---\n\n{body.strip()}\n"


def _read_entry(path: Path) -> tuple[str, str]:
    """(description, body) of an existing SKILL.md / AGENT.md (empty when it does not parse)."""
    try:
        fm = parse_front_matter(path.read_text(encoding="utf-8"))
    except (FrontMatterError, OSError):
        return "", path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    return str(fm.data.get("description") or ""), fm.body


def apply_policy(root: Path, layout: HarnessLayout, policy: str) -> list[str]:
    old = (root / layout.policy).read_text(encoding="utf-8") if (root / layout.policy).is_file() else None
    for rel in filter(None, (layout.policy, layout.policy_copy)):
        (root / rel).write_text(policy, encoding="utf-8")
    return [] if old == policy else [f"rewrote {layout.policy} ({len(policy)} characters)"]


def apply_component(root: Path, folder: str, leaf: str, delta: ComponentDelta, *, verb: str) -> list[str]:
    """Apply create/update/retire to ``root/folder/<name>/leaf`` (+ scripts); returns what changed,
    one phrase per item, skipped items included with the reason."""
    done: list[str] = []
    base = root / folder
    for entry in delta.create:
        where = base / entry.name
        if where.exists():
            done.append(f"skipped {verb} {entry.name}: it exists (use update)")
            continue
        where.mkdir(parents=True)
        (where / leaf).write_text(_front_matter_file(entry.name, entry.description or "", entry.body or ""),
                                  encoding="utf-8")
        _write_scripts(where, entry.scripts)
        done.append(f"{verb} {entry.name}{_spelt(entry)}")
    for entry in delta.update:
        where = base / entry.name
        if not (where / leaf).is_file():
            done.append(f"skipped update {entry.name}: no such entry")
            continue
        description, body = _read_entry(where / leaf)
        (where / leaf).write_text(_front_matter_file(entry.name, entry.description or description,
                                                     entry.body or body), encoding="utf-8")
        _write_scripts(where, entry.scripts)
        done.append(f"updated {entry.name}{_spelt(entry)}")
    for name in delta.retire:
        where = base / name
        if not NAME_PATTERN.match(name) or not where.is_dir():
            done.append(f"skipped retire {name}: no such entry")
            continue
        shutil.rmtree(where)
        done.append(f"retired {name}")
    return done


def _spelt(entry: Entry) -> str:
    return f" (named {entry.asked_as!r} in the answer)" if entry.asked_as else ""


def _write_scripts(folder: Path, scripts: dict[str, str | None]) -> None:
    for rel, content in scripts.items():
        path = folder / rel
        if content is None:
            if path.is_file():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if content.endswith("\n") else content + "\n", encoding="utf-8")
        path.chmod(0o755)   # helpers are run directly by the agent


def apply_memory(root: Path, layout: HarnessLayout, delta: MemoryDelta, max_changes: int) -> list[str]:
    """Apply the first ``max_changes`` changes that apply — retirements first (they make room),
    then updates, then additions — and skip the rest, saying so; the file stays within
    ``layout.memory_bytes``, its oldest notes evicted first. Returns what changed."""
    path = root / layout.memory
    notes = Notes.parse(path.read_text(encoding="utf-8") if path.is_file() else "# Notes\n")
    done: list[str] = []
    changed = 0
    over = f"over memory_max_changes={max_changes}"
    for topic in delta.retire:
        kept = tuple(n for n in notes.notes if _key(n[0]) != _key(topic))
        if len(kept) == len(notes.notes):
            done.append(f"skipped retire {topic!r}: no such topic")
        elif changed >= max_changes:
            done.append(f"skipped retire {topic!r}: {over}")
        else:
            notes, changed = Notes(notes.header, kept), changed + 1
            done.append(f"retired {topic!r}")
    for kind, items in (("update", delta.update), ("add", delta.add)):
        for topic, body in items:
            if kind == "update" and _key(topic) not in notes.topics():
                done.append(f"skipped update {topic!r}: no such topic")
                continue
            if changed >= max_changes:
                done.append(f"skipped {kind} {topic!r}: {over}")
                continue
            notes, what = notes.upsert(topic, body)
            if what != "same":
                changed += 1
                done.append(f"{what} {topic!r}")
    if changed:
        notes, evicted = notes.fit(layout.memory_bytes)
        done += [f"evicted {topic!r} (the file's cap is {layout.memory_bytes} bytes)" for topic in evicted]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(notes.render(), encoding="utf-8")
    return done
