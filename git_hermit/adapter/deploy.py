"""Deploy an adapter for one host: the context file, hooks, skills and sub-agents where that
host reads them, the adapter's runtime copy in `.hermit-adapter/`, and `.hermit-deploy.json`
(the DeployRecord: host, hook command, every file written with its hash, so a redeploy is
idempotent and never overwrites a file it did not write unless forced).

Layout of a deployment (DEST is usually the rollout's workspace):
  .hermit-deploy.json          the record; the hook runner reads the host from it
  .hermit-adapter/             the whole adapter as committed (middleware.py, MEMORY.md, scripts/,
                               agents/, hook_runner.py ...); hooks run the runner from here
  AGENTS.md | CLAUDE.md        the context file (adapter's AGENTS.md + a footer naming the copy)
  .codex/hooks.json            Codex hooks (project layer)       | only for adapters with
  .claude/settings.json        Claude Code hooks                 | a middleware.py
  .agents/skills/<n>/          Codex and Pi skills; Claude Code: .claude/skills/<n>/
  .claude/agents/<n>.md        Claude Code sub-agents
  .codex/agents/<n>.toml       Codex agent roles (name, description, developer_instructions: what
                               Codex 0.164 discovers and offers to spawn_agent); Pi has no
                               sub-agents, its context file points to their definitions
  memory/NOTES.md              the memory notes, where the policy tells the agent to read them
"""

from __future__ import annotations

import hashlib
import importlib.util
import py_compile
import threading
import json
import os
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from git_hermit import errors, resources
from git_hermit.hosts import registry
from git_hermit.hosts.base import Host, Layout, SubAgent
from git_hermit.hosts.wire import DEPLOYED_NAME, deployed_source

RECORD_NAME = ".hermit-deploy.json"
RUNTIME_DIR = ".hermit-adapter"
RECORD_VERSION = 1
RUNNER_FILES = ("hook_runner.py", "hermit_hooks.py", "hooks.json")
# The host's wire, written at deploy time from its host module (never committed: not the adapter's).
WIRE_FILE = DEPLOYED_NAME
# The runner's own deadline; hooks.json gives the host 30 s, so the runner always answers first.
HOOK_TIMEOUT_S = 20.0
_SKIPPED_PARTS = {".git", "__pycache__"}


@dataclass(frozen=True)
class DeployRecord:
    """What a deployment wrote; saved as DEST/.hermit-deploy.json."""

    host: str
    dest: str
    adapter_dir: str
    context_file: str
    runtime_dir: str
    hooks: bool  # False for templates without middleware.py (no hooks installed)
    interpreter: str | None
    hooks_config: str | None
    hook_command: str | None  # the command for one event, with EVENT as placeholder
    host_args: tuple[str, ...] = ()
    hook_timeout_s: float = HOOK_TIMEOUT_S
    files: dict[str, str] = field(default_factory=dict)  # relpath -> sha256 of what we wrote
    v: int = RECORD_VERSION

    def command_for(self, event: str) -> str | None:
        return self.hook_command.replace("EVENT", event) if self.hook_command else None

    def to_json(self) -> str:
        data = asdict(self)
        data["host_args"] = list(self.host_args)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DeployRecord:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("v") != RECORD_VERSION:
            raise ValueError("not a version-1 deploy record")
        data["host_args"] = tuple(data.get("host_args", ()))
        return cls(**data)


def read_record(dest: Path) -> DeployRecord | None:
    """The record of the deployment in DEST, None when there is none; InputError if unreadable."""
    path = Path(dest) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        return DeployRecord.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, TypeError) as exc:
        raise errors.InputError(
            f"{path} is not a deploy record git hermit can read ({exc})",
            hint="remove it, or deploy with force=True (--force) to replace it",
        ) from None


def deploy(adapter_dir: Path, dest: Path, host: str, *, force: bool = False,
           interpreter: str | None = None) -> DeployRecord:
    """Write ADAPTER_DIR's deployment for HOST into DEST and return its record."""
    if not registry.known(host):
        raise errors.InputError(f"unknown host {host!r}", hint=f"use one of: {', '.join(registry.names())}")
    impl = registry.get(host)
    host, layout = impl.name, impl.layout
    adapter_dir, dest = Path(adapter_dir).resolve(), Path(dest).resolve()
    if not adapter_dir.is_dir():
        raise errors.InputError(f"adapter directory {adapter_dir} does not exist")
    if dest == adapter_dir or adapter_dir in dest.parents:
        raise errors.InputError(f"cannot deploy {adapter_dir} into itself ({dest})",
                                hint="deploy into a directory outside the adapter")
    sources = _adapter_files(adapter_dir)
    if "AGENTS.md" not in sources:
        raise errors.InputError(f"{adapter_dir} has no AGENTS.md", hint="is this an adapter directory?")
    has_hooks = "middleware.py" in sources and layout.hooks_config is not None
    python = _interpreter(interpreter) if "middleware.py" in sources else None
    runtime = dest / RUNTIME_DIR

    plan: dict[str, bytes] = {}
    for rel, src in sources.items():
        plan[f"{RUNTIME_DIR}/{rel}"] = src.read_bytes()
    hook_command = hooks_config = None
    if python is not None:       # the adapter has a middleware.py
        shipped = resources.hooks_dir() / "agent"
        for name in RUNNER_FILES:  # the fixed files, from the adapter or else as shipped
            plan.setdefault(f"{RUNTIME_DIR}/{name}", (shipped / name).read_bytes())
        if impl.hook_wire is not None:
            plan[f"{RUNTIME_DIR}/{WIRE_FILE}"] = wire_source(impl).encode()
        rendered = render_hooks(plan[f"{RUNTIME_DIR}/hooks.json"], shlex.quote(python), shlex.quote(str(runtime)))
        hook_command = _command_template(rendered)
        if layout.hooks_config is not None:
            hooks_config = layout.hooks_config
            plan[hooks_config] = (json.dumps({"hooks": rendered["hooks"]}, indent=2) + "\n").encode()
    context = sources["AGENTS.md"].read_text(encoding="utf-8")
    plan[layout.context_file] = (context + _footer(impl, sources, python, runtime)).encode()
    for rel, src in sources.items():
        target = _host_location(layout, rel)
        if target:
            plan[target] = src.read_bytes()
        native = _native_sub_agent(impl, rel, src)
        if native:
            plan[native[0]] = native[1]

    previous = None if force and not _record_readable(dest) else read_record(dest)
    owned = dict(previous.files) if previous else {}
    _refuse_foreign(dest, plan, owned, force)
    written = {}
    for rel, content in plan.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != content:
            path.write_bytes(content)
        written[rel] = _sha256(content)
    _remove_stale(dest, owned, written)
    record = DeployRecord(
        host=host, dest=str(dest), adapter_dir=str(adapter_dir),
        context_file=layout.context_file, runtime_dir=RUNTIME_DIR, hooks=has_hooks,
        interpreter=python, hooks_config=hooks_config, hook_command=hook_command,
        host_args=layout.hook_args if hooks_config else (),
        files=dict(sorted(written.items())),
    )
    (dest / RECORD_NAME).write_text(record.to_json(), encoding="utf-8")
    if python:
        _precompile(python, runtime)
    return record


# -- helpers -----------------------------------------------------------------------------------

def wire_source(host: Host) -> str:
    """The host's hook_wire.py; a wire whose source cannot be read (defined outside a file) is an
    installation error, not a traceback."""
    assert host.hook_wire is not None
    try:
        return deployed_source(host.hook_wire)
    except (OSError, TypeError) as exc:
        raise errors.HermitError(f"cannot read the source of host {host.name!r}'s hook wire "
                                 f"{type(host.hook_wire).__name__} ({exc})",
                                 hint="define the host's Wire subclass in a module file (see docs/extending.md)") from None


def _adapter_files(adapter_dir: Path) -> dict[str, Path]:
    files = {}
    for path in sorted(adapter_dir.rglob("*")):
        rel = path.relative_to(adapter_dir)
        if not path.is_file() or _SKIPPED_PARTS & set(rel.parts) or path.suffix == ".pyc":
            continue
        if rel.parts[0].startswith(".hermit-"):
            continue
        files[rel.as_posix()] = path
    return files


def _interpreter(interpreter: str | None) -> str:
    """The absolute, symlink-free interpreter: a PATH shim (pyenv) costs ~80 ms per hook call."""
    path = os.path.realpath(interpreter or sys.executable)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise errors.InputError(f"interpreter {interpreter or sys.executable} is not an executable file",
                                hint="pass the absolute path of a Python 3.11+ interpreter")
    return path


def render_hooks(template: bytes, python: str, runtime: str) -> dict[str, Any]:
    """hooks.json with its placeholders filled by two shell words: the interpreter and the
    runtime directory (deploy: both quoted paths; a plugin: its host's root variable)."""
    text = template.decode("utf-8")
    # JSON-escape the shell words: they are substituted into JSON string literals.
    for token, value in (("{{python}}", python), ("{{runtime}}", runtime)):
        text = text.replace(token, json.dumps(value)[1:-1])
    try:
        rendered = json.loads(text)
    except json.JSONDecodeError as exc:
        raise errors.InputError(f"the adapter's hooks.json is not valid JSON ({exc})",
                                hint="hooks.json is a fixed file: restore it from the template") from None
    if not isinstance(rendered, dict) or not isinstance(rendered.get("hooks"), dict):
        raise errors.InputError("the adapter's hooks.json has no 'hooks' object",
                                hint="hooks.json is a fixed file: restore it from the template")
    return rendered


def _command_template(rendered: dict[str, Any]) -> str | None:
    for event, groups in rendered["hooks"].items():
        for group in groups:
            for hook in group.get("hooks", []):
                command = hook.get("command", "")
                if command.endswith(f" {event}"):
                    return command[: -len(event)] + "EVENT"
    return None


def _host_location(layout: Layout, rel: str) -> str | None:
    """Where the host reads this adapter file natively (memory, skills), or None."""
    parts = rel.split("/")
    if parts[0] == "memory" and len(parts) >= 2:   # continual-harness: the policy names memory/NOTES.md
        return rel
    if len(parts) >= 4 and parts[:2] == [".agents", "skills"]:
        return f"{layout.skills_dir}/{'/'.join(parts[2:])}"
    if len(parts) >= 3 and parts[0] == "skills":  # evo-harness native skills
        return f"{layout.skills_dir}/{'/'.join(parts[1:])}"
    return None


def _sub_agent_name(rel: str) -> str | None:
    """The sub-agent a file defines: ``agents/<name>.md`` (ahe), ``sub_agents/<name>/AGENT.md``."""
    parts = rel.split("/")
    if len(parts) == 2 and parts[0] == "agents" and rel.endswith(".md"):
        return parts[1][:-3]
    if len(parts) == 3 and parts[0] == "sub_agents" and parts[2] == "AGENT.md":
        return parts[1]
    return None


def _native_sub_agent(host: Host, rel: str, src: Path) -> tuple[str, bytes] | None:
    """The host's native file for the sub-agent ``rel`` defines (its path and content), or None."""
    name = _sub_agent_name(rel)
    if name is None or not host.layout.native_sub_agents:
        return None
    from git_hermit.adapter.front_matter import FrontMatterError, parse_front_matter
    source = src.read_bytes()
    text = source.decode("utf-8", errors="replace")
    try:
        fm = parse_front_matter(text)
        description, body = str(fm.data.get("description") or ""), fm.body.strip()
    except FrontMatterError:
        description, body = "", text.strip()
    return host.sub_agent_file(SubAgent(name, description, body, source))


def _footer(host: Host, sources: dict[str, Path], python: str | None, runtime: Path) -> str:
    """A few lines saying where the adapter's other files went (their paths changed)."""
    lines = ["", "", "---", f"This adapter's files are in `{RUNTIME_DIR}/`."]
    if any(rel.startswith("scripts/") for rel in sources):
        lines.append(f"Run its scripts as `python {RUNTIME_DIR}/scripts/<name>.py`.")
    if not host.layout.native_sub_agents:  # a host without sub-agents reads their definitions
        for folder in ("agents", "sub_agents"):
            if any(rel.startswith(f"{folder}/") for rel in sources):
                lines.append(f"Sub-agent definitions: `{RUNTIME_DIR}/{folder}/`.")
    if host.layout.hooks_config is None and python and "middleware.py" in sources:
        runner = shlex.quote(str(runtime / "hook_runner.py"))
        lines.append("This agent runs no hooks, so run the adapter's session-start hook yourself, "
                     "first thing, and read what it prints (the long-term memory):")
        lines.append(f"`{shlex.quote(python)} -S {runner} SessionStart </dev/null`")
    return "\n".join(lines) + "\n"


def context_room(adapter_dir: Path, unit: str) -> tuple[int, int] | None:
    """(what a host reads, what deploy appends to the context file for it: its footer) for the host
    whose limit in ``unit`` ("bytes" or "chars") leaves the context file the least room; None when no
    host counts in that unit. A size rule counts the footer, so a context file that passes the rule
    still fits in what the host reads once deployed."""
    sources = _adapter_files(Path(adapter_dir))
    python = sys.executable if "middleware.py" in sources else None
    rooms = []
    for host in registry.hosts():
        if host.context_limit is None or host.context_limit.unit != unit:
            continue
        footer = _footer(host, sources, python, Path("/") / RUNTIME_DIR)
        rooms.append((host.context_limit.limit, len(footer.encode()) if unit == "bytes" else len(footer)))
    return min(rooms, key=lambda room: room[0] - room[1]) if rooms else None


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _record_readable(dest: Path) -> bool:
    try:
        read_record(dest)
        return True
    except errors.InputError:
        return False


def _refuse_foreign(dest: Path, plan: dict[str, bytes], owned: dict[str, str], force: bool) -> None:
    foreign = []
    for rel, content in plan.items():
        path = dest / rel
        if path.is_dir():
            foreign.append(rel)
        elif path.is_file():
            current = _sha256(path.read_bytes())
            if current != _sha256(content) and owned.get(rel) != current:
                foreign.append(rel)
    if foreign and not force:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise errors.InputError(
            f"{dest} has files git hermit deploy did not write (or that changed since): {shown}",
            hint="deploy into an empty directory, or pass --force to overwrite them",
        )


def _remove_stale(dest: Path, owned: dict[str, str], written: dict[str, str]) -> None:
    """Files an earlier deployment wrote that this one does not; left alone if edited since."""
    for rel, digest in owned.items():
        path = dest / rel
        if rel in written or not path.is_file() or _sha256(path.read_bytes()) != digest:
            continue
        path.unlink()
        parent = path.parent
        while parent != dest and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


_PYC_BY_SOURCE: dict[bytes, bytes] = {}
_PYC_LOCK = threading.Lock()


def _precompile_cached(runtime: Path) -> None:
    for source in sorted(runtime.glob("*.py")):
        data = source.read_bytes()
        key = hashlib.sha256(data).digest()
        target = Path(importlib.util.cache_from_source(str(source)))
        with _PYC_LOCK:
            cached = _PYC_BY_SOURCE.get(key)
        if cached is None:
            try:
                py_compile.compile(str(source), cfile=str(target), doraise=True,
                                   invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
            except py_compile.PyCompileError:
                continue   # fails open at hook time and is reported by check_spec
            with _PYC_LOCK:
                _PYC_BY_SOURCE[key] = target.read_bytes()
            continue
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(cached)   # importlib sets co_filename to the real source on load


def _precompile(python: str, runtime: Path) -> None:
    """Write the runtime's bytecode with the hook interpreter: hosts often run hooks with
    PYTHONDONTWRITEBYTECODE set, and compiling the runner on every call doubles its cost.
    A middleware that does not compile is not an error here: its hooks fail open and log it,
    and check_spec reports it."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        # Same interpreter (the usual case, e.g. every rollout): same bytecode magic, so compile
        # in-process, once per distinct source (hash-checked .pyc files stay valid whatever the
        # copy's mtime), and save a ~40 ms interpreter start plus ~8 ms of compiling per deployment.
        _precompile_cached(runtime)
        return
    code = "import compileall,sys; compileall.compile_dir(sys.argv[1], maxlevels=0, quiet=2)"
    try:
        result = subprocess.run([python, "-S", "-c", code, str(runtime)], capture_output=True,
                                text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise errors.InputError(f"interpreter {python} cannot run ({exc})",
                                hint="pass the absolute path of a working Python 3.11+") from None
    if result.returncode != 0:
        raise errors.InputError(f"interpreter {python} failed: {result.stderr.strip()[-200:]}",
                                hint="pass the absolute path of a working Python 3.11+")
