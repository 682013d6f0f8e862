"""Config typed once, at the edge (issue 26, item 3): hermit.yaml's agent block is a frozen
AgentConfig built in git_hermit/config.py with its defaults applied there (an unset backend is the
default host), and no other module applies them again; the plain dict form exists only where the
block crosses a process or Dask boundary (AgentConfig.block())."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import git_hermit
from git_hermit.config import AgentConfig, parse_config
from git_hermit.hosts import registry

PACKAGE = Path(git_hermit.__file__).parent

BASE = """run: demo
template: ahe@1
adapter: adapter/
tasks: {path: tasks.jsonl}
judge: {kind: answer}
data: {train: rows/train.txt}
evolver: {name: ahe, base: scripted}
"""

# Where the default host may be named: the registry that defines it, the config that applies it
# (and writes it into init's hermit.yaml), and the demo's own hermit.yaml.
DEFAULT_HOST_ALLOWED = {"hosts/registry.py", "config.py", "core/demo.py"}


def test_a_config_without_an_agent_block_gets_the_typed_defaults():
    config = parse_config(BASE)
    assert isinstance(config.agent, AgentConfig)
    assert config.agent.backend == registry.DEFAULT
    assert config.agent.timeout_s == 1800.0 and config.agent.model is None
    assert config.agent.env == {} and config.agent.pass_env == ()
    assert config.agent.block() == {"backend": registry.DEFAULT}


def test_an_unset_backend_is_the_default_host_not_the_runs_host():
    other = next((name for name in registry.names() if name != registry.DEFAULT), None)
    if other is None:
        pytest.skip("one host is registered")
    config = parse_config(BASE + f"host: {other}\nagent: {{model: m, timeout_s: 60, pass_env: [X]}}\n")
    assert config.host == other
    assert config.agent.backend == registry.DEFAULT
    assert config.agent.timeout_s == 60.0 and config.agent.pass_env == ("X",)
    # the dict crossing the Dask boundary: as written, its backend filled in
    assert config.agent.block() == {"model": "m", "timeout_s": 60, "pass_env": ["X"], "backend": registry.DEFAULT}


def test_the_agent_config_is_frozen():
    config = parse_config(BASE + "agent: {backend: command, command: [./a, '{workspace}']}\n")
    assert config.agent.command == ("./a", "{workspace}")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.agent.backend = "scripted"  # type: ignore[misc]


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_no_module_re_applies_the_default_host():
    """``registry.DEFAULT`` is read only where it is defined and applied; ``.get("backend", …)``
    with a fallback, and ``… or {"backend": …}``, are gone everywhere."""
    found = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr == "DEFAULT" and isinstance(node.value, ast.Name)
                    and node.value.id == "registry" and rel not in DEFAULT_HOST_ALLOWED):
                found.append(f"{rel}:{node.lineno} registry.DEFAULT")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value in ("backend", "base", "host")):
                found.append(f"{rel}:{node.lineno} .get({node.args[0].value!r}, default)")
            if (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
                    and any(isinstance(v, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "backend"
                                                            for k in v.keys) for v in node.values)):
                found.append(f"{rel}:{node.lineno} … or {{'backend': …}}")
    assert found == []


def test_the_evolver_params_are_merged_once_and_read_only():
    config = parse_config(BASE + "")
    params = config.evolver_params()
    assert params is config.params is config.evolver_params()      # merged once per config
    assert params["evolve_timeout_s"] == 7200 and params["debugger"]["enabled"] is True   # the schema's defaults
    with pytest.raises(TypeError):
        params["k"] = 3  # type: ignore[index]
    tuned = parse_config(BASE.replace("base: scripted}", "base: scripted, params: {debugger: {timeout_s: 5}}}"))
    assert tuned.params["debugger"]["timeout_s"] == 5 and tuned.params["debugger"]["retries"] == 3   # one level deep


def _params_receiver(node: ast.expr) -> bool:
    """``p``, ``params``, ``raw``, ``given`` or ``<x>.params``: the evolver's merged params."""
    return (isinstance(node, ast.Name) and node.id in ("p", "params", "raw", "given")) or \
        (isinstance(node, ast.Attribute) and node.attr == "params")


def test_no_evolver_merges_its_params_defaults_again():
    """The evolvers read config.params (StepContext.params) as merged: no ``params.get(key, default)``
    and no ``{**DEFAULTS, …}`` over them."""
    found = []
    for rel, tree in _modules():
        if not rel.startswith("evolvers/"):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and len(node.args) == 2 and _params_receiver(node.func.value)):
                found.append(f"{rel}:{node.lineno} params.get(key, default)")
            if isinstance(node, ast.Dict) and any(k is None and isinstance(v, ast.Name) and v.id == "DEFAULTS"
                                                  for k, v in zip(node.keys, node.values)):
                found.append(f"{rel}:{node.lineno} {{**DEFAULTS, …}}")
    assert found == []


def test_the_step_carries_k_once(repo, monkeypatch):
    """k is resolved once (load_benchmark: -k, else evolver.params.k, else the rows file) and the
    step context carries it once, as ``k``: its params hold no second copy."""
    from support.cli_helpers import hermit
    from git_hermit.evolvers.ahe.evolver import AHEEvolver
    from support.step_support import env_for, make_run

    seen = []
    learn = AHEEvolver.learn

    def spy(self, ctx):
        seen.append(ctx)
        return learn(self, ctx)

    monkeypatch.setattr(AHEEvolver, "learn", spy)
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=2)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, (r.out, r.err)
    (ctx,) = seen
    assert ctx.k == 2 and "k" not in ctx.params
    assert ctx.params["evolve_timeout_s"] == 7200            # the rest of config.params, as merged


def test_k_is_read_from_the_config_in_one_place():
    """``evolver.params.k`` is read by RunConfig.train_k only."""
    found = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key, value = node.slice.value, node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                key, value = node.args[0].value, node.func.value
            if key == "k" and rel != "config.py" and (
                    _params_receiver(value) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                                                and value.func.attr == "evolver_params")):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


# --- the other blocks (judge, tasks, data, executor, budget, sandbox, trainer, prices) -----------

BLOCKS = ("tasks", "judge", "data", "executor", "budget", "sandbox", "trainer")
CONFIG_BLOCKS = (*BLOCKS, "prices")


def test_every_block_is_a_frozen_dataclass():
    config = parse_config(BASE)
    for name in BLOCKS:
        block = getattr(config, name)
        assert dataclasses.is_dataclass(block), name
        assert type(block).__dataclass_params__.frozen, name   # type: ignore[attr-defined]
    from git_hermit.accounting.ledger import Price
    priced = parse_config(BASE + "prices: {m: {input: 1, output: 2}}\n").prices
    assert priced == {"m": Price(1.0, 1.0, 2.0)}     # parsed once: cached_input defaults to input


def _schema_defaults(props):
    return {key: spec["default"] for key, spec in props.items() if "default" in spec}


def test_the_blocks_defaults_are_the_schemas():
    """One place for each default: the dataclasses' defaults are the ones the JSON Schema (and so
    docs/configuration.md) states."""
    import json
    schema = json.loads((PACKAGE.parent / "schemas" / "config.schema.json").read_text(encoding="utf-8"))
    config = parse_config(BASE.replace("judge: {kind: answer}\n", "").replace("tasks: {path: tasks.jsonl}\n", ""))
    mismatched = []
    for name in BLOCKS:
        props = schema["properties"][name].get("properties", {})
        for key, default in _schema_defaults(props).items():
            if key == "rate_limit":
                continue
            if getattr(getattr(config, name), key) != default:
                mismatched.append(f"{name}.{key}: {getattr(getattr(config, name), key)!r} != schema {default!r}")
    rate = schema["properties"]["executor"]["properties"]["rate_limit"]["properties"]
    for key, default in _schema_defaults(rate).items():
        if getattr(config.executor.rate_limit, key) != default:
            mismatched.append(f"executor.rate_limit.{key}")
    assert mismatched == []


def test_defaults_apply_when_a_block_is_partly_written():
    config = parse_config(BASE + "trainer: {epochs: 3}\nsandbox: {enabled: true}\n"
                                 "executor: {kind: dask, rate_limit: {retries: 1}}\nbudget: {max_usd: 5}\n")
    assert (config.trainer.epochs, config.trainer.concurrency, config.trainer.max_exception_rate) == (3, 4, 0.9)
    assert config.sandbox.enabled and config.sandbox.network == "restricted" and config.sandbox.allow == ()
    assert config.executor.address == "local" and config.executor.workers == 2
    assert (config.executor.rate_limit.retries, config.executor.rate_limit.backoff_s) == (1, 5.0)
    assert (config.budget.max_usd, config.budget.max_tokens) == (5.0, None)
    # the judge crosses to the worker as the block as written; the worker's judge has the defaults
    from git_hermit.rollouts.judges import AnswerJudge, judge_timeout_s, make_judge
    assert config.judge.block() == {"kind": "answer"}
    judge = make_judge(config.judge.block())
    assert isinstance(judge, AnswerJudge) and (judge.mode, judge.tolerance) == ("exact", 0.0)
    assert judge_timeout_s(config.judge.block()) == 600.0


def test_a_bad_rate_limit_is_refused_when_the_config_is_read():
    from git_hermit.errors import ConfigError
    with pytest.raises(ConfigError):
        parse_config(BASE + "executor: {rate_limit: {backoff_s: 10, max_backoff_s: 1}}\n")


def _config_block(node: ast.expr) -> str | None:
    """``<…>config.<block>`` or ``(<…>config.<block> or {})``: the block's name, else None."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        node = node.values[0]
    if (isinstance(node, ast.Attribute) and node.attr in CONFIG_BLOCKS
            and ((isinstance(node.value, ast.Name) and node.value.id in ("config", "cfg"))
                 or (isinstance(node.value, ast.Attribute) and node.value.attr == "config"))):
        return node.attr
    return None


def test_no_module_reads_a_config_block_as_a_dict():
    """Outside config.py no ``config.<block>.get(…)``, ``config.<block>[…]``, ``(config.<block> or {})``
    nor ``config.raw[…]``: the blocks are read as typed attributes."""
    found = []
    for rel, tree in _modules():
        if rel == "config.py":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and _config_block(node.func.value)):
                found.append(f"{rel}:{node.lineno} config.{_config_block(node.func.value)}.get(…)")
            if isinstance(node, ast.Subscript) and _config_block(node.value) and _config_block(node.value) != "prices":
                found.append(f"{rel}:{node.lineno} config.{_config_block(node.value)}[…]")
            if (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _config_block(node)
                    and any(isinstance(v, ast.Dict) for v in node.values)):
                found.append(f"{rel}:{node.lineno} config.{_config_block(node)} or {{}}")
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "raw"
                    and isinstance(node.slice, ast.Constant) and node.slice.value in CONFIG_BLOCKS):
                found.append(f"{rel}:{node.lineno} .raw[{node.slice.value!r}]")
    assert found == []


def test_the_final_mode_has_one_default():
    """``evolver.params.final`` is read by RunConfig.final_mode only (finalize, the card and the
    held-out snapshot used to fall back to different modes)."""
    found = []
    for rel, tree in _modules():
        if rel == "config.py":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "final"):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


def test_final_mode_default_is_last_without_an_evolver_default(monkeypatch):
    from git_hermit.config import RunConfig
    config = parse_config(BASE)
    assert config.final_mode == "best_ever"            # ahe's params schema sets it
    monkeypatch.setattr(RunConfig, "params", property(lambda self: {}))
    assert config.final_mode == "last"


# The parsers below config, and the names the config block had there before it was typed once
_PARSERS = ("rollouts/judges.py", "rollouts/tasks.py", "rollouts/worker.py", "supervise/sandbox.py")
_BLOCK_NAMES = {"spec", "block", "judge_cfg", "sandbox", "tasks", "judge"}


def test_no_parser_below_config_applies_a_default_of_its_own():
    """Issue 26.3: make_judge, load_tasks, spec_from_config and the worker each had `.get(key, default)`
    copies of the schema's defaults; they read the typed blocks (model/config_blocks.py) now."""
    package = Path(__file__).resolve().parents[1] / "git_hermit"
    found = []
    for rel in _PARSERS:
        for node in ast.walk(ast.parse((package / rel).read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in _BLOCK_NAMES
                    and len(node.args) == 2):
                found.append(f"{rel}:{node.lineno}")
    assert found == []
