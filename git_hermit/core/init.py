"""`git hermit init`: write hermit.yaml and the seed adapter, commit them, create step-0000.

The seed commit is made with plumbing on top of HEAD; the current branch (when HEAD is a
branch) and ``hermit/<run>/step-0000`` move to it in one ref transaction, and only the new
paths are added to the index, so the user's other staged work stays as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from git_hermit.adapter.check_spec import check_adapter
from git_hermit.adapter.templates import load_template, write_seed
from git_hermit.config import (CONFIG_FILE, RUNS_DIR, SCHEMA_LINK, config_paths, config_schema_text, parse_config,
                               render_default_config)
from git_hermit.core.commits import step_message
from git_hermit.core.example_benchmark import example_files
from git_hermit.core.runs import BASE_TRAILER, check_run_name, list_runs, step_ref
from git_hermit.core.workflow import INSTALL_VARIABLE, WORKFLOW_PATH, this_installation, workflow_text
from git_hermit.errors import CheckFailed, InputError
from git_hermit.evolvers import registry
from git_hermit.gitio import FileChange, RefUpdate, Repo, ZERO_SHA, configure_notes_rewrite, files_in_directory


@dataclass(frozen=True)
class InitResult:
    run: str
    template: str
    commit: str
    config_path: str
    adapter_dir: str
    files: tuple[str, ...]
    branch: str | None          # the user's branch that received the seed commit, if any
    workflow: str | None = None # the GitHub Actions workflow written (--github)
    install_variable: str | None = None   # the repository variable the workflow installs git-hermit from
    detached: bool = False      # HEAD was detached: it moved to the seed commit itself, no branch did


def init_run(repo: Repo, *, template_id: str | None = None, run: str | None = None,
             adapter_dir: str | None = None, example: bool = False, github: bool = False) -> InitResult:
    template = load_template(template_id or registry.default_template())
    run = run or template.name
    check_run_name(run)
    if run in list_runs(repo) or repo.list_refs(f"refs/heads/hermit/{run}/") or repo.read_ref(f"refs/heads/hermit/{run}"):
        raise InputError(f"a run named {run!r} already exists in this repository",
                         hint="choose another name with --run NAME (see `git hermit log --run NAME`)")
    existing = config_paths(repo.work_tree)
    for path in existing:
        if parse_config(path.read_text(), source=path.name).run == run:
            raise InputError(f"{path.relative_to(repo.work_tree)} already configures run {run!r}",
                             hint="choose another name with --run NAME")
    config_rel = CONFIG_FILE if not (repo.work_tree / CONFIG_FILE).exists() else f"{RUNS_DIR}/{run}.yaml"
    adapter_rel = (adapter_dir or ("adapter" if not existing else f"adapter-{run}")).strip("/")
    if not adapter_rel or adapter_rel.startswith("..") or Path(adapter_rel).is_absolute():
        raise InputError(f"--adapter-dir must be a directory inside the repository, not {adapter_dir!r}")
    target = repo.work_tree / adapter_rel
    if target.exists() and any(target.iterdir()):
        raise InputError(f"{adapter_rel}/ already exists and is not empty",
                         hint="choose another directory with --adapter-dir DIR")
    if (repo.work_tree / config_rel).exists():
        raise InputError(f"{config_rel} already exists", hint="choose another run name with --run NAME")

    extra = example_files() if example else {}
    taken = sorted(path for path in extra if (repo.work_tree / path).exists())
    if taken:
        raise InputError(f"--example would overwrite {', '.join(taken)}",
                         hint="run `git hermit init` without --example, or move those files away first")
    extra[SCHEMA_LINK] = config_schema_text()   # committed: the config's $schema line resolves in every clone
    config_text = render_default_config(run=run, template=template.id, adapter=adapter_rel, config_path=config_rel,
                                        example=example, github=github)
    parse_config(config_text, source=config_rel)   # the file we write must load
    with tempfile.TemporaryDirectory(prefix="hermit-seed-") as tmp:
        seed = Path(tmp) / "adapter"
        seed.mkdir()
        written = write_seed(template, seed)
        problems = [v for v in check_adapter(seed, template) if v.severity == "error"]
        if problems:   # a shipped template that fails its own checks is a packaging bug
            raise CheckFailed(f"the {template.id} seed fails check_spec: {problems[0]}")
        changes: dict[str, FileChange | None] = {
            f"{adapter_rel}/{rel}": change for rel, change in files_in_directory(seed).items()}
        changes[config_rel] = FileChange(config_text.encode())
        changes.update({path: FileChange(text.encode()) for path, text in extra.items()})
        head = repo.rev_parse("HEAD")
        branch = repo.head_branch()
        attributes = _attributes(repo, head, adapter_rel, template.context_export)
        if attributes is not None:
            changes[GITATTRIBUTES] = FileChange(attributes.encode())
        workflow = None
        source = None
        if github:
            if (repo.work_tree / WORKFLOW_PATH).exists() or (head and repo.read_blob(head, WORKFLOW_PATH)):
                raise InputError(f"{WORKFLOW_PATH} already exists", hint="remove it or run init without --github")
            source = this_installation()
            workflow = workflow_text(host=parse_config(config_text, source=config_rel).host, source=source)
            changes[WORKFLOW_PATH] = FileChange(workflow.encode())
            extra[WORKFLOW_PATH] = workflow
        # the branch the run starts from: its step pull requests are opened against it
        message = step_message(run=run, step=0, evolver=template.name, summary=f"seed adapter from {template.id}",
                               body=f"The seed adapter of template {template.id} and the run's {config_rel}.",
                               extra=[(BASE_TRAILER, branch)] if branch else None)
        commit = repo.write_commit(head, changes, message)
        updates = [RefUpdate(step_ref(run, 0), commit, ZERO_SHA)]
        if branch:
            updates.append(RefUpdate(f"refs/heads/{branch}", commit, head or ZERO_SHA))
        elif head:   # a detached HEAD moves to the seed commit, so the files written below are its, not untracked
            updates.append(RefUpdate("HEAD", commit, head))
        # Files first (a failure here leaves no refs); then the refs in one transaction.
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tmp) / "staged"
        shutil.copytree(seed, staged, symlinks=True)
        (repo.work_tree / config_rel).parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()
        shutil.move(str(staged), str(target))
        (repo.work_tree / config_rel).write_text(config_text)
        for rel, text in extra.items():
            (repo.work_tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo.work_tree / rel).write_text(text)
        stage_attributes = False
        if attributes is not None and _worktree_matches(repo, head, GITATTRIBUTES):
            (repo.work_tree / GITATTRIBUTES).write_text(attributes)
            stage_attributes = True
        repo.update_refs(updates, message=f"git hermit init {run}")
    if branch or head:
        repo.git("add", "--", config_rel, adapter_rel, *extra, *([GITATTRIBUTES] if stage_attributes else []))
    configure_notes_rewrite(repo)
    repo.info_exclude_add("/.hermit/")
    return InitResult(run=run, template=template.id, commit=commit, config_path=config_rel,
                      adapter_dir=adapter_rel, files=tuple(written), branch=branch,
                      workflow=WORKFLOW_PATH if workflow is not None else None, detached=branch is None and bool(head),
                      install_variable=INSTALL_VARIABLE if source is not None and source.requirement is None else None)


GITATTRIBUTES = ".gitattributes"


def _attributes(repo: Repo, head: str | None, adapter_rel: str, export: str | None) -> str | None:
    """``.gitattributes`` with the adapter's context export (``ADAPTER.md``, a byte-equal copy of
    ``AGENTS.md``) marked ``linguist-generated``, so GitHub collapses its diff and each prompt change
    is reviewed once; None when the template has no export or the line is already there."""
    if not export:
        return None
    line = f"/{adapter_rel}/{export} linguist-generated=true"
    current = (repo.read_blob(head, GITATTRIBUTES) or b"").decode("utf-8", "replace") if head else ""
    if line in current.splitlines():
        return None
    if current and not current.endswith("\n"):
        current += "\n"
    return current + "# git-hermit: a byte-equal copy of the prompt; collapsed in GitHub diffs\n" + line + "\n"


def _worktree_matches(repo: Repo, head: str | None, path: str) -> bool:
    """The work-tree file equals HEAD's (or both are absent): safe to overwrite and stage it."""
    full = repo.work_tree / path
    committed = repo.read_blob(head, path) if head else None
    if not full.exists():
        return committed is None
    return committed is not None and full.read_bytes() == committed

