"""Learners: LLM sessions that read a run's evidence and edit files, or answer one query.

Sessions (``codex``, ``claude-code``) run the host CLI in a learner workspace, reusing the
acting-agent backends; one-shot calls go to an OpenAI-compatible ``base_url`` or Anthropic;
``scripted`` learners are Python functions for tests and the offline demo. A caller that
asks again (a reply it could not use) passes the earlier exchanges: a chat call sends them as
the conversation's messages, a session or a scripted learner reads them in its prompt.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from git_hermit.agents import AgentContext, make_agent
from git_hermit.agents.base import AgentBackend
from git_hermit.errors import AgentError, ConfigError
from git_hermit.hosts import registry
from git_hermit.model.learner import Exchange, Learner, LearnerResult, Sampling
from git_hermit.model.rollout import Usage
from git_hermit.supervise.scratch import scratch


# The CLIs take the prompt as one argv string, and Linux caps one at 128 KiB (MAX_ARG_STRLEN);
# a longer prompt goes to a file in the workspace and the session is told to read it.
PROMPT_FILE_THRESHOLD = 100_000
ANTHROPIC_MAX_TOKENS = 8000     # an Anthropic call's max_tokens when the caller sets none


def conversation_text(earlier: tuple[Exchange, ...], prompt: str) -> str:
    """A conversation as one prompt, for learners that take one text (sessions, scripted)."""
    if not earlier:
        return prompt
    parts = []
    for number, exchange in enumerate(earlier, 1):
        parts += [exchange.asked, f"\n--- your answer {number} ---\n{exchange.answered}\n--- end of answer {number} ---\n"]
    return "\n".join([*parts, prompt])


@dataclass
class SessionLearner:
    """A Codex or Claude Code session in a learner workspace (the acting-agent backend reused)."""

    role: str
    backend: str
    cfg: dict[str, Any]
    sandbox: Any = None           # a supervise.sandbox.SandboxSpec, or None: unsandboxed
    hide: tuple[str, ...] = ()    # workspace paths (globs) the session must not see (seed 000 ``hide``)

    def _agent(self) -> AgentBackend:
        return make_agent({**self.cfg, "backend": self.backend})

    def check_available(self) -> None:
        self._checked_agent()

    def _checked_agent(self) -> AgentBackend:
        """The backend, available; its errors name the learner's settings, not the agent's."""
        agent = self._agent()
        try:
            agent.check_available()
        except AgentError as exc:
            def fix(text: str | None) -> str | None:
                return text and text.replace("agent.bin", "evolver.model.bin").replace(
                    "agent.provider", "evolver.model.provider")
            raise AgentError(f"learner: {fix(exc.message)}", hint=fix(exc.hint)) from None
        return agent

    def ask(self, workspace: Path, prompt: str, *, timeout_s: float, key: str,
            earlier: tuple[Exchange, ...] = (), sampling: Sampling | None = None) -> LearnerResult:
        # ``sampling`` is a chat call's: a session's CLI sets its own (the evolvers refuse it for one)
        prompt = conversation_text(earlier, prompt)
        agent = self._checked_agent()
        session_dir = workspace.parent / f".session-{self.role}-{_safe(key)}"
        if session_dir.exists():
            shutil.rmtree(session_dir)
        session_dir.mkdir(parents=True)
        # The workspace lives inside the user's repository (.hermit/runs/…); run the session in a
        # copy outside it, so the CLI does not load that repository's AGENTS.md / CLAUDE.md or
        # project .codex/.claude settings and hooks as its own. The edits are copied back. The
        # private home (copied login files) lives in private scratch, removed after the session.
        with scratch(f"{_safe(self.role)}-") as tmp:
            place = tmp / "workspace"
            hidden = _hidden(workspace, self.hide)
            shutil.copytree(workspace, place, symlinks=True,
                            ignore=lambda d, names: [n for n in names if Path(d, n) in hidden])
            (tmp / "home").mkdir()
            if len(prompt.encode()) > PROMPT_FILE_THRESHOLD:
                prompt = _prompt_by_file(place, prompt, f"PROMPT-{_safe(self.role)}.md")
            ctx = AgentContext(rollout_dir=session_dir, workspace=place, home=tmp / "home",
                               prompt=prompt, timeout_s=timeout_s, attempt=1, task_id=key, host=self.backend,
                               sandbox=self.sandbox)
            run = agent.run(ctx)
            kept = tmp / "hidden"               # hidden paths keep their own content
            for path in hidden:
                target = kept / path.relative_to(workspace)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
            _remove_tree(workspace)
            shutil.copytree(place, workspace, symlinks=True)
            for path in hidden:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(kept / path.relative_to(workspace), path)
            _remove_tree(place)   # read-only copies in it (before/) would outlive the scratch's cleanup
        ok = run.error is None and not run.timed_out and bool(run.final_answer)
        return LearnerResult(run.final_answer or "", run.usage, ok,
                             None if ok else (run.error or "the session gave no answer"), run.duration_s, run.model)


@dataclass
class OneShotLearner:
    """One chat call (OpenAI-compatible or Anthropic). It cannot open or edit files, so an
    editing role (the Evolve Agent) gets the files in its prompt and answers with its edits
    (``oneshot_edits``); a reading role (the Debugger) answers from the prompt alone."""

    role: str
    api: str                      # "openai" | "anthropic"
    cfg: dict[str, Any]

    def check_available(self) -> None:
        module = "openai" if self.api == "openai" else "anthropic"
        try:
            importlib.import_module(module)
        except ImportError:
            raise AgentError(f"the {module} package is not installed",
                             hint=f"pip install 'git-hermit[{module}]'") from None

    def ask(self, workspace: Path, prompt: str, *, timeout_s: float, key: str,
            earlier: tuple[Exchange, ...] = (), sampling: Sampling | None = None) -> LearnerResult:
        from git_hermit.learners import oneshot_edits
        edits = self.role == "evolve"
        messages: list[tuple[str, str]] = []
        for exchange in earlier:
            messages += [("user", exchange.asked), ("assistant", exchange.answered)]
        messages.append(("user", oneshot_edits.edit_prompt(workspace, prompt) if edits and not earlier else prompt))
        result = self._complete(messages, timeout_s, sampling or Sampling())
        if edits and result.ok:
            problems = oneshot_edits.apply_reply(workspace, result.text)
            if problems:
                return LearnerResult(result.text, result.usage, False, "; ".join(problems),
                                     result.duration_s, result.model)
        return result

    def _complete(self, messages: list[tuple[str, str]], timeout_s: float, sampling: Sampling) -> LearnerResult:
        """One call to the model: its text and usage (a failure is a LearnerResult, not raised).

        The official SDKs retry a 429 (after its Retry-After), a 5xx, a dropped connection and a
        timeout ``max_retries`` times (default 2); what still fails is reported with its reason."""
        import os
        provider = self.cfg.get("provider") or {}
        env_key = provider.get("env_key") or ("OPENAI_API_KEY" if self.api == "openai" else "ANTHROPIC_API_KEY")
        api_key = os.environ.get(env_key)
        # An empty name reaches the provider, which answers with its own error (as None did).
        model = str(self.cfg.get("name") or self.cfg.get("model") or "")
        stream = bool(self.cfg.get("stream"))
        retries = self.cfg.get("max_retries")
        retries = 2 if retries is None else int(retries)
        start = time.monotonic()
        try:
            if self.api == "openai":
                text, usage = _openai_chat(provider.get("base_url"), api_key, model, messages, timeout_s, retries,
                                           stream, sampling)
            else:
                text, usage = _anthropic_message(provider.get("base_url"), api_key, model, messages, timeout_s,
                                                 retries, stream, sampling)
        except Exception as exc:   # a failed call is the learner's error, retried by the caller
            return LearnerResult("", Usage(), False, f"{type(exc).__name__}: {exc}"[:300],
                                 time.monotonic() - start, model)
        return LearnerResult(text, usage, bool(text.strip()), None if text.strip() else "empty answer",
                             time.monotonic() - start, model)


def _openai_chat(base_url: str | None, api_key: str | None, model: str, turns: list[tuple[str, str]],
                 timeout_s: float, retries: int, stream: bool, sampling: Sampling) -> tuple[str, Usage]:
    """One OpenAI Chat Completions call (what OpenAI, vLLM, Ollama, llama.cpp serve)."""
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam
    client = OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout_s, max_retries=retries)
    messages: list[ChatCompletionMessageParam] = [
        {"role": "assistant", "content": text} if role == "assistant" else {"role": "user", "content": text}
        for role, text in turns]
    extra: dict[str, Any] = {key: value for key, value in (("max_tokens", sampling.max_tokens),
                                                           ("temperature", sampling.temperature)) if value is not None}
    if not stream:
        reply = client.chat.completions.create(model=model, messages=messages, **extra)
        if not reply.choices:
            raise ValueError("the answer has no choices")
        return reply.choices[0].message.content or "", _chat_usage(reply.usage)
    parts: list[str] = []
    usage = Usage()
    for chunk in client.chat.completions.create(model=model, messages=messages, stream=True,
                                                stream_options={"include_usage": True}, **extra):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if getattr(chunk, "usage", None):
            usage = _chat_usage(chunk.usage)
    return "".join(parts), usage


def _chat_usage(u: Any) -> Usage:
    if u is None:
        return Usage()
    return Usage(getattr(u, "prompt_tokens", 0) or 0,
                 getattr(getattr(u, "prompt_tokens_details", None), "cached_tokens", 0) or 0,
                 getattr(u, "completion_tokens", 0) or 0)


def _anthropic_message(base_url: str | None, api_key: str | None, model: str, turns: list[tuple[str, str]],
                       timeout_s: float, retries: int, stream: bool, sampling: Sampling) -> tuple[str, Usage]:
    """One Anthropic Messages call (streamed through the SDK's event accumulator when asked)."""
    from anthropic import Anthropic
    from anthropic.types import Message, MessageParam
    client = Anthropic(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=retries)
    messages: list[MessageParam] = [
        {"role": "assistant", "content": text} if role == "assistant" else {"role": "user", "content": text}
        for role, text in turns]
    # the Messages API requires max_tokens: without a setting, what this call always asked for
    limit = sampling.max_tokens or ANTHROPIC_MAX_TOKENS
    # the SDK's create() takes no temperature argument (2.x): it goes in the request body
    extra: dict[str, Any] = {} if sampling.temperature is None else {"extra_body": {"temperature": sampling.temperature}}
    reply: Message
    if stream:
        with client.messages.stream(model=model, max_tokens=limit, messages=messages, **extra) as events:
            reply = events.get_final_message()
    else:
        reply = client.messages.create(model=model, max_tokens=limit, messages=messages, **extra)
    text = "".join(getattr(block, "text", "") for block in reply.content)
    return text, Usage(reply.usage.input_tokens, getattr(reply.usage, "cache_read_input_tokens", 0) or 0,
                       reply.usage.output_tokens)


@dataclass
class ScriptedLearner:
    """A Python function standing in for a model: ``fn(workspace, prompt, key) -> str``."""

    role: str
    fn: Callable[[Path, str, str], str]

    def check_available(self) -> None:
        return None

    def ask(self, workspace: Path, prompt: str, *, timeout_s: float, key: str,
            earlier: tuple[Exchange, ...] = (), sampling: Sampling | None = None) -> LearnerResult:
        prompt = conversation_text(earlier, prompt)
        start = time.monotonic()
        try:
            text = self.fn(workspace, prompt, key)
        except Exception as exc:
            return LearnerResult("", Usage(), False, f"{type(exc).__name__}: {exc}", time.monotonic() - start)
        usage = Usage(input_tokens=len(prompt) // 4, output_tokens=len(text) // 4)
        return LearnerResult(text, usage, bool(text.strip()), None, time.monotonic() - start, "scripted")


def _prompt_by_file(workspace: Path, prompt: str, name: str) -> str:
    path = workspace / ".hermit" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prompt, encoding="utf-8")
    return (f"Your full instructions and task are in the file .hermit/{name} in the current directory "
            f"({len(prompt):,} characters, too long to pass here). Read all of it first, then follow it exactly.")


def _hidden(workspace: Path, patterns: tuple[str, ...]) -> set[Path]:
    """The workspace paths the ``hide`` globs match (never the workspace itself)."""
    found: set[Path] = set()
    for pattern in patterns:
        for path in workspace.glob(str(pattern).strip("/")):
            if path != workspace and workspace in path.parents:
                found.add(path)
    # a path under another hidden one goes with its parent
    return {p for p in found if not any(q in p.parents for q in found)}


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:80]


def load_callable(spec: str) -> Callable[..., Any]:
    from git_hermit.loader import load
    try:
        return load(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"cannot load scripted learner {spec!r} ({exc})", hint="give it as module:function") from None


def is_session_base(base: str) -> bool:
    """Whether ``evolver.base`` names a host CLI session (codex, claude-code …), not a one-shot call."""
    return registry.known(base) and registry.get(base).learner


def make_learner(evolver_cfg: dict[str, Any], role: str, *, base: str | None = None,
                 scripted_default: str | None = None, overrides: dict[str, Any] | None = None) -> Learner:
    """The learner for ``role`` from hermit.yaml's ``evolver:`` block (base + model). ``base``: the
    config's learner_base (its default applied there), else the block's own ``base``."""
    base = base if base is not None else str(evolver_cfg["base"])
    model_cfg = dict(evolver_cfg.get("model") or {})
    model_cfg.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if base == "scripted":
        spec = (evolver_cfg.get("scripted") or {}).get(role) or scripted_default
        if not spec:
            raise ConfigError(f"evolver.scripted.{role} is not set", hint="name a module:function")
        return ScriptedLearner(role, load_callable(spec))
    if is_session_base(base):
        cfg = {"model": model_cfg.get("name"), "effort": model_cfg.get("effort"), "login": model_cfg.get("login"),
               "home": model_cfg.get("home"), "provider": model_cfg.get("provider"), "bin": model_cfg.get("bin"),
               "args": list(model_cfg.get("args") or [])}
        return SessionLearner(role, registry.get(base).name, cfg)
    if base in ("llm", "openai"):
        return OneShotLearner(role, "openai", model_cfg)
    if base == "anthropic":
        return OneShotLearner(role, "anthropic", model_cfg)
    hosts = ", ".join(h.name for h in registry.learner_hosts())
    raise ConfigError(f"unknown learner base {base!r}", hint=f"use {hosts}, llm, anthropic or scripted")


def _remove_tree(root: Path) -> None:
    """rmtree that also removes read-only directories (the Evolve workspace's ``before/`` copies)."""
    for directory, dirs, _ in os.walk(root):
        for name in [directory, *(os.path.join(directory, d) for d in dirs)]:
            if not os.path.islink(name):
                os.chmod(name, os.stat(name).st_mode | 0o700)
    shutil.rmtree(root)
