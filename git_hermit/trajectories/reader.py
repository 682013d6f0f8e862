"""Entry points: sniff a trajectory's format, stream its steps, summarise it in one pass, and
explode it into one Markdown file per step (plus an INDEX.md) for a learner to navigate.

Each host's own formats are sniffed and read by the host (``Host.sniff_format``,
``Host.read_trajectory``: its package's trajectory.py); only ATIF is read here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from git_hermit.errors import InputError
from git_hermit.hosts import registry
from git_hermit.model.trajectory import ReadState, Step, ToolCall, TrajectorySummary

from .atif import load_atif, read_atif, steps_to_atif

_SNIFF_LINES = 50
_SNIFF_LINE_BYTES = 1 << 24      # a session_meta line carries the whole system prompt
_GIST_CHARS = 120


def formats() -> tuple[str, ...]:
    """Every format a reader reads: each registered host names the formats its sessions write
    (asked when reading, so a plugin's host registered after this import counts); ATIF is Harbor's.
    Here, not beside Step, so that the trajectory data imports no host table."""
    return (*(fmt for host in registry.hosts() for fmt in host.trajectory_formats), "atif")


def _agent_name(fmt: str) -> str:
    """The agent an ATIF export names: the host whose sessions write ``fmt``."""
    host = registry.host_for_format(fmt)
    return host.name if host else {"atif": "atif"}.get(fmt, "unknown")


def resolve_trajectory(path: Path) -> Path:
    """The trajectory file itself; a Harbor trial directory resolves to its ATIF file."""
    path = Path(path)
    if path.is_dir():
        for candidate in (path / "trajectory.json", path / "agent" / "trajectory.json"):
            if candidate.is_file():
                return candidate
        raise InputError(f"no trajectory.json in {path}",
                         hint="pass a trajectory file, or a Harbor trial directory with agent/trajectory.json")
    if not path.is_file():
        raise InputError(f"trajectory not found: {path}", hint="check the path")
    return path


def detect_format(path: Path) -> str:
    """One of formats(), judged from the first lines (a directory is a Harbor trial: atif)."""
    path = resolve_trajectory(path)
    with open(path, "rb") as lines:
        head = lines.read(1 << 16)
        lines.seek(0)
        for _ in range(_SNIFF_LINES):
            raw = lines.readline(_SNIFF_LINE_BYTES)
            if not raw:
                break
            if len(raw) == _SNIFF_LINE_BYTES and not raw.endswith(b"\n"):
                _skip_rest_of_line(lines)      # too long to judge by (bounded memory)
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            fmt = _format_of(record) if isinstance(record, dict) else None
            if fmt:
                return fmt
    # a pretty-printed JSON document: ATIF when it names its schema
    if head.lstrip()[:1] == b"{" and b'"schema_version"' in head and b'"steps"' in head:
        return "atif"
    raise InputError(f"cannot tell the trajectory format of {path}",
                     hint=f"pass the format explicitly, one of: {', '.join(formats())}")


def _skip_rest_of_line(lines: Any) -> None:
    while True:
        chunk = lines.readline(_SNIFF_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _format_of(record: dict[str, Any]) -> str | None:
    if isinstance(record.get("steps"), list) and "schema_version" in record:
        return "atif"
    for weak in (False, True):      # every host's strong shapes before any host's weak one
        for host in registry.hosts():
            fmt = host.sniff_format(record, weak)
            if fmt:
                return fmt
    return None


def _is_blank(path: Path) -> bool:
    """True for a file with no bytes, or only whitespace (read in bounded chunks)."""
    with open(path, "rb") as data:
        while chunk := data.read(1 << 16):
            if chunk.strip():
                return False
    return True


def _read(path: Path, fmt: str | None) -> tuple[Iterator[Step], ReadState]:
    """The step iterator and the state it fills while consumed."""
    path = resolve_trajectory(path)
    if fmt is not None and fmt not in formats():
        raise InputError(f"unknown trajectory format: {fmt}", hint=f"use one of: {', '.join(formats())}")
    if _is_blank(path):
        # a session that recorded nothing (the host crashed before its first line): an empty
        # trajectory, said so, rather than "cannot tell the format"
        state = ReadState(fmt or "empty", usage_known=False)
        state.add_warning("empty file: no records")
        return iter(()), state
    fmt = fmt or detect_format(path)
    state = ReadState(fmt)
    if fmt == "atif":
        return read_atif(load_atif(path, state), state), state
    host = registry.host_for_format(fmt)
    assert host is not None      # formats() lists the registered hosts' formats and atif
    return host.read_trajectory(fmt, path, state), state


def iter_steps(path: Path, fmt: str | None = None) -> Iterator[Step]:
    """The trajectory's steps in order, read as a stream (only the open step is held)."""
    steps, _ = _read(path, fmt)
    yield from steps


def summarize(path: Path, fmt: str | None = None) -> TrajectorySummary:
    """Counts, usage totals, final answer and errors from one streaming pass."""
    steps, state = _read(path, fmt)
    count = calls = failed = 0
    kinds: dict[str, int] = {}
    for step in steps:
        count += 1
        calls += len(step.tool_calls)
        failed += len(step.failed_tool_calls)
        for call in step.tool_calls:
            kinds[call.kind] = kinds.get(call.kind, 0) + 1
    return _summary(state, count, calls, failed, kinds)


def _summary(state: ReadState, steps: int, calls: int, failed: int,
             kinds: dict[str, int] | None = None) -> TrajectorySummary:
    errors = tuple(state.errors)
    if state.dropped_messages:
        errors += (f"... {state.dropped_messages} more errors/warnings not kept",)
    warnings = list(state.warnings)
    if state.stopped_mid_call:
        warnings.append("the last tool call has no result: the session stopped mid-call")
    elif state.unanswered_calls:
        warnings.append(f"{state.unanswered_calls} tool call(s) never got a result (interrupted)")
    return TrajectorySummary(state.format, steps, calls, failed, state.usage, state.final_answer,
                             errors, state.malformed_lines, state.truncated, state.model,
                             state.session_id, tuple(warnings), state.usage_recorded, state.version,
                             state.user_turns, tuple(sorted((kinds or {}).items())), state.parent_session_id)


def to_atif(path: Path, fmt: str | None = None) -> dict[str, Any]:
    """The trajectory as an ATIF document (built in memory)."""
    steps, state = _read(path, fmt)
    collected = list(steps)        # consumed first: usage totals are final only at the end
    return steps_to_atif(collected, state, _agent_name(state.format))


# -- explode ---------------------------------------------------------------------------------

def explode(path: Path, dest: Path, fmt: str | None = None, *, max_chars_per_step: int = 20000) -> list[Path]:
    """Write dest/NNN-<source>[-<kinds>].md per step and dest/INDEX.md; return the files written.

    Long texts keep their head and tail (a failing command's error is at the end). Files a
    previous explode left in ``dest`` are removed first so the folder matches this trajectory.
    """
    steps, state = _read(path, fmt)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for stale in [*dest.glob("[0-9][0-9][0-9]*-*.md"), dest / "INDEX.md"]:
        stale.unlink(missing_ok=True)
    written: list[Path] = []
    count = calls = failed = 0
    kinds: dict[str, int] = {}
    index_body = dest / ".INDEX.body"     # index lines go to disk: memory stays flat
    with open(index_body, "w", encoding="utf-8") as body:
        for step in steps:
            name = _step_name(step.index, step.label, 3)
            target = dest / name
            target.write_text(render_step(step, max_chars_per_step), encoding="utf-8")
            written.append(target)
            count += 1
            calls += len(step.tool_calls)
            failed += len(step.failed_tool_calls)
            for call in step.tool_calls:
                kinds[call.kind] = kinds.get(call.kind, 0) + 1
            body.write(f"{step.index}\t{step.label}\t{step_gist(step)}\n")
    # past 999 steps the names get wider: renamed once the count is known, so that every
    # name has the same width and a plain sort is step order
    width = max(3, len(str(count - 1)))
    if width > 3:
        renamed = []
        for old in written:
            index, _, label = old.name[:-3].partition("-")
            target = dest / _step_name(int(index), label, width)
            old.rename(target)
            renamed.append(target)
        written = renamed
    summary = _summary(state, count, calls, failed, kinds)
    index_file = dest / "INDEX.md"
    with open(index_file, "w", encoding="utf-8") as out, open(index_body, encoding="utf-8") as body:
        out.write(_index_header(summary))
        for line in body:
            number, label, gist = line.rstrip("\n").split("\t", 2)
            name = _step_name(int(number), label, width)
            out.write(f"- [{name}]({name}) {gist}\n")
    index_body.unlink()
    written.append(index_file)
    return written


def _step_name(index: int, label: str, width: int) -> str:
    return f"{index:0{width}d}-{label}.md"


def _index_header(summary: TrajectorySummary) -> str:
    usage = summary.usage
    lines = [
        "# Trajectory index", "",
        f"- format: {summary.format}; session: {summary.session_id or '?'}; model: {summary.model or '?'}",
        f"- steps: {summary.steps}; tool calls: {summary.tool_calls}; failed tool calls: {summary.failed_tool_calls}",
        f"- tokens: input {usage.input_tokens} (cached {usage.cached_input_tokens}), "
        f"output {usage.output_tokens} (reasoning {usage.reasoning_tokens})"
        + (f"; cost ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""),
    ]
    if summary.malformed_lines or summary.truncated:
        lines.append(f"- malformed lines: {summary.malformed_lines}; truncated: {summary.truncated}")
    for error in summary.errors:
        lines.append(f"- ERROR: {_one_line(error)}")
    if summary.final_answer:
        lines.append(f"- final answer: {_one_line(summary.final_answer)}")
    lines += ["", "Steps (FAILED marks a failing tool call):", ""]
    return "\n".join(lines) + "\n"


def _one_line(text: str, limit: int = _GIST_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _call_gist(call: ToolCall) -> str:
    arguments = call.input
    if isinstance(arguments, dict):
        for key in ("command", "cmd", "file_path", "path", "pattern", "query"):
            if arguments.get(key):
                arguments = arguments[key]
                break
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, default=str)
    status = ""
    if call.failed:
        status = f" → FAILED (exit {call.exit_code})" if call.exit_code is not None else " → FAILED"
    elif call.exit_code is not None:
        status = f" → exit {call.exit_code}"
    elif call.output is None:
        status = " → no result"
    return f"{call.name}: {_one_line(arguments, 80)}{status}"


def step_gist(step: Step) -> str:
    """One line saying what the step did (failed tool calls flagged)."""
    parts = [_call_gist(call) for call in step.tool_calls]
    text = step.message or step.reasoning or ""
    if text or not parts:
        parts.insert(0, _one_line(text) if text else "(empty)")
    if step.error:
        parts.append(f"ERROR: {_one_line(step.error, 80)}")
    return f"{step.source}: " + " | ".join(parts)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 5, limit * 2 // 5
    return f"{text[:head]}\n… [{len(text) - head - tail} chars omitted] …\n{text[-tail:]}"


def _fenced(text: str, language: str = "") -> str:
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def render_step(step: Step, max_chars: int = 20000) -> str:
    """A step as Markdown, its long texts clipped so the file stays near ``max_chars``."""
    pieces = [step.reasoning, step.message, *(c.output for c in step.tool_calls),
              *(c.input for c in step.tool_calls)]
    budget = max(200, max_chars // max(1, sum(1 for p in pieces if p)))
    lines = [f"# Step {step.index}: {step.source}", ""]
    meta = [f"time: {step.timestamp}"] if step.timestamp else []
    if step.usage is not None:
        meta.append(f"tokens: input {step.usage.input_tokens} (cached {step.usage.cached_input_tokens}), "
                    f"output {step.usage.output_tokens}")
    if meta:
        lines += ["; ".join(meta), ""]
    if step.error:
        lines += ["## Error", "", _fenced(_clip(step.error, budget)), ""]
    if step.reasoning:
        lines += ["## Reasoning", "", _clip(step.reasoning, budget), ""]
    if step.message:
        lines += ["## Message", "", _clip(step.message, budget), ""]
    for number, call in enumerate(step.tool_calls, 1):
        status = "FAILED" if call.failed else ("ok" if call.failed is False else "status unknown")
        exit_text = f", exit {call.exit_code}" if call.exit_code is not None else ""
        lines += [f"## Tool call {number}: {call.name} ({call.kind}) — {status}{exit_text}", "",
                  f"id: `{call.call_id}`", "", "### Input", ""]
        rendered = call.input if isinstance(call.input, str) else json.dumps(
            call.input, indent=2, ensure_ascii=False, default=str)
        lines += [_fenced(_clip(rendered, budget), "" if isinstance(call.input, str) else "json"), ""]
        lines += ["### Output", ""]
        lines += [_fenced(_clip(call.output, budget)) if call.output is not None else "(no result recorded)", ""]
    return "\n".join(lines)
