"""Each evolver's ``evolver.params``: its JSON Schema, defaults and the params ``init`` writes.

The schema lives in the evolver's own folder (``evolvers/<name>/params.schema.json``); this
module reads it, so config.py can refuse an unknown key or a bad value (naming its path)
before a command spends anything, and the evolvers read their defaults from the same file.
Besides JSON Schema, a schema carries ``x-init`` (what ``init`` writes), ``x-refused`` (seed
keys git-hermit does not take there, each with the reason and where it goes instead: ``to``, or
null when nothing takes it) and ``x-data-step-size`` (what ``data.step_size`` is for an evolver
without a ``step_size`` parameter: ``means: every-row``, or where it goes instead).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from git_hermit.evolvers import registry
from git_hermit.model.schema import python_validator_for


@dataclass(frozen=True)
class ParamProblem:
    """One bad parameter: ``path`` below evolver.params (``debugger.retries``), what is wrong, what to do."""

    path: str
    message: str
    hint: str


# `k` and `timeout_as` belong to the rollouts every evolver's step runs: declared, with their one
# default each, in this file and merged into every evolver's schema (an evolver may not redefine them)
SHARED_SCHEMA = Path(__file__).resolve().parent / "framework.params.schema.json"


def schema_path(evolver: str) -> Path:
    return registry.get(evolver).params_schema_path


def params_schema(evolver: str) -> dict[str, Any]:
    return _schema_at(schema_path(evolver))


@cache
def _schema_at(path: Path) -> dict[str, Any]:      # by path: a re-registered name may move
    """The evolver's schema at ``path`` with the framework's parameters (``k``, ``timeout_as``) added."""
    schema = json.loads(path.read_text(encoding="utf-8"))
    shared = json.loads(SHARED_SCHEMA.read_text(encoding="utf-8"))["properties"]
    clash = sorted(set(shared) & set(schema.get("properties", {})))
    if clash:
        raise ValueError(f"{path} redefines the framework's parameter(s) {', '.join(clash)}: drop them "
                         f"(they are declared once, in {SHARED_SCHEMA.name})")
    schema["properties"] = {**shared, **schema.get("properties", {})}
    return schema


def _validator(evolver: str) -> Any:
    return _validator_at(schema_path(evolver))


@cache
def _validator_at(path: Path) -> Any:
    """The params schema's ``jsonschema`` validator: part of the configuration (model/schema.py)."""
    return python_validator_for(_schema_at(path))


def param_defaults(evolver: str) -> dict[str, Any]:
    """{key: default} of every parameter (a fresh copy: callers may change it)."""
    props = params_schema(evolver).get("properties", {})
    return {key: copy.deepcopy(sub["default"]) for key, sub in props.items() if "default" in sub}


def init_params(evolver: str) -> dict[str, Any]:
    """The params block ``init`` writes for this evolver's template."""
    return copy.deepcopy(params_schema(evolver).get("x-init", {}))


@dataclass(frozen=True)
class Elsewhere:
    """A seed key git-hermit keeps elsewhere: where the seed has it, where it goes here (None:
    nowhere, remove it) and why."""

    path: str
    to: str | None
    why: str


def refused_params(evolver: str, params: Any) -> list[Elsewhere]:
    """The keys of ``params`` the evolver's schema refuses (``x-refused``), with where each goes."""
    refused = params_schema(evolver).get("x-refused", {})
    if not isinstance(params, dict):
        return []
    return [Elsewhere(f"evolver.params.{key}", refused[key].get("to"), refused[key]["why"])
            for key in params if key in refused]


def data_step_size(evolver: str) -> dict[str, Any] | None:
    """What ``data.step_size`` is for this evolver: None when a ``step_size`` parameter takes it,
    else its schema's ``x-data-step-size`` (``{"means": "every-row", "why"}`` or ``{"to", "why"}``)."""
    schema = params_schema(evolver)
    if "step_size" in schema.get("properties", {}):
        return None
    return schema.get("x-data-step-size") or {"to": None, "why": f"{evolver} sets the size of its steps itself"}


def params_problems(evolver: str, params: Any) -> list[ParamProblem]:
    """Every unknown key and bad value of ``params`` (empty when valid); unknown keys first."""
    schema = params_schema(evolver)
    if not isinstance(params, dict):
        return [ParamProblem("", f"must be a mapping of {evolver}'s parameters, not {params!r}",
                             f"e.g. params: {json.dumps(init_params(evolver))}")]
    problems = _unknown_keys(evolver, schema, params, "")
    if problems:
        return problems
    out = []
    for error in sorted(_validator(evolver).iter_errors(params), key=lambda e: [str(p) for p in e.absolute_path]):
        path = _dotted(list(error.absolute_path))
        out.append(ParamProblem(path, f"is invalid: {error.message}", _value_hint(schema, list(error.absolute_path))))
    return out


def _unknown_keys(evolver: str, schema: dict[str, Any], value: dict[str, Any], prefix: str) -> list[ParamProblem]:
    props = schema.get("properties", {})
    problems = []
    for key, item in value.items():
        path = f"{prefix}{key}"
        if key not in props:
            if schema.get("additionalProperties", True) is False:
                problems.append(_unknown(evolver, schema, str(key), path, sorted(props)))
            continue
        if isinstance(item, dict) and props[key].get("type") == "object":
            problems += _unknown_keys(evolver, props[key], item, f"{path}.")
    return problems


def _unknown(evolver: str, schema: dict[str, Any], key: str, path: str, known: list[str]) -> ParamProblem:
    refused = schema.get("x-refused", {}).get(key)
    if refused:
        return ParamProblem(path, f"is not accepted for {evolver}: {refused['why']}", refused["hint"])
    import difflib   # only for a bad key's suggestion
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return ParamProblem(path, f"is not a parameter of {evolver}{guess}",
                        f"its parameters here: {', '.join(known)} (see docs/configuration.md, evolver.params)")


def _value_hint(schema: dict[str, Any], parts: list[str | int]) -> str:
    sub: dict[str, Any] = schema
    for part in parts:
        if isinstance(part, int):
            sub = sub.get("items", {})
        else:
            sub = sub.get("properties", {}).get(part, {})
    bits = []
    if "enum" in sub:
        bits.append("use one of: " + ", ".join(str(v) for v in sub["enum"]))
    if "items" in sub and "enum" in sub["items"]:
        bits.append("items are: " + ", ".join(str(v) for v in sub["items"]["enum"]))
    if sub.get("description"):
        bits.append(sub["description"])
    if "default" in sub:
        bits.append(f"default: {json.dumps(sub['default'])}")
    return "; ".join(bits) or "see docs/configuration.md, evolver.params"


def _dotted(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
