"""The one ``module:attribute`` loader (git_hermit/loader.py, issue 26 item 4), pkgutil.resolve_name
underneath; the evolver registry, scripted learners and scripted agents all load through it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from git_hermit.loader import load

TOP = Path(__file__).resolve().parents[1]


def test_it_loads_module_attribute_and_dotted_attributes():
    import os.path
    assert load("os.path:join") is os.path.join
    assert load("git_hermit.loader:load") is load
    assert load("pathlib:Path.cwd") == Path.cwd


@pytest.mark.parametrize("spec, error", [("os.path", ValueError), (":join", ValueError), ("os:", ValueError),
                                         ("no_such_module_xyz:f", ImportError), ("os:no_such_function", AttributeError)])
def test_a_bad_spec_raises_what_the_callers_turn_into_a_config_error(spec, error):
    with pytest.raises(error):
        load(spec)


def test_a_bad_scripted_policy_is_one_config_error():
    from git_hermit.errors import ConfigError
    from git_hermit.agents.scripted import load_policy
    with pytest.raises(ConfigError, match="cannot be loaded"):
        load_policy("no_colon_here")
    assert load_policy("os.path:join") is __import__("os").path.join


def test_no_other_module_splits_module_colon_attribute_itself():
    offenders = []
    for path in sorted((TOP / "git_hermit").rglob("*.py")):
        if path.name == "loader.py":
            continue
        if re.search(r'partition\(":"\)\s*\n\s*(try:\s*\n\s*)?return getattr\(importlib\.import_module',
                     path.read_text(encoding="utf-8")):
            offenders.append(str(path.relative_to(TOP)))
    assert offenders == []
