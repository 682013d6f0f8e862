"""Shared pieces of the step-driver tests (not a test module): a repository with a small
benchmark, a ``command`` acting agent that answers what the deployed MEMORY.md tells it, and
scripted Agent Debugger / Evolve Agent learners driven by a per-test control directory.

The learners run inside the `git hermit` subprocess: set ``PYTHONPATH`` to tests/ and
``HERMIT_TEST_CONTROL`` to the control directory (``env_for``). Every agent and learner call
is appended to a log in the control directory, so tests can count them; a ``hold-*`` file
makes the matching call block, so a test can kill the process at a known point.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from support.cli_helpers import GIT_HERMIT
from support.project import build_project, task_rows
from conftest import git

RUN = "r"
CONTROL_ENV = "HERMIT_TEST_CONTROL"
TESTS_DIR = Path(__file__).resolve().parents[1]   # tests/

# The acting agent: a `command` backend program. Its environment is filtered by the framework,
# so the control directory is baked into the script instead of passed through the environment.
AGENT_SCRIPT = '''#!{python}
import re, sys, time
from pathlib import Path
control = Path({control!r})
prompt_file, workspace, task, attempt = sys.argv[1:5]
with open(control / "agent.log", "a") as log:
    log.write(f"{{task}}#{{attempt}}\\n")
if (control / f"hold-agent-{{task}}").exists():
    (control / f"held-agent-{{task}}#{{attempt}}").write_text("")
    while (control / f"hold-agent-{{task}}").exists():
        time.sleep(0.05)
memory = Path(workspace, ".hermit-adapter", "MEMORY.md")
text = memory.read_text() if memory.is_file() else ""
found = re.findall(r"^- answer " + re.escape(task) + r": (.*)$", text, re.M)
print(found[-1].strip() if found else "I do not know")
'''


def control_dir() -> Path:
    return Path(os.environ[CONTROL_ENV])


def env_for(control: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, CONTROL_ENV: str(control)}


def make_run(repo: Path, answers: dict[str, str], *, k: int = 2, params: dict[str, Any] | None = None,
             allow_early_stop: bool = True, epochs: int = 10, concurrency: int = 4) -> Path:
    """`git hermit init` a run ``r`` in ``repo`` with one task per answer; returns the control dir."""
    control = repo.parent / "control"
    control.mkdir()
    agent = control / "agent.py"
    build_project(repo, init_args=("--run", RUN), tasks=task_rows(answers),
                  rows={"train": [f"{t}#{i}" for t in answers for i in range(1, k + 1)]},
                  scripts={agent: AGENT_SCRIPT.format(python=sys.executable, control=str(control))},
                  config={"agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{prompt_file}", "{workspace}", "{task_id}", "{attempt}"]},
                          "evolver": {"name": "ahe", "base": "scripted",
                                      "scripted": {"debugger": "support.step_support:debugger_session",
                                                   "evolve": "support.step_support:evolve_session"},
                                      "params": {"k": k, "rollback": "auto", "target_pass_rate": 1.0,
                                                 "debugger": {"retries": 1, "backoff_s": 0.0}, **(params or {})}},
                          "trainer": {"epochs": epochs, "allow_early_stop": allow_early_stop,
                                      "concurrency": concurrency}})
    return control


def plan(control: Path, step: int, **spec: Any) -> None:
    """What the scripted Evolve Agent does at ``step`` (see ``evolve_session``)."""
    path = control / "evolve.json"
    plans = json.loads(path.read_text()) if path.is_file() else {}
    plans[str(step)] = spec
    path.write_text(json.dumps(plans))


def change(id: str, files: list[str], fixes: list[str] = (), risks: list[str] = (), **extra: Any) -> dict:
    return {"id": id, "description": f"{id}: remember answers", "files": list(files),
            "failure_pattern": "the agent does not know the answer", "predicted_fixes": list(fixes),
            "risk_tasks": list(risks), "component": "memory", **extra}


def calls(control: Path, log: str) -> list[str]:
    path = control / f"{log}.log"
    return path.read_text().split() if path.is_file() else []


def _hold(control: Path, name: str) -> None:
    if (control / f"hold-{name}").exists():
        (control / f"held-{name}").write_text("")
        while (control / f"hold-{name}").exists():
            time.sleep(0.05)


# --- scripted learners (called in the git-hermit process) ------------------------------------
def debugger_session(workspace: Path, prompt: str, key: str) -> str:
    control = control_dir()
    with open(control / "debugger.log", "a") as log:
        log.write(key + "\n")
    _hold(control, f"debugger-{key}")
    return (f"## Root cause\nTask {key}: the agent answered without knowing the answer.\n\n"
            "## Fix\nRemember the answer in MEMORY.md.\n")


def evolve_session(workspace: Path, prompt: str, key: str) -> str:
    """Apply the plan of this step: ``append``/``write`` {adapter path: text}, ``write_hex`` {path: bytes
    as hex}, ``symlink``/``hardlink`` {path: target}, ``delete`` [paths];
    then ``manifest_text`` verbatim, or no manifest (``manifest: None``), or one built from
    ``changes`` (``iteration`` overrides the step); ``check`` runs ./check_spec afterwards
    (its output kept as ``check_spec-<step>.txt``) and, if it fails, writes ``fixed_changes``."""
    control = control_dir()
    step = int(key.rsplit("-", 1)[1])
    with open(control / "evolve.log", "a") as log:
        log.write(key + "\n")
    _hold(control, "evolve")
    path = control / "evolve.json"
    spec = (json.loads(path.read_text()) if path.is_file() else {}).get(str(step), {})
    adapter = workspace / "adapter"
    for rel, text in spec.get("append", {}).items():
        with open(adapter / rel, "a") as handle:
            handle.write(text)
    for rel, text in spec.get("write", {}).items():
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).write_text(text)
    for rel, hexed in spec.get("write_hex", {}).items():
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).write_bytes(bytes.fromhex(hexed))
    for rel, target in spec.get("symlink", {}).items():
        (adapter / rel).parent.mkdir(parents=True, exist_ok=True)
        (adapter / rel).unlink(missing_ok=True)
        (adapter / rel).symlink_to(target)
    for rel, target in spec.get("hardlink", {}).items():
        (adapter / rel).unlink(missing_ok=True)
        os.link(target, adapter / rel)
    for rel in spec.get("delete", []):
        (adapter / rel).unlink()
    manifest = workspace / "state" / "change_manifest.json"
    if "manifest_text" in spec:
        manifest.write_text(spec["manifest_text"])
    elif spec.get("manifest", True) is not None:
        manifest.write_text(json.dumps({"iteration": spec.get("iteration", step),
                                        "changes": spec.get("changes", [])}, indent=2))
    if spec.get("check"):   # run the workspace's ./check_spec as the agent would, keep what it said
        proc = subprocess.run(["./check_spec"], cwd=workspace, capture_output=True, text=True)
        (control / f"check_spec-{step}.txt").write_text(f"{proc.returncode}\n{proc.stdout}{proc.stderr}")
        if proc.returncode and "fixed_changes" in spec:   # the agent fixes what check_spec reported
            manifest.write_text(json.dumps({"iteration": step, "changes": spec["fixed_changes"]}, indent=2))
    return spec.get("answer", f"step {step}: done")


def memory_lines(answers: dict[str, str]) -> str:
    return "".join(f"- answer {t}: {a}\n" for t, a in answers.items())


# --- processes --------------------------------------------------------------------------------
def start_step(repo: Path, control: Path, *args: str) -> subprocess.Popen:
    """`git hermit step` in its own process group (the test ends it and its children)."""
    return subprocess.Popen([*GIT_HERMIT, "step", *args], cwd=repo, env={**os.environ, **env_for(control)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(condition, what: str, proc: subprocess.Popen | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"step exited ({proc.returncode}) before {what}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the step and every process it started (its own process group), then reap it."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def step_dir(repo: Path, step: int) -> Path:
    return repo / ".hermit" / "runs" / RUN / f"step-{step:04d}"


def rollouts_dir(repo: Path, step: int) -> Path:
    """Where step ``step`` runs its rollouts: the evaluated commit's (shared with `git hermit rollout`)."""
    commit = git(repo, "rev-parse", f"refs/heads/hermit/{RUN}/step-{step - 1:04d}").strip()
    return repo / ".hermit" / "runs" / RUN / "evals" / f"{commit[:12]}-train" / "rollouts"
