"""Let a one-shot model act as an editing learner: the files go into the prompt, the edits
come back as one JSON block.

A chat call cannot open files or run commands, so for the Evolve Agent the prompt carries the
adapter's files and the state it needs, and the model answers with
``{"files": {"<path in adapter/>": "<full new text>" | null}, "manifest": {...}}`` in a
```json block; ``apply_reply`` writes those edits into the learner workspace, only inside
``adapter/``, and the manifest to ``state/change_manifest.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

from git_hermit.model.learner_json import load_json

MAX_FILE_CHARS = 20_000
MAX_STATE_FILES = 40
_BLOCK = re.compile(r"```json\s*\n(.*?)\n```", re.S)

INSTRUCTIONS = """
# How to answer (you cannot run commands or open files in this session)

The adapter's files and the run's records are above. Make your edits by answering with
exactly one fenced ```json block holding one object:

  {"files": {"<path relative to adapter/>": "<the file's full new text>", "<path to delete>": null},
   "manifest": {"iteration": <N>, "changes": [{"id": "chg-1", "description": "...", "files": ["..."],
                "failure_pattern": "...", "predicted_fixes": ["<task id>"], "risk_tasks": ["<task id>"],
                "component": "...", "why_this_component": "..."}]}}

Give each edited file's complete new content. Text outside the block is your summary.
"""


def _text_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _show(path: Path, rel: str) -> str:
    text = path.read_text(errors="replace")
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n… (cut at {MAX_FILE_CHARS} characters)"
    return f"## {rel}\n\n````\n{text}\n````\n"


def edit_prompt(workspace: Path, prompt: str) -> str:
    """``prompt`` plus the adapter's files, the state records and the answer format."""
    parts = [prompt, "\n# The adapter's files (adapter/)\n"]
    adapter = workspace / "adapter"
    parts += [_show(p, p.relative_to(adapter).as_posix()) for p in _text_files(adapter)]
    state = workspace / "state"
    records = [p for p in _text_files(state) if p.suffix in (".md", ".json")][-MAX_STATE_FILES:]
    parts.append("\n# The run's records (state/, read-only)\n")
    parts += [_show(p, "state/" + p.relative_to(state).as_posix()) for p in records]
    parts.append(INSTRUCTIONS)
    return "\n".join(parts)


def apply_reply(workspace: Path, reply: str) -> list[str]:
    """Write the reply's edits; the problems found (an empty list when all was applied)."""
    blocks = _BLOCK.findall(reply)
    if not blocks:
        return ["the reply has no ```json block with files and a manifest"]
    try:
        data = load_json(blocks[-1])
    except json.JSONDecodeError as exc:
        return [f"the reply's json block is not JSON ({exc.msg} at line {exc.lineno})"]
    except ValueError as exc:   # TooDeep
        return [f"the reply's json block is {exc}"]
    if not isinstance(data, dict):
        return ["the reply's json block is not an object"]
    files = data.get("files") or {}
    if not isinstance(files, dict):
        return ["the reply's \"files\" is not an object of path → text"]
    problems = []
    adapter = workspace / "adapter"
    for rel, content in files.items():
        path = PurePosixPath(str(rel).removeprefix("adapter/"))
        if path.is_absolute() or ".." in path.parts or not path.parts:
            problems.append(f"refused an edit outside the adapter: {rel!r}")
            continue
        target = adapter / path
        if not isinstance(content, (str, type(None))):
            problems.append(f"the new content of {rel!r} is not text")
            continue
        try:   # a reply that cannot be written is refused, never an internal error
            if content is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content.encode("utf-8"))
        except (OSError, ValueError) as exc:    # a directory, a NUL in the name, a lone surrogate …
            problems.append(f"refused the edit of {rel!r}: {type(exc).__name__}")
    if "manifest" in data:
        (workspace / "state" / "change_manifest.json").write_text(json.dumps(data["manifest"], indent=2))
    return problems
