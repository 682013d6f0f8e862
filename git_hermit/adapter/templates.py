"""Adapter templates: load `templates/<dir>/template.yaml`, write a seed adapter, classify paths.

A template declares which adapter files are learnable (glob patterns), which are fixed (copied
byte for byte from the shipped hooks runtime), which seed files it takes from
``templates/shared/`` (one copy for several templates, e.g. ``run_tests.py``), and which check_spec
rules hold for it; every other file in its folder is the seed adapter that `git hermit init` writes.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Callable

import yaml

from git_hermit import plugins, resources
from git_hermit.adapter import runtime
from git_hermit.errors import HermitError, InputError, SchemaError

TEMPLATE_FILE = "template.yaml"
# Files in a template folder that are never part of the seed adapter.
_NOT_SEED = re.compile(r"(^|/)(__pycache__|\.pytest_cache)(/|$)|\.pyc$|(^|/)\.DS_Store$")


@dataclass(frozen=True)
class Template:
    """One adapter template as declared by its template.yaml."""

    id: str                          # "ahe@1.0"
    name: str                        # "ahe"
    version: str                     # "1.0"
    root: Path                       # templates/<dir>
    context_file: str                # "AGENTS.md"
    learnable: tuple[str, ...] = field(repr=False)  # glob patterns relative to the adapter dir
    # adapter path -> shipped source file (the mappings below take no part in hashing)
    fixed: dict[str, Path] = field(repr=False, hash=False)
    checks: tuple[str, ...] = field(repr=False)      # check_spec rule ids, in the order they run
    summary: str = field(default="", repr=False)
    context_export: str | None = None          # a copy kept byte-equal to context_file
    required: tuple[str, ...] = field(default=(), repr=False)  # files every adapter of it has
    detect: tuple[str, ...] = field(default=(), repr=False)    # paths that identify the layout
    files: dict[str, Any] = field(default_factory=dict, repr=False, hash=False)     # component -> path or glob(s)
    limits: dict[str, int] = field(default_factory=dict, repr=False, hash=False)    # size and count limits
    settings: dict[str, Any] = field(default_factory=dict, repr=False, hash=False)  # seed_rules, memory_header …
    # seed files kept once for several templates (templates/shared/): adapter path -> shipped file
    shared: dict[str, Path] = field(default_factory=dict, repr=False, hash=False)

    def seed_files(self) -> list[str]:
        """Relative paths of the seed adapter's own files (its folder's and its shared ones; the
        fixed ones excluded), sorted."""
        return sorted(set(_seed_files(self.root)) | set(self.shared))

    def seed_source(self, rel: str) -> Path:
        """Where seed file ``rel`` is shipped: templates/shared/ or the template's own folder."""
        return self.shared.get(rel, self.root / rel)


def list_templates() -> list[str]:
    """The ids of the installed templates, sorted."""
    return sorted(_all_templates())


def load_template(template_id: str) -> Template:
    """The template with this id; a bare name ("ahe") picks its only or highest version."""
    templates = _all_templates()
    if template_id in templates:
        return templates[template_id]
    versions = sorted((t for t in templates.values() if t.name == template_id),
                      key=lambda t: tuple(int(p) if p.isdigit() else 0 for p in t.version.split(".")))
    if versions:
        return versions[-1]
    raise InputError(f"unknown template {template_id!r}",
                     hint="choose one of " + ", ".join(sorted(templates)))


def write_seed(template: Template, dest: Path) -> list[str]:
    """Write the seed adapter (seed files + fixed files) into ``dest``; return the paths, sorted.

    Refuses, before writing anything, when a file it would write already exists with other
    content, so an existing adapter is never half-overwritten.
    """
    dest = Path(dest)
    sources = {rel: template.seed_source(rel) for rel in template.seed_files()}
    for rel, source in template.fixed.items():
        if not source.is_file():
            raise HermitError(f"the shipped file {source} is missing from the installation",
                              hint="reinstall git-hermit")
        sources[rel] = source
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} exists and is not a directory", hint="choose another adapter directory")
    clashes = [rel for rel, source in sources.items()
               if (dest / rel).exists() and (not (dest / rel).is_file()
                                             or (dest / rel).read_bytes() != source.read_bytes())]
    if clashes:
        raise InputError(f"{dest / clashes[0]} already exists with other content"
                         + (f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""),
                         hint="remove the existing adapter files or choose another adapter directory")
    for rel, source in sources.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        shutil.copymode(source, target)  # keeps scripts executable
    return sorted(sources)


def detect_template(adapter_dir: Path) -> Template | None:
    """The template whose layout markers all exist in ``adapter_dir`` (most markers wins).

    Between templates with as many markers, the one that claims more of the adapter's files
    (learnable, fixed or seed) wins, so a new template needs no marker file of its own; None when
    none matches or they still tie (the caller then asks for the template by name).
    """
    adapter_dir = Path(adapter_dir)
    matches = [t for t in _all_templates().values()
               if t.detect and all((adapter_dir / marker).exists() for marker in t.detect)]
    if not matches:
        return None
    files = [p.relative_to(adapter_dir).as_posix() for p in adapter_dir.rglob("*")
             if p.is_file() and not _NOT_SEED.search(p.relative_to(adapter_dir).as_posix())
             and ".git" not in p.relative_to(adapter_dir).parts]

    def claimed(t: Template) -> int:
        seed = set(t.seed_files())
        return sum(1 for rel in files if rel in seed or is_learnable(t, rel) or is_fixed(t, rel))

    ranked = sorted(((len(t.detect), claimed(t), t.id) for t in matches), reverse=True)
    if len(ranked) > 1 and ranked[0][:2] == ranked[1][:2]:
        return None
    return _all_templates()[ranked[0][2]]


def is_learnable(template: Template, path: str) -> bool:
    """True when a learner may create, edit or delete ``path`` (relative to the adapter dir)."""
    path = _normalise(path)
    return not is_fixed(template, path) and any(glob_match(p, path) for p in template.learnable)


def is_fixed(template: Template, path: str) -> bool:
    """True when ``path`` is one of the files copied unchanged from the shipped hooks runtime (or
    a file of an older runtime version, which an adapter committed with it still carries)."""
    path = _normalise(path)
    return path in template.fixed or path in runtime.runtime_paths(template.fixed)


def glob_match(pattern: str, path: str) -> bool:
    """Match a relative POSIX path: ``*`` and ``?`` stay within a segment, ``**`` spans segments."""
    return _glob_regex(pattern).match(_normalise(path)) is not None


# --------------------------------------------------------------------------------------------
# Loading


@cache
def _glob_regex(pattern: str) -> re.Pattern[str]:
    parts = pattern.strip("/").split("/")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        segment = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part)
        out.append(segment if last else segment + "/")
    return re.compile("".join(out) + r"\Z")


def _normalise(path: str) -> str:
    path = str(path).replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def _seed_files(root: Path) -> list[str]:
    files = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel != TEMPLATE_FILE and not _NOT_SEED.search(rel):
            files.append(rel)
    return sorted(files)


def _all_templates() -> dict[str, Template]:
    return _load_all(resources.templates_dir(), plugins.template_roots())


@cache
def _load_all(templates_root: Path, plugin_roots: tuple[Path, ...] = ()) -> dict[str, Template]:
    """The shipped templates (templates/<dir>/) and those installed evolver plugins ship."""
    templates: dict[str, Template] = {}
    spec_files = sorted(templates_root.glob(f"*/{TEMPLATE_FILE}")) + [r / TEMPLATE_FILE for r in plugin_roots]
    for spec_file in spec_files:
        template = _parse(spec_file)
        if template.id in templates:
            raise SchemaError(f"template {template.id!r} is declared twice ({spec_file})",
                              hint="reinstall git-hermit")
        templates[template.id] = template
    return templates


_KNOWN_KEYS = {"id", "name", "version", "summary", "context_file", "context_export", "learnable",
               "fixed", "files", "required", "detect", "checks", "limits", "shared"}


def _parse(spec_file: Path) -> Template:
    """Build a Template from its template.yaml; a malformed file is an installation error."""
    def bad(what: str) -> SchemaError:
        return SchemaError(f"{spec_file}: {what}", hint="reinstall git-hermit (a template file is damaged)")

    try:
        raw = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise bad(f"not valid YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise bad("not a mapping")
    for key in ("id", "name", "version", "context_file", "learnable", "checks"):
        if key not in raw:
            raise bad(f"missing key {key!r}")
    name, version = str(raw["name"]), str(raw["version"])
    if raw["id"] != f"{name}@{version}":
        raise bad(f"id {raw['id']!r} is not {name}@{version}")
    fixed_raw = raw.get("fixed") or {}
    if not isinstance(fixed_raw, dict):
        raise bad("'fixed' is not a mapping")
    fixed = {_normalise(rel): _shipped_path(str(source)) for rel, source in fixed_raw.items()}
    shared_raw = raw.get("shared") or {}
    if not isinstance(shared_raw, dict) or not all(str(s).startswith("templates/shared/") for s in shared_raw.values()):
        raise bad("'shared' is not a mapping of adapter paths to templates/shared/ files")
    shared = {_normalise(rel): _shipped_path(str(source)) for rel, source in shared_raw.items()}
    string_lists = {key: _string_tuple(raw.get(key) or (), key, bad)
                    for key in ("learnable", "checks", "required", "detect")}
    return Template(
        id=raw["id"], name=name, version=version, root=spec_file.parent,
        context_file=str(raw["context_file"]),
        learnable=string_lists["learnable"], fixed=fixed, checks=string_lists["checks"],
        summary=" ".join(str(raw.get("summary") or "").split()),
        context_export=raw.get("context_export"),
        required=string_lists["required"], detect=string_lists["detect"],
        files=dict(raw.get("files") or {}),
        limits={str(k): int(v) for k, v in (raw.get("limits") or {}).items()},
        settings={k: v for k, v in raw.items() if k not in _KNOWN_KEYS},
        shared=shared,
    )


def _string_tuple(value: Any, key: str, bad: Callable[[str], Exception]) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise bad(f"{key!r} is not a list of strings")
    return tuple(value)


def _shipped_path(source: str) -> Path:
    """'hooks/agent/x.py' -> <installed hooks folder>/agent/x.py (wheel or checkout)."""
    folder, _, rest = source.partition("/")
    return resources.data_dir(folder) / rest
