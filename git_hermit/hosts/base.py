"""The Host protocol: what git-hermit needs to know and do for one coding-agent CLI.

A host is one package (hosts/codex/, hosts/claude_code/, hosts/pi/, or a plugin's module): its
``__init__`` subclasses ``Host`` once (binary, session, deploy layout, hook wire, capability
rows), ``trajectory.py`` reads its session files and ``layout.py`` writes its plugin format;
the Host reaches those two lazily, so listing hosts imports neither. Rollouts, learners,
deploy, convert, trace, hostcheck, conformance and doctor ask the host, never branch on its
name. This protocol imports only errors, locate and wire (no rollouts, no adapter, no readers);
the data it names (PluginFormat, ReadState, Step) is in model/, below it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Mapping

from git_hermit.errors import InputError
from git_hermit.hosts import locate
from git_hermit.hosts.wire import Wire

# Data from the layer below, named in signatures only: a warm `log` lists hosts and must not
# import the rollout record model/trajectory.py's Usage brings (tests/test_scale.py).
if TYPE_CHECKING:
    from git_hermit.model.plugin_format import PluginFormat
    from git_hermit.model.trajectory import ReadState, Step


@dataclass(frozen=True)
class Layout:
    """Where the host reads a deployed adapter (relative to the workspace)."""

    context_file: str                     # AGENTS.md, CLAUDE.md
    skills_dir: str                       # native skills: <skills_dir>/<name>/SKILL.md
    hooks_config: str | None = None       # the project hooks file; None: the host runs no hooks
    hook_args: tuple[str, ...] = ()       # argv the host needs to run the project's hooks
    native_sub_agents: bool = False       # False: the context file points to the definitions


@dataclass(frozen=True)
class ContextLimit:
    """What the host reads of the context file; past ``limit`` the deployment is flagged."""

    limit: int
    unit: str                             # "bytes" or "chars"
    severity: str                         # "error" (content is dropped) or "warning"
    consequence: str                      # the end of the message: what the host does past it

    def measure(self, data: bytes) -> int:
        return len(data) if self.unit == "bytes" else len(data.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class HookWire:
    """How the host's hooks behave: the events its deployment registers and the seed table's
    rows as measured on the pinned version (True: observed; None: not applicable)."""

    events: tuple[str, ...]
    failed_tool_event: str                # the event a failed tool call fires
    before_model_event: str               # the event whose context reaches the next model request
    updated_input_extra: Mapping[str, str] = field(default_factory=dict)   # fields a new input must carry
    capabilities: Mapping[str, bool | None] = field(default_factory=dict)

    def can(self, row: str) -> bool:
        return bool(self.capabilities.get(row))


@dataclass(frozen=True)
class Login:
    """The user's own login files: ``user_dir`` under the real home, copied into the session's
    config dir when hermit.yaml says ``login:`` (never into git, notes or logs)."""

    user_dir: str
    files: tuple[str, ...]
    value: str = "yes"                    # the ``login:`` value hints suggest
    command: str = ""                     # the host's own command that writes the files


@dataclass(frozen=True)
class SessionSpec:
    """What one session asks of the host: hermit.yaml's ``agent:`` block (or a learner's
    model block, or the conformance harness's scripted server), typed."""

    model: str | None = None
    effort: str | None = None
    web_search: bool | None = None
    base_url: str | None = None
    wire_api: str | None = None
    env_key: str | None = None
    provider_name: str = "hermit"
    args: tuple[str, ...] = ()
    retries: int = 2                      # the host's own request retries (0: fail fast)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SessionSpec:
        provider = cfg.get("provider") or {}
        return cls(model=cfg.get("model"), effort=cfg.get("effort"), web_search=cfg.get("web_search"),
                   base_url=provider.get("base_url"), wire_api=provider.get("wire_api"),
                   env_key=provider.get("env_key"), provider_name=provider.get("name", "hermit"),
                   args=tuple(cfg.get("args") or ()))


@dataclass(frozen=True)
class SubAgent:
    """A sub-agent the adapter defines (``agents/<name>.md``, ``sub_agents/<name>/AGENT.md``)."""

    name: str
    description: str
    body: str
    source: bytes


# A synthetic hook call: fire(event, payload) -> the merged hook output.
Fire = Callable[[str, dict[str, Any]], dict[str, Any]]


def denied(output: dict[str, Any]) -> bool:
    """True when a hook output refuses the call (a deny decision or a block)."""
    specific = output.get("hookSpecificOutput") or {}
    return specific.get("permissionDecision") == "deny" or output.get("decision") == "block"


class Host(ABC):
    """One coding-agent CLI. Subclasses set the class attributes and write ``session``."""

    name: ClassVar[str]                   # hermit.yaml's host / agent.backend value
    binary: ClassVar[str]                 # the CLI's executable name
    package: ClassVar[str]                # the pinned npm package, name@version
    aliases: ClassVar[tuple[str, ...]] = ()
    family: ClassVar[str]                 # `git hermit trace --format` value
    trajectory_formats: ClassVar[tuple[str, ...]]   # the reader formats its sessions write, stored session first
    # The files (a glob under config_dir) in which it stores a session beside its stream, one
    # per agent (a sub-agent's apart), read as trajectory_formats[0]; None: it stores none.
    stored_sessions: ClassVar[str | None] = None
    default_endpoint: ClassVar[str]       # the model endpoint without provider.base_url (sandbox)
    api_path: ClassVar[str] = ""          # appended to a model server's root for the default wire
    # The model a session against the scripted server names; None: the CLI's own default.
    scripted_model: ClassVar[str | None] = "scripted-model"
    home_env: ClassVar[tuple[str, ...]] = ()   # variables naming its private config dir (agent.env may not)
    layout: ClassVar[Layout]
    wire: ClassVar[HookWire | None] = None   # None: runs no hooks
    # How its hook payloads are read and answered: deployed as the adapter runtime's hook_wire.py
    # (None: the runtime cannot serve it; a host without hooks that runs them by hand has one too).
    hook_wire: ClassVar[Wire | None] = None
    # seed 000's capability table, this host's rows as text (what the ahe learner is told)
    capability_notes: ClassVar[Mapping[str, str]] = {}
    login: ClassVar[Login]
    learner: ClassVar[bool] = False       # may run a learner session (evolver.base)
    context_limit: ClassVar[ContextLimit | None] = None
    key_var: ClassVar[str | None] = None  # the API key variable it reads when no env_key is named
    errors_only_in_stream: ClassVar[bool] = False   # exits 0 on a model error; the stream says so

    # -- the binary
    def find(self) -> Path | None:
        """The installed CLI, or None."""
        return locate.find_cli(self.binary)

    def version(self, path: Path | str) -> str:
        return locate.cli_version(path)

    # -- a session (the one definition rollouts, learners, conformance and doctor run)
    @abstractmethod
    def config_dir(self, home: Path) -> Path:
        """The host's private config dir inside the session's ``home``."""

    @abstractmethod
    def session(self, binary: Path | str, spec: SessionSpec, prompt: str, home: Path,
                base_env: Mapping[str, str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """Write the host's config into ``home``; return the argv and environment of one run.
        ``base_env`` is the session's minimal environment; ``environ`` the caller's, read
        only for the API key ``spec.env_key`` names."""

    # -- deploy
    def sub_agent_file(self, agent: SubAgent) -> tuple[str, bytes] | None:
        """Where (and as what) the host reads a sub-agent natively; None when it has none."""
        return None

    # -- its trajectories (trajectories/reader.py reads every host's through these)
    def sniff_format(self, record: dict[str, Any], weak: bool = False) -> str | None:
        """Which of ``trajectory_formats`` a file whose line is ``record`` is, or None. The
        reader asks every host (strong shapes first); ``weak`` is its second pass, for shapes
        so plain another host's lines could have them."""
        return None

    def read_trajectory(self, fmt: str, path: Path, state: ReadState) -> Iterator[Step]:
        """The steps of ``path``, a file in this host's format ``fmt``, read as a stream into
        ``state`` (its records through trajectories._stream.iter_records)."""
        raise InputError(f"{self.name} has no reader for its {fmt} trajectories",
                         hint="convert the file to ATIF, or pass another format")

    def sub_sessions(self, fmt: str, path: Path, session_id: str | None) -> list[Path]:
        """The sessions this one (``path``, in this host's format ``fmt``, its ``session_id``)
        spawned: its sub-agents' files where the host keeps them (`git hermit trace` reads them
        in the same format)."""
        return []

    def parent_file(self, fmt: str, path: Path, session_id: str | None,
                    parent_session_id: str | None) -> Path | None:
        """The session file that spawned the one in ``path`` (a sub-agent's), when it is found."""
        return None

    # -- convert --target
    def plugin_format(self) -> PluginFormat | None:
        """Its own plugin (or package) format; None: `convert` cannot target it."""
        return None

    # -- hostcheck's synthetic session (hook hosts only)
    def hook_env(self, dest: Path, scratch: Path, session_id: str) -> dict[str, str]:
        """What the host adds to a hook's environment."""
        return {}

    def synthetic_session(self, fire: Fire, dest: Path, prompt: str,
                          tool_calls: tuple[tuple[str, str], ...], session_id: str, turn_id: str) -> None:
        """Fire the host's events, in its order and payload shapes, for one session."""
        raise NotImplementedError(f"{self.name} runs no hooks")
