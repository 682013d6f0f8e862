"""The tests' one project builder (issue 26, item 7): `git hermit init` in a repository, then the
benchmark (tasks.jsonl, rows/<split>.txt), the scripts a test runs (acting agents, verifiers) and
hermit.yaml as the test needs it, optionally committed.

Every helper that makes a project for its tests (the ahe step driver's ``make_run``, the
continual-harness and evo-harness runs, the rollout end-to-end projects, ...) is a thin caller of
``build_project``, so the order of the set-up and the way hermit.yaml is written are the same
everywhere. hermit.yaml is read and written through ``read_config``/``write_config`` (and
``edit_config``), one YAML dump for all (key order kept).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from conftest import git
from support.cli_helpers import hermit

Config = dict[str, Any]
DEFAULT_PROMPT = "What is the answer of task {id}?"


def task_rows(answers: Mapping[str, str], prompt: str = DEFAULT_PROMPT) -> list[dict[str, str]]:
    """tasks.jsonl rows for ``answers`` (task id: answer); ``prompt`` is formatted with ``id``."""
    return [{"id": task, "prompt": prompt.format(id=task), "answer": answer} for task, answer in answers.items()]


def read_config(repo: Path) -> Config:
    return yaml.safe_load((repo / "hermit.yaml").read_text())


def write_config(repo: Path, config: Config) -> None:
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def edit_config(repo: Path, **keys: Any) -> None:
    """Replace hermit.yaml's top-level ``keys``; a key given None is removed."""
    config = read_config(repo)
    _replace_keys(config, keys)
    write_config(repo, config)


def write_script(path: Path, text: str) -> Path:
    """An executable script (an acting agent, a verifier) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def build_project(repo: Path, *, init_args: Sequence[str] = (), initialised: bool = False,
                  tasks: Sequence[Mapping[str, Any]] | None = None,
                  rows: Mapping[str, Sequence[str]] | None = None,
                  files: Mapping[Path, str] | None = None,
                  scripts: Mapping[Path, str] | None = None,
                  config: Mapping[str, Any] | None = None,
                  edit: Callable[[Config], None] | None = None,
                  commit: str | None = None) -> Config:
    """`git hermit init *init_args` in ``repo`` (an existing git repository), then, each only when
    given: ``tasks`` as tasks.jsonl (one JSON object a line), ``rows`` as rows/<split>.txt (one row
    a line), ``files`` ({path: text}) and ``scripts`` (the same, executable), hermit.yaml with
    ``config``'s top-level keys replaced (None removes a key) and then ``edit`` applied to it in
    place, and everything committed on the current branch with the message ``commit``. Returns
    hermit.yaml as written (as init wrote it when neither ``config`` nor ``edit`` is given).

    ``initialised`` skips the init: for a test whose subject is an init run some other way (an
    installed package's executable), which then builds on what that init wrote."""
    if not initialised:
        done = hermit(repo, "init", *init_args)
        assert done.code == 0, done.err
    if tasks is not None:
        (repo / "tasks.jsonl").write_text("".join(json.dumps(dict(task)) + "\n" for task in tasks))
    if rows is not None:
        (repo / "rows").mkdir(exist_ok=True)
        for split, lines in rows.items():
            (repo / "rows" / f"{split}.txt").write_text("".join(f"{line}\n" for line in lines))
    for path, text in (files or {}).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path, text in (scripts or {}).items():
        write_script(path, text)
    written = read_config(repo)
    if config is not None or edit is not None:
        _replace_keys(written, config or {})
        if edit is not None:
            edit(written)
        write_config(repo, written)
    if commit is not None:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", commit)
    return written


def _replace_keys(config: Config, keys: Mapping[str, Any]) -> None:
    for key, value in keys.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
