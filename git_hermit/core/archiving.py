"""`finalize`'s outputs: the adapter card (CARD.md beside the adapter) and, with `--archive`, the
final snapshot as a file. A continual-harness or evo-harness run's archive holds the host-native
layout for the run's ``host`` (what `deploy` writes: context file, skills, sub-agents, memory), at
the archive's root, so unpacking it in a project and starting the host uses the learned harness
without git-hermit. Other runs archive the adapter directory as committed (their hooks need an
interpreter path only `deploy` on the target machine knows). Every archive holds the CARD.md.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from git_hermit.adapter.deploy import RECORD_NAME, deploy
from git_hermit.adapter.plugins.base import CARD_FILE
from git_hermit.adapter.templates import load_template
from git_hermit.config import RunConfig
from git_hermit.errors import InputError
from git_hermit.evolvers import registry
from git_hermit.gitio import Repo
from git_hermit.atomic import write_atomic

if TYPE_CHECKING:
    from git_hermit.core.card import CardText
    from git_hermit.core.runs import RunContext


def archive_format(archive: Path) -> str:
    if archive.exists() and archive.is_dir():
        raise InputError(f"{archive} is a directory", hint="give a file name ending in .tar, .tar.gz or .zip")
    return "zip" if archive.suffix == ".zip" else "tar.gz" if archive.name.endswith((".tar.gz", ".tgz")) else "tar"


def write_card(ctx: RunContext, commit: str, card_text: CardText) -> tuple[Path, str]:
    """CARD.md of ``commit`` beside the run's adapter directory (core/card.card_path); its path and
    text. Like ``.hermit/``, it is listed in info/exclude: an output finalize regenerates, never
    committed by git-hermit, so `git status` stays as the user left it."""
    from git_hermit.core.card import build_card, card_path
    text = card_text(build_card(ctx, commit))
    path = card_path(ctx)
    write_atomic(path, text.encode("utf-8"), durable=True)
    ctx.repo.info_exclude_add("/" + path.relative_to(ctx.repo.work_tree).as_posix())
    return path, text


def write_archive(repo: Repo, config: RunConfig, commit: str, archive: Path, *, card: str | None = None) -> str:
    """Write ``commit``'s adapter (and ``card`` as CARD.md at the archive's root) to ``archive``;
    returns the layout written (``native <host>`` | ``adapter``)."""
    fmt = archive_format(archive)
    # evolvers whose snapshot is meant to run natively on the host (seeds 001 and 002) say so
    spec = registry.for_template(load_template(config.template).id)
    native = spec is not None and spec.native_archive
    with tempfile.TemporaryDirectory(prefix="hermit-archive-") as tmp:
        adapter, out = Path(tmp) / "adapter", Path(tmp) / "native"
        if native:
            repo.materialise(commit, config.adapter, adapter)
            deploy(adapter, out, config.host)
            (out / RECORD_NAME).unlink()          # the record names this temporary directory
        else:
            repo.materialise(commit, config.adapter, out / Path(config.adapter).name)
        if card is not None:
            (out / CARD_FILE).write_text(card, encoding="utf-8")
        _pack(out, archive.resolve(), fmt)
    return f"native {config.host}" if native else "adapter"


def _pack(root: Path, archive: Path, fmt: str) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    partial = archive.with_name(archive.name + ".partial")
    if fmt == "zip":
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                member = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                member.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
                member.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(member, path.read_bytes())
    else:
        with tarfile.open(partial, "w:gz" if fmt == "tar.gz" else "w") as tf:
            for path in files:
                data = path.read_bytes()
                info = tarfile.TarInfo(path.relative_to(root).as_posix())
                info.size, info.mode = len(data), 0o755 if os.access(path, os.X_OK) else 0o644
                tf.addfile(info, io.BytesIO(data))
    partial.replace(archive)
