"""Run naming and discovery: the refs a run owns and how to find its steps.

A run ``R`` owns ``refs/heads/hermit/R/step-NNNN`` and ``refs/tags/hermit/R/{best,final}``;
everything here derives those names or reads them in one ``for-each-ref``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from git_hermit.config import CONFIG_FILE, RUNS_DIR, RunConfig, load_config, parse_config
from git_hermit.errors import ConfigError, ConfigMissing, GitStateError, InputError
from git_hermit.gitio import Repo

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The seed commit's trailer naming the branch the run was initialised on: the branch that holds its
# config (and that step pull requests target)
BASE_TRAILER = "Hermit-Base-Branch"
_STEP_REF = re.compile(r"^refs/heads/hermit/(?P<run>[^/]+)/step-(?P<n>\d{4,})$")


def step_ref(run: str, step: int) -> str:
    return f"refs/heads/hermit/{run}/step-{step:04d}"


def best_tag(run: str) -> str:
    return f"refs/tags/hermit/{run}/best"


def final_tag(run: str) -> str:
    return f"refs/tags/hermit/{run}/final"


def run_dir(repo: Repo, run: str) -> Path:
    """The run's working area (ignored through info/exclude)."""
    return repo.work_tree / ".hermit" / "runs" / run


def step_dir(repo: Repo, run: str, step: int) -> Path:
    return run_dir(repo, run) / f"step-{step:04d}"


def eval_dir(ctx: RunContext, commit: str, split: str) -> Path:
    """Where ``commit``'s rollouts on ``split`` live (shared by evaluate.py, which runs them, and
    budget.py, which counts what they spent: here, so neither imports the other)."""
    return run_dir(ctx.repo, ctx.run) / "evals" / f"{commit[:12]}-{split}"


def check_run_name(run: str) -> None:
    if not RUN_NAME.match(run) or run.endswith(".lock") or ".." in run:
        raise InputError(f"invalid run name {run!r}",
                         hint="use letters, digits, '.', '_' or '-', starting with a letter or digit")


def list_steps(repo: Repo, run: str, refs: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """The run's step branches as (step, commit), ascending — one git process, none when ``refs``
    (a listing of them) is given."""
    steps = []
    for ref, sha in (refs if refs is not None else repo.list_refs(f"refs/heads/hermit/{run}/")).items():
        match = _STEP_REF.match(ref)
        if match and match["run"] == run:
            steps.append((int(match["n"]), sha))
    return sorted(steps)


def list_runs(repo: Repo) -> list[str]:
    runs = set()
    for ref in repo.list_refs("refs/heads/hermit/"):
        match = _STEP_REF.match(ref)
        if match:
            runs.add(match["run"])
    return sorted(runs)


@dataclass(frozen=True)
class RunContext:
    """An open repository plus the run's validated config and its step branches."""

    repo: Repo
    config: RunConfig
    steps: tuple[tuple[int, str], ...]
    # the refs listed with the steps (open_run's with_refs): {name: sha}, a missing ref absent; None: not listed
    refs: dict[str, str] | None = None

    def read_ref(self, ref: str) -> str | None:
        """``ref`` as listed with the steps when it was, else read now."""
        if self.refs is not None and ref.startswith(("refs/notes/hermit/", f"refs/tags/hermit/{self.run}/",
                                                     f"refs/hermit/{self.run}/")):
            return self.refs.get(ref)
        return self.repo.read_ref(ref)

    @property
    def run(self) -> str:
        return self.config.run

    @property
    def tip(self) -> tuple[int, str]:
        """(step, commit) of the latest step branch: the adapter the next step evaluates."""
        return self.steps[-1]

    def step_commit(self, step: int) -> str:
        for n, sha in self.steps:
            if n == step:
                return sha
        raise GitStateError(f"run {self.run!r} has no step {step}",
                            hint=f"steps here: 0..{self.tip[0]} (see `git hermit log`)")


def seed_branch(repo: Repo, run: str) -> str | None:
    """The branch run ``run`` was initialised on (its seed commit's trailer): where its config lives."""
    seed = repo.read_ref(step_ref(run, 0))
    if seed is None:
        return None
    for key, value in repo.commit_info(seed).trailers:
        if key.lower() == BASE_TRAILER.lower() and value.strip():
            return value.strip()
    return None


def _config_elsewhere(repo: Repo, run: str | None, missing: ConfigMissing) -> ConfigMissing:
    """The error for a repository that holds a run's steps but not its config: it names the branch
    to check out (a clone on another branch, or before the branch was fetched) — never `init`, which
    would start a second run."""
    known = list_runs(repo)
    runs = [run] if run in known else ([] if run else known)
    if not runs:
        return missing
    homes = [(name, seed_branch(repo, name)) for name in runs]
    where = "; ".join(f"run {name!r}'s is on branch {branch!r}" if branch else
                      f"run {name!r}'s is in its seed commit hermit/{name}/step-0000" for name, branch in homes)
    branch = next((b for _, b in homes if b), None)
    checkout = f"`git checkout {branch}`" if branch else f"`git checkout -b main hermit/{runs[0]}/step-0000`"
    return ConfigMissing(
        f"this work tree has no config for {'run ' + repr(runs[0]) if len(runs) == 1 else 'runs ' + ', '.join(runs)}, "
        f"though the repository holds its steps: {where}",
        hint=f"check that branch out ({checkout}; `git fetch` first if it is not here), then rerun; "
             "`git hermit init` would start another run")


def open_run(repo: Repo, run: str | None = None, with_refs: bool = False) -> RunContext:
    """Load the run's config and steps; a clear error when the run has not been initialised, and one
    naming the branch to check out when the repository holds the run but the work tree not its config.

    ``with_refs``: the notes refs, the run's tags and its records refs are listed in the same git process
    as its step branches and kept in ``refs`` (for a command that reads them right after and writes nothing)."""
    try:
        config = (committed_config(repo, run) if repo.bare
                  else load_config(repo.work_tree, run, cache_dir=repo.common_dir / "hermit" / "cache"))
    except ConfigMissing as missing:
        raise _config_elsewhere(repo, run, missing) from None
    refs = None
    if with_refs:
        refs = repo.list_refs(f"refs/heads/hermit/{config.run}/", "refs/notes/hermit/",
                               f"refs/tags/hermit/{config.run}/", f"refs/hermit/{config.run}/")
    steps = list_steps(repo, config.run, refs)
    if not steps:
        raise GitStateError(f"run {config.run!r} has no step branches (refs/heads/hermit/{config.run}/step-0000)",
                            hint="run `git hermit init` to create the seed, or fetch the run's branches")
    return RunContext(repo=repo, config=config, steps=tuple(steps), refs=refs)


def committed_config(repo: Repo, run: str | None) -> RunConfig:
    """A bare repository's run config, as committed (it has no work tree to read one from): HEAD's
    ``hermit.yaml`` and ``hermit/*.yaml``, then each run's seed commit (``step-0000`` holds the
    config its `init` wrote). As in a work tree, the root ``hermit.yaml``'s run is the default."""
    found: dict[str, RunConfig] = {}
    default = None
    head = repo.rev_parse("HEAD")
    candidates: list[tuple[str, str]] = []
    if head:
        candidates.append((head, CONFIG_FILE))
        candidates += [(head, f"{RUNS_DIR}/{name}") for name in sorted(repo.ls_tree(head, RUNS_DIR))
                       if name.endswith(".yaml") and "/" not in name]
    for name in list_runs(repo):
        seed = repo.read_ref(step_ref(name, 0))
        if seed:
            candidates += [(seed, CONFIG_FILE), (seed, f"{RUNS_DIR}/{name}.yaml")]
    for commit, path in candidates:
        blob = repo.read_blob(commit, path)
        if blob is None:
            continue
        config = parse_config(blob.decode("utf-8", "replace"), source=f"{path} at {commit[:12]}")
        if commit == head and path == CONFIG_FILE:
            default = config.run
        found.setdefault(config.run, config)
    if not found:
        raise ConfigError("this bare repository has no committed hermit.yaml (on HEAD or a run's step-0000)",
                          hint="push the branch that holds the run's hermit.yaml, or `git hermit push` the run")
    if run is not None:
        if run not in found:
            raise ConfigError(f"no run named {run!r} (runs here: {', '.join(sorted(found))})", hint="check --run")
        return found[run]
    if default is None and len(found) > 1:
        raise ConfigError(f"this repository has several runs ({', '.join(sorted(found))})",
                          hint="choose one with --run NAME")
    return found[default] if default is not None else next(iter(found.values()))


def parse_step_name(text: str) -> int | None:
    """``step-3`` / ``step-0003`` / ``3`` → 3; anything else → None."""
    match = re.fullmatch(r"(?:step-)?(\d{1,6})", text.strip())
    return int(match.group(1)) if match else None
