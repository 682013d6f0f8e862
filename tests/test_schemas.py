"""The shipped JSON Schemas are valid 2020-12 schemas, and records round-trip through them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import git_hermit
from git_hermit.errors import SchemaError
from git_hermit.model.records import (Analysis, Attempt, Change, Manifest, Scores, TaskScore, VerdictNote, dumps,
                                      loads)
from git_hermit.model.schema import schema_errors
from git_hermit.resources import schemas_dir

SCHEMAS = sorted(schemas_dir().glob("*.schema.json")) + sorted(
    (Path(git_hermit.__file__).parent / "evolvers").glob("*/params.schema.json"))   # each evolver's own


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_schema_is_valid_against_its_metaschema(path):
    schema = json.loads(path.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.validators.validator_for(schema).check_schema(schema)


def test_records_round_trip_and_are_canonical():
    change = Change("chg-1", "d", ("MEMORY.md",), "p", ("t1",), ("t2",), "memory")
    manifest = Manifest("r", 1, (change,))
    text = dumps("manifest", manifest)
    assert loads("manifest", text) == manifest
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert json.loads(text)["v"] == 1
    scores = Scores("r", 1, "a" * 40, "train", 2, 0.5, {"t": TaskScore("fail", (Attempt("pass", 1.0),
                                                                                 Attempt("exception", None, "AgentTimeout")))})
    assert loads("scores", dumps("scores", scores)) == scores
    verdict = VerdictNote("r", 2, "chg-1", "HARMFUL", (), ("t1",), ("t2",))
    assert loads("verdicts", dumps("verdicts", verdict)) == verdict
    analysis = Analysis("r", 1, "ahe", {"overview": "x"})
    assert loads("analysis", dumps("analysis", analysis)) == analysis


@pytest.mark.parametrize("kind,text,needle", [
    ("verdicts", "{", "not JSON"),
    ("verdicts", '{"v": 1}', "is a required property"),
    ("scores", json.dumps({"v": 1, "run": "r", "step": 1, "commit": "xyz", "split": "train", "k": 2,
                           "pass_at_1": 0.5, "tasks": {}}), "$.commit"),
    ("manifest", json.dumps({"v": 1, "run": "r", "step": 1, "changes": [{"id": "c"}]}), "$.changes[0]"),
])
def test_bad_notes_name_the_problem(kind, text, needle):
    with pytest.raises(SchemaError) as err:
        loads(kind, text, where="abc")
    assert needle in err.value.message and "abc" in err.value.message


def test_writing_an_invalid_record_is_refused():
    bad = VerdictNote("r", 2, "chg-1", "GREAT", (), (), ())   # not a verdict name
    with pytest.raises(SchemaError):
        dumps("verdicts", bad)


def test_config_schema_names_unknown_keys_by_path():
    errors = schema_errors("config", {"run": "x", "template": "ahe@1.0", "adapter": "a",
                                      "trainer": {"epochs": 1, "bogus": 2}})
    assert errors and "$.trainer" in errors[0] and "bogus" in errors[0]
