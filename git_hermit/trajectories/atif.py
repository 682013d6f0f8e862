"""Harbor's ATIF ``trajectory.json``: read into the normalised steps, and write them back out.

ATIF is one JSON document (not lines), so it is parsed whole; such files are small
compared with the raw streams they were converted from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from git_hermit.errors import InputError
from git_hermit.model.rollout import Usage
from git_hermit.model.trajectory import ReadState, Step

from ._stream import StepAssembler, as_int, content_text

ATIF_VERSION = "ATIF-v1.4"


def load_atif(path: Path, state: ReadState) -> dict[str, Any]:
    try:
        document = json.loads(path.read_bytes())
    except ValueError as exc:
        # a cut-off document cannot be partly read: one malformed "line", no steps
        state.malformed_lines += 1
        state.cut_last_line = True
        state.add_error(f"unreadable ATIF document: {exc}")
        return {"steps": []}
    if not isinstance(document, dict) or not isinstance(document.get("steps"), list):
        raise InputError(f"{path} is not an ATIF trajectory (no steps list)",
                         hint="pass a Harbor trajectory.json or the trial directory holding it")
    return document


def atif_usage(metrics: Any) -> Usage | None:
    if not isinstance(metrics, dict):
        return None
    extra = got if isinstance(got := metrics.get("extra"), dict) else {}
    cost = metrics.get("cost_usd")
    return Usage(as_int(metrics.get("prompt_tokens")), as_int(metrics.get("cached_tokens")),
                 as_int(metrics.get("completion_tokens")), as_int(extra.get("reasoning_tokens")),
                 float(cost) if isinstance(cost, (int, float)) else None)


def read_atif(document: dict[str, Any], state: ReadState) -> Iterator[Step]:
    asm = StepAssembler()
    state.session_id = document.get("session_id")
    agent = got if isinstance(got := document.get("agent"), dict) else {}
    state.model = agent.get("model_name")
    summed = Usage()
    for raw in document.get("steps", []):
        if not isinstance(raw, dict):
            state.malformed_lines += 1
            continue
        source, timestamp = raw.get("source"), raw.get("timestamp")
        message = content_text(raw.get("message"))
        if source == "user":
            asm.user(message, timestamp)
        elif source == "system":
            asm.system(message, timestamp)
        else:
            asm.close()          # ATIF steps are already whole turns: never merge two
            asm.reasoning(str(raw.get("reasoning_content") or ""), timestamp)
            asm.message(message, timestamp)
            state.final_answer = message or state.final_answer
            for call in raw.get("tool_calls") or []:
                if isinstance(call, dict):
                    asm.call(str(call.get("tool_call_id")), str(call.get("function_name")),
                             call.get("arguments"), timestamp)
            observation = got if isinstance(got := raw.get("observation"), dict) else {}
            for result in observation.get("results") or []:
                if isinstance(result, dict):
                    asm.result(str(result.get("source_call_id")), content_text(result.get("content")),
                               timestamp=timestamp)
            usage = atif_usage(raw.get("metrics"))
            if usage is not None:
                summed += usage
                asm.usage(usage)
            asm.close()
        yield from asm.drain()
    asm.close()
    yield from asm.drain()
    final = document.get("final_metrics")
    if isinstance(final, dict) and any(k in final for k in ("total_prompt_tokens", "total_completion_tokens")):
        extra = got if isinstance(got := final.get("extra"), dict) else {}
        cost = final.get("total_cost_usd")
        state.usage = Usage(as_int(final.get("total_prompt_tokens")), as_int(final.get("total_cached_tokens")),
                            as_int(final.get("total_completion_tokens")), as_int(extra.get("reasoning_tokens")),
                            float(cost) if isinstance(cost, (int, float)) else None)
    else:
        state.usage = summed


def steps_to_atif(steps: Iterable[Step], state: ReadState, agent_name: str) -> dict[str, Any]:
    """An ATIF document from normalised steps (built in memory: meant for one rollout)."""
    out_steps = []
    for step in steps:
        entry: dict[str, Any] = {"step_id": step.index + 1,
                                 "source": "agent" if step.source == "tool" else step.source,
                                 "message": step.message}
        if step.timestamp:
            entry["timestamp"] = step.timestamp
        if step.reasoning:
            entry["reasoning_content"] = step.reasoning
        if step.tool_calls:
            entry["tool_calls"] = [{"tool_call_id": c.call_id, "function_name": c.name,
                                    "arguments": c.input if isinstance(c.input, dict) else {"input": c.input}}
                                   for c in step.tool_calls]
            results = [{"source_call_id": c.call_id, "content": c.output}
                       for c in step.tool_calls if c.output is not None]
            if results:
                entry["observation"] = {"results": results}
        if step.usage is not None:
            entry["metrics"] = {"prompt_tokens": step.usage.input_tokens,
                                "completion_tokens": step.usage.output_tokens,
                                "cached_tokens": step.usage.cached_input_tokens,
                                "extra": {"reasoning_tokens": step.usage.reasoning_tokens}}
            if step.usage.cost_usd is not None:
                entry["metrics"]["cost_usd"] = step.usage.cost_usd
        extra = {key: value for key, value in (
            ("error", step.error),
            ("tool_results", [{"tool_call_id": c.call_id, "kind": c.kind, "exit_code": c.exit_code,
                               "failed": c.failed} for c in step.tool_calls] or None)) if value}
        if extra:
            entry["extra"] = extra
        out_steps.append(entry)
    usage = state.usage
    final: dict[str, Any] = {"total_prompt_tokens": usage.input_tokens,
                             "total_completion_tokens": usage.output_tokens,
                             "total_cached_tokens": usage.cached_input_tokens,
                             "total_steps": len(out_steps),
                             "extra": {"reasoning_tokens": usage.reasoning_tokens}}
    if usage.cost_usd is not None:
        final["total_cost_usd"] = usage.cost_usd
    agent: dict[str, Any] = {"name": agent_name, "version": "unknown"}
    if state.model:
        agent["model_name"] = state.model
    return {"schema_version": ATIF_VERSION, "session_id": state.session_id or "unknown",
            "agent": agent, "steps": out_steps, "final_metrics": final}
