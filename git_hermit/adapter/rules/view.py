"""The adapter as the rules see it (a cached, read-only view of its directory) and the rule
record: each rules module collects its rules in a ``RuleSet`` with the ``rule`` decorator;
``check_spec`` joins the sets into one table keyed by the ids template.yaml names.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from git_hermit.adapter.front_matter import FrontMatter, FrontMatterError, parse_front_matter
from git_hermit.adapter.templates import Template, glob_match
from git_hermit.adapter.violations import Violation
from git_hermit.errors import SchemaError

# Never part of an adapter: version control, caches, and what a deployment or run writes.
IGNORED = re.compile(r"(^|/)(\.git|__pycache__|\.pytest_cache|\.hermit|\.hermit-hooks)(/|$)"
                     r"|\.pyc$|(^|/)\.DS_Store$|(^|/)\.hermit-deploy\.json$")


class AdapterView:
    """Cached, read-only view of an adapter directory for the rules."""

    def __init__(self, root: Path, template: Template, limits: Mapping[str, int]):
        self.root = root
        self.template = template
        self.limits = dict(limits)
        self._texts: dict[str, str] = {}
        self._modules: dict[str, ast.Module | None] = {}

    @cached_property
    def files(self) -> list[str]:
        found = []
        for path in self.root.rglob("*"):
            rel = path.relative_to(self.root).as_posix()
            if not IGNORED.search(rel) and path.is_file():
                found.append(rel)
        return sorted(found)

    def is_file(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def text(self, rel: str) -> str:
        if rel not in self._texts:
            self._texts[rel] = (self.root / rel).read_text(encoding="utf-8", errors="replace")
        return self._texts[rel]

    def matching(self, patterns: str | Iterable[str] | None) -> list[str]:
        if not patterns:
            return []
        patterns = [patterns] if isinstance(patterns, str) else list(patterns)
        return [rel for rel in self.files if any(glob_match(p, rel) for p in patterns)]

    def python(self, rel: str) -> ast.Module | None:
        """The parsed module, or None when it is missing or does not parse (python-syntax says so)."""
        if rel not in self._modules:
            try:
                self._modules[rel] = ast.parse(self.text(rel), filename=rel) if self.is_file(rel) else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._modules[rel] = None
        return self._modules[rel]

    def front_matter(self, rel: str) -> FrontMatter | None:
        try:
            return parse_front_matter(self.text(rel))
        except FrontMatterError:
            return None

    def setting(self, key: str) -> Any:
        value = self.template.settings.get(key)
        if value is None:
            raise SchemaError(f"template {self.template.id} lacks {key!r}, which its checks need",
                              hint="reinstall git-hermit (a template file is damaged)")
        return value

    def limit(self, key: str) -> int:
        if key not in self.limits:
            raise SchemaError(f"template {self.template.id} lacks the limit {key!r}",
                              hint="reinstall git-hermit (a template file is damaged)")
        return int(self.limits[key])


@dataclass(frozen=True)
class Rule:
    """A registered check: its id (as template.yaml names it), what it requires, and the code."""

    id: str
    description: str
    check: Callable[[AdapterView], Iterator[Violation]]

    def run(self, adapter: AdapterView) -> list[Violation]:
        return list(self.check(adapter))


class RuleSet(dict[str, Rule]):
    """The rules of one module, by id; ``@rules.rule(id, description)`` adds one."""

    def rule(self, rule_id: str, description: str):
        def register(check: Callable[[AdapterView], Iterator[Violation]]):
            if rule_id in self:
                raise ValueError(f"check rule {rule_id!r} is defined twice")
            self[rule_id] = Rule(rule_id, description, check)
            return check
        return register
