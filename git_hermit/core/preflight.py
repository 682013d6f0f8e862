"""Preflight: before a command spends on rollouts or learner sessions, check what it will need —
the config's files, the agent / learner / judge programs, the keys and logins they use — and
name every missing thing in ONE error (so a step never runs its rollouts and then fails on a
missing learner). Also the warnings about work-tree edits a step will not use (or not record).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from git_hermit.config import CONFIG_FILE, RunConfig
from git_hermit.errors import AgentError, ConfigError, HermitError, InputError
from git_hermit.hosts import registry
from git_hermit.hosts.base import Host

if TYPE_CHECKING:
    from git_hermit.gitio import Repo

ONE_SHOT = {"llm": "openai", "openai": "openai", "anthropic": "anthropic"}
RELATIVE = "a config's paths are relative to the repository's root, hermit/<run>.yaml's too"
# Kinds in the order that picks the error's exit code: the most specific problem wins.
KINDS = {"binary": AgentError, "input": InputError, "config": ConfigError}


@dataclass(frozen=True)
class Problem:
    """One thing a command needs and does not have."""

    what: str     # what is missing ("the codex CLI was not found")
    where: str    # the setting that asks for it ("evolver.model.bin")
    hint: str     # what to do
    kind: str     # "binary" | "input" | "config" (KINDS)

    def line(self) -> str:
        return f"{self.what} ({self.where})"


@dataclass(frozen=True)
class PreflightReport:
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def error(self) -> HermitError | None:
        """One error naming every problem, of the most specific kind's class (exit code)."""
        if not self.problems:
            return None
        kind = next(k for k in KINDS if any(p.kind == k for p in self.problems))
        hints = list(dict.fromkeys(p.hint for p in self.problems if p.hint))
        if len(self.problems) == 1:
            return KINDS[kind](self.problems[0].line(), hint=hints[0] if hints else None)
        message = (f"{len(self.problems)} problems before anything runs: "
                   + "; ".join(f"({i}) {p.line()}" for i, p in enumerate(self.problems, 1)))
        return KINDS[kind](message, hint="; ".join(hints))


def preflight(config: RunConfig, *, splits: Iterable[str], learners: bool = True,
              cwd: Path | None = None) -> PreflightReport:
    """Every problem that would stop a command using ``splits`` (and the learners) midway."""
    base_dir = config.base_dir or cwd or Path.cwd()
    problems: list[Problem] = []
    problems += _paths(config, base_dir, list(splits))
    problems += _step_size(config, base_dir)
    problems += _program(config.agent.block(), "agent", cwd or Path.cwd())
    problems += _guarded(config.agent_env, "agent.pass_env")
    problems += _judge(config, base_dir)
    if learners:
        problems += _guarded(lambda: _evolver_refuses(config), "evolver")
        problems += _learners(config)
    from git_hermit.supervise.sandbox import spec_from_config   # its own refusal, collected with the rest
    problems += _guarded(lambda: spec_from_config(config.sandbox), "sandbox.enabled")
    return PreflightReport(tuple(problems))


def require(config: RunConfig, *, splits: Iterable[str], learners: bool = True) -> None:
    """Raise the one preflight error, if anything is missing."""
    error = preflight(config, splits=splits, learners=learners).error()
    if error is not None:
        raise error


def require_for_step(config: RunConfig) -> None:
    """`step` / `train`: the training split, the held-out split `train` ends with, the learners."""
    require(config, splits=step_splits(config), learners=True)


def step_splits(config: RunConfig) -> tuple[str, ...]:
    return ("train",) + (("test",) if config.split_path("test") else ())


def binary_problems(config: RunConfig) -> list[Problem]:
    """Only the missing agent and learner programs (what `doctor` reports)."""
    found = _program(config.agent.block(), "agent", Path.cwd()) + _learners(config)
    return [p for p in found if p.kind == "binary"]


def run_preflight(repo: Repo, run: str | None = None) -> PreflightReport:
    """`check`: the preflight of the run's `step` (config from the work tree)."""
    from git_hermit.config import load_config
    config = load_config(repo.work_tree, run)
    return preflight(config, splits=step_splits(config))


def configured_binaries(repo: Repo) -> list[str]:
    """`doctor`: every run's missing agent and learner programs, one line each (a config that does
    not load is `check`'s to report)."""
    from git_hermit.config import config_paths, parse_config
    lines = []
    for path in config_paths(repo.work_tree):
        try:
            config = parse_config(path.read_text(), source=path.name, path=path)
        except HermitError:
            continue
        lines += [f"run {config.run}: {p.line()}: {p.hint}" for p in binary_problems(config)]
    return lines


# --- paths ------------------------------------------------------------------------------------
def _paths(config: RunConfig, base_dir: Path, splits: list[str]) -> list[Problem]:
    problems = []
    tasks = config.tasks
    if not tasks.configured:
        problems.append(Problem("hermit.yaml has no tasks: block", "tasks", "e.g. tasks: {path: tasks.jsonl, id_field: id}",
                                "config"))
    elif tasks.harbor is not None:
        if not (base_dir / str(tasks.harbor)).is_dir():
            problems.append(Problem(f"Harbor task directory {tasks.harbor} not found at {base_dir / str(tasks.harbor)}",
                                    _setting(config, "tasks.harbor"),
                                    f"give the directory holding one sub-directory per task ({RELATIVE})", "input"))
    elif tasks.path is not None and not (base_dir / str(tasks.path)).is_file():
        problems.append(Problem(f"tasks file {tasks.path} not found at {base_dir / str(tasks.path)}",
                                _setting(config, "tasks.path"),
                                f"create it (one JSON object per line: id, prompt, answer) or fix tasks.path ({RELATIVE})",
                                "input"))
    for split in dict.fromkeys(splits):
        rows = config.split_path(split)
        if rows is None:
            problems.append(Problem(f"data: has no split {split!r}", f"data.{split}",
                                    f"add data: {{{split}: rows/{split}.txt}} (splits here: "
                                    f"{', '.join(config.splits()) or 'none'})", "config"))
        elif not (base_dir / rows).is_file():
            problems.append(Problem(f"rows file {rows} not found at {base_dir / rows}", _setting(config, f"data.{split}"),
                                    f"write one <task>#<attempt> per line, or fix the path ({RELATIVE})", "input"))
    return problems


def _setting(config: RunConfig, key: str) -> str:
    """The key, and the config file that sets it when that is not the root hermit.yaml."""
    return key if config.source == CONFIG_FILE else f"{config.source}: {key}"


def _step_size(config: RunConfig, base_dir: Path) -> list[Problem]:
    """``data.step_size`` for an evolver whose step is every trial row (ahe; seed 000: "one step =
    one AHE iteration over every trial row"): it must cover the train rows, or it would promise
    steps of fewer rows that no step runs."""
    from git_hermit.evolvers.params import data_step_size
    size = config.data.step_size
    rule = data_step_size(config.evolver_name)
    rows = config.split_path("train")
    if size is None or rule is None or rule.get("means") != "every-row" or rows is None \
            or not (base_dir / rows).is_file():
        return []
    k = config.train_k or 1      # a row line without #n is one row when the rows file decides k
    lines = [line.strip() for line in (base_dir / rows).read_text(encoding="utf-8", errors="replace").splitlines()]
    count = sum(1 if "#" in line else k for line in lines if line and not line.startswith("#"))
    if size >= count:
        return []
    return [Problem(f"data.step_size is {size}, fewer than the {count} rows of {rows}: {config.evolver_name} "
                    "runs every trial row in each step", "data.step_size",
                    f"remove data.step_size, or set it to {count} or more ({rule['why']})", "config")]


# --- programs, keys, logins -------------------------------------------------------------------
def _program(cfg: dict[str, Any], prefix: str, cwd: Path) -> list[Problem]:
    """The agent (or a session learner) ``cfg`` names: its binary, then its credentials (``cfg``'s
    backend is filled in: the agent's by AgentConfig, a learner's by the caller)."""
    backend = cfg["backend"]
    if backend == "command":
        argv = list(cfg.get("command") or [])
        if not argv:
            return [Problem("agent.command is empty", f"{prefix}.command",
                            'e.g. command: [./my-agent, "{prompt_file}", "{workspace}"]', "config")]
        return _executable(argv[0], f"{prefix}.command", cwd, "install it or give its path")
    if not registry.known(backend):
        return []
    host = registry.get(backend)
    problems = []
    if cfg.get("bin"):
        if shutil.which(str(cfg["bin"])) is None:
            problems.append(Problem(f"{cfg['bin']} is not an executable file or on PATH", f"{prefix}.bin",
                                    f"give the path of the {backend} CLI, or remove {prefix}.bin", "binary"))
    elif host.find() is None:
        problems.append(Problem(f"the {backend} CLI was not found", f"{prefix}.backend: {backend}",
                                f"`git hermit hosts install {backend}` installs the pinned {host.package}, "
                                f"or set {prefix}.bin to its path", "binary"))
    return problems + _credentials(cfg, host, prefix)


def _credentials(cfg: dict[str, Any], host: Host, prefix: str) -> list[Problem]:
    """What the host CLI authenticates with (mirrors agents/hosts.py): the user's login
    files with ``login:``/``home:``, else the key ``provider.env_key`` names."""
    provider = cfg.get("provider") or {}
    env_key = provider.get("env_key")
    backend = host.name
    default_dir, names, command = host.login.user_dir, host.login.files, host.login.command
    if cfg.get("login") or cfg.get("home"):
        source = Path(os.path.expanduser(str(cfg.get("home") or Path("~") / default_dir)))
        if not any((source / name).is_file() for name in names):
            return [Problem(f"no {backend} login: {source / names[0]} does not exist",
                            f"{prefix}.{'home' if cfg.get('home') else 'login'}",
                            f"log in first (`{command}`), or use an API key: {prefix}.provider.env_key", "config")]
        return []
    if env_key:
        if env_key not in os.environ:
            return [Problem(f"{env_key} is not set", f"{prefix}.provider.env_key",
                            f"export {env_key}=…, or run on your own login with {prefix}.login", "config")]
        return []
    if provider.get("base_url"):
        return []          # a local server that takes no key
    if host.key_var and host.key_var in os.environ:
        return []          # the host hands its own key variable through by default
    key = host.key_var or "an API key"
    return [Problem(f"{backend} has no credentials (no login, and {key} is not given)", f"{prefix}.login",
                    f"set {prefix}.login: {host.login.value} to use your own login "
                    f"({Path('~') / default_dir / names[0]}), or {prefix}.provider.env_key to name a key's variable",
                    "config")]


def _executable(program: str, where: str, cwd: Path, hint: str) -> list[Problem]:
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        ok = path.is_file() and os.access(path, os.X_OK)
    else:
        ok = shutil.which(program) is not None
    return [] if ok else [Problem(f"{program} is not an executable file or on PATH", where, hint, "binary")]


def _learners(config: RunConfig) -> list[Problem]:
    evolver = config.evolver or {}
    base = config.learner_base
    model = dict(evolver.get("model") or {})
    if base == "scripted":
        from git_hermit.learners import make_learner
        roles = [r for r in (evolver.get("scripted") or {})]
        return [p for role in roles for p in _guarded(lambda: make_learner(evolver, role, base=base), f"evolver.scripted.{role}")]
    if base in ONE_SHOT:
        return _one_shot(base, model)
    if not (registry.known(base) and registry.get(base).learner):
        return []
    problems = _program({**model, "backend": base}, "evolver.model", Path.cwd())
    debugger = config.evolver_params().get("debugger")     # an evolver with a Debugger role may name its own bin
    if isinstance(debugger, dict) and debugger.get("enabled", True) and debugger.get("bin"):
        problems += [p for p in _program({**model, "backend": base, "bin": debugger["bin"]},
                                         "evolver.params.debugger", Path.cwd()) if p.kind == "binary"]
    return problems


def _evolver_refuses(config: RunConfig) -> None:
    """The evolver's own start-up check (e.g. evo-harness refuses a learner that cannot edit files)."""
    from git_hermit.evolvers.registry import make_evolver
    evolver = make_evolver(config.evolver_name)
    if hasattr(evolver, "check_config"):
        evolver.check_config(config)


def _one_shot(base: str, model: dict[str, Any]) -> list[Problem]:
    package = ONE_SHOT[base]
    problems = []
    if importlib.util.find_spec(package) is None:
        problems.append(Problem(f"the {package} package is not installed", f"evolver.base: {base}",
                                f"pip install 'git-hermit[{package}]'", "binary"))
    provider = model.get("provider") or {}
    env_key = provider.get("env_key")
    if env_key is None and not provider.get("base_url"):
        env_key = "OPENAI_API_KEY" if package == "openai" else "ANTHROPIC_API_KEY"   # the official API
    if env_key and not os.environ.get(env_key):
        problems.append(Problem(f"{env_key} is not set", "evolver.model.provider.env_key",
                                f"export {env_key}=… (a local server without keys: give provider.base_url)", "config"))
    return problems


# --- the judge ----------------------------------------------------------------------------------
def _judge(config: RunConfig, base_dir: Path) -> list[Problem]:
    from git_hermit.rollouts.judges import make_judge
    judge = config.judge
    problems = _guarded(lambda: make_judge(judge, base_dir=base_dir), "judge")
    if judge.kind == "llm" and importlib.util.find_spec("openai") is None:
        problems.append(Problem("the openai package is not installed", "judge.kind: llm",
                                "pip install 'git-hermit[openai]'", "binary"))
    command = judge.command if judge.kind == "command" else None
    if isinstance(command, str):
        command = shlex.split(command)
    if command and isinstance(command[0], str):
        program = command[0].replace("{base_dir}", str(base_dir))
        if "{" not in program and ("/" not in program or Path(program).is_absolute()):
            # a relative path runs from the rollout's workspace: it cannot be checked here
            problems += _executable(program, "judge.command", base_dir, "install the verifier or give its path")
    return problems


def _guarded(check: Callable[[], object], where: str) -> list[Problem]:
    """A check that raises its own HermitError: its message becomes one problem."""
    try:
        check()
    except HermitError as exc:
        kind = "binary" if isinstance(exc, AgentError) else "input" if isinstance(exc, InputError) else "config"
        return [Problem(exc.message, where, exc.hint or "", kind)]
    return []


# --- work-tree edits ----------------------------------------------------------------------------
def worktree_warnings(repo: Repo, run: str | None = None) -> list[str]:
    """What `step` says (stderr, not an error) about hand edits it will not use or not record.

    The adapter a step evaluates is the run's tip commit (``hermit/<run>/step-NNNN``), never the
    work tree: an uncommitted adapter edit, or a commit on another branch, is not used. (A work
    tree that is merely behind the tip, e.g. ``main`` at the seed, is normal and says nothing.)
    The config is read from the work tree: an edit not committed at HEAD is used, unrecorded."""
    from git_hermit.core.runs import open_run
    ctx = open_run(repo, run)
    config, (step, tip) = ctx.config, ctx.tip
    branch = f"hermit/{ctx.run}/step-{step:04d}"
    head = repo.rev_parse("HEAD")
    warnings = []
    edited: list[str] = []
    if head:   # uncommitted edits that also differ from the tip (an edit already on the tip is used)
        off_tip = set(repo.worktree_changes(tip, [config.adapter]))
        edited = [p for p in repo.worktree_changes(head, [config.adapter]) if p in off_tip]
    if edited:
        warnings.append(f"{config.adapter}/ has uncommitted edits ({_few(edited)}); this step evaluates {branch} "
                        f"({tip[:12]}) and does not use them: commit them on {branch} to make them part of the run "
                        "(docs/concepts.md: Hand edits)")
    elsewhere = [c for c in repo.log(f"{tip}..{head}", paths=[config.adapter])] if head else []
    if elsewhere and not edited:
        warnings.append(f"HEAD has {len(elsewhere)} commit(s) changing {config.adapter}/ that are not on {branch} "
                        f"({elsewhere[0].sha[:12]} {elsewhere[0].subject[:50]}); this step does not use them: "
                        f"commit adapter edits on {branch} (docs/concepts.md: Hand edits)")
    if config.path is not None:
        rel = config.path.relative_to(repo.work_tree).as_posix()
        if head is None or repo.worktree_changes(head, [rel]):
            warnings.append(f"{rel} has changes not committed at HEAD: the step uses the work-tree file as it is, "
                            "and git does not record these settings (commit it to keep them)")
    return warnings


def _few(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
