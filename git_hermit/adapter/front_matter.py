"""A Markdown file's leading ``---`` YAML block (skills, sub-agents): parsed strictly, with the
line of each key, plus the naming limits a skill or sub-agent front matter must keep.

Used by the front-matter rules, by deploy (sub-agents as host roles) and by the evolvers that
write skills; it imports nothing of git_hermit, so any of them may use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

# Skill and sub-agent names: what both hosts accept (lowercase, digits, single hyphens).
NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
NAME_MAX = 64
DESCRIPTION_MAX = 1024


@dataclass(frozen=True)
class FrontMatter:
    """A Markdown file's leading ``---`` YAML block, parsed."""

    data: dict[str, Any]
    body: str               # everything after the closing ``---``
    body_line: int          # 1-based line where the body starts
    key_lines: dict[str, int] = field(default_factory=dict)  # top-level key -> its line

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, 1)


class FrontMatterError(ValueError):
    """Front matter that is missing or does not parse; ``line`` is where (1-based)."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int):
        super().__init__(key)
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: PyYAML silently keeps the last,
    so a second provenance block (or name) could hide behind the first."""

    def construct_mapping(self, node, deep=False):
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise _DuplicateKey(str(key), key_node.start_mark.line)
            seen.add(key if isinstance(key, (str, int, float, bool)) else id(key_node))
        return super().construct_mapping(node, deep=deep)


def parse_front_matter(text: str) -> FrontMatter:
    """Parse ``---\\n<yaml mapping>\\n---\\n<body>``; raise FrontMatterError(line, message)."""
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        raise FrontMatterError(1, "does not start with a '---' front-matter block")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise FrontMatterError(1, "the front matter is not closed by a '---' line")
    try:
        data = yaml.load("\n".join(lines[1:end]), Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise FrontMatterError(exc.line + 2, f"the front matter has a duplicate key {exc.key!r}: "
                                             "YAML keeps only the last one, so say it once") from None
    except RecursionError:   # learner output: a crash here would recur on every rerun
        raise FrontMatterError(2, "the front matter is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(line, f"the front matter is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise FrontMatterError(2, "the front matter is not a YAML mapping")
    key_lines: dict[str, int] = {}
    for i in range(1, end):
        match = re.match(r"([^\s:#][^:]*):", lines[i])
        if match:
            key_lines.setdefault(match.group(1).strip(), i + 1)
    return FrontMatter(data, "\n".join(lines[end + 1:]), end + 2, key_lines)
