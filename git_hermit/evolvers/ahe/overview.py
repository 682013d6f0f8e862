"""The Debugger's analysis files the Evolve Agent reads: overview.md with one line per task
and detail/<task>.md with the full report (spec/ahe.md §7; upstream evolve.py:1546-1719
_extract_one_liner, _write_debugger_analyse). Rendering is pure; write_analysis writes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from git_hermit.evolvers.ahe.debugger import ERROR_PREFIX, DebugReport, tail_lines
from git_hermit.evolvers.files import write_json_atomic, write_text_atomic

DETAIL_TAIL_LINES = 80
_ROOT_CAUSE = re.compile(r"ROOT CAUSE\s*[:：]", re.IGNORECASE)
# where a ROOT CAUSE paragraph ends: upstream's three headings, plus the k=1 template's two
# (its ROOT CAUSE is followed by WHAT SHOULD HAVE BEEN DONE), optionally numbered or bold
_SECTION_END = re.compile(
    r"^[\s*#]*(?:\d+\.\s*)?[*\s]*(?:PASS vs FAIL|CRITICAL MISTAKE|GENERAL MECHANISM|"
    r"WHAT SHOULD HAVE BEEN DONE|GENERAL LESSON)", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^(?:[-*]\s+|\d+\.\s*)")


def one_liner(response: str) -> str:
    """A report's one-line summary, by §7.1's three rules in order."""
    text = response.strip()
    if not text:
        return "(no analysis)"
    first = text.splitlines()[0]
    if text.startswith(ERROR_PREFIX):
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("- "):
                line = line[2:]
            if line.startswith("FAILED "):
                tag = first[: first.index("]") + 1] if "]" in first else first
                return f"{tag} verifier: {line[:100]}"
        return first[:100]
    match = _ROOT_CAUSE.search(text)
    if match:
        paragraph = []
        for line in text[match.end():].splitlines():
            if _SECTION_END.match(line):
                break
            if not line.strip():
                if paragraph:
                    break
                continue  # the paragraph may start on the line after the heading
            paragraph.append(line)
        summary = " ".join(" ".join(paragraph).split()).lstrip("* ").strip()
        if summary:
            return summary
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return _LIST_MARKER.sub("", line, count=1)
    return first[:100]


def _sorted(reports: Sequence[DebugReport]) -> list[DebugReport]:
    return sorted(reports, key=lambda r: (r.job.mode == "summary", -r.job.n_fail))


def render_overview(step: int, results: Sequence[DebugReport], *,
                    detail_dir: str = "") -> str:
    """overview.md (§7.1): timeout, debug and summary groups; ``detail_dir`` is the path the
    Evolve Agent sees, e.g. ``state/analysis/step_0003/detail/``."""
    reports = _sorted(results)
    timeout = [r for r in reports if r.job.is_timeout]
    debug = [r for r in reports if r.job.mode == "debug" and not r.job.is_timeout]
    summary = [r for r in reports if r.job.mode == "summary" and not r.job.is_timeout]
    counts = [f"{n} {name}" for n, name in ((len(debug), "debug"), (len(timeout), "timeout"),
                                             (len(summary), "summary")) if n]
    lines = [f"# Debugger Analysis Overview — Iteration {step}", "",
             f"Analyzed {len(reports)} tasks" + (f" ({' + '.join(counts)})." if counts else ".")]
    if timeout:
        lines += ["", "### Timeout (agent exceeded time limit)"]
        lines += [f"- **{r.job.task}** ({r.job.n_timeout}/{r.job.n_total} timed out): "
                  f"{one_liner(r.response)}" for r in timeout]
    if debug:
        lines += ["", "### Debug (has failures)"]
        lines += [f"- **{r.job.task}** ({r.job.n_pass}/{r.job.n_total} pass): {one_liner(r.response)}"
                  for r in debug]
    if summary:
        lines += ["", f"### Summary (all pass): {len(summary)} tasks",
                  ", ".join(r.job.task for r in summary),
                  "(No per-task analysis is included here; read `detail/{task}.md` for one.)"]
    lines += ["", f"Detail per task: `{detail_dir or 'detail/'}`", ""]
    return "\n".join(lines)


def overview_body(overview: str) -> str:
    """Everything after the H1: what the evolution query embeds as its §4."""
    return overview.split("\n", 1)[1].strip() if "\n" in overview else ""


def render_detail(result: DebugReport) -> str:
    """detail/<task>.md (§7.2): header, trace paths, the analysis, the verifier tails."""
    job = result.job
    header = f"# {job.task} ({job.n_pass}/{job.n_total} pass)" + (" ⏱️ TIMEOUT" if job.is_timeout else "")
    counts = f"{job.n_pass} pass, {job.n_fail} fail" + (f", {job.n_timeout} timeout" if job.n_timeout else "")
    lines = [header, "", f"Analyzed {job.n_total} traces ({counts}).", "", "## Trace Paths", ""]
    for i, t in enumerate(job.traces, start=1):
        lines.append(f"- **trace{i:02d}** ({t.label}): `{t.trajectory}`")
        if t.steps_dir:
            lines.append(f"  - one file per step: `{t.steps_dir}/`")
        if t.hook_log:
            lines.append(f"  - hook audit: `{t.hook_log}`")
    lines += ["", "## QA Analysis", "", result.response.strip(), ""]
    shown = [(i, t) for i, t in enumerate(job.traces, start=1) if t.label != "PASS" and t.verifier_output]
    if shown:
        lines += ["## Verifier Test Output", ""]
        for i, t in shown:
            lines += [f"### trace{i:02d} ({t.label})", "", "```",
                      tail_lines(t.verifier_output, DETAIL_TAIL_LINES), "```", ""]
    return "\n".join(lines)


def detail_filename(task: str) -> str:
    # a task id may hold a path separator; the file must stay inside detail/
    return task.replace("/", "_").replace("\\", "_") + ".md"


def write_analysis(directory: Path, step: int, results: Sequence[DebugReport], *,
                   detail_dir: str = "") -> Path:
    """Write overview.md, detail/<task>.md and reports.json under ``directory``; returns the
    overview's path."""
    detail = directory / "detail"
    detail.mkdir(parents=True, exist_ok=True)
    for report in results:
        write_text_atomic(detail / detail_filename(report.job.task), render_detail(report))
    write_json_atomic(directory / "reports.json", [r.to_dict() for r in results])
    overview = directory / "overview.md"
    write_text_atomic(overview, render_overview(step, results, detail_dir=detail_dir))
    return overview
