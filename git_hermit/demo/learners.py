"""The demo's scripted learners: an Agent Debugger that reads a task's trajectories and writes
the report sections upstream's query asks for, and an Evolve Agent that reads state/ (overview,
per-task reports, verdicts), edits adapter/ and writes state/change_manifest.json.

They are simulated: each recognises the demo benchmark's failure patterns from what the traces
and reports actually show and applies a fixed playbook of fixes, one of which (an answer-format
rule) is a plausible misdiagnosis that hurts tasks needing decimals.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from git_hermit.errors import HermitError
from git_hermit.trajectories import iter_steps

from .acting import CONCEPTS

_LABELS = re.compile(r"trace(\d+)=(PASS|FAIL|TIMEOUT)")
_VERIFIER_BLOCK = re.compile(r"--- Verifier test output \(rollout (\d+), \w+\) ---\n(.*?)\n--- end verifier output ---", re.S)
_EXPECTED = re.compile(r"expected '([^']*)'")
_QUANTITIES = re.compile(r"The quantities are (.+?);")
_UNIT = re.compile(r"\d(?:\.\d+)?\s*(km|m|h|min|kg|g)\b")
_SINGLE_ARG_ROUND = re.compile(r"print\(round\([\d.]+\)\)")

# --- the Agent Debugger ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Pattern:
    root_cause: str          # what went wrong, as seen in the trace
    passing: str             # what passing rollouts did instead
    mechanism: str           # the general fix


PATTERNS: dict[str, _Pattern] = {
    "unit-mix": _Pattern(
        "the agent added quantities given in different units without converting them to the unit "
        "the answer asks for",
        "converted every quantity to the answer's unit before adding",
        "a skill for tasks with mixed units: convert every quantity to the unit the answer asks "
        "for before computing"),
    "csv-isdigit": _Pattern(
        "the agent filtered the column's cells with isdigit(), which silently drops negative "
        "amounts (refunds), so the total is too high",
        "read the CSV with csv.DictReader, picked the column by its header name and converted "
        "every value",
        "a skill for totalling a CSV column: csv.DictReader (skips the header), column by name, "
        "float() on every value, never filter cells"),
    "csv-parentheses": _Pattern(
        "a value in parentheses, accounting notation for a negative amount, failed to convert and "
        "the agent stripped the parentheses, counting it as positive",
        "(no passing rollout handled the parenthesised amount)",
        "tell the agent that amounts in parentheses are negative and must be converted as such"),
    "dates-exclusive": _Pattern(
        "the agent counted the days of an inclusive date range as the plain difference between the "
        "dates, one day short",
        "added one to the difference because both the first and the last day count",
        "a long-term memory entry: inclusive date ranges count both ends, so add 1 to the difference"),
    "integer-rounding": _Pattern(
        "the agent rounded its answer to an integer, following an instruction in AGENTS.md, "
        "although the task asks for decimal places",
        "kept the decimal places the task asked for",
        "remove the instruction to round answers to an integer"),
}


@dataclass
class _TraceFindings:
    label: str
    final_answer: str = ""
    tags: list[str] = field(default_factory=list)
    evidence: str = ""               # the command (and output) that shows the mistake
    step: int | None = None


def _read_trace(path: Path, label: str) -> _TraceFindings:
    found = _TraceFindings(label)
    try:
        steps = list(iter_steps(Path(path)))
    except (HermitError, OSError, ValueError) as exc:
        found.evidence = f"trace unreadable: {exc}"
        return found
    units: set[str] = set()
    conversion_failed = False
    for step in steps:
        quantities = _QUANTITIES.search(step.message or "")
        if quantities:
            units = set(_UNIT.findall(quantities.group(1)))
        if step.message and not step.tool_calls:
            found.final_answer = step.message.strip()
        for call in step.tool_calls:
            command = str((call.input or {}).get("command", "")) if isinstance(call.input, dict) else ""
            output = (call.output or "").strip()
            shown = f"`{command}` → {output.splitlines()[-1] if output else '(no output)'}"
            if "could not convert string to float: '(" in output:
                conversion_failed = True
            tag = None
            if "isdigit()" in command:
                tag = "csv-isdigit"
            elif conversion_failed and ".strip('()')" in command and "-float" not in command:
                tag = "csv-parentheses"
            elif ".days" in command and "+ 1" not in command:
                tag = "dates-exclusive"
            elif _SINGLE_ARG_ROUND.search(command):
                tag = "integer-rounding"
            elif len(units) >= 2 and command.startswith("python3 -c") and "*" not in command:
                tag = "unit-mix"
            if tag and tag not in found.tags:
                found.tags.append(tag)
                found.evidence, found.step = shown, step.index
    return found


def _is_fractional(text: str) -> bool:
    try:
        return not float(text).is_integer()
    except ValueError:
        return False


def scripted_debugger(query: str, trace_paths: list[Path], workspace: Path) -> str:
    """The Agent Debugger's report for one task from its query and trajectories. ``workspace``
    is the session's directory (unused: the scripted debugger only reads)."""
    labels = dict((int(n), label) for n, label in _LABELS.findall(query))
    expected = {int(n): _EXPECTED.findall(block) for n, block in _VERIFIER_BLOCK.findall(query)}
    traces = [_read_trace(path, labels.get(i, "FAIL")) for i, path in enumerate(trace_paths, start=1)]
    names = [f"trace{i:02d}" for i in range(1, len(traces) + 1)]
    passing = [n for n, t in zip(names, traces) if t.label == "PASS"]
    failing = [(n, t, expected.get(i, [])) for i, (n, t) in enumerate(zip(names, traces), start=1)
               if t.label != "PASS"]
    decimals = next((t.final_answer for t in traces if t.label == "PASS" and _is_fractional(t.final_answer)), None)
    decimals_note = (f" [needs-decimals] The answer {decimals} keeps its decimal places; a rule that "
                     "rounds answers to an integer would break it." if decimals else "")
    if not failing:
        answer = traces[0].final_answer if traces else "(none)"
        strategy = f"1. KEY STRATEGY: the agent computed the answer with one checked command and answered {answer}."
        if "SUCCESS FACTORS" in query:
            return "\n\n".join([strategy, "2. SUCCESS FACTORS: it read the task's numbers exactly and "
                                "printed the result instead of computing it by hand.",
                                "3. REUSABLE PATTERN: compute with a one-line python3 command and "
                                "answer with its output." + decimals_note])
        return "\n\n".join([strategy, "2. REUSABLE PATTERN: compute with a one-line python3 command "
                            "and answer with its output.",
                            "3. FRAGILITY RISK:" + (decimals_note or " nothing fragile seen.")])

    by_tag: dict[str, list[str]] = {}
    for name, found, _ in failing:
        for tag in found.tags:
            by_tag.setdefault(tag, []).append(name)
    ranked = sorted(by_tag, key=lambda tag: (-len(by_tag[tag]), tag))
    if ranked:
        causes = [f"[{tag}] in {', '.join(by_tag[tag])}: {PATTERNS[tag].root_cause}." for tag in ranked]
    else:
        causes = ["[unknown] in " + ", ".join(n for n, _, _ in failing)
                  + ": the trace shows no recognisable mistake; the final answer differs from the verifier's."]
    first_name, first, first_expected = next(
        ((n, t, e) for n, t, e in failing if t.tags), failing[0])
    mistake = (f"{first_name}, step {first.step}: {first.evidence}; final answer {first.final_answer or '(none)'}"
               + (f", the verifier expected {first_expected[0]}." if first_expected else "."))
    if first_expected and _is_fractional(first.final_answer) and not _is_fractional(first_expected[0]):
        mistake += (f" [fractional-answer] The answer {first.final_answer} has a fractional part "
                    f"although a whole number was expected.")
    top = PATTERNS.get(ranked[0]) if ranked else None
    if passing and top:
        contrast = f"The passing rollouts ({', '.join(passing)}) {top.passing}; the failing ones did not."
    elif passing:
        contrast = f"The passing rollouts ({', '.join(passing)}) reached the expected answer; the traces differ only in the computation."
    else:
        contrast = "No rollout passed."
    mechanism = top.mechanism if top else "read the raw traces: no known mechanism applies."
    if "FAILURE POINT" in query:     # the k=1 query's sections
        return "\n\n".join([f"1. FAILURE POINT: {mistake}", "2. ROOT CAUSE: " + " ".join(causes)
                            + " The agent believed it had succeeded; the verifier disagrees.",
                            f"3. WHAT SHOULD HAVE BEEN DONE: {top.passing if top else 'unknown'}.",
                            f"4. GENERAL LESSON: {mechanism}."])
    return "\n\n".join(["1. ROOT CAUSE: " + " ".join(causes), f"2. PASS vs FAIL: {contrast}{decimals_note}",
                        f"3. CRITICAL MISTAKE: {mistake}", f"4. GENERAL MECHANISM: {mechanism}."])


# --- the Evolve Agent ------------------------------------------------------------------------

_TAGGED = re.compile(r"\[([a-z-]+)\](?: in ((?:trace\d+(?:, )?)+))?")
_DETAIL_HEADER = re.compile(r"^# (\S+) \((\d+)/(\d+) pass\)", re.M)
CSV_SKILL = ".agents/skills/csv-column-total/SKILL.md"
UNITS_SKILL = ".agents/skills/unit-conversion/SKILL.md"
ANSWER_FORMAT_RULE = ("\n## Answer format\n\n- Give the final answer as the number only, rounded to "
                      "an integer: stray decimal places were making answers miss.\n")
DATES_MEMORY = ("- A date range given as from X to Y inclusive counts both the first and the last "
                "day, so add 1 to the difference between the dates.\n")
UNITS_SKILL_TEXT = """\
---
name: unit-conversion
description: Use when a task gives quantities in different units (km and metres, hours and minutes, kg and grams) and asks for a total in one unit.
---

# Convert units before computing

1. List every quantity with its unit, and the unit the answer asks for.
2. Convert every quantity to that unit first (1 km = 1000 m, 1 h = 60 min, 1 kg = 1000 g);
   never add numbers whose units differ.
3. Compute in one command, e.g. `python3 -c "print(3.5*1000 + 750)"`, and answer in the asked unit.
"""
CSV_SKILL_TEXT = """\
---
name: csv-column-total
description: Use when a task asks for the total or sum of a column in a CSV file.
---

# Total a CSV column

1. Look at the first lines (`head -n 5 file.csv`) to see the header and the notation of the values.
2. Read the file with `csv.DictReader`, which skips the header row, and pick the column by its header name.
3. Convert every value with float() and sum all rows. Never filter cells with isdigit() or similar
   checks: they silently drop negative amounts such as refunds.
4. If a value does not convert, look at it and handle its notation instead of dropping it.
"""
CSV_PARENTHESES_STEP = ("5. Amounts in parentheses, like (120), are negative (accounting notation): "
                        "convert them as -120, never just strip the parentheses.\n")


@dataclass(frozen=True)
class _Report:
    task: str
    n_pass: int
    n_total: int
    tags: dict[str, int]     # tag -> failing traces showing it (0: an observation)


@dataclass(frozen=True)
class _Fix:
    key: str                 # the pattern it answers
    title: str               # the manifest description starts with it (how a verdict is matched)
    component: str
    why: str


FIXES = {
    "unit-mix": _Fix("unit-mix", "Skill unit-conversion", "skill",
                     "the procedure matters only for tasks with mixed units; a skill is loaded only when "
                     "its description fits, so other tasks are untouched"),
    "csv-isdigit": _Fix("csv-isdigit", "Skill csv-column-total", "skill",
                        "a step-by-step procedure for one kind of task, loaded only for CSV totals"),
    "csv-parentheses": _Fix("csv-parentheses", "Skill csv-column-total, parentheses rule",
                            "skill", "the CSV procedure already lives in that skill; the notation is one more step of it"),
    "dates-exclusive": _Fix("dates-exclusive", "Memory: inclusive date ranges", "memory",
                            "a short reusable lesson the hooks hand over at session start; it needs no procedure"),
    "fractional-answer": _Fix("fractional-answer", "AGENTS.md: answer-format rule", "prompt",
                              "the answer format applies to every task, so it belongs in the system prompt"),
    "integer-rounding": _Fix("integer-rounding", "Remove the answer-format rule", "prompt",
                             "the rule lives in the system prompt"),
}
_APPLIED_BY = {"unit-mix": "convert_units", "csv-isdigit": "csv_by_name",
               "csv-parentheses": "csv_parentheses", "dates-exclusive": "inclusive_days",
               "fractional-answer": "round_integer"}


def _analysis_dir(state: Path) -> Path | None:
    """The newest Debugger analysis: state/analysis/ itself, or its last step_* folder."""
    analysis = state / "analysis"
    if (analysis / "overview.md").is_file():
        return analysis
    steps = sorted(p for p in analysis.glob("step_*") if (p / "overview.md").is_file())
    return steps[-1] if steps else None


def _read_reports(directory: Path | None) -> list[_Report]:
    reports = []
    for path in sorted((directory / "detail").glob("*.md")) if directory else []:
        text = path.read_text(encoding="utf-8", errors="replace")
        header = _DETAIL_HEADER.search(text)
        if not header:
            continue
        analysis = text.split("## QA Analysis", 1)[-1].split("## Verifier Test Output", 1)[0]
        tags: dict[str, int] = {}
        for tag, traces in _TAGGED.findall(analysis):
            count = len(re.findall(r"trace\d+", traces)) if traces else 0
            tags[tag] = max(tags.get(tag, 0), count)
        reports.append(_Report(header.group(1), int(header.group(2)), int(header.group(3)), tags))
    return reports


def _harmful_titles(state: Path) -> list[str]:
    """Descriptions of every change a verdict called HARMFUL, from state/evaluations/*.json."""
    titles = []
    for path in sorted((state / "evaluations").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        for evaluation in data.get("change_evaluations", []) if isinstance(data, dict) else []:
            if isinstance(evaluation, dict) and evaluation.get("verdict") == "HARMFUL":
                titles.append(str(evaluation.get("description", "")))
    return titles


def _adapter_text(adapter: Path) -> str:
    parts = [p.read_text(encoding="utf-8", errors="replace")
             for p in [adapter / "AGENTS.md", adapter / "MEMORY.md", *sorted(adapter.glob(".agents/skills/*/SKILL.md"))]
             if p.is_file()]
    return "\n".join(parts)


def _set_agents_md(adapter: Path, text: str) -> list[str]:
    for name in ("AGENTS.md", "ADAPTER.md"):       # the template keeps them byte-equal
        (adapter / name).write_text(text, encoding="utf-8")
    return ["AGENTS.md", "ADAPTER.md"]


def _apply(fix: _Fix, adapter: Path) -> tuple[str, list[str]]:
    """Make the fix's edit; returns (change type, files relative to adapter/)."""
    if fix.key == "unit-mix":
        path = adapter / UNITS_SKILL
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(UNITS_SKILL_TEXT, encoding="utf-8")
        return "new", [UNITS_SKILL]
    if fix.key in ("csv-isdigit", "csv-parentheses"):
        path = adapter / CSV_SKILL
        existed = path.is_file()
        text = path.read_text(encoding="utf-8") if existed else CSV_SKILL_TEXT
        if fix.key == "csv-parentheses":
            text = text.rstrip("\n") + "\n" + CSV_PARENTHESES_STEP
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return ("improvement" if existed else "new"), [CSV_SKILL]
    if fix.key == "dates-exclusive":
        path = adapter / "MEMORY.md"
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        path.write_text(text.rstrip("\n") + "\n" + DATES_MEMORY, encoding="utf-8")
        return "new", ["MEMORY.md"]
    agents = (adapter / "AGENTS.md").read_text(encoding="utf-8")
    if fix.key == "fractional-answer":
        return "new", _set_agents_md(adapter, agents.rstrip("\n") + "\n" + ANSWER_FORMAT_RULE)
    return "rollback", _set_agents_md(adapter, agents.replace(ANSWER_FORMAT_RULE, "\n").rstrip("\n") + "\n")


def scripted_evolve(workspace: Path, iteration: int, *, max_fixes: int = 1) -> str:
    """Read ``workspace/state``, edit ``workspace/adapter`` and write
    ``state/change_manifest.json`` for ``iteration``; returns the session's summary.

    Per iteration: undo a rule the reports blame that is still in the adapter, then fix the
    ``max_fixes`` patterns with most failing traces, plus the answer-format rule when the
    reports show fractional wrong answers. A fix already in the adapter, or one a verdict
    called HARMFUL, is never (re)applied."""
    workspace = Path(workspace)
    state, adapter = workspace / "state", workspace / "adapter"
    reports = _read_reports(_analysis_dir(state))
    harmful = _harmful_titles(state)
    present = _adapter_text(adapter)
    blocked = {key for key, fix in FIXES.items() if any(t.startswith(fix.title + ":") for t in harmful)}
    applied = {key for key, concept in _APPLIED_BY.items() if CONCEPTS[concept].search(present)}

    failing_traces: Counter[str] = Counter()
    tasks_with: dict[str, list[str]] = {}
    for report in reports:
        for tag, count in report.tags.items():
            failing_traces[tag] += count
            if report.n_pass < report.n_total or tag == "needs-decimals":
                tasks_with.setdefault(tag, []).append(report.task)

    chosen: list[str] = []
    if "integer-rounding" in tasks_with and "fractional-answer" in applied:
        chosen.append("integer-rounding")          # the adapter still carries the harmful rule
    candidates = sorted((tag for tag in failing_traces
                         if tag in FIXES and tag not in ("fractional-answer", "integer-rounding")
                         and failing_traces[tag] > 0 and tag not in applied | blocked),
                        key=lambda tag: (-failing_traces[tag], tag))
    chosen += candidates[:max_fixes]
    if "fractional-answer" in tasks_with and not {"fractional-answer"} & (applied | blocked):
        chosen.append("fractional-answer")

    changes, lines = [], []
    predicted_elsewhere: set[str] = set()
    for number, key in enumerate(chosen, start=1):
        fix = FIXES[key]
        change_type, files = _apply(fix, adapter)
        if key == "fractional-answer":
            # the same tasks are already predicted by a fix for their real cause
            predicted = [t for t in tasks_with[key] if t not in predicted_elsewhere]
            risks = sorted(tasks_with.get("needs-decimals", []))
        else:
            predicted, risks = tasks_with.get(key, []), []
        predicted_elsewhere.update(predicted)
        pattern = PATTERNS.get(key)
        changes.append({
            "id": f"chg-{number}", "type": change_type,
            "description": f"{fix.title}: " + (pattern.mechanism if pattern else
                                               "answer with the number only, rounded to an integer"),
            "files": files,
            "failure_pattern": pattern.root_cause if pattern else
            "wrong answers carried a fractional part where a whole number was expected",
            "predicted_fixes": sorted(predicted), "risk_tasks": risks,
            "component": fix.component, "why_this_component": fix.why})
        lines.append(f"- chg-{number} ({change_type}, {fix.component}): {fix.title}; predicts "
                     f"{', '.join(sorted(predicted)) or 'no fix'}"
                     + (f"; at risk: {', '.join(risks)}" if risks else ""))
    manifest = {"iteration": iteration, "changes": changes}
    state.mkdir(parents=True, exist_ok=True)
    (state / "change_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

    summary = [f"Iteration {iteration} (scripted Evolve Agent): read {len(reports)} Debugger reports."]
    if harmful:
        summary.append("Verdicts: HARMFUL earlier: " + "; ".join(sorted(set(harmful)))
                       + " — not re-applied.")
    summary.append("Changes:" if lines else "No change: no fixable pattern left in the reports.")
    return "\n".join(summary + lines)


# --- the learner-session entry points the step driver calls (ScriptedLearner: workspace, prompt, key)

_TRACE_PATH = re.compile(r"trajectory `([^`]+)`")


def debugger_session(workspace: Path, prompt: str, key: str) -> str:
    """One Agent Debugger session: the trajectories named in the query, read by the script."""
    return scripted_debugger(prompt, [Path(p) for p in _TRACE_PATH.findall(prompt)], workspace)


def evolve_session(workspace: Path, prompt: str, key: str) -> str:
    """One Evolve Agent session in the learner workspace (``key`` is ``step-N``)."""
    return scripted_evolve(workspace, int(key.rsplit("-", 1)[1]))
