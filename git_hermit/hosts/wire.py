"""The shared part of every host's hook wire: its payload -> one HookInput, a HookResult ->
exactly the output fields that host reads (READS). Each host module subclasses ``Wire``;
``deployed_source`` writes this file's deployed part plus the host's subclass into an adapter's
runtime as ``.hermit-adapter/hook_wire.py`` (the hook runner imports ``WIRE`` from it), so the
runtime names no host and a new host is one module.

The deployed part (everything above the ``DEPLOYED PART ENDS`` line) is stdlib-only and does no
I/O: hook_runner.py does the reading, writing and queueing. A host's ``Wire`` subclass may use
only the names defined here and its own attributes (it is copied without its module).
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy reads the imports below; the hook never pays for `typing`
if TYPE_CHECKING:
    from typing import Any

    from hermit_hooks import HookInput, HookResult

# Every event hooks.json registers; each host fires the ones it has and skips the others.
HOST_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
    "PostToolBatch", "Stop", "PreModelRequest",
)


def _join(*parts: str | None) -> str | None:
    text = "\n\n".join(p for p in parts if p)
    return text or None


def _text(value: Any) -> str | None:
    """A tool response as text when the host sent text; structured responses stay in payload."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "stdout" in value or "stderr" in value:
            out, err = value.get("stdout") or "", value.get("stderr") or ""
            return out + ("\n" + err if out and err else err)
        file = value.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return file["content"]
    return None


def _exit_code_from(error: str | None) -> int | None:
    """Claude Code's failed Bash error starts 'Exit code N'; parsed without `re` (start-up cost)."""
    if not error:
        return None
    at = error.find("Exit code ")
    if at < 0:
        return None
    digits = ""
    for ch in error[at + len("Exit code "):]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


class Wire:
    """The common part; a host subclass fills the tables and the two transforms."""

    name = ""
    reads_stdin = True
    # None: the runner prints the rendered output as JSON; a field name: it prints that field's
    # text as is (a host that runs the hook by hand and reads what it prints, like Pi).
    prints_field: str | None = None
    # host event -> middleware function (None: the runner's own work, e.g. recording the prompt)
    CALLS: dict[str, str | None] = {}
    # events after which the runner calls before_model because the host has no such event
    BEFORE_MODEL_AFTER: frozenset[str] = frozenset()
    # events whose output hands the queued context over (Stop: only when it blocks)
    DELIVERS_QUEUE: frozenset[str] = frozenset()
    # host event -> the output fields (dotted paths) this host reads for it
    READS: dict[str, frozenset[str]] = {}
    _TOOL_KINDS: dict[str, str] = {}

    def tool_kind(self, tool_name: str | None) -> str | None:
        if not tool_name:
            return None
        if tool_name.startswith("mcp__"):
            return "mcp"
        return self._TOOL_KINDS.get(tool_name, "other")

    def fields(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> dict[str, Any]:
        """The HookInput's fields for one host event (a subclass adds its own)."""
        return self._common(host_event, payload, task, workspace)

    def to_input(self, host_event: str, payload: dict[str, Any], *, task: str, workspace: str) -> HookInput:
        from hermit_hooks import HookInput

        return HookInput(**self.fields(host_event, payload, task=task, workspace=workspace))

    def render(self, host_event: str, result: HookResult | None) -> dict[str, Any]:
        raise NotImplementedError

    def dropped(self, host_event: str, result: HookResult | None) -> list[str]:
        """Parts of `result` this host drops by design (logged; check_spec warns)."""
        return []

    def _common(self, host_event: str, payload: dict[str, Any], task: str, workspace: str) -> dict[str, Any]:
        tool_name = payload.get("tool_name")
        tool_input = payload.get("tool_input")
        return {
            "event": self.CALLS.get(host_event) or "",
            "task": task,
            "tool_name": tool_name,
            "tool_kind": self.tool_kind(tool_name),
            "tool_input": tool_input if isinstance(tool_input, dict) else None,
            "cwd": payload.get("cwd") or workspace,
            "workspace": workspace,
            "source": payload.get("source"),
            "host": self.name,
            "host_event": host_event,
            "session_id": payload.get("session_id"),
            "prompt": payload.get("prompt"),
            "payload": payload,
        }


# -- DEPLOYED PART ENDS: below, what builds hook_wire.py (never deployed) --------------------

DEPLOYED_NAME = "hook_wire.py"
_END_MARK = "# -- DEPLOYED PART ENDS"


def deployed_source(wire: Wire) -> str:
    """hook_wire.py for ``wire``: this module's deployed part, the host's Wire subclasses (base
    first) and ``WIRE = <class>()``. Deterministic, so a redeploy writes the same bytes."""
    wire_class = type(wire)
    if wire_class not in _SOURCES:   # every rollout deploys: read the sources once per process
        _SOURCES[wire_class] = _source_for(wire_class)
    return _SOURCES[wire_class]


_SOURCES: dict[type[Wire], str] = {}


def _source_for(wire_class: type[Wire]) -> str:
    import inspect
    import sys
    import textwrap

    own = inspect.getsource(sys.modules[__name__])
    head = own[:own.index(_END_MARK)].rstrip() + "\n"
    classes = [c for c in reversed(wire_class.__mro__) if issubclass(c, Wire) and c is not Wire]
    parts = [f"# {DEPLOYED_NAME}: written by `git hermit deploy` from {wire_class.__module__} "
             "(a redeploy rewrites it; do not edit)\n" + head]
    for cls in classes:
        parts.append(f"# -- {cls.__name__}, from {cls.__module__}\n\n" + textwrap.dedent(inspect.getsource(cls)))
    parts.append(f"WIRE = {wire_class.__name__}()\n")
    return "\n\n".join(p.rstrip() + "\n" for p in parts)
