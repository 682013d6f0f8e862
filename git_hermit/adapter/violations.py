"""What a check reports: one broken rule at one place (`Violation`) and its severity.

The bottom of the adapter checks: the static rules (``rules/``), the host checks
(``hostcheck``) and ``check_spec`` all speak in these; it imports nothing of git_hermit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Violation:
    """One broken rule at one place in the adapter."""

    path: str          # relative to the adapter directory, POSIX
    line: int          # 1-based; 1 when the rule is about the whole file
    rule: str          # kebab-case rule id
    message: str
    severity: str = ERROR  # "error" | "warning"; only errors fail the check

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


def has_errors(violations: Iterable[Violation]) -> bool:
    """True when any violation is an error (warnings alone pass)."""
    return any(v.severity == ERROR for v in violations)
