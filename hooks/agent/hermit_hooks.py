"""The middleware's interface: HookInput (what a hook event tells the middleware) and
HookResult (what the middleware asks the host to do). Stdlib-only and import-light on
purpose: the hook runner starts once per host event, so this module avoids dataclasses and
typing (each costs more than the interpreter's own start-up).
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy reads the imports below; the hook never pays for `typing`
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _Record = TypeVar("_Record", bound="_Frozen")

# The middleware functions, one per lifecycle moment (middleware.py defines all five).
EVENTS = ("session_start", "before_tool", "after_tool", "stop", "before_model")

# inp.tool_kind values; the host's own tool name is in inp.tool_name.
TOOL_KINDS = ("shell", "patch", "read", "write", "mcp", "other")


class _Frozen:
    """A small frozen record: keyword-only construction, equality, repr, replace()."""

    __slots__: tuple[str, ...] = ()
    _defaults: tuple[tuple[str, Any], ...] = ()

    def __init__(self, **fields: Any) -> None:
        for name in fields:
            if name not in self.__slots__:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
        for name, default in self._defaults:
            object.__setattr__(self, name, fields.get(name, default))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def replace(self: _Record, **fields: Any) -> _Record:
        merged = {name: getattr(self, name) for name in self.__slots__}
        merged.update(fields)
        return type(self)(**merged)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(repr(getattr(self, n)) for n in self.__slots__))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{n}={getattr(self, n)!r}" for n, d in self._defaults if getattr(self, n) != d
        )
        return f"{type(self).__name__}({shown})"


class HookInput(_Frozen):
    """One host event, the same shape on every host (each host module's capability_notes say what differs).

    event        one of EVENTS: the middleware function being called
    task         the task text: the workspace's task.md, else the session's first prompt
    tool_kind    shell | patch | read | write | mcp | other (tool events only)
    tool_name    the host's tool name ("Bash", "apply_patch", "Write", "mcp__srv__fn" ...)
    tool_input   the tool call's input as the host sent it (a dict)
    output_text  after_tool: the call's output text; None when the host gives none
    failed       after_tool: True/False, or None when the host cannot tell (Codex)
    exit_code    after_tool: the command's exit code when the host reports one
    cwd          the host's current directory for this event
    workspace    the deployment's root (where task.md and .hermit-hooks/ live)
    model        the model name when the host sends it (Codex), else None
    turn_id      the turn (Codex) or the prompt's id (Claude Code)
    source       session_start: startup | resume | clear | compact
    host         codex | claude-code | pi
    host_event   the host's own event name (PreToolUse, PostToolBatch ...)
    session_id   the host's session id
    prompt       the prompt of the current turn when the host sent it
    payload      the host's raw payload (a dict), for anything not mapped above
    """

    __slots__ = (
        "event", "task", "tool_kind", "tool_name", "tool_input", "output_text", "failed",
        "exit_code", "cwd", "workspace", "model", "turn_id", "source", "host", "host_event",
        "session_id", "prompt", "payload",
    )
    # The fields' types, for the reader and for mypy (annotations only: __slots__ holds them).
    event: str
    task: str
    tool_kind: str | None
    tool_name: str | None
    tool_input: dict[str, Any] | None
    output_text: str | None
    failed: bool | None
    exit_code: int | None
    cwd: str
    workspace: str
    model: str | None
    turn_id: str | None
    source: str | None
    host: str
    host_event: str
    session_id: str | None
    prompt: str | None
    payload: dict[str, Any] | None
    _defaults = (
        ("event", ""), ("task", ""), ("tool_kind", None), ("tool_name", None),
        ("tool_input", None), ("output_text", None), ("failed", None), ("exit_code", None),
        ("cwd", ""), ("workspace", ""), ("model", None), ("turn_id", None), ("source", None),
        ("host", ""), ("host_event", ""), ("session_id", None), ("prompt", None),
        ("payload", None),
    )


class HookResult(_Frozen):
    """What the middleware asks for; each host honours the parts its CAPABILITIES row names.

    context         text handed to the model (before_model: queued for the next hand-over)
    deny            before_tool: do not run the call; the model reads `reason`
    allow           before_tool: run the call without asking
    updated_input   before_tool: run this tool input instead (a dict in the host's shape)
    block           after_tool: the model reads `reason` (Codex: instead of the output);
                    stop: do not stop yet, the model goes on with `reason` (once per turn)
    reason          the text for deny / block / stop_session
    stop_session    end the session (only where the host can: see CAPABILITIES)
    system_message  shown to the person watching (Claude Code), never to the model
    """

    __slots__ = (
        "context", "deny", "allow", "updated_input", "block", "reason", "stop_session",
        "system_message",
    )
    context: str | None
    deny: bool
    allow: bool
    updated_input: dict[str, Any] | None
    block: bool
    reason: str | None
    stop_session: bool
    system_message: str | None
    _defaults = (
        ("context", None), ("deny", False), ("allow", False), ("updated_input", None),
        ("block", False), ("reason", None), ("stop_session", False), ("system_message", None),
    )
