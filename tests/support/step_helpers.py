"""Helpers of tests/test_step.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, change, env_for, make_run, memory_lines, plan

STEP = "refs/heads/hermit/{run}/step-{n:04d}"


def step_ref(n: int) -> str:
    return STEP.format(run=RUN, n=n)


def rev(repo, name: str) -> str:
    return git(repo, "rev-parse", "--verify", "-q", name, check=False).strip()


def run_step(repo, control, expect: int = 0):
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == expect, r.out + r.err
    return r


def note(repo, kind: str, commit: str) -> dict:
    return json.loads(git(repo, "notes", f"--ref=hermit/{kind}", "show", commit))


def trailers(repo, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%(trailers:only,unfold)", commit)


def tree(repo, commit: str, path: str = "adapter") -> str:
    return rev(repo, f"{commit}:{path}")


def chain(repo, tip: str, base: str) -> list[str]:
    """The commits from ``base`` (exclusive) to ``tip``, oldest first."""
    return git(repo, "rev-list", "--reverse", f"{base}..{tip}").split()


# --- verdicts and rollback ---------------------------------------------------------------------
def _three_steps(repo, rollback: str, *, step2: dict, step3_change: bool = True):
    """Step 1 fixes t1, t2 (EFFECTIVE next step); step 2's change regresses t2 (HARMFUL)."""
    control = make_run(repo, {"t1": "4", "t2": "7", "t3": "9"}, params={"rollback": rollback},
                       allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4", "t2": "7"})},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1", "t2"], risks=["t3"])])
    plan(control, 2, **step2)
    if step3_change:
        plan(control, 3, append={"MEMORY.md": memory_lines({"t3": "9"})},
             changes=[change("chg-3", ["MEMORY.md"], fixes=["t3"])])
    for _ in range(3):
        run_step(repo, control)
    return control


HARMFUL_STEP2 = dict(append={"MEMORY.md": memory_lines({"t2": "8"})}, write={"scripts/helper.py": "print(2)\n"},
                     changes=[change("chg-2", ["MEMORY.md", "scripts/helper.py"], fixes=["t3"], risks=["t2"])])

