"""The demo's simulated acting agent: it reads the deployed adapter like a host-run model
would (AGENTS.md / CLAUDE.md, the skills whose description fits the task, the context the
hooks hand over), solves the demo benchmark's four task families by running real shell
commands, and emits a Codex ``exec --json`` event stream while calling the hooks as Codex does.

How guidance shapes behaviour (nothing else does; the agent never sees a step number):
a family's characteristic mistake happens on some attempts (deterministic pseudo-randomness
from prompt + attempt) unless the guidance it read covers it; an instruction to round answers
to an integer is followed, which breaks answers that need decimals.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

Emit = Callable[[dict[str, Any]], None]
RunHook = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]

MODEL = "scripted-demo"
SLIP_RATE = 0.5                 # chance of the family's mistake on an attempt without guidance
COMMAND_TIMEOUT_S = 20
CONTEXT_FILES = ("AGENTS.md", "CLAUDE.md")
SKILL_GLOBS = (".agents/skills/*/SKILL.md", ".claude/skills/*/SKILL.md")

# What the agent understands from the guidance it read: a concept counts as known when its
# pattern matches a sentence of AGENTS.md, a loaded skill or a context the hooks handed over.
CONCEPTS = {
    "convert_units": re.compile(r"\bconvert\w*\b[^.\n]{0,120}\bunits?\b|\bunits?\b[^.\n]{0,120}\bconvert", re.I),
    "csv_by_name": re.compile(r"DictReader|column by (?:its )?(?:header )?name", re.I),
    "csv_parentheses": re.compile(r"parenthes[ie]s[^.\n]{0,120}\bnegative", re.I),
    "inclusive_days": re.compile(r"inclusive[^.\n]{0,160}(?:\+\s*1\b|add(?:ing)? (?:one|1)\b)", re.I),
    "round_integer": re.compile(r"\bround\w*[^.\n]{0,60}\b(?:integer|whole number)", re.I),
}

_STOPWORDS = frozenset("""a an and are as at be by do does for from given how in is it its of on or
that the then this to use when what which with you your into every each before after than""".split())
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)\s*(km|m|h|min|kg|g)\b")
_TARGET_UNIT = re.compile(r"how many (metres|minutes|grams)\b", re.I)
_FACTORS = {"metres": {"km": 1000, "m": 1}, "minutes": {"h": 60, "min": 1},
            "grams": {"kg": 1000, "g": 1}}
_CSV_FILE = re.compile(r"([\w.-]+\.csv)\b")
_CSV_COLUMN = re.compile(r"\bthe (\w+) column\b", re.I)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MEAN = re.compile(r"\bmean of (.+?), to (\d+) decimal places", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class _Guidance:
    """Everything the agent has read so far, and where it came from."""

    texts: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def add(self, source: str, text: str | None) -> None:
        if text and text.strip():
            self.texts.append(text)
            self.sources.append(source)

    def knows(self, concept: str) -> bool:
        return self.source_of(concept) is not None

    def source_of(self, concept: str) -> str | None:
        """Where the agent read about ``concept`` (it cites it, as a model following a rule would)."""
        return next((source for source, text in zip(self.sources, self.texts)
                     if CONCEPTS[concept].search(text)), None)


@dataclass(frozen=True)
class _Skill:
    name: str
    description: str
    path: Path


def _chance(*parts: object) -> float:
    """A deterministic number in [0, 1) for these parts (the same attempt always slips alike)."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()
    return int(digest[:8], 16) / 2**32


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 2 and w not in _STOPWORDS}


def _front_matter(text: str) -> dict[str, str]:
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    fields = {}
    for line in text[3:end if end > 0 else 0].splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip()] = value.strip().strip("'\"")
    return fields


def find_skills(workspace: Path) -> list[_Skill]:
    """The skills deployed in the workspace (Codex's and Claude Code's folders)."""
    skills = []
    for pattern in SKILL_GLOBS:
        for path in sorted(workspace.glob(pattern)):
            meta = _front_matter(path.read_text(encoding="utf-8", errors="replace"))
            skills.append(_Skill(meta.get("name") or path.parent.name, meta.get("description", ""), path))
    return skills


def skill_fits(skill_description: str, prompt: str) -> bool:
    """A skill is loaded when its description shares at least two content words with the task."""
    return len(_words(skill_description) & _words(prompt)) >= 2


def _number_text(value: str) -> str:
    """'4250.0' -> '4250'; other numbers unchanged; non-numbers stripped."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if text.endswith(".0") and number.is_integer() else text


def _command_env() -> dict[str, str]:
    """The environment the agent's commands run in: this one, with the directory of the interpreter
    git hermit runs on first on PATH, so `python3 -c ...` is that interpreter. A `python3` found on
    PATH may be a version manager's shim (pyenv's starts a dozen processes, ~0.1 s of CPU, a call:
    more than the arithmetic the demo runs), and the commands need nothing but the standard library."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", os.defpath)
    return {**os.environ, "PATH": path}


def _py(code: str) -> str:
    # the code uses single quotes only, so double quotes are safe for the shell
    return f'python3 -c "{code}"'


class _Session:
    """One simulated Codex session: event stream, hooks, real commands, token accounting."""

    def __init__(self, workspace: Path, prompt: str, attempt: int, emit: Emit, run_hook: RunHook):
        self.workspace, self.prompt, self.attempt = workspace, prompt, attempt
        self.emit_event, self.run_hook = emit, run_hook
        seed = hashlib.sha256(f"{prompt}\0{attempt}".encode()).hexdigest()
        self.session_id = str(uuid.UUID(seed[:32]))
        self.turn_id = f"turn-{seed[32:40]}"
        self.guidance = _Guidance()
        self.items = 0
        self.transcript_chars = len(prompt)
        self.usage = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                      "reasoning_output_tokens": 0}
        self.previous_request_tokens = 0
        self.last_message = ""
        self.command_env = _command_env()

    # --- hooks ------------------------------------------------------------------------
    def hook(self, event: str, **fields: object) -> dict[str, Any]:
        payload = {"session_id": self.session_id, "transcript_path": None,
                   "cwd": str(self.workspace), "hook_event_name": event, "model": MODEL, **fields}
        return self.run_hook(event, payload) or {}

    def take_context(self, source: str, output: dict[str, Any]) -> None:
        specific = output.get("hookSpecificOutput")
        if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
            self.guidance.add(source, specific["additionalContext"])
            self.transcript_chars += self._chars(specific["additionalContext"])

    # --- model requests and items -----------------------------------------------------
    def _chars(self, text: str) -> int:
        """Characters the model reads, the workspace's absolute path counted as "." — a scratch
        path's length (its pid) must not change the token count of the same session."""
        return len(text.replace(str(self.workspace), "."))

    def _model_request(self, produced: str) -> None:
        """Account one model request: it re-reads the transcript (cached but for the new part)."""
        # ~4 characters a token, plus the host's own system prompt and tool schemas
        context_tokens = (self.transcript_chars + sum(map(self._chars, self.guidance.texts))) // 4 + 900
        self.usage["cached_input_tokens"] += self.previous_request_tokens
        self.usage["input_tokens"] += context_tokens
        self.previous_request_tokens = context_tokens
        self.usage["output_tokens"] += len(produced) // 4 + 12
        self.usage["reasoning_output_tokens"] += 24 + len(produced) // 8
        self.transcript_chars += self._chars(produced)

    def _item_id(self) -> str:
        self.items += 1
        return f"item_{self.items}"

    def message(self, text: str) -> None:
        self._model_request(text)
        self.last_message = text
        self.emit_event({"type": "item.completed",
                         "item": {"id": self._item_id(), "type": "agent_message", "text": text}})

    def shell(self, command: str) -> tuple[str, int | None]:
        """Run one command the way Codex does with hooks: PreToolUse, run, PostToolUse.
        Returns what the model reads and the exit code (None when the command did not run)."""
        self._model_request(command)
        call_id = f"call_{self.items + 1}"
        pre = self.hook("PreToolUse", turn_id=self.turn_id, permission_mode="bypassPermissions",
                        tool_name="Bash", tool_input={"command": command}, tool_use_id=call_id)
        specific = got if isinstance(got := pre.get("hookSpecificOutput"), dict) else {}
        self.take_context("a hook note before a command", pre)
        if specific.get("permissionDecision") == "deny" or pre.get("decision") == "block":
            reason = specific.get("permissionDecisionReason") or pre.get("reason") or "denied"
            text = f"Command blocked by PreToolUse hook: {reason}. Command: {command}"
            self.transcript_chars += self._chars(text)
            return text, None     # Codex: no command_execution item, no PostToolUse
        updated = specific.get("updatedInput") if specific.get("permissionDecision") == "allow" else None
        if isinstance(updated, dict) and isinstance(updated.get("command"), str):
            command = updated["command"]
        item_id = self._item_id()
        self.emit_event({"type": "item.started", "item": {
            "id": item_id, "type": "command_execution", "command": command,
            "aggregated_output": "", "exit_code": None, "status": "in_progress"}})
        try:
            done = subprocess.run(["bash", "-c", command], cwd=self.workspace, capture_output=True,
                                  text=True, timeout=COMMAND_TIMEOUT_S, env=self.command_env)
            output, exit_code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired:
            output, exit_code = f"command timed out after {COMMAND_TIMEOUT_S}s", 124
        self.emit_event({"type": "item.completed", "item": {
            "id": item_id, "type": "command_execution", "command": command,
            "aggregated_output": output, "exit_code": exit_code,
            "status": "completed" if exit_code == 0 else "failed"}})
        post = self.hook("PostToolUse", turn_id=self.turn_id, permission_mode="bypassPermissions",
                         tool_name="Bash", tool_input={"command": command}, tool_use_id=call_id,
                         tool_response=output)
        self.take_context("a hook note after a command", post)
        if post.get("decision") == "block":
            output = str(post.get("reason") or "blocked")   # Codex: the model reads the reason instead
        self.transcript_chars += self._chars(output)
        return output, exit_code

    def run(self) -> str:
        self.emit_event({"type": "thread.started", "thread_id": self.session_id})
        start = self.hook("SessionStart", permission_mode="bypassPermissions", source="startup")
        self.take_context("the memory handed over at session start", start)
        if start.get("continue") is False:
            return ""
        for name in CONTEXT_FILES:
            path = self.workspace / name
            if path.is_file():       # the host puts the context file into the prompt
                self.guidance.add(name, path.read_text(encoding="utf-8", errors="replace"))
                break
        submit = self.hook("UserPromptSubmit", turn_id=self.turn_id,
                           permission_mode="bypassPermissions", prompt=self.prompt)
        self.take_context("a note handed over with the prompt", submit)
        self.emit_event({"type": "turn.started"})
        for skill in find_skills(self.workspace):
            if skill_fits(skill.description, self.prompt):
                rel = skill.path.relative_to(self.workspace).as_posix()
                text, code = self.shell(f"cat {rel}")
                if code == 0:
                    self.guidance.add(f"skill {skill.name}", text)
        answer = _solve(self)
        final = answer if answer else "I could not work out an answer to this task."
        self.message(final)
        stop_active = False
        for _ in range(2):
            stop = self.hook("Stop", turn_id=self.turn_id, permission_mode="bypassPermissions",
                             stop_hook_active=stop_active, last_assistant_message=final)
            if stop.get("decision") != "block" or stop_active:
                break
            # one more model turn with the hook's reason; the scripted agent re-states its answer
            reason = str(stop.get("reason") or "")
            self.guidance.add("the stop hook", reason)
            self.transcript_chars += self._chars(reason)
            self.message(f"Checked again before finishing. {final}" if answer else final)
            stop_active = True
        self.emit_event({"type": "turn.completed", "usage": dict(self.usage)})
        return answer


# --- the four families ---------------------------------------------------------------------

def _slips(session: _Session, family: str) -> bool:
    return _chance(session.prompt, session.attempt, family) < SLIP_RATE


def _final_number(session: _Session, output: str) -> str:
    """The last line of a command's output as the answer; rounded to an integer if the guidance
    demands it (the rule a harmful change adds)."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    value = _number_text(lines[-1]) if lines else ""
    rule = session.guidance.source_of("round_integer")
    if value and rule and "." in value:
        session.message(f"{rule} asks for the number only, rounded to an integer.")
        rounded, code = session.shell(_py(f"print(round({value}))"))
        if code == 0 and rounded.strip():
            value = rounded.strip().splitlines()[-1]
    return value


# Each solver returns None when the task is not of its family, else its answer ('' if none).

def _solve_units(session: _Session) -> str | None:
    target = _TARGET_UNIT.search(session.prompt)
    quantities = _QUANTITY.findall(session.prompt)
    if not target or len(quantities) < 2:
        return None
    unit = target.group(1).lower()
    factors = _FACTORS[unit]
    listed = ", ".join(f"{value} {symbol}" for value, symbol in quantities)
    guide = session.guidance.source_of("convert_units")
    if guide or not _slips(session, "units"):
        session.message(f"The quantities are {listed}; the answer is asked in {unit}. "
                        f"Converting each quantity to {unit} before adding them"
                        + (f", as {guide} says." if guide else "."))
        terms = " + ".join(f"{value}*{factors.get(symbol, 1)}" for value, symbol in quantities)
    else:
        session.message(f"The quantities are {listed}; adding them to get the total.")
        terms = " + ".join(value for value, _ in quantities)
    output, code = session.shell(_py(f"print({terms})"))
    return _final_number(session, output) if code == 0 else ""


def _solve_csv(session: _Session) -> str | None:
    file_match, column_match = _CSV_FILE.search(session.prompt), _CSV_COLUMN.search(session.prompt)
    if not file_match or not column_match:
        return None
    name, column = file_match.group(1), column_match.group(1)
    session.shell(f"head -n 5 {name}")
    guide = session.guidance.source_of("csv_by_name")
    if not guide and _slips(session, "csv"):
        session.message(f"Summing the numeric cells of the {column} column of {name}, "
                        "skipping anything that is not a number.")
        code_text = (f"lines = open('{name}').read().splitlines(); "
                     f"i = lines[0].split(',').index('{column}'); "
                     "vals = [l.split(',')[i] for l in lines[1:]]; "
                     "print(sum(float(v) for v in vals if v.replace('.', '').isdigit()))")
        output, code = session.shell(_py(code_text))
        return _final_number(session, output) if code == 0 else ""
    reader = f"csv.DictReader(open('{name}', newline=''))"
    if session.guidance.knows("csv_parentheses"):
        session.message(f"Totalling the {column} column by its header name; amounts in "
                        f"parentheses are negative ({session.guidance.source_of('csv_parentheses')}).")
        value = (f"(-float(r['{column}'].strip('()')) if r['{column}'].startswith('(') "
                 f"else float(r['{column}']))")
        output, code = session.shell(_py(f"import csv; print(sum({value} for r in {reader}))"))
        return _final_number(session, output) if code == 0 else ""
    session.message(f"Totalling the {column} column by its header name with csv.DictReader"
                    + (f", as {guide} says." if guide else "."))
    output, code = session.shell(_py(f"import csv; print(sum(float(r['{column}']) for r in {reader}))"))
    if code != 0 and "could not convert" in output:
        session.message("Some cells are wrapped in parentheses; stripping them so every value converts.")
        output, code = session.shell(_py(
            f"import csv; print(sum(float(r['{column}'].strip('()')) for r in {reader}))"))
    return _final_number(session, output) if code == 0 else ""


def _solve_dates(session: _Session) -> str | None:
    dates = _ISO_DATE.findall(session.prompt)
    if len(dates) != 2:
        return None
    start, end = (f"date({int(y)}, {int(m)}, {int(d)})" for y, m, d in dates)
    guide = session.guidance.source_of("inclusive_days")
    if guide or not _slips(session, "dates"):
        session.message("The range is inclusive, so both the first and the last day count: "
                        "the difference in days plus one" + (f" ({guide})." if guide else "."))
        expression = f"({end} - {start}).days + 1"
    else:
        session.message("Computing the number of days between the two dates.")
        expression = f"({end} - {start}).days"
    output, code = session.shell(_py(f"from datetime import date; print({expression})"))
    return _final_number(session, output) if code == 0 else ""


def _solve_mean(session: _Session) -> str | None:
    match = _MEAN.search(session.prompt)
    if not match:
        return None
    numbers = _NUMBER.findall(match.group(1))
    places = int(match.group(2))
    session.message(f"Averaging {len(numbers)} values and keeping {places} decimal places.")
    output, code = session.shell(_py(f"print('%.{places}f' % (({' + '.join(numbers)}) / {len(numbers)}))"))
    return _final_number(session, output) if code == 0 else ""


_SOLVERS = (_solve_csv, _solve_dates, _solve_mean, _solve_units)


def _solve(session: _Session) -> str:
    for solver in _SOLVERS:
        answer = solver(session)
        if answer is not None:
            return answer
    return ""


def run_scripted_agent(workspace: Path, prompt: str, *, attempt: int, emit: Emit,
                       run_hook: RunHook) -> str:
    """Run one simulated session in ``workspace`` (a deployed adapter) and return the final
    answer ('' when it found none). ``emit`` receives Codex ``exec --json`` events;
    ``run_hook(event, payload)`` runs the deployment's hooks for a Codex event and returns
    their parsed output (or None)."""
    return _Session(Path(workspace), prompt, attempt, emit, run_hook).run()
