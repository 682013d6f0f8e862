"""Trajectory readers: every host's event stream or session file (Codex exec/rollout, Claude
Code stream/session, Pi, Harbor ATIF) read as a stream into one normalised, ATIF-like form,
summarised in one pass, or exploded one Markdown file per step.
"""

from .model import FORMATS, TOOL_KINDS, Step, ToolCall, TrajectorySummary, tool_kind
from .reader import detect_format, explode, iter_steps, render_step, resolve_trajectory, step_gist, summarize, to_atif

__all__ = [
    "FORMATS", "TOOL_KINDS", "Step", "ToolCall", "TrajectorySummary", "detect_format", "explode",
    "iter_steps", "render_step", "resolve_trajectory", "step_gist", "summarize", "to_atif", "tool_kind",
]
