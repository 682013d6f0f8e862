"""The backend for every registered host CLI (hosts/registry.py): the host module writes the
session's argv, environment and private home; this runs it and reads its event stream.

Each rollout gets a private HOME holding the provider config from hermit.yaml; auth is an API
key from the variable ``env_key`` names, or a copy of the user's own login files (``login:``)
— never written to git, notes or logs. The final answer and token usage come from the
agent's own event stream; a session that ended early is billed from the sessions the host
stored, when they hold more.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from git_hermit.errors import AgentError
from git_hermit.hosts.base import Host, SessionSpec
from git_hermit.model.rollout import Usage
from git_hermit.agents.agent_files import is_plain_file, left_file
from git_hermit.agents.base import (AGENT_EXIT_ERROR, AgentContext, AgentRun, copy_login_files, in_sandbox,
                                            real_home)
from git_hermit.supervise.process import ProcessOutcome, run_process
from git_hermit.trajectories import summarize

RATE_LIMITED = "RateLimited"    # the exception_type of a rollout the model's rate limit ended
MODEL_ERROR = "ModelError"            # a session that exited 0 on a model error, without an answer
# How the hosts say the model refused for load (measured with the scripted server's 429s):
# Codex 0.164 ends on "exceeded retry limit, last status: 429 Too Many Requests" and exits 1;
# Claude Code 2.1 logs system/api_retry events (error_status 429, error "rate_limit") while it
# waits, up to 10 retries; Pi 0.73 ends on an assistant error. 529 is Anthropic's "overloaded".
_RATE_LIMIT_TEXT = re.compile(r"\b(429|529)\b|too many requests|rate[ _-]?limit|overloaded", re.IGNORECASE)
_RATE_LIMIT_STATUS = (429, 529)
_TAIL_BYTES = 16_384
# events after which an earlier error is not how the session ended; a Claude Code session woken
# again prints each query's `result` at the end, so a later success outranks an earlier 429
_PROGRESS = ("assistant", "user", "item.started", "item.completed", "turn.completed",
             "tool_execution_start", "tool_execution_end", "result")


def _resolve_bin(cfg: Mapping[str, Any], host: Host) -> Path | None:
    if cfg.get("bin"):
        found = shutil.which(str(cfg["bin"]))
        return Path(found) if found else None
    return host.find()


@dataclass
class HostCLIAgent:
    """A rollout (or learner session) of one registered host's CLI."""

    cfg: dict[str, Any]
    host_impl: Host
    binary: Path | str | None = field(default=None, init=False)

    @property
    def host(self) -> str:
        return self.host_impl.name

    @property
    def name(self) -> str:
        return self.host_impl.name

    def check_available(self) -> None:
        self.binary = _resolve_bin(self.cfg, self.host_impl)
        if self.binary is None:
            raise AgentError(f"the {self.host} CLI was not found",
                             hint="install it (`git hermit hosts install`) or set agent.bin in hermit.yaml")
        provider = self.cfg.get("provider") or {}
        env_key = provider.get("env_key")
        if env_key and env_key not in os.environ and not self.cfg.get("login"):
            raise AgentError(f"agent.provider.env_key names {env_key}, which is not set",
                             hint=f"export {env_key}=… or use login: to run on your own login")

    def _copy_login(self, home: Path) -> None:
        """With ``login:`` (or ``home:``), the user's own login files go into the private home."""
        login = self.host_impl.login
        if self.cfg.get("login") or self.cfg.get("home"):
            source = Path(os.path.expanduser(self.cfg.get("home") or str(real_home() / login.user_dir)))
            copy_login_files(source, self.host_impl.config_dir(home), login.files)

    def _command(self, ctx: AgentContext) -> tuple[list[str], dict[str, str]]:
        """The host's argv and environment for one run (config written into ``ctx.home``)."""
        argv, env = self.host_impl.session(self.binary or self.host_impl.binary, SessionSpec.from_config(self.cfg),
                                           ctx.prompt, ctx.home, ctx.base_env(), os.environ)
        self._copy_login(ctx.home)
        return argv, env

    def run(self, ctx: AgentContext) -> AgentRun:
        argv, env = self._command(ctx)
        if ctx.sandbox is not None:
            from git_hermit.supervise.sandbox import install_dir
            provider = self.cfg.get("provider") or {}
            ctx = replace(ctx, sandbox=ctx.sandbox.with_endpoint(provider.get("base_url")))
            argv, env = in_sandbox(ctx, argv, env, readable=(install_dir(self.binary or argv[0]),))
        outcome = run_process(argv, cwd=ctx.workspace, env=env, timeout_s=ctx.timeout_s,
                              stdout_path=ctx.trajectory_path, stderr_path=ctx.stderr_path)
        return self._finish(ctx, outcome, ctx.trajectory_path)

    def _finish(self, ctx: AgentContext, outcome: ProcessOutcome, trajectory: Path) -> AgentRun:
        run = self._finish_run(ctx, outcome, trajectory)
        failed = run.timed_out or run.returncode != 0 or run.final_answer is None
        if not failed:
            return run
        # a session that ended early (timeout, a model error, a rate limit) billed what it
        # called before all the same: the budget counts it
        run = replace(run, usage=self._billed(ctx, run.usage))
        last = last_error_report(trajectory, ctx.stderr_path)
        limit = rate_limit_of(last)
        if limit is not None:
            # the host gave up on (or was still waiting out) the model's rate limit: infrastructure
            # (the runner runs it again and bills both attempts)
            return replace(run, exception_type=RATE_LIMITED, error=f"{self.host} was rate limited: {limit[:200]}")
        if run.timed_out or run.final_answer is not None or run.error is None:
            return run
        # no answer and an error (a refused key, no network, a crash): the session measured nothing,
        # so it is an exception (no reward), reported with the host's own last word on it
        said = last.strip().splitlines()[-1][:200] if last and last.strip() else None
        kind = AGENT_EXIT_ERROR if run.returncode not in (0, None) else MODEL_ERROR
        error = (f"{self.host} exited with status {run.returncode}" if kind == AGENT_EXIT_ERROR
                 else f"{self.host} ended on a model error")
        return replace(run, exception_type=kind, error=f"{error}: {said}" if said else run.error)

    def _billed(self, ctx: AgentContext, streamed: Usage) -> Usage:
        """The larger of the stream's usage and the sum over the sessions the host stored in the
        private home (read before its scratch goes; each agent's calls are in one file, a
        sub-agent's apart). Measured: Codex 0.164's exec stream reports a turn's usage only when
        the turn completes; Claude Code 2.1's stream, ended early (a timeout, or while it waits
        out a 429), holds each call's first usage snapshot (1 output token) and not every
        sub-agent call. So the calls billed before the session ended are only in its stored sessions."""
        pattern = self.host_impl.stored_sessions
        if pattern is None:
            return streamed
        stored = Usage()
        for path in self.host_impl.config_dir(ctx.home).glob(pattern):
            if not is_plain_file(ctx.home, path):     # the agent's home: a link there is not followed
                continue
            try:
                stored += summarize(path, self.host_impl.trajectory_formats[0]).usage
            except Exception:                # best effort: a file of the host's it does not read
                continue
        return stored if stored.total_tokens > streamed.total_tokens else streamed

    def _finish_run(self, ctx: AgentContext, outcome: ProcessOutcome, trajectory: Path) -> AgentRun:
        readable = is_plain_file(ctx.rollout_dir, trajectory)   # never a link the agent put there
        summary = summarize(trajectory) if readable and trajectory.stat().st_size else None
        answer = summary.final_answer if summary else None
        usage = summary.usage if summary else Usage()
        model = (summary.model if summary else None) or self.cfg.get("model")
        if outcome.timed_out:
            return AgentRun(answer, usage, None, True, outcome.duration_s,
                            f"agent timed out after {ctx.timeout_s:g}s", "AgentTimeout", trajectory.name, model)
        error = None
        if outcome.returncode != 0:
            stderr = left_file(ctx.rollout_dir, ctx.stderr_path.name).data or b""
            tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            error = f"{self.host} exited with status {outcome.returncode}" + (f": {tail[0][:200]}" if tail else "")
        run = AgentRun(answer, usage, outcome.returncode, False, outcome.duration_s, error, None,
                       trajectory.name, model)
        if self.host_impl.errors_only_in_stream and error is None and answer is None and summary is not None:
            if summary.errors:   # the host exited 0 on a model error: only its stream says so
                return replace(run, error=f"{self.host} ended on a model error: {summary.errors[-1][:200]}")
        return run


def _tail_lines(path: Path) -> list[str]:
    if not is_plain_file(path.parent, path):
        return []
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - _TAIL_BYTES))
        return handle.read().decode("utf-8", errors="replace").splitlines()[-40:]


def rate_limit_report(trajectory: Path, stderr: Path) -> str | None:
    """The host's last word on a rate limit or overload, if that is how its stream ends; else None.

    Only error reports count (an error event, a failed turn or result, an API retry), never
    what a tool printed, so a task about HTTP 429 is not mistaken for one."""
    return rate_limit_of(last_error_report(trajectory, stderr))


def rate_limit_of(last_error: str | None) -> str | None:
    """The last line of ``last_error`` when it reports a rate limit or overload, else None."""
    if last_error and _RATE_LIMIT_TEXT.search(last_error):
        return last_error.strip().splitlines()[-1]
    return None


def last_error_report(trajectory: Path, stderr: Path) -> str | None:
    """The host's last error report, when its stream ends on one (an error event, a failed turn
    or result, an API retry; never what a tool printed), else its stderr's last lines."""
    last_error = None
    for line in _tail_lines(trajectory):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        text = None
        if kind in ("error", "turn.failed"):                                   # Codex
            error = event.get("error")
            text = event.get("message") or (error.get("message") if isinstance(error, dict) else error)
        elif kind == "system" and event.get("subtype") == "api_retry":       # Claude Code
            status = event.get("error_status")
            text = f"{status} {event.get('error', '')}".strip() if status in _RATE_LIMIT_STATUS else str(event.get("error"))
        elif kind == "result" and event.get("is_error"):
            text = str(event.get("result") or event.get("errors") or "")
        elif isinstance(event.get("error"), str):                              # an assistant's API error
            text = event["error"]
        elif kind in ("message_end", "turn_end") and isinstance(event.get("message"), dict):   # Pi
            message = event["message"]
            if message.get("stopReason") == "error":
                text = str(message.get("errorMessage") or "")
        if text:
            last_error = str(text)
        elif kind in _PROGRESS:      # the session went on after that error: it is not the end
            last_error = None
    if last_error is None:          # no stream (the host failed early): its stderr's last lines
        tail = [line for line in _tail_lines(stderr) if line.strip()][-3:]
        last_error = "\n".join(tail) if tail else None
    return last_error
