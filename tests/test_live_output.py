"""A long run says what happens as it happens (issue 24, requirement 2).

Each step's outcome lines (its verdicts, rollbacks, best-ever move and the commits it made) are
printed as that step ends: in `train`, in `demo`, and in the log of the GitHub workflow's step.
The real executable runs with stdout and stderr on one pipe, as a CI log holds them, and its
output is read line by line while it runs: step 1's lines must be there before step 2 starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from support.cli_helpers import GIT_HERMIT, hermit
from support.step_support import change, env_for, make_run, memory_lines, plan

ROOT = Path(__file__).resolve().parents[1]


def _lines_as_they_come(argv: list[str], cwd: Path, env: dict[str, str], *, until: str,
                        timeout: float = 600) -> tuple[list[str], int]:
    """The process's merged output, line by line as it is written, up to the first line holding
    ``until`` (the process is then let run to its end); and its exit code."""
    proc = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line.rstrip("\n"))
            if until in line:
                break
        rest, _ = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return seen + rest.splitlines(), proc.returncode


def _index(lines: list[str], text: str) -> int:
    return next((i for i, line in enumerate(lines) if text in line), -1)


def _two_step_plan(control: Path) -> None:
    """Step 1 makes a change that fixes t1 (judged EFFECTIVE by step 2), then learns nothing more."""
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])


def test_train_prints_each_steps_outcome_before_the_next_step_starts(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, epochs=3)
    _two_step_plan(control)
    lines, code = _lines_as_they_come([*GIT_HERMIT, "train"], repo, env_for(control),
                                      until="step 3: rollouts of H_2")
    assert code == 0, "\n".join(lines)
    step_2_starts = _index(lines, "step 2: rollouts of H_1")
    made_1 = _index(lines, "step 1 made H_1")
    verdicts = _index(lines, "verdicts on step 1's changes: chg-1 EFFECTIVE")
    assert 0 <= made_1 < step_2_starts, lines            # step 1's commits, before step 2 starts
    assert step_2_starts < verdicts < _index(lines, "step 3: rollouts of H_2"), lines
    assert _index(lines, "training stopped") > verdicts


def test_demo_prints_each_steps_outcome_as_it_ends(demo_made):
    """The session's demo run (conftest's demo_made: its stdout and stderr on one pipe, so the order
    of its lines is the order they were written in, as read while it runs)."""
    _, result = demo_made
    lines, code = result.out.splitlines(), result.code
    assert code == 0, "\n".join(lines)
    step_2_starts = _index(lines, "step 2: rollouts of H_1")
    assert 0 <= _index(lines, "step 1 made H_1") < step_2_starts, lines
    # step 2 judged step 1's changes and rolled one back: said before step 3 starts
    rolled = _index(lines, "rolled back automatically")
    assert step_2_starts < _index(lines, "verdicts on step 1's changes") < _index(lines, "step 3: rollouts of H_2")
    assert step_2_starts < rolled < _index(lines, "step 3: rollouts of H_2"), lines
    assert _index(lines, "$ git hermit log") > rolled


def test_the_workflows_step_prints_its_outcome_in_the_log(repo):
    """The workflow's own `One step` command, run by bash with its output on one pipe as the
    Actions runner captures it: the step's verdicts and commits are in the log, after its
    rollouts' progress."""
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    _two_step_plan(control)
    assert hermit(repo, "step", env=env_for(control)).code == 0
    from git_hermit.core.workflow import workflow_text
    workflow = yaml.safe_load(workflow_text(host="codex"))   # as `init --github` writes it
    [command] = [s["run"] for s in workflow["jobs"]["step"]["steps"] if s.get("name") == "One step"]
    bin_dir = str(Path(sys.executable).parent)               # where `git-hermit` is installed
    env = {**env_for(control), "HERMIT_RUN": "r", "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    lines, code = _lines_as_they_come(["bash", "-e", "-c", command], repo, env, until="step 2 made H_2")
    assert code == 0, "\n".join(lines)
    assert 0 <= _index(lines, "step 2: rollouts of H_1") < _index(lines, "verdicts on step 1's changes: chg-1")
    assert _index(lines, "rollouts: 1/1 done") < _index(lines, "step 2 made H_2"), lines
