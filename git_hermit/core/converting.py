"""`git hermit convert REV --target HOST`: the adapter at REV (default: the run's final tag) as the
host's own plugin or package (hosts/<host>/layout.py), with its CARD.md. A conversion that would drop a
component is refused, one line per component, unless ``allow_lossy``; the plugin is built in a
temporary directory beside the output and renamed into place, so a refusal or a failure leaves
nothing behind and an existing output directory is never written into.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from git_hermit.adapter.components import inventory
from git_hermit.adapter.plugins import formats
from git_hermit.adapter.plugins.base import CARD_FILE, DEFAULT_PYTHON
from git_hermit.adapter.templates import load_template
from git_hermit.core.card import CardText, build_card
from git_hermit.core.runs import RunContext, final_tag
from git_hermit.errors import GitStateError, InputError, LossyConversion
from git_hermit.model.plugin_format import Carried, Dropped, PluginSpec

_PLUGIN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


@dataclass(frozen=True)
class Conversion:
    target: str
    title: str
    run: str
    commit: str
    output: Path
    plugin_dir: Path
    name: str
    version: str
    carried: tuple[Carried, ...]
    dropped: tuple[Dropped, ...]     # what --allow-lossy let go
    install: tuple[str, ...]

    @property
    def card(self) -> Path:
        return self.plugin_dir / CARD_FILE


def plugin_name(run: str) -> str:
    """A run's name as a plugin name (lowercase letters, digits and hyphens)."""
    name = re.sub(r"[^a-z0-9-]+", "-", run.lower()).strip("-")
    return name or "adapter"


def default_output(run: str, target: str) -> Path:
    return Path(f"{plugin_name(run)}-{target}-plugin")


def _check_output(output: Path) -> None:
    if output.is_symlink() or (output.exists() and not output.is_dir()):
        raise InputError(f"{output} exists and is not a directory", hint="give -o a new or empty directory")
    if output.is_dir() and any(output.iterdir()):
        raise InputError(f"{output} exists and is not empty",
                         hint="give -o a new or empty directory (convert never writes into an existing plugin)")
    if not output.parent.is_dir():
        raise InputError(f"{output.parent} does not exist", hint="create it first, or give -o another directory")


def resolve_commit(ctx: RunContext, rev: str | None) -> str:
    if rev is None:
        commit = ctx.repo.read_ref(final_tag(ctx.run))
        if commit is None:
            raise GitStateError(f"run {ctx.run!r} has no final adapter yet (no {final_tag(ctx.run)})",
                                hint="run `git hermit finalize` first, or name the revision to convert")
        return commit
    return ctx.repo.resolve_commit(rev)


def refusal(title: str, commit: str, dropped: list[Dropped]) -> LossyConversion:
    faithful = " or ".join(f"--target {fmt.target}" for fmt in formats().values() if fmt.carries_all)
    return LossyConversion(f"a {title} would drop {len(dropped)} component(s) of the adapter at {commit[:12]}:",
                           details=tuple(d.line() for d in dropped),
                           hint=f"convert with {faithful} (its plugins carry every component), or pass "
                                "--allow-lossy to write the plugin without them")


def convert(ctx: RunContext, rev: str | None, target: str, output: Path | None, card_text: CardText, *,
            allow_lossy: bool = False, python: str = DEFAULT_PYTHON, name: str | None = None) -> Conversion:
    """Write the plugin; returns what it carries and what it left out."""
    fmt = formats().get(target)
    if fmt is None:
        raise InputError(f"unknown target {target!r}", hint=f"use one of: {', '.join(formats())}")
    name = name or plugin_name(ctx.run)
    if not _PLUGIN_NAME.match(name):
        raise InputError(f"invalid plugin name {name!r}", hint="use lowercase letters, digits and hyphens (--name)")
    if not python.strip() or "\n" in python:
        raise InputError(f"invalid --python {python!r}", hint="a command on PATH (python3) or an absolute path")
    commit = resolve_commit(ctx, rev)
    output = (output or default_output(ctx.run, target)).absolute()
    adapter_dir = (ctx.repo.work_tree / ctx.config.adapter).absolute()
    if output == adapter_dir or adapter_dir in output.parents:
        raise InputError(f"{output} is inside the run's adapter directory",
                         hint="write the plugin outside the adapter (-o DIR)")
    _check_output(output)
    entries = ctx.repo.ls_tree(commit, ctx.config.adapter)
    if not entries:
        raise GitStateError(f"commit {commit[:12]} has no {ctx.config.adapter}/ directory",
                            hint="name a commit of the run (a step branch, its best or final tag)")
    template = load_template(ctx.config.template)
    work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        adapter = work / "adapter-at-commit"
        ctx.repo.materialise(commit, ctx.config.adapter, adapter)
        files = sorted(p.relative_to(adapter).as_posix() for p in adapter.rglob("*")
                       if p.is_file() or p.is_symlink())
        inv = inventory(files, template, lambda rel: (adapter / rel).read_bytes()
                        if (adapter / rel).is_file() and not (adapter / rel).is_symlink() else None)
        dropped = fmt.dropped(inv)
        if dropped and not allow_lossy:
            raise refusal(fmt.title, commit, dropped)
        info = ctx.repo.commit_info(commit)
        step = next((n for n, sha in ctx.steps if sha == commit), None)
        version = f"0.{step if step is not None else 0}.0+g{commit[:12]}"
        trailer_step = next((v for k, v in info.trailers if k == "Hermit-Step"), None)
        where = f"step {step}" if step is not None else f"step {trailer_step}" if trailer_step else "a commit"
        spec = PluginSpec(name=name, version=version, python=python, output=output,
                          description=f"The {ctx.run} adapter ({ctx.config.template}, {where}, "
                                      f"commit {commit[:12]}), trained by git-hermit",
                          card=card_text(build_card(ctx, commit)))
        built = work / "plugin"
        built.mkdir()
        written = fmt.write(inv, adapter, built, spec)
        if output.is_dir():
            output.rmdir()         # empty (checked above): the rename takes its place
        os.replace(built, output)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Conversion(target=fmt.target, title=fmt.title, run=ctx.run, commit=commit, output=output,
                      plugin_dir=(output / written.plugin_dir).resolve() if written.plugin_dir != "." else output,
                      name=name, version=version, carried=written.carried, dropped=tuple(dropped),
                      install=written.install)
