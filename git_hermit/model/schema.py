"""Validate records against the shipped JSON Schemas (2020-12).

Schemas are read once from ``schemas/`` (shipped read-only data). The configuration (hermit.yaml,
a few kB read once per command and remembered once valid: see config.py) is validated by
``jsonschema``, whose errors give its messages (``config_schema_errors``). Records are validated
by ``jsonschema-rs``: `git hermit log` validates thousands of notes, and bench/jsonschema_notes.py
measures jsonschema 136-170x slower on 3,000 scores notes (1.04 s against jsonschema-rs's 6.1 ms
at load average 4 on 2 cores; 1.28 s against 9.4 ms at load 8), far over the 1.5x a hot path may
lose. The schemas themselves are checked against their metaschema by the test suite. Errors
become ``SchemaError`` naming the record, the JSON path and the problem.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any, Callable

from git_hermit.errors import SchemaError
from git_hermit.resources import schemas_dir

if TYPE_CHECKING:      # imported where a schema is compiled (see _compiled)
    import jsonschema_rs


# name -> a function completing the loaded schema in place (e.g. enums from a registry above
# this layer: the config's host names come from hosts/registry.py, registered by config.py).
_EXTENSIONS: dict[str, Callable[[dict[str, Any]], None]] = {}


def extend(name: str, complete: Callable[[dict[str, Any]], None]) -> None:
    """Have ``complete`` fill in schema ``name`` each time it is loaded."""
    _EXTENSIONS[name] = complete


@cache
def _schema_text(name: str) -> str:
    return (schemas_dir() / f"{name}.schema.json").read_text()


def load_schema(name: str) -> dict[str, Any]:
    """Schema ``name`` as shipped, completed by its extension (if any)."""
    schema = json.loads(_schema_text(name))
    if name in _EXTENSIONS:
        _EXTENSIONS[name](schema)
    return schema


@cache
def _compiled(text: str) -> jsonschema_rs.Validator:
    # imported here: jsonschema-rs pulls in email, socket and uuid (~8 ms), which a command that
    # validates nothing (a warm `log`: its notes and config were checked before) never needs
    import jsonschema_rs
    return jsonschema_rs.validator_for(json.loads(text))


def fingerprint(name: str) -> str:
    """Names schema ``name`` as it is now (completed by its extension): a check remembered under it
    is redone after git-hermit, a registry or the schema changes. The text itself, not a digest of
    it: hashlib loads OpenSSL (~3 ms), more than comparing a few kB."""
    return _schema_text(name) if name not in _EXTENSIONS else json.dumps(load_schema(name), sort_keys=True)


def _validator(name: str) -> jsonschema_rs.Validator:
    if name not in _EXTENSIONS:
        return _compiled(_schema_text(name))
    return _compiled(json.dumps(load_schema(name), sort_keys=True))   # recompiled only when it changed


def schema_errors(name: str, data: Any) -> list[str]:
    """Every violation of schema ``name`` as ``at <path>: <message>`` lines (empty when valid)."""
    validator = _validator(name)
    if validator.is_valid(data):
        return []
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.instance_path])
    return [f"at {_path(e.instance_path)}: {e.message}" for e in errors]


def config_schema_errors(name: str, data: Any) -> list[str]:
    """Like ``schema_errors``, validated by ``jsonschema`` (the configuration's validator: see the
    module docstring), its messages as ``at <path>: <message>`` lines."""
    validator = _python_validator(name)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"at {_path(list(e.absolute_path))}: {e.message}" for e in errors]


def python_validator_for(schema: dict[str, Any]) -> Any:
    """A ``jsonschema`` validator of ``schema`` (2020-12; ``format`` an annotation, as jsonschema-rs has it)."""
    # imported here: jsonschema (and its referencing, rpds, attrs) costs ~40 ms a command that
    # validates no configuration (a warm `log`, completion, a hook) never pays
    import jsonschema  # type: ignore[import-untyped]
    return jsonschema.Draft202012Validator(schema)


def _python_validator(name: str) -> Any:
    # by the completed schema's text, as _validator: recompiled only when an extension changed it
    return _python_compiled(json.dumps(load_schema(name), sort_keys=True))


@cache
def _python_compiled(text: str) -> Any:
    return python_validator_for(json.loads(text))


def validate(name: str, data: Any, *, what: str | None = None) -> None:
    """Raise SchemaError with the first problem when ``data`` breaks schema ``name``."""
    problems = schema_errors(name, data)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SchemaError(f"{what or name} is invalid {problems[0]}{more}",
                          hint=f"it must match {schemas_dir() / f'{name}.schema.json'} (shipped with git-hermit)")


def _path(parts: list[str | int]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
