"""The rules every template may name: required files, the context file's size and its
export, Python that parses, skill and sub-agent front matter, fixed files, unknown files.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

from git_hermit.adapter.deploy import context_room
from git_hermit.adapter.front_matter import (DESCRIPTION_MAX, NAME_MAX, NAME_PATTERN, FrontMatterError,
                                             parse_front_matter)
from git_hermit.adapter import runtime
from git_hermit.adapter.rules.view import IGNORED, AdapterView, RuleSet
from git_hermit.adapter.templates import is_fixed, is_learnable
from git_hermit.adapter.violations import WARNING, Violation

RULES = RuleSet()


@RULES.rule("required-files", "the template's required files exist")
def _required_files(a: AdapterView) -> Iterator[Violation]:
    for rel in dict.fromkeys((a.template.context_file, *a.template.required)):
        if not a.is_file(rel):
            yield Violation(rel, 1, "required-files", f"missing: every {a.template.id} adapter has this file")


@RULES.rule("context-size", "the context file stays within what the host reads (bytes or characters)")
def _context_size(a: AdapterView) -> Iterator[Violation]:
    rel = a.template.context_file
    if not a.is_file(rel):
        return
    if "context_bytes" in a.limits:
        limit, unit = a.limit("context_bytes"), "bytes"
        lines: list[bytes] | list[str] = (a.root / rel).read_bytes().splitlines(keepends=True)
    else:
        limit, unit = a.limit("context_chars"), "characters"
        lines = a.text(rel).splitlines(keepends=True)
    # deploy appends a footer (where the adapter's files went), which the host reads too: the file
    # must leave it room within what the host reads
    room = context_room(a.root, "bytes" if unit == "bytes" else "chars")
    why = ""
    if room is not None and room[0] - room[1] < limit:
        limit, why = room[0] - room[1], f" (the host reads {room[0]}, and deploy adds {room[1]} after it)"
    total = sum(map(len, lines))
    if total <= limit:
        return
    seen = 0
    for number, line in enumerate(lines, start=1):
        seen += len(line)
        if seen > limit:
            yield Violation(rel, number, "context-size",
                            f"is {total} {unit}, over the limit of {limit}{why}; from this line on the agent "
                            "would not see it")
            return


@RULES.rule("adapter-md-equal", "the context export (ADAPTER.md) is byte-equal to the context file")
def _adapter_md_equal(a: AdapterView) -> Iterator[Violation]:
    export, context = a.template.context_export, a.template.context_file
    if not export or not a.is_file(context):
        return
    if not a.is_file(export):
        yield Violation(export, 1, "adapter-md-equal", f"missing: it must be a copy of {context}")
        return
    ours, theirs = (a.root / export).read_bytes(), (a.root / context).read_bytes()
    if ours == theirs:
        return
    ours_lines, theirs_lines = ours.splitlines(keepends=True), theirs.splitlines(keepends=True)
    line = next((i + 1 for i, (x, y) in enumerate(zip(ours_lines, theirs_lines)) if x != y),
                min(len(ours_lines), len(theirs_lines)) + 1)
    yield Violation(export, line, "adapter-md-equal",
                    f"differs from {context} from this line on: keep it an exact copy of {context}")


@RULES.rule("python-syntax", "every learnable Python file parses")
def _python_syntax(a: AdapterView) -> Iterator[Violation]:
    for rel in a.matching(a.template.files.get("python")):
        try:
            ast.parse(a.text(rel), filename=rel)
        except SyntaxError as exc:
            yield Violation(rel, exc.lineno or 1, "python-syntax", f"does not parse: {exc.msg}")
        except ValueError as exc:  # e.g. a NUL byte
            yield Violation(rel, 1, "python-syntax", f"does not parse: {exc}")
        except (RecursionError, MemoryError):  # CPython's parser gives up on deep nesting this way
            yield Violation(rel, 1, "python-syntax", "does not parse: nested too deeply")


def _component_files(a: AdapterView, kind: str) -> tuple[list[str], list[Violation]]:
    """The files of a component kind ('skills' or 'agents'), and its folders that lack their file."""
    pattern = a.template.files.get(kind)
    if not pattern:
        return [], []
    found = a.matching(pattern)
    missing = []
    parts = pattern.split("/")
    if len(parts) >= 2 and parts[-2] == "*" and "*" not in parts[-1]:
        base = a.root.joinpath(*parts[:-2])
        if base.is_dir():
            for folder in sorted(p for p in base.iterdir() if p.is_dir() and not IGNORED.search(p.name)):
                if not (folder / parts[-1]).is_file():
                    rel = folder.relative_to(a.root).as_posix()
                    missing.append(Violation(rel, 1, "front-matter", f"has no {parts[-1]}"))
    return found, missing


def identity(rel: str) -> str:
    """The name a skill or sub-agent file must declare: its folder for SKILL.md/AGENT.md, else its stem."""
    path = Path(rel)
    return path.parent.name if path.name in ("SKILL.md", "AGENT.md") else path.stem


@RULES.rule("front-matter", "every skill and sub-agent file starts with YAML front matter naming and describing it")
def _front_matter(a: AdapterView) -> Iterator[Violation]:
    for kind in ("skills", "agents"):
        files, missing = _component_files(a, kind)
        yield from missing
        for rel in files:
            try:
                fm = parse_front_matter(a.text(rel))
            except FrontMatterError as exc:
                yield Violation(rel, exc.line, "front-matter", str(exc))
                continue
            name, description = fm.data.get("name"), fm.data.get("description")
            if not isinstance(name, str) or not name.strip():
                yield Violation(rel, fm.line_of("name"), "front-matter", "'name' is missing or empty")
            elif not NAME_PATTERN.match(name) or len(name) > NAME_MAX:
                yield Violation(rel, fm.line_of("name"), "front-matter",
                                f"name {name!r} must be lowercase letters, digits and single hyphens "
                                f"(at most {NAME_MAX})")
            elif name != identity(rel):
                yield Violation(rel, fm.line_of("name"), "front-matter",
                                f"name {name!r} does not match its file's name {identity(rel)!r}")
            if not isinstance(description, str) or not description.strip():
                yield Violation(rel, fm.line_of("description"), "front-matter",
                                "'description' is missing or empty: the agent picks it by its description")
            elif len(description) > DESCRIPTION_MAX:
                yield Violation(rel, fm.line_of("description"), "front-matter",
                                f"description is {len(description)} characters, over {DESCRIPTION_MAX}")


@RULES.rule("fixed-file", "the fixed hook-runtime files are identical to the installed ones")
def _fixed_file(a: AdapterView) -> Iterator[Violation]:
    def read(rel: str) -> bytes | None:   # a link is never followed (it is no runtime file)
        path = a.root / rel
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    status = runtime.identify(read, a.template.fixed)
    if status is not None and status.outdated:
        return   # an older runtime, whole and unchanged: it keeps working (`check` says so)
    for rel, source in sorted(a.template.fixed.items()):
        if not source.is_file():
            yield Violation(rel, 1, "fixed-file",
                            f"cannot be compared: the installed {source.name} is missing (reinstall git-hermit)")
        elif not a.is_file(rel):
            yield Violation(rel, 1, "fixed-file", f"missing: restore the installed copy of {source.name}")
        elif (a.root / rel).read_bytes() != source.read_bytes():
            yield Violation(rel, 1, "fixed-file",
                            f"was changed: a fixed file must stay identical to the installed {source.name}")


@RULES.rule("unknown-file", "every file belongs to the template (learnable, fixed or part of the seed)")
def _unknown_file(a: AdapterView) -> Iterator[Violation]:
    seed = set(a.template.seed_files())
    for rel in a.files:
        if not (is_learnable(a.template, rel) or is_fixed(a.template, rel) or rel in seed):
            yield Violation(rel, 1, "unknown-file",
                            f"is not a file of the {a.template.id} template: learners may not change it",
                            WARNING)
