"""The ``command`` backend: any program, started from an argv template.

``{prompt_file}`` and ``{workspace}`` (and ``{task_id}``, ``{attempt}``) are substituted;
the final answer is ``answer.txt`` in the workspace if the program wrote one, else the last
non-empty line of its stdout (which is kept as the trajectory). An ``answer.txt`` that is a link or
a special file is refused (agent_files): the run has no answer and its error says why.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from git_hermit.errors import AgentError, ConfigError
from git_hermit.model.rollout import Usage
from git_hermit.agents.agent_files import left_file
from git_hermit.agents.base import AGENT_EXIT_ERROR, AgentContext, AgentRun, in_sandbox, last_nonempty_line
from git_hermit.supervise.process import run_process


ANSWER_FILE = "answer.txt"
ANSWER_LIMIT = 1024 * 1024     # an answer, not a data dump


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
        written = left_file(ctx.workspace, ANSWER_FILE, limit=ANSWER_LIMIT)
        stdout = left_file(ctx.rollout_dir, "trajectory.txt")
        answer: str | None
        if written.data is not None:
            answer = written.data.decode("utf-8", "replace").strip()
        elif written.refused is None:
            answer = last_nonempty_line((stdout.data or b"").decode("utf-8", "replace"))
        else:
            answer = None             # an answer that is not the agent's own file is no answer
        refused = "; ".join(f"refused {r}" for r in (written.refused, stdout.refused) if r)
        if outcome.timed_out:
            return AgentRun(answer, Usage(), None, True, outcome.duration_s,
                            f"agent timed out after {ctx.timeout_s:g}s", "AgentTimeout", "trajectory.txt")
        error = None if outcome.returncode == 0 else f"agent exited with status {outcome.returncode}"
        # exited non-zero with no answer at all: a crash, not an answer to judge (an exception)
        crashed = error is not None and not answer
        if crashed:
            said = last_nonempty_line((left_file(ctx.rollout_dir, ctx.stderr_path.name).data or b"")
                                      .decode("utf-8", "replace"))
            error = f"{error}: {said[:200]}" if said else error
        if refused:
            error = f"{error}; {refused}" if error else refused
        return AgentRun(answer, Usage(), outcome.returncode, False, outcome.duration_s, error,
                        AGENT_EXIT_ERROR if crashed else None, "trajectory.txt")
