"""`git hermit demo [DIR]`: a real ahe run, offline, on a bundled benchmark.

Creates a repository with the demo benchmark and a scripted acting agent that follows the
deployed adapter, runs `train` with scripted learners until the target stops it, finalizes,
and leaves everything in git for `git hermit log` / `git log --notes=hermit/verdicts`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from git_hermit.config import CONFIG_FILE
from git_hermit.core.card import CardText
from git_hermit.core.init import init_run
from git_hermit.core.step import FinalizeOutcome, StepOutcome, TrainOutcome, finalize, train
from git_hermit.demo.benchmark import TEMPLATE, write_benchmark
from git_hermit.errors import InputError
from git_hermit.hosts import registry
from git_hermit.rollouts.runner import Progress

DEMO_RUN = "demo"
DEMO_EPOCHS = 8
DEMO_CONCURRENCY = 4


@dataclass(frozen=True)
class DemoOutcome:
    directory: Path
    training: TrainOutcome
    final: FinalizeOutcome
    seconds: float


def _demo_config(text: str, blocks: dict[str, Any]) -> str:
    """The default hermit.yaml with the demo's blocks swapped in (comments of other keys kept)."""
    data = yaml.safe_load(text)
    data.update(blocks)
    data["host"] = registry.DEFAULT
    data["trainer"] = {"epochs": DEMO_EPOCHS, "allow_early_stop": True, "concurrency": DEMO_CONCURRENCY}
    data["executor"] = {"kind": "local"}
    header = "\n".join(line for line in text.splitlines() if line.startswith("# yaml-language-server"))
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return (f"{header}\n# The offline demo's run: a SIMULATED acting agent and scripted learners "
            "(see `git hermit demo -h`).\n" + body)


def run_demo(directory: Path, *, say: Callable[[str], None] = print,
             on_progress: Callable[[Progress], None] | None = None,
             on_step: Callable[[StepOutcome], None] | None = None,
             card_text: CardText | None = None) -> DemoOutcome:
    """The demo repository made and trained; ``on_step`` hears each step's outcome as it ends, and
    ``card_text`` (render/card.markdown) writes the final adapter's CARD.md."""
    start = time.monotonic()
    directory = directory.resolve()
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{directory} exists and is not a directory", hint="give a new directory: git hermit demo DIR")
    if directory.exists() and any(directory.iterdir()):
        raise InputError(f"{directory} exists and is not empty", hint="give a new directory: git hermit demo DIR")
    directory.mkdir(parents=True, exist_ok=True)
    from git_hermit.gitio import init_repository
    repo = init_repository(directory)
    info = write_benchmark(directory)
    init_run(repo, template_id=TEMPLATE, run=DEMO_RUN)
    config_path = directory / CONFIG_FILE
    config_path.write_text(_demo_config(config_path.read_text(), info.config))
    repo.git("add", "--", CONFIG_FILE, *sorted({p.split("/")[0] for p in _benchmark_paths(directory)}))
    repo.git("commit", "-q", "-m", "demo benchmark: tasks, rows and the demo's hermit.yaml")
    say(f"demo repository: {directory} ({len(info.train_tasks)} training tasks x k=2, "
        f"{len(info.test_tasks)} held-out tasks)")
    training = train(repo, DEMO_RUN, say=say, on_progress=on_progress, on_step=on_step)
    final = finalize(repo, DEMO_RUN, card_text=card_text)
    return DemoOutcome(directory, training, final, time.monotonic() - start)


def _benchmark_paths(directory: Path) -> list[str]:
    return [p.relative_to(directory).as_posix() for p in directory.iterdir()
            if p.name not in (".git", ".hermit", "adapter", CONFIG_FILE)]
