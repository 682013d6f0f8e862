"""Validate records against the shipped JSON Schemas (2020-12).

Schemas are read once from ``schemas/`` (shipped read-only data) and cached; validation
errors become ``SchemaError`` naming the record, the JSON path and what is wrong.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema

from git_hermit.errors import SchemaError
from git_hermit.resources import schemas_dir


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((schemas_dir() / f"{name}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(name: str, data: Any) -> list[str]:
    """Every violation of schema ``name`` as ``at <path>: <message>`` lines (empty when valid)."""
    errors = sorted(_validator(name).iter_errors(data), key=lambda e: list(e.absolute_path))
    return [f"at {_path(e.absolute_path)}: {e.message}" for e in errors]


def validate(name: str, data: Any, *, what: str | None = None) -> None:
    """Raise SchemaError with the first problem when ``data`` breaks schema ``name``."""
    problems = schema_errors(name, data)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SchemaError(f"{what or name} is invalid {problems[0]}{more}",
                          hint=f"it must match schemas/{name}.schema.json")


def _path(parts) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
