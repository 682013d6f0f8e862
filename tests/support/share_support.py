"""Shared pieces of the multi-machine tests (not a test module): a run of each evolver made in a
repository whose config, tasks and rows are committed on ``main``, a bare repository as the
remote, and the machines (clones) that continue it, each step's learners recording what they were
given (tests/support/recording_learners.py).

Every scenario of one test uses the same paths (the machines' work trees, the control directory,
the remote): a scenario is run, its learners' inputs read back, and its directories removed
before the next (``Scenario.reset``), so two scenarios' commits can be compared directly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from support.cli_helpers import Result, hermit
from conftest import git
from support.project import build_project, task_rows
from support.step_support import AGENT_SCRIPT, change, plan

TESTS = Path(__file__).resolve().parents[1]   # tests/
SUPPORT = TESTS / "support"
RUN = "r"
TEMPLATES = {"ahe": None, "continual-harness": "continual-harness@1.0", "evo-harness": "evo-harness@1.0"}


def learner_env(control: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(TESTS), str(SUPPORT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "HERMIT_TEST_CONTROL": str(control)}


def _skill(name: str, tasks: list[str]) -> str:
    return (f"---\nname: {name}\ndescription: Use when the answer is a single value.\nflashrsi:\n"
            f"  algorithm: evo_harness\n  level: topic\n  source_task_ids: {json.dumps(tasks)}\n---\n\n"
            "- Check the answer's format before giving it.\n")


class Scenario:
    """One run of ``evolver`` continued across machines ``root/<name>`` through ``root/remote.git``."""

    def __init__(self, root: Path, evolver: str):
        self.root, self.evolver = root, evolver
        self.control = root / "control"
        self.remote = root / "remote.git"
        self.machines: dict[str, Path] = {}
        self.last: str | None = None

    # -------------------------------------------------------------------------------- setup
    def reset(self) -> None:
        for path in [self.control, self.remote, *self.root.glob("m-*")]:
            shutil.rmtree(path, ignore_errors=True)
        self.machines, self.last = {}, None

    def machine(self, name: str) -> Path:
        return self.root / f"m-{name}"

    def env(self) -> dict[str, str]:
        return learner_env(self.control)

    def hermit(self, name: str, *args: str, **kwargs: Any) -> Result:
        return hermit(self.machines[name], *args, env=self.env(), **kwargs)

    def start(self, name: str = "a") -> Path:
        """Machine ``name`` creates the run: init, its tasks, rows and config committed on main."""
        repo = self.machine(name)
        repo.mkdir(parents=True)
        git(repo, "init", "-q")
        (repo / "README.md").write_text("a benchmark\n")
        git(repo, "add", "README.md")
        git(repo, "commit", "-q", "-m", "initial")
        self.control.mkdir(parents=True)
        template = TEMPLATES[self.evolver]
        self._benchmark(repo, init_args=("--run", RUN, *(["--template", template] if template else [])))
        git(self.root, "init", "-q", "--bare", self.remote.name)
        git(repo, "remote", "add", "origin", str(self.remote))
        self.machines[name] = repo
        return repo

    def _benchmark(self, repo: Path, init_args: tuple[str, ...]) -> None:
        """`git hermit init` the run, its tasks, rows, agent and scripted (recording) learners, committed."""
        ahe = self.evolver == "ahe"
        tasks = {"t1": "1", "t2": "2", "t3": "3"} if ahe else {f"t{i}": str(i) for i in range(1, 7)}
        k = 2 if ahe else 1
        agent = self.control / "agent.py"
        scripted = {role: f"recording_learners:{role}" for role in
                    {"ahe": ("debugger", "evolve"), "continual-harness": ("policy", "subagents", "skills", "memory"),
                     "evo-harness": ("reflect", "topic_curator", "general_curator")}[self.evolver]}
        if ahe:
            params = {"k": 2, "rollback": "auto", "target_pass_rate": 1.0, "debugger": {"retries": 1, "backoff_s": 0.0}}
            plan(self.control, 1, append={"MEMORY.md": "- answer t1: 1\n"}, changes=[change("chg-1", ["MEMORY.md"], ["t1"])])
            # step 2's change fixes t2 and breaks t1 (unpredicted): step 3 judges it HARMFUL and rolls it back
            plan(self.control, 2, append={"MEMORY.md": "- answer t2: 2\n- answer t1: 7\n"},
                 changes=[change("chg-1", ["MEMORY.md"], ["t2"])])
            plan(self.control, 3, append={"MEMORY.md": "- answer t3: 3\n"}, changes=[change("chg-1", ["MEMORY.md"], ["t3"])])
        elif self.evolver == "continual-harness":
            params = {"k": 1, "step_size": 2}
        else:
            params = {"k": 1, "batch_size": 2}
            (self.control / "plan.json").write_text(json.dumps({
                "1-topic_curator": {"write": {"skills/short-answers/SKILL.md": _skill("short-answers", ["t1", "t2"])}}}))
        build_project(repo, init_args=init_args, tasks=task_rows(tasks),
                      rows={"train": [f"{t}#{i}" for t in tasks for i in range(1, k + 1)]},
                      scripts={agent: AGENT_SCRIPT.format(python=sys.executable, control=str(self.control))},
                      config={"agent": {"backend": "command", "timeout_s": 60,
                                        "command": [str(agent), "{prompt_file}", "{workspace}", "{task_id}",
                                                    "{attempt}"]},
                              "evolver": {"name": self.evolver, "base": "scripted", "scripted": scripted,
                                          "params": params},
                              "trainer": {"epochs": 10, "allow_early_stop": True, "concurrency": 2}},
                      commit="the run's tasks, rows and config")

    # -------------------------------------------------------------------------------- steps
    def on(self, name: str) -> Path:
        """Machine ``name`` takes over the run: a fresh clone of the remote the first time (its
        ``git hermit fetch`` brings the run), a ``git hermit fetch`` when another machine stepped last."""
        if name not in self.machines:
            repo = self.machine(name)
            git(self.root, "clone", "-q", str(self.remote), repo.name)
            self.machines[name] = repo
            fetched = self.hermit(name, "fetch")
            assert fetched.code == 0, fetched.err + fetched.out
        elif self.last is not None and self.last != name:
            fetched = self.hermit(name, "fetch")
            assert fetched.code == 0, fetched.err + fetched.out
        return self.machines[name]

    def step(self, name: str, *, wipe: bool = False) -> Result:
        repo = self.on(name)
        if wipe:
            shutil.rmtree(repo / ".hermit", ignore_errors=True)
        done = self.hermit(name, "step", timeout=300)
        assert done.code == 0, done.err + done.out
        pushed = self.hermit(name, "push")
        assert pushed.code == 0, pushed.err + pushed.out
        self.last = name
        return done

    def roots(self) -> list[Path]:
        return [self.machine(n) for n in "abcd"]


# --- what the learners were given ------------------------------------------------------------
def read_inputs(control: Path) -> dict[str, dict[str, Any]]:
    """{file name: record} of every learner call a scenario made."""
    folder = control / "inputs"
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


# A step's wall-clock time (evolution history, iteration scores): two runs cannot share it
_TIMES = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:\d{2}|Z)?")


def normalise(text: str, roots: list[Path]) -> str:
    """``text`` with each machine's absolute work-tree path as ``<repo>`` and wall-clock times as
    ``<time>``: what may differ between two machines running the same run."""
    for root in sorted(roots, key=lambda p: -len(str(p))):
        text = text.replace(str(root), "<repo>")
    return _TIMES.sub("<time>", text)


def diff_inputs(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], roots: list[Path]) -> list[str]:
    """Every difference between two scenarios' learner inputs (empty: the same inputs)."""
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            out.append(f"{name}: only in {'the first' if name in a else 'the second'} scenario")
            continue
        one, two = a[name], b[name]
        if normalise(one["prompt"], roots) != normalise(two["prompt"], roots):
            out.append(f"{name}: prompts differ")
        files_a = {k: normalise(v, roots) for k, v in one["files"].items()}
        files_b = {k: normalise(v, roots) for k, v in two["files"].items()}
        for rel in sorted(set(files_a) | set(files_b)):
            if files_a.get(rel) != files_b.get(rel):
                out.append(f"{name}: workspace file {rel} differs"
                           + ("" if rel in files_a and rel in files_b else " (present on one side only)"))
    return out
