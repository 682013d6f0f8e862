"""`git hermit report --open`: open (or update) a step's pull request with the GitHub CLI.

The body is written to a file under the run's working area and handed to ``gh pr create
--base B --head H --title T --body-file F``; when a pull request for the head branch already
exists, ``gh pr edit H`` updates its title and body instead. Without ``gh`` on PATH the exact
command is returned for the user to run.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from git_hermit.core.runs import run_dir
from git_hermit.errors import AgentError
from git_hermit.gitio import Repo
from git_hermit.rollouts.process import run_process

GH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class PullRequestOutcome:
    command: tuple[str, ...]        # what was run, or what to run
    ran: bool                       # False: gh is missing, ``command`` is printed instead
    url: str | None = None
    updated: bool = False           # an existing pull request was edited


def body_file(repo: Repo, run: str, step: int) -> Path:
    path = run_dir(repo, run) / "reports" / f"step-{step:04d}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def open_pull_request(repo: Repo, run: str, step: int, *, base: str, head: str, title: str, body: str,
                      gh: str = "gh") -> PullRequestOutcome:
    path = body_file(repo, run, step)
    path.write_text(body)
    create = ("gh", "pr", "create", "--base", base, "--head", head, "--title", title, "--body-file", str(path))
    found = shutil.which(gh)
    if found is None:
        return PullRequestOutcome(create, ran=False)
    out, err = path.with_suffix(".gh.out"), path.with_suffix(".gh.err")
    result = run_process([found, *create[1:]], cwd=repo.work_tree, env=os.environ, timeout_s=GH_TIMEOUT_S,
                         stdout_path=out, stderr_path=err)
    if result.returncode == 0:
        return PullRequestOutcome(create, ran=True, url=_last_line(out))
    problem = err.read_text(errors="replace")
    if "already exists" in problem:
        edit = ("gh", "pr", "edit", head, "--title", title, "--body-file", str(path))
        result = run_process([found, *edit[1:]], cwd=repo.work_tree, env=os.environ, timeout_s=GH_TIMEOUT_S,
                             stdout_path=out, stderr_path=err)
        if result.returncode == 0:
            return PullRequestOutcome(edit, ran=True, url=_last_line(out), updated=True)
        problem = err.read_text(errors="replace")
    line = next((l for l in problem.splitlines() if l.strip()), "no message")
    raise AgentError(f"gh failed: {line.strip()}",
                     hint=f"push the step first (`git hermit push`), check `gh auth status`; the command was: "
                          f"{shlex.join(create)}")


def _last_line(path: Path) -> str | None:
    lines = [l.strip() for l in path.read_text(errors="replace").splitlines() if l.strip()]
    return lines[-1] if lines else None
