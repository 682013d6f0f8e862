#!/usr/bin/env python3
"""Write the docs' configuration reference from the JSON Schemas, so it cannot go stale.

The hermit.yaml keys come from ``schemas/config.schema.json`` (completed with the registered hosts,
as ``init`` commits it), each evolver's parameters from its ``params.schema.json`` (with the
framework's ``k``, ``timeout_as``, ``task_field``). Only the text between a page's
``<!-- BEGIN GENERATED … -->`` and ``<!-- END GENERATED … -->`` lines is written; the prose around
it is the page's own. ``--check`` writes nothing and exits 1 naming every stale page
(``tests/test_docs.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG_REGION = "config-reference"
PARAMS_REGION = "params"


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"`{text}`"


def _cell(text: str) -> str:
    """Table-safe (a pipe would end the cell), with the docs pages a description names linked."""
    text = re.sub(r"\bdocs/([a-z-]+\.md)\b", r"[\1](\1)", text)
    return text.replace("|", "\\|").replace("\n", " ")


def _values(node: dict[str, Any]) -> str:
    """What a key takes, said shortly: its enum, its type(s) with bounds, a list's or map's items."""
    if "const" in node:
        return f"only {_code(node['const'])}"
    if "enum" in node:
        return ", ".join(_code(v) for v in node["enum"]) or "a registered name"
    kinds = node.get("type")
    if kinds is None:
        return ""
    names = [kinds] if isinstance(kinds, str) else list(kinds)
    words = []
    for kind in names:
        if kind == "array":
            item = _values(node.get("items", {}))
            words.append(f"list of {item}" if item else "list")
        elif kind == "object" and isinstance(node.get("additionalProperties"), dict) and "properties" not in node:
            item = _values(node["additionalProperties"])
            words.append(f"map to {item}" if item else "map")
        else:
            words.append(kind)
    text = " or ".join(words)
    bounds = [f"≥ {node['minimum']}" if "minimum" in node else "",
              f"> {node['exclusiveMinimum']}" if "exclusiveMinimum" in node else "",
              f"≤ {node['maximum']}" if "maximum" in node else ""]
    bounds = [b for b in bounds if b]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _rows(properties: dict[str, Any], prefix: str, required: set[str],
          inherited: dict[str, Any] | None = None) -> list[tuple[str, str, str, str]]:
    """(key, values, default, description) for each key, nested objects' keys after their own."""
    rows = []
    for name, node in properties.items():
        key = prefix + name
        if "default" in node:
            default = _code(node["default"]) if not isinstance(node["default"], dict) else "(below)"
        elif inherited is not None and name in inherited:
            default = _code(inherited[name])
        else:
            default = "required" if name in required else "—"
        description = node.get("description", "")
        rows.append((key, _values(node), default, description))
        children = node.get("properties")
        if children:
            rows += _rows(children, key + ".", set(node.get("required", [])),
                          node.get("default") if isinstance(node.get("default"), dict) else None)
        each = node.get("additionalProperties")
        if isinstance(each, dict) and each.get("properties"):     # a map of records: prices.<name>.input
            rows += _rows(each["properties"], key + ".<name>.", set(each.get("required", [])))
    return rows


def _table(rows: list[tuple[str, str, str, str]], first: str) -> list[str]:
    lines = [f"| {first} | values | default | what it does |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {_cell(values)} | {_cell(default)} | {_cell(text)} |"
              for key, values, default, text in rows]
    return lines


def render_config_reference(schema: dict[str, Any]) -> str:
    """The hermit.yaml reference: the top-level keys, then one section per block."""
    properties = schema["properties"]
    required = set(schema.get("required", []))
    scalars = {k: v for k, v in properties.items() if "properties" not in v}
    blocks = {k: v for k, v in properties.items() if "properties" in v}
    lines = ["## Top-level keys", ""]
    lines += _table(_rows(scalars, "", required), "key")
    for name, node in blocks.items():
        lines += ["", f"## `{name}`", ""]
        if node.get("description"):
            lines += [node["description"][0].upper() + node["description"][1:] + ".", ""]
        if node.get("additionalProperties") is not False:
            lines += ["Keys not listed are " + ("checked by the block's own reader (an unknown one exits 5)."
                                                if node.get("additionalProperties") is True else
                                                f"taken as {_values(node['additionalProperties'])}."), ""]
        lines += _table(_rows(node["properties"], f"{name}.", set(node.get("required", []))), "key")
    return "\n".join(lines)


def render_params(schema: dict[str, Any]) -> str:
    """An evolver's ``evolver.params`` table."""
    return "\n".join(_table(_rows(schema["properties"], "", set(schema.get("required", []))), "parameter"))


def expected_regions() -> dict[str, dict[str, str]]:
    """{page under docs/: {region: text}} as the schemas say now."""
    from git_hermit import config  # noqa: F401  (registers the config schema's completion)
    from git_hermit.evolvers import params, registry
    from git_hermit.model.schema import load_schema

    pages = {"configuration.md": {CONFIG_REGION: render_config_reference(load_schema("config"))}}
    for spec in registry.specs():
        pages[f"evolvers/{spec.name}.md"] = {PARAMS_REGION: render_params(params.params_schema(spec.name))}
    return pages


def _region(region: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN GENERATED {region} [^\n]*-->\n)(.*?)(<!-- END GENERATED {region} -->)", re.S)


def update(text: str, region: str, body: str) -> str | None:
    """``text`` with the region's body replaced; None when the page has no such region."""
    pattern = _region(region)
    if not pattern.search(text):
        return None
    return pattern.sub(lambda m: m[1] + body + "\n" + m[3], text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is stale")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="the docs directory (default: docs/)")
    args = parser.parse_args(argv)
    stale, missing = [], []
    for page, regions in expected_regions().items():
        path = args.docs / page
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        new = text
        for region, body in regions.items():
            updated = update(new, region, body)
            if updated is None:
                missing.append(f"{page} (no {region} region)")
                continue
            new = updated
        if new != text:
            stale.append(page)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for item in missing:
        print(f"error: docs/{item}: add the lines <!-- BEGIN GENERATED {item.split('no ')[1].split()[0]} "
              f"(scripts/gen_config_docs.py) --> and <!-- END GENERATED … -->", file=sys.stderr)
    if args.check and stale:
        print("error: stale generated docs: " + ", ".join(f"docs/{p}" for p in stale), file=sys.stderr)
        print("hint: run `python scripts/gen_config_docs.py` and commit the pages", file=sys.stderr)
        return 1
    for page in stale:
        print(f"wrote docs/{page}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
