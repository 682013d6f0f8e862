"""Trajectory reading: every host's event stream or session file read as a stream into one
normalised, ATIF-like form, summarised in one pass, or exploded one Markdown file per step.
The generic parts live here (the stream assembler, ATIF, the entry points; the data is model/trajectory.py); each
host's own reader is in its package (hosts/<host>/trajectory.py), reached through its Host.
"""

from git_hermit.model.trajectory import TOOL_KINDS, Step, ToolCall, TrajectorySummary, tool_kind

from .reader import detect_format, formats, explode, iter_steps, render_step, resolve_trajectory, step_gist, summarize, to_atif

__all__ = [
    "TOOL_KINDS", "Step", "ToolCall", "TrajectorySummary", "detect_format", "explode", "formats",
    "iter_steps", "render_step", "resolve_trajectory", "step_gist", "summarize", "to_atif", "tool_kind",
]
