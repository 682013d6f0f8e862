"""Definitions nothing calls are gone (issue 26, item 4), and stay gone: each name below was
defined and never used anywhere in the package, its hooks, tests, benches or scripts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[1]
GONE = ["final_selection", "param_names", "redact_file", "is_open", "next_index", "NOTES_KINDS"]


@pytest.mark.parametrize("name", GONE)
def test_a_removed_dead_definition_is_not_back(name):
    pattern = re.compile(rf"^\s*(def {name}\b|{name}\s*[:=])", re.M)
    found = [str(p.relative_to(TOP)) for p in sorted((TOP / "git_hermit").rglob("*.py"))
             if pattern.search(p.read_text(encoding="utf-8"))]
    assert found == []
