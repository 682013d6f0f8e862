"""hermit.yaml → a typed, validated run configuration.

A run's config is ``hermit.yaml`` (or ``hermit/<run>.yaml`` when a repo holds several runs),
validated against ``schemas/config.schema.json`` and its ``evolver.params`` against the evolver's
own ``evolvers/<name>/params.schema.json`` (with the defaults); unknown keys are errors with their
path, every one named in one error. Keys of the seeds' setups that git-hermit keeps elsewhere are
named together first, each with where it goes. ``render_default_config`` writes the commented
file ``init`` creates.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from git_hermit import __version__, checked
from git_hermit.errors import ConfigError, ConfigMissing
from git_hermit.evolvers import registry as evolver_registry
from git_hermit.evolvers.params import (Elsewhere, data_step_size, init_params, param_defaults, params_problems,
                                        refused_params)
from git_hermit.hosts import registry
from git_hermit.model.config_blocks import (BudgetConfig, DataConfig, ExecutorConfig, JudgeConfig, SandboxConfig,
                                            TasksConfig, TrainerConfig, set_fields)
from git_hermit.model.prices import Price, load_prices
from git_hermit.model.schema import extend as extend_schema
from git_hermit.model.schema import config_schema_errors, fingerprint, load_schema

CONFIG_FILE = "hermit.yaml"
RUNS_DIR = "hermit"
# The schema copy the yaml-language-server line points at: committed with the seed, so every
# clone has it (the working area .hermit/ is ignored and would not be).
SCHEMA_LINK = "hermit/config.schema.json"

SEEDS_TABLE = "docs/configuration.md (From the seeds' setups)"
# Keys of the seeds' setups git-hermit keeps elsewhere, besides each evolver's own evolver.params
# keys (its schema's x-refused): seed 002's run-level `llm:` and its `agent: {name: …}` class, and
# the `algorithm:` block of the seeds' framework (seed 001's `algorithm.worker.type`).
SEED_KEYS = {
    "llm": Elsewhere("llm", "evolver.base: llm with evolver.model: {name: <model>, provider: {base_url: "
                            "<the backend's /v1 URL>, env_key: <its key's variable>}}",
                     "seed 002's llm is the Refiner's model, the learners' model here"),
    "algorithm": Elsewhere("algorithm", "evolver: {name, params, base: the Worker (codex or claude-code: it must "
                                        "edit files), model}", "the seeds' framework calls the evolver its algorithm"),
    "agent.name": Elsewhere("agent.name", "agent.backend: codex (it runs `codex exec` with the adapter deployed, "
                                          "as the seed's codex_agent.py does; another program: agent.backend: "
                                          "command with agent.command)",
                            "the acting agent is a backend here, not a Python class"),
}

# Names agent.env / agent.pass_env may not set: the framework gives every agent its own.


def reserved_agent_env() -> frozenset[str]:
    """Variables agent.env may not set: HOME and each host's private config dir."""
    return frozenset({"HOME", *(var for host in registry.hosts() for var in host.home_env)})


@dataclass(frozen=True)
class AgentConfig:
    """hermit.yaml's ``agent:`` block, typed once here with its defaults applied here and only here:
    an unset ``backend`` is the default host (hosts/registry.py's DEFAULT), an unset ``timeout_s``
    the schema's 1800. Everything on the user's side of a rollout reads these fields."""

    backend: str = registry.DEFAULT
    model: str | None = None
    effort: str | None = None
    login: str | None = None
    home: str | None = None
    bin: str | None = None
    args: tuple[Any, ...] = ()
    provider: dict[str, Any] | None = None
    command: tuple[Any, ...] = ()
    timeout_s: float = 1800.0
    scripted: Mapping[str, Any] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    given: Mapping[str, Any] = field(default_factory=dict, repr=False)   # the block as written

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> AgentConfig:
        """The typed block of a validated config's ``agent:`` mapping (absent: every default)."""
        given = dict(block or {})
        values = set_fields(cls, given)
        for name in ("args", "command", "pass_env"):
            if name in values:
                values[name] = tuple(values[name])
        if "timeout_s" in values:
            values["timeout_s"] = float(values["timeout_s"])
        return cls(**values, given=given)

    def block(self) -> dict[str, Any]:
        """The block as a plain dict, as written with its backend filled in: the form that crosses
        the process / Dask boundary (RolloutJob.agent_cfg, make_agent on the worker's side)."""
        return {**self.given, "backend": self.backend}


@dataclass(frozen=True)
class RunConfig:
    """A validated hermit.yaml, every block typed once (config.py's frozen dataclasses) with its
    defaults applied here; only ``evolver`` stays a plain dict (its params: ``params``)."""

    run: str
    template: str
    adapter: str                       # repo-relative directory, no trailing slash
    host: str = registry.DEFAULT
    agent: AgentConfig = field(default_factory=AgentConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    data: DataConfig = field(default_factory=DataConfig)
    evolver: dict[str, Any] = field(default_factory=dict)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    prices: Mapping[str, Price] = field(default_factory=dict)   # parsed once (model/prices.py)
    budget: BudgetConfig = field(default_factory=BudgetConfig)  # core/budget.py
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)   # seed 000: {enabled, network, allow}
    path: Path | None = None           # where it was read from
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def evolver_name(self) -> str:
        """The registered evolver evolver.name names (an alias resolved), else the template's."""
        name = self.evolver.get("name")
        if name:
            return evolver_registry.canonical(name)
        spec = evolver_registry.for_template(self.template)
        return spec.name if spec else self.template.split("@")[0]

    def evolver_params(self) -> Mapping[str, Any]:
        """The evolver's params over its defaults, merged once (see params); read-only."""
        return self.params

    @cached_property
    def params(self) -> Mapping[str, Any]:
        """The evolver's params over its defaults (its params.schema.json; nested dicts merged one
        level deep): merged here, once per config, and read-only, so every reader (the step, the
        evolvers, preflight, the card) sees the same values and none applies a default again."""
        params = param_defaults(self.evolver_name)
        if "step_size" in params and self.data.step_size:
            params["step_size"] = self.data.step_size   # seed 002: data.step_size is the stream's window
        for key, value in (self.evolver.get("params") or {}).items():
            if isinstance(value, dict) and isinstance(params.get(key), dict):
                params[key] = {**params[key], **value}
            else:
                params[key] = value
        return MappingProxyType(params)

    @property
    def train_k(self) -> int | None:
        """``evolver.params.k``, the rollouts per task of the training split (None: what its rows
        file holds). Read here only: evaluate.load_benchmark weighs it against ``-k`` and the rows."""
        k = self.params.get("k")
        return None if k is None else int(k)

    @property
    def learner_base(self) -> str:
        """``evolver.base``, the learners' backend; unset, the default host (applied here only)."""
        return str(self.evolver.get("base") or registry.DEFAULT)

    @property
    def timeout_as(self) -> str:
        """How a timed-out rollout is scored (``exception`` or ``fail``): read here and only here,
        its default from evolvers/framework.params.schema.json, applied by model.rollout.scored."""
        return str(self.evolver_params()["timeout_as"])

    def agent_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the acting agent gets besides the framework's minimal environment: ``agent.env``,
        then the user's variables ``agent.pass_env`` names (a named variable that is not set is
        a ConfigError, raised before any rollout starts). Nothing else of the user's environment."""
        environ = os.environ if environ is None else environ
        env = dict(self.agent.env)
        names = list(self.agent.pass_env)
        missing = [name for name in names if name not in environ]
        if missing:
            raise ConfigError(f"agent.pass_env names {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'}"
                              " not set in your environment",
                              hint=f"export {missing[0]}=… before running git hermit, or remove it from agent.pass_env")
        env.update({name: environ[name] for name in names})
        return env

    @property
    def epochs(self) -> int:
        return self.trainer.epochs

    @property
    def concurrency(self) -> int:
        return self.trainer.concurrency

    @property
    def allow_early_stop(self) -> bool:
        return self.trainer.allow_early_stop

    @property
    def max_exception_rate(self) -> float:
        """The share of a step's rollouts that may end in an exception before it stops, before its
        learners (see core/failures.py): 0.9 stops a step that measured (almost) nothing."""
        return self.trainer.max_exception_rate

    @property
    def final_mode(self) -> str:
        """``evolver.params.final``: ``best_ever`` or ``last``. Each evolver's params schema sets
        its default (best_ever where it keeps a best-ever tag); an evolver whose schema names none
        hands back its tip: ``last``, applied here and only here (finalize, the card, heldout)."""
        return str(self.params.get("final") or "last")

    @property
    def base_dir(self) -> Path | None:
        """Where the config's relative paths (tasks, rows, a judge's command, task files) start: the
        repository's root, for ``hermit.yaml`` and ``hermit/<run>.yaml`` alike (None: no file)."""
        if self.path is None:
            return None
        folder = self.path.parent
        return folder.parent if folder.name == RUNS_DIR and self.path.name != CONFIG_FILE else folder

    @property
    def source(self) -> str:
        """The config file as the user names it: ``hermit.yaml`` or ``hermit/<run>.yaml``."""
        if self.path is None or self.base_dir is None:
            return CONFIG_FILE
        return self.path.relative_to(self.base_dir).as_posix()

    def split_path(self, split: str) -> str | None:
        return self.data.splits.get(split)

    def splits(self) -> list[str]:
        return list(self.data.splits)


def parse_config(text: str, *, source: str = CONFIG_FILE, path: Path | None = None) -> RunConfig:
    """Parse and validate hermit.yaml text; ConfigError names every bad key by path."""
    data = _read_yaml(text, source)
    _refuse_seed_keys(data, source)
    _check_schema(data, source)
    return _config_from(data, source, path, check_params=True)


def _read_yaml(text: str, source: str) -> Any:
    import yaml   # here: a config checked before is read from the cache, without the YAML parser (~8 ms)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{source} is not valid YAML{where}: {getattr(exc, 'problem', exc)}",
                          hint="fix the syntax; `git hermit init` writes a commented example") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a mapping of settings", hint="see docs/configuration.md")
    return data


def seed_keys_elsewhere(data: dict[str, Any]) -> list[Elsewhere]:
    """The keys of a pasted seed setup git-hermit keeps elsewhere (each with where it goes)."""
    found = [SEED_KEYS[key] for key in ("llm", "algorithm") if key in data]
    agent = data.get("agent")
    if isinstance(agent, dict) and "name" in agent:
        found.append(SEED_KEYS["agent.name"])
    evolver: dict[str, Any] = data["evolver"] if isinstance(data.get("evolver"), dict) else {}
    name = evolver.get("name")
    if not isinstance(name, str):
        spec = evolver_registry.for_template(str(data.get("template") or ""))
        name = spec.name if spec else None
    if name is None or evolver_registry.find(name) is None:
        return found          # an unknown evolver is the config check's to name
    name = evolver_registry.canonical(name)
    params = evolver.get("params")
    found += refused_params(name, params)
    if isinstance(params, dict) and params.get("task_field") is not None:
        found += _task_field(params["task_field"], data.get("tasks"))
    block: dict[str, Any] = data["data"] if isinstance(data.get("data"), dict) else {}
    rule = data_step_size(name)
    if block.get("step_size") is not None and rule is not None and rule.get("means") != "every-row":
        found.append(Elsewhere("data.step_size", rule.get("to"), rule["why"]))
    return found


def _task_field(value: Any, tasks: Any) -> list[Elsewhere]:
    """Seed 000's task_field, the row field naming the task: here the tasks' id field is that
    field, so task_field is accepted only when it names it."""
    tasks = tasks if isinstance(tasks, dict) else {}
    if "harbor" in tasks:
        return [Elsewhere("evolver.params.task_field", None, "Harbor tasks are named by their directory")]
    id_field = tasks.get("id_field", "id")
    if value == id_field:
        return []
    return [Elsewhere("evolver.params.task_field", f"tasks.id_field: {value} (a row's task is read from the tasks' "
                                                   f"id field, now {id_field!r}; its rows <task>#1 … #k share it)",
                      "the tasks' id field names the task")]


def _refuse_seed_keys(data: dict[str, Any], source: str) -> None:
    found = seed_keys_elsewhere(data)
    if not found:
        return
    items = [f"{e.path} → {e.to}" if e.to else f"{e.path}: remove it ({e.why})" for e in found]
    listed = items[0] if len(items) == 1 else "; ".join(f"({i}) {item}" for i, item in enumerate(items, 1))
    raise ConfigError(f"{source}: {len(found)} key(s) of the seeds' setup are kept elsewhere in git-hermit: {listed}",
                      hint=f"move each key where its arrow points, remove the others; the seeds' setups "
                           f"translated: {SEEDS_TABLE}")


def _all(problems: list[str]) -> str:
    """Every problem in one line, numbered when there are several."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems: " + "; ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))


def _check_schema(data: dict[str, Any], source: str) -> None:
    problems = config_schema_errors("config", data)
    if problems:
        raise ConfigError(f"{source}: {_all(problems)}",
                          hint=f"see docs/configuration.md, or the schema {SCHEMA_LINK} that init commits")


def _config_from(data: dict[str, Any], source: str, path: Path | None, *, check_params: bool) -> RunConfig:
    known = set(RunConfig.__dataclass_fields__) - {"path", "raw"}
    values = {k: v for k, v in data.items() if k in known and v is not None}
    values["adapter"] = str(values["adapter"]).strip("/") or "."
    # every block typed here, its defaults applied here, once
    values["agent"] = AgentConfig.from_block(values.get("agent"))
    for name, typed in (("tasks", TasksConfig), ("judge", JudgeConfig), ("data", DataConfig),
                        ("executor", ExecutorConfig), ("budget", BudgetConfig), ("sandbox", SandboxConfig),
                        ("trainer", TrainerConfig)):
        values[name] = typed.from_block(values.get(name))
    values["prices"] = load_prices(values.get("prices"))
    config = RunConfig(**values, path=path, raw=data)
    if evolver_registry.find(config.evolver_name) is None:
        where = "evolver.name" if config.evolver.get("name") else "template (no evolver.name)"
        raise ConfigError(f"{source}: {where}: unknown evolver {config.evolver_name!r}",
                          hint="use " + ", ".join(evolver_registry.names()))
    if check_params:
        _check_evolver_params(config, source)
    _check_agent_env(config, source)
    return config


def _params_fingerprint(evolver: str) -> str | None:
    """The evolver's params schema as it is now (its text: see model/schema.py's fingerprint)."""
    spec = evolver_registry.find(evolver)
    try:
        return spec.params_schema_path.read_text(encoding="utf-8") if spec else None
    except OSError:
        return None


def _parse_remembered(text: str, source: str, path: Path, cache_dir: Path) -> RunConfig:
    """parse_config, remembering a valid config by its text (see checked.py): the next read command
    takes its data from the cache, neither importing the YAML parser nor validating again."""
    file = cache_dir / "configs.json"
    format = f"configs/2:{__version__}:{fingerprint('config')}"
    entries = checked.load(file, format)
    key = text   # the file's text itself names it (a config is a few kB)
    entry = entries.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("data"), dict):
        config = _config_from(entry["data"], source, path, check_params=False)
        if entry.get("params") != _params_fingerprint(config.evolver_name):   # its params schema changed
            _check_evolver_params(config, source)
        return config
    data = _read_yaml(text, source)
    _refuse_seed_keys(data, source)
    _check_schema(data, source)
    config = _config_from(data, source, path, check_params=True)
    try:   # only data JSON keeps exactly (YAML dates or integer keys would come back changed)
        kept = json.loads(json.dumps(data)) == data
    except (TypeError, ValueError):
        kept = False
    if kept:
        entries[key] = {"data": data, "params": _params_fingerprint(config.evolver_name)}
        checked.save(file, format, dict(list(entries.items())[-16:]))   # the last few configs seen
    return config


def _check_evolver_params(config: RunConfig, source: str) -> None:
    """``evolver.params`` against the evolver's own schema: an unknown key or a bad value is one
    ConfigError naming its path, so no command starts (and spends) on a setting that does nothing."""
    params = config.evolver.get("params")
    if params is None:
        return
    problems = params_problems(config.evolver_name, params)
    if problems:
        lines = [f"evolver.params{(f'.{p.path}' if p.path and not p.path.startswith('[') else p.path)} {p.message}"
                 for p in problems]
        raise ConfigError(f"{source}: {_all(lines)}", hint="; ".join(dict.fromkeys(p.hint for p in problems)))


def _check_agent_env(config: RunConfig, source: str) -> None:
    for block, names in (("env", list(config.agent.env)), ("pass_env", list(config.agent.pass_env))):
        for name in sorted(set(names) & reserved_agent_env()):
            path = f"agent.{block}.{name}" if block == "env" else f"agent.pass_env ({name})"
            raise ConfigError(f"{source}: {path} cannot be set: git-hermit gives every agent its own {name}",
                              hint=f"remove {name} from agent.{block}; agent.home/login choose the files it holds")


def config_paths(work_tree: Path) -> list[Path]:
    """Every run config file in the work tree: hermit.yaml and hermit/*.yaml."""
    found = [work_tree / CONFIG_FILE] if (work_tree / CONFIG_FILE).is_file() else []
    runs = work_tree / RUNS_DIR
    if runs.is_dir():
        found += sorted(p for p in runs.glob("*.yaml") if p.is_file())
    return found


def load_config(work_tree: Path, run: str | None = None, *, cache_dir: Path | None = None) -> RunConfig:
    """The config of ``run`` (or the only run) from the work tree; with ``cache_dir``, a config
    checked before is not parsed and validated again (see checked.py)."""
    configs = []
    for path in config_paths(work_tree):
        text, source = path.read_text(), str(path.relative_to(work_tree))
        configs.append(_parse_remembered(text, source, path, cache_dir) if cache_dir is not None
                       else parse_config(text, source=source, path=path))
    if not configs:
        raise ConfigMissing("no hermit.yaml in this repository", hint="run `git hermit init` first")
    if run is None:
        # the root hermit.yaml's run is the repository's default: a second run (hermit/<run>.yaml)
        # is chosen with --run; without a root config, several runs leave the choice to the user
        root = [c for c in configs if c.path is not None and c.path == work_tree / CONFIG_FILE]
        if len(configs) > 1 and not root:
            names = ", ".join(c.run for c in configs)
            raise ConfigError(f"this repository has several runs ({names})", hint="choose one with --run NAME")
        return root[0] if root else configs[0]
    for cfg in configs:
        if cfg.run == run:
            return cfg
    names = ", ".join(c.run for c in configs)
    raise ConfigMissing(f"no run named {run!r} (runs here: {names})", hint="check --run, or `git hermit init --run NAME`")


def _complete_schema(schema: dict[str, Any]) -> None:
    """The names the schema file cannot know: the registered hosts (and learner hosts), evolvers and templates."""
    props = schema["properties"]
    props["host"]["enum"] = list(registry.names())
    backend = props["agent"]["properties"]["backend"]
    backend["enum"] = [*registry.names(), *backend["enum"]]
    base = props["evolver"]["properties"]["base"]
    base["enum"] = [*(h.name for h in registry.learner_hosts()), *base["enum"]]
    # the registered evolvers and their templates as examples, not an enum: an evolver registered
    # at run time (a plugin) stays valid; the config refuses an unknown one with its own message
    props["template"]["examples"] = sorted({spec.template for spec in evolver_registry.specs()})
    props["evolver"]["properties"]["name"]["examples"] = evolver_registry.names()


extend_schema("config", _complete_schema)


def config_schema_text() -> str:
    """The config schema with the registered hosts' names (init commits it at SCHEMA_LINK)."""
    return json.dumps(load_schema("config"), indent=2, ensure_ascii=False) + "\n"


def render_default_config(*, run: str, template: str, adapter: str, config_path: str = CONFIG_FILE,
                          example: bool = False, github: bool = False) -> str:
    """The commented hermit.yaml that ``init`` writes (valid as written; edit to taste). ``github``
    (init --github): the agent's and the learners' ``provider.env_key`` name the key the workflow's
    OPENAI_API_KEY secret fills, so the secret reaches the sessions (a key no env_key names does not)."""
    depth = config_path.count("/")
    schema_ref = "../" * depth + SCHEMA_LINK
    evolver_name = RunConfig(run=run, template=template, adapter=adapter).evolver_name
    hosts = " | ".join(registry.names())
    learners = " | ".join(h.name for h in registry.learner_hosts())
    lines = [
        f"# yaml-language-server: $schema={schema_ref}",
        "# git-hermit run configuration. Every key is documented in docs/configuration.md.",
        f"run: {run}                      # names the refs hermit/{run}/step-NNNN, hermit/{run}/best …",
        f"template: {template}",
        f"adapter: {adapter}/                 # the adapter's directory in this repo (steps change only this)",
        f"host: {registry.DEFAULT:<25}# {hosts}: what `git hermit deploy` writes",
        "agent:                         # the acting agent (fixed; only the adapter evolves)",
        f"  backend: {registry.DEFAULT:<20}# {hosts} | command | scripted",
        "  model: gpt-5.6-luna",
        "  timeout_s: 1800              # wall clock per rollout; a timeout is an exception typed …Timeout",
        ("  provider: {env_key: OPENAI_API_KEY}   # the workflow's OPENAI_API_KEY secret (init --github)" if github else
         "  # provider: {base_url: http://127.0.0.1:8000/v1, env_key: OPENAI_API_KEY, wire_api: responses}"),
        "  # login: chatgpt             # use your own Codex/Claude login instead of an API key",
        "  # env: {MY_SETTING: value}   # set for the agent; pass_env: [NAME] hands your own NAME through",
        "# Tasks: one JSON object per line (or CSV with a header), e.g.",
        '#   {"id": "sum-1", "prompt": "Total the amount column of data.csv.", "answer": "42.5", "files": ["data.csv"]}',
        "# `files` (paths relative to the tasks file) are copied into the agent's workspace.",
        "tasks: {path: tasks.jsonl, id_field: id, prompt_field: prompt, answer_field: answer, files_field: files}",
        "judge: {kind: answer, mode: normalised}   # answer (exact|normalised|numeric) | command | llm",
        "data:                          # rows files: one `<task id>#<n>` per line, the k rows of a task #1..#k",
        "  train: rows/train.txt        # the rows every step rolls out",
        f"  {'' if example else '# '}test: rows/test.txt        # held-out split for `git hermit eval --split test`",
        "evolver:",
        f"  name: {evolver_name}",
        f"  params: {_flow(init_params(evolver_name))}   # every parameter and its default: docs/evolvers/",
        f"  base: {registry.DEFAULT:<23}# the learners' backend: {learners} | llm | scripted",
        ("  model: {name: gpt-5.6-luna, effort: medium, provider: {env_key: OPENAI_API_KEY}}   # the workflow's secret"
         if github else "  model: {name: gpt-5.6-luna, effort: medium}"),
        "trainer: {epochs: 10, allow_early_stop: true, concurrency: 4}",
        "executor: {kind: local}        # or {kind: dask, address: tcp://scheduler:8786 | local}",
        "# prices: {gpt-5.6-luna: {input: 1.25, cached_input: 0.125, output: 10.0}}   # USD per 1M tokens",
        "# budget: {max_usd: 50, max_tokens: 20000000}   # the run's cap: train/step stop before crossing it",
        "",
    ]
    return "\n".join(lines)


def _flow(params: dict[str, Any]) -> str:
    """A one-line YAML mapping: ``{k: 2, rollback: auto}``."""
    import yaml
    return yaml.safe_dump(params, default_flow_style=True, sort_keys=False).strip()
