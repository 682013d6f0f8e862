"""The ``command`` backend: any program, started from an argv template.

``{prompt_file}`` and ``{workspace}`` (and ``{task_id}``, ``{attempt}``) are substituted;
the final answer is ``answer.txt`` in the workspace if the program wrote one, else the last
non-empty line of its stdout (which is kept as the trajectory).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from git_hermit.errors import AgentError, ConfigError
from git_hermit.model.rollout import Usage
from git_hermit.rollouts.agents.base import AGENT_EXIT_ERROR, AgentContext, AgentRun, in_sandbox, last_nonempty_line
from git_hermit.rollouts.process import run_process


@dataclass
class CommandAgent:
    argv: list[str]
    name: str = "command"

    def __post_init__(self) -> None:
        if not self.argv:
            raise ConfigError("agent.command is required for backend: command",
                              hint='e.g. agent: {backend: command, command: [./my-agent, "{prompt_file}", "{workspace}"]}')

    def check_available(self) -> None:
        program = self.argv[0]
        if "/" not in program and shutil.which(program) is None:
            raise AgentError(f"agent command {program!r} is not on PATH", hint="install it or give its path")

    def run(self, ctx: AgentContext) -> AgentRun:
        prompt_file = ctx.rollout_dir / "prompt.md"
        prompt_file.write_text(ctx.prompt)
        values = {"{prompt_file}": str(prompt_file), "{workspace}": str(ctx.workspace),
                  "{task_id}": ctx.task_id, "{attempt}": str(ctx.attempt)}
        argv = []
        for arg in self.argv:
            for key, value in values.items():
                arg = arg.replace(key, value)
            argv.append(arg)
        if "/" in argv[0] and not Path(argv[0]).is_absolute():
            argv[0] = str((Path.cwd() / argv[0]).resolve())
        env = ctx.base_env()
        if ctx.sandbox is not None:   # the program and its prompt are readable, nothing else of the repo
            program = shutil.which(argv[0]) or argv[0]
            readable = tuple(p for p in {program, os.path.realpath(program), str(prompt_file)} if os.path.isabs(p))
            argv, env = in_sandbox(ctx, argv, env, readable=readable)
        try:
            outcome = run_process(argv, cwd=ctx.workspace, env=env, timeout_s=ctx.timeout_s,
                                  stdout_path=ctx.rollout_dir / "trajectory.txt", stderr_path=ctx.stderr_path)
        except OSError as exc:
            return AgentRun(None, Usage(), None, False, 0.0, f"cannot start {argv[0]}: {exc.strerror}",
                            "AgentStartError")
        answer_file = ctx.workspace / "answer.txt"
        answer: str | None
        if answer_file.is_file():
            answer = answer_file.read_text(errors="replace").strip()
        else:
            answer = last_nonempty_line((ctx.rollout_dir / "trajectory.txt").read_text(errors="replace"))
        if outcome.timed_out:
            return AgentRun(answer, Usage(), None, True, outcome.duration_s,
                            f"agent timed out after {ctx.timeout_s:g}s", "AgentTimeout", "trajectory.txt")
        error = None if outcome.returncode == 0 else f"agent exited with status {outcome.returncode}"
        # exited non-zero with no answer at all: a crash, not an answer to judge (an exception)
        crashed = error is not None and not answer
        if crashed:
            said = last_nonempty_line(ctx.stderr_path.read_text(errors="replace")) if ctx.stderr_path.is_file() else None
            error = f"{error}: {said[:200]}" if said else error
        return AgentRun(answer, Usage(), outcome.returncode, False, outcome.duration_s, error,
                        AGENT_EXIT_ERROR if crashed else None, "trajectory.txt")
