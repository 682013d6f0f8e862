"""The docs site: the generated configuration reference matches the schemas, every key is in it,
the README's and CONTRIBUTING's links reach a page and heading that exist, and mkdocs builds it
--strict (links and anchors checked)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_config_docs.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


def test_the_committed_config_reference_is_what_the_schemas_generate():
    done = _run("--check")
    assert done.returncode == 0, done.stderr


def test_a_hand_edit_of_a_generated_table_is_stale_and_the_generator_restores_it(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    page = docs / "configuration.md"
    original = page.read_text()
    page.write_text(original.replace("one rollout's wall clock, in seconds", "one rollout's wall clock"))
    stale = _run("--check", "--docs", str(docs))
    assert stale.returncode == 1 and "docs/configuration.md" in stale.stderr, stale.stderr
    assert page.read_text() != original                                   # --check wrote nothing
    assert _run("--docs", str(docs)).returncode == 0
    assert page.read_text() == original
    assert _run("--check", "--docs", str(docs)).returncode == 0


def test_a_page_without_its_region_is_an_error_naming_it(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "evolvers" / "ahe.md").write_text("# AHE Adapter\n")
    done = _run("--docs", str(docs))
    assert done.returncode == 1 and "docs/evolvers/ahe.md (no params region)" in done.stderr, done.stderr


def _key_paths(schema: dict, prefix: str = "") -> list[str]:
    paths = []
    for name, node in schema.get("properties", {}).items():
        paths.append(prefix + name)
        paths += _key_paths(node, f"{prefix}{name}.")
        each = node.get("additionalProperties")
        if isinstance(each, dict):
            paths += _key_paths(each, f"{prefix}{name}.<name>.")
    return paths


def test_every_schema_key_and_default_is_in_the_rendered_reference():
    from git_hermit import config  # noqa: F401  (completes the schema with the hosts)
    from git_hermit.evolvers import params, registry
    from git_hermit.model.schema import load_schema
    gen = _generator()
    schema = load_schema("config")
    text = gen.render_config_reference(schema)
    missing = [key for key in _key_paths(schema) if f"| `{key}` |" not in text and f"## `{key}`\n" not in text]
    assert missing == [], missing
    assert "| `trainer.epochs` | integer (≥ 1) | `10` |" in text
    for spec in registry.specs():
        table = gen.render_params(params.params_schema(spec.name))
        for key, node in params.params_schema(spec.name)["properties"].items():
            default = node.get("default")
            shown = "(below)" if isinstance(default, dict) else f"`{json.dumps(default) if not isinstance(default, str) else default}`"
            assert f"| `{key}` |" in table and shown in table.split(f"| `{key}` |", 1)[1].split("\n")[0], (spec.name, key)


def test_a_changed_schema_renders_a_changed_reference():
    from git_hermit import config  # noqa: F401
    from git_hermit.model.schema import load_schema
    gen = _generator()
    schema = load_schema("config")
    before = gen.render_config_reference(schema)
    schema["properties"]["trainer"]["properties"]["epochs"]["default"] = 12
    schema["properties"]["trainer"]["properties"]["new_key"] = {"type": "boolean", "description": "a new key"}
    after = gen.render_config_reference(schema)
    assert "| `trainer.epochs` | integer (≥ 1) | `12` |" in after and "`12`" not in before
    assert "| `trainer.new_key` | boolean | — | a new key |" in after


def _slugs(markdown: str) -> set[str]:
    """The anchors mkdocs (Python-Markdown's toc) gives a page's headings."""
    slugs = set()
    for line in markdown.splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            text = re.sub(r"[`*]", "", match[1]).lower()
            slugs.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text)).strip("-"))
    return slugs


@pytest.mark.parametrize("source", ["README.md", "CONTRIBUTING.md"])
def test_the_links_into_docs_reach_a_page_and_heading(source):
    text = (ROOT / source).read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert links, f"{source} links no docs page"
    broken = []
    for page, anchor in links:
        path = ROOT / page
        if not path.is_file():
            broken.append(page)
        elif anchor and anchor not in _slugs(path.read_text()):
            broken.append(f"{page}#{anchor}")
    assert broken == [], broken


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if p not in nav] == []


def test_mkdocs_builds_the_site_strict(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    done = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()
