#!/usr/bin/env python3
"""Write the docs' reference tables from their sources of truth, so they cannot go stale.

The hermit.yaml keys come from ``schemas/config.schema.json`` (completed with the registered hosts,
as ``init`` commits it), each evolver's parameters from its ``params.schema.json`` (with the
framework's ``k``, ``timeout_as``, ``task_field``), the architecture's layers from the
import-linter contracts in ``pyproject.toml``. Only the text between a page's
``<!-- BEGIN GENERATED … -->`` and ``<!-- END GENERATED … -->`` lines is written; the prose around
it is the page's own. ``--check`` writes nothing and exits 1 naming every stale page
(``tests/test_docs.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG_REGION = "config-reference"
PARAMS_REGION = "params"
CONTRACTS_REGION = "import-contracts"
HOSTS_REGION = "hosts"


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


def render_contracts(pyproject: dict[str, Any]) -> str:
    """The import-linter contracts: the layers top to bottom, then every other contract."""
    def short(module: str) -> str:
        return "`" + module.removeprefix("git_hermit.") + "`"

    lines = []
    for contract in pyproject["tool"]["importlinter"]["contracts"]:
        lines += [f"**{contract['name']}** ({contract['type']})", ""]
        if contract["type"] == "layers":
            lines += ["| layer (imports only what is below it) |", "|---|"]
            lines += ["| " + " · ".join(short(m.strip()) for m in layer.split("|")) + " |"
                      for layer in contract["layers"]]
        elif contract["type"] == "forbidden":
            lines.append(f"- forbidden: {', '.join(short(m) for m in contract['forbidden_modules'])}")
            lines.append(f"- to: {', '.join(short(m) for m in contract['source_modules'])}")
        elif contract["type"] == "independence":
            lines.append(f"- {', '.join(short(m) for m in contract['modules'])}")
        lines.append("")
    return "\n".join(lines).rstrip()


def render_hosts(hosts: Any) -> str:
    """The registered hosts side by side: what deploy writes, logins, trajectories, the hook wire's rows."""
    def mark(value: Any) -> str:
        return {True: "yes", False: "no", None: "n/a"}.get(value, str(value))

    columns = [f"{h.name} (`{h.package}`)" for h in hosts]
    rows: list[tuple[str, list[str]]] = [
        ("context file", [f"`{h.layout.context_file}`" for h in hosts]),
        ("skills", [f"`{h.layout.skills_dir}/<name>/`" for h in hosts]),
        ("hooks config", [f"`{h.layout.hooks_config}`" if h.layout.hooks_config else "none (no hooks)" for h in hosts]),
        ("native sub-agents", [mark(h.layout.native_sub_agents) for h in hosts]),
        ("login files", [", ".join(f"`~/{h.login.user_dir}/{f}`" for f in h.login.files) for h in hosts]),
        ("trajectory formats", [", ".join(f"`{f}`" for f in h.trajectory_formats) for h in hosts]),
        ("learner sessions", [mark(h.learner) for h in hosts]),
    ]
    events = [", ".join(h.wire.events) if h.wire else "none" for h in hosts]
    rows.append(("hook events", events))
    names = sorted({row for h in hosts if h.wire for row in h.wire.capabilities})
    rows += [(f"`{row}`", [mark(h.wire.capabilities.get(row)) if h.wire else "n/a" for h in hosts]) for row in names]
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---|" * len(hosts)]
    lines += [f"| {name} | " + " | ".join(_cell(v) for v in values) + " |" for name, values in rows]
    return "\n".join(lines)


def expected_regions() -> dict[str, dict[str, str]]:
    """{page under docs/: {region: text}} as the schemas say now."""
    from git_hermit import config  # noqa: F401  (registers the config schema's completion)
    from git_hermit.evolvers import params, registry
    from git_hermit.hosts import registry as host_registry
    from git_hermit.model.schema import load_schema

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pages = {"configuration.md": {CONFIG_REGION: render_config_reference(load_schema("config"))},
             "architecture.md": {CONTRACTS_REGION: render_contracts(pyproject)},
             "hosts.md": {HOSTS_REGION: render_hosts(host_registry.hosts())}}
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
