"""`git hermit check`: run check_spec on a directory, a revision, or the run's adapter."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from git_hermit.adapter import runtime
from git_hermit.adapter.check_spec import Violation, check_adapter
from git_hermit.adapter.templates import Template, detect_template, list_templates, load_template
from git_hermit.config import load_config
from git_hermit.errors import ConfigError, InputError
from git_hermit.evolvers import registry
from git_hermit.gitio import Repo


@dataclass(frozen=True)
class CheckReport:
    target: str
    template: str
    violations: tuple[Violation, ...]
    runtime: runtime.RuntimeStatus | None = None   # the hook runtime it carries (None: the template has none)

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "error"]


def _template_for(directory: Path, repo: Repo | None, run: str | None, explicit: str | None) -> Template:
    if explicit:
        return load_template(explicit)
    if repo is not None:
        try:
            return load_template(load_config(repo.work_tree, run).template)
        except ConfigError:
            if run is not None:
                raise
    detected = detect_template(directory)
    if detected is None:
        raise InputError(f"cannot tell which template {directory} follows",
                         hint="pass --template " + "|".join(list_templates()))
    return detected


def run_check(*, repo: Repo | None, rev: str | None, directory: Path | None, run: str | None,
              template: str | None, hosts: bool, manifest: Path | None = None,
              run_host: str | None = None) -> CheckReport:
    """``run_host``: the host the adapter deploys for (default: the run's ``host:``, when there is a run)."""
    report = _run_check(repo=repo, rev=rev, directory=directory, run=run, template=template, hosts=hosts,
                        run_host=run_host)
    if manifest is None:
        return report
    # an evolver that writes a change manifest (ahe's Evolve Agent) holds it to "one change, one set
    # of files": the check is its folder's, found through the template's evolver
    spec = registry.for_template(report.template)
    if spec is None or spec.manifest_check is None:
        raise InputError(f"the {report.template} template's evolver writes no change manifest",
                         hint="drop --manifest, or check an adapter of a template whose evolver writes one: "
                              + ", ".join(s.template for s in registry.specs() if s.manifest_check))
    found = tuple(Violation(str(manifest), 1, "manifest-overlap", message)
                  for message in registry.load_function(spec.manifest_check)(manifest))
    return CheckReport(report.target, report.template, report.violations + found, report.runtime)


def _runtime_of(directory: Path, tmpl: Template) -> runtime.RuntimeStatus | None:
    def read(rel: str) -> bytes | None:
        path = directory / rel
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return runtime.identify(read, tmpl.fixed)


def _run_check(*, repo: Repo | None, rev: str | None, directory: Path | None, run: str | None,
               template: str | None, hosts: bool, run_host: str | None) -> CheckReport:
    if directory is not None:
        if not directory.is_dir():
            raise InputError(f"{directory} is not a directory", hint="pass the adapter's directory to --dir")
        tmpl = _template_for(directory, repo, run, template)
        return CheckReport(str(directory), tmpl.id,
                           tuple(check_adapter(directory, tmpl, hosts=hosts, run_host=run_host)),
                           _runtime_of(directory, tmpl))
    if repo is None:
        raise InputError("not in a git repository and no --dir given", hint="pass --dir DIR")
    config = load_config(repo.work_tree, run)
    tmpl = load_template(template or config.template)
    if rev is None:
        path = repo.work_tree / config.adapter
        return CheckReport(f"{config.adapter}/ (work tree)", tmpl.id,
                           tuple(check_adapter(path, tmpl, hosts=hosts, run_host=run_host or config.host)),
                           _runtime_of(path, tmpl))
    commit = repo.resolve_commit(rev)
    with tempfile.TemporaryDirectory(prefix="hermit-check-") as tmp:
        if repo.materialise(commit, config.adapter, Path(tmp)) == 0:
            raise InputError(f"{rev} has no {config.adapter}/ directory", hint="check the revision and the run")
        found = check_adapter(Path(tmp), tmpl, hosts=hosts, run_host=run_host or config.host)
        status = _runtime_of(Path(tmp), tmpl)
    # Paths in the report are relative to the adapter; prefix them so they point into the repo.
    return CheckReport(f"{config.adapter}/ at {commit[:12]}", tmpl.id, tuple(found), status)
