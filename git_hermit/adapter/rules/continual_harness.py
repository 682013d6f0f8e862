"""The continual-harness template's own rules: sub-agent instructions within their limit, and
memory notes under unique, non-empty ``## <topic>`` headings.
"""

from __future__ import annotations

from typing import Iterator

from git_hermit.adapter.rules.view import AdapterView, RuleSet
from git_hermit.adapter.violations import Violation

RULES = RuleSet()


@RULES.rule("subagent-size", "a sub-agent's instructions (its file's body) stay within the limit")
def _subagent_size(a: AdapterView) -> Iterator[Violation]:
    limit = a.limit("subagent_chars")
    for rel in a.matching(a.template.files.get("agents")):
        fm = a.front_matter(rel)
        body = fm.body if fm else a.text(rel)
        if len(body.strip()) > limit:
            yield Violation(rel, fm.body_line if fm else 1, "subagent-size",
                            f"instructions are {len(body.strip())} characters, over the limit of {limit}")


@RULES.rule("memory-notes", "memory notes sit under unique, non-empty '## <topic>' headings")
def _memory_notes(a: AdapterView) -> Iterator[Violation]:
    rel = a.template.files.get("memory")
    if not rel or not a.is_file(rel):
        return
    topics: dict[str, int] = {}
    current: tuple[str, int] | None = None   # (topic, line) of the note being read
    has_text = False
    in_fence = False

    def close() -> Iterator[Violation]:
        if current is not None and not has_text:
            yield Violation(rel, current[1], "memory-notes", f"topic {current[0]!r} has no note under it")

    for number, line in enumerate(a.text(rel).splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            has_text = True
            continue
        if in_fence:
            continue
        if line.startswith("# ") or line.rstrip() == "#":
            if number != 1:
                yield Violation(rel, number, "memory-notes",
                                "only the first line may be a '# ' title; put notes under '## <topic>' headings")
        elif line.startswith("## ") or line.rstrip() == "##":
            yield from close()
            topic = line[2:].strip()
            key = " ".join(topic.casefold().split())
            if not topic:
                yield Violation(rel, number, "memory-notes", "a '## ' heading needs a topic")
            elif key in topics:
                yield Violation(rel, number, "memory-notes",
                                f"topic {topic!r} appears twice (first at line {topics[key]}): one note per topic")
            else:
                topics[key] = number
            current, has_text = (topic, number), False
        elif line.strip():
            has_text = True
    yield from close()
