"""Benchmark tasks: load them from JSONL/CSV records or Harbor task directories.

Owns ``Task`` and ``load_tasks`` (the hermit.yaml ``tasks:`` block). Every problem in the
source (missing file, missing field, duplicate id, missing task file) is collected and
raised as one InputError before anything runs.
"""

from __future__ import annotations

import csv
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from git_hermit.errors import ConfigError, InputError
from git_hermit.model.config_blocks import TasksConfig

RECORD_KEYS = frozenset({"path", "id_field", "prompt_field", "prompt_file_field", "answer_field",
                         "answer_file_field", "files_field", "files_dir"})
HARBOR_KEYS = frozenset({"harbor"})
CONTAINER_HINT = ("container tasks need a Docker-capable backend; the host runner only runs "
                  "tasks without an [environment] image or environment/Dockerfile")
_DOCKER_FILES = ("Dockerfile", "docker-compose.yaml", "docker-compose.yml")
_MAX_LISTED = 5


@dataclass(frozen=True)
class Task:
    """One benchmark task.

    ``files`` maps a workspace-relative name to the source file copied there before the
    agent starts. ``verifier`` is a script run by the ``command`` judge (Harbor's
    ``tests/test.sh``). ``metadata`` is the whole source record (or the parsed task.toml).
    """

    id: str
    prompt: str
    expected: str | None = None
    files: dict[str, Path] = field(default_factory=dict)
    verifier: Path | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    needs_container: bool = False


def load_tasks(tasks: TasksConfig | Mapping[str, Any], base_dir: Path) -> dict[str, Task]:
    """Load the tasks the hermit.yaml ``tasks:`` block names, keyed by id in source order.

    ``{path: tasks.jsonl|tasks.csv, id_field: uid, prompt_field: question, answer_field:
    answer, files_field: files}`` or ``{harbor: tasks/}``; relative paths are resolved
    against ``base_dir`` (the directory holding hermit.yaml). A plain mapping is typed here
    (TasksConfig holds the defaults); an unknown key of the block as written is refused.
    """
    if not isinstance(tasks, (TasksConfig, Mapping)):
        raise ConfigError("tasks: expected a mapping", "e.g. tasks: {path: tasks.jsonl, id_field: uid}")
    spec = tasks if isinstance(tasks, TasksConfig) else TasksConfig.from_block(tasks)
    if spec.harbor is not None:
        _reject_unknown(spec.given, HARBOR_KEYS)
        return _load_harbor(base_dir / spec.harbor)
    if spec.path is None:
        raise ConfigError("tasks: needs `path` (a .jsonl or .csv file) or `harbor` (a directory)",
                          "e.g. tasks: {path: tasks.jsonl, id_field: uid, prompt_field: question}")
    _reject_unknown(spec.given, RECORD_KEYS)
    return _load_records(spec, spec.path, base_dir)


def _reject_unknown(given: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise ConfigError(f"tasks: unknown key(s) {', '.join(unknown)}",
                          f"known keys: {', '.join(sorted(known))}")


# --- JSONL / CSV records -------------------------------------------------------------------

def _load_records(spec: TasksConfig, records_file: str, base_dir: Path) -> dict[str, Task]:
    path = base_dir / records_file
    if not path.is_file():
        raise InputError(f"tasks file not found: {path}", "check `tasks.path` in hermit.yaml")
    id_field, prompt_field, answer_field = spec.id_field, spec.prompt_field, spec.answer_field
    prompt_file_field, answer_file_field, files_field = spec.prompt_file_field, spec.answer_file_field, spec.files_field
    files_dir = base_dir / spec.files_dir if spec.files_dir is not None else path.parent

    problems: list[str] = []
    tasks: dict[str, Task] = {}
    duplicates: list[str] = []
    for where, record in _read_records(path):
        task_id = _text(record.get(id_field))
        if not task_id:
            problems.append(f"{where}: no `{id_field}`")
            continue
        if task_id in tasks:
            duplicates.append(task_id)
            continue
        if prompt_file_field:
            prompt = _read_referenced(record.get(prompt_file_field), files_dir, where,
                                      prompt_file_field, problems)
        else:
            prompt = _text(record.get(prompt_field))
        if not prompt:
            problems.append(f"{where} ({task_id}): no prompt in `{prompt_file_field or prompt_field}`")
            continue
        if answer_file_field:
            expected = _read_referenced(record.get(answer_file_field), files_dir, where,
                                        answer_file_field, problems)
        else:
            expected = _text(record.get(answer_field)) or None
        files = _task_files(record.get(files_field) if files_field else None, files_dir, where, problems)
        tasks[task_id] = Task(task_id, prompt, expected, files, None, dict(record))
    if duplicates:
        problems.insert(0, f"duplicate id(s) {listing(sorted(set(duplicates)))}")
    if problems:
        raise InputError(f"{path.name}: {len(problems)} problem(s): {listing(problems)}",
                         f"fix the records (ids come from `{id_field}`)")
    if not tasks:
        raise InputError(f"{path.name}: no tasks", "the file has no records")
    return tasks


UTF8_HINT = "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"


def _read_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (``file:line`` for errors, record). CSV fields may span lines (csv handles it)."""
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            try:
                for record in reader:
                    yield f"{path.name}:{reader.line_num}", record
            except UnicodeDecodeError:
                raise InputError(f"{path.name}:{reader.line_num + 1}: not UTF-8 text", UTF8_HINT) from None
        return
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        raise InputError(f"tasks file {path.name}: unknown format", "use a .jsonl or .csv file")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            where = f"{path.name}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line)", UTF8_HINT) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not JSON ({exc.msg})", "one JSON object per line") from None
            if not isinstance(record, dict):
                raise InputError(f"{where}: not a JSON object", "one JSON object per line")
            yield where, record


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _read_referenced(value: Any, files_dir: Path, where: str, name: str, problems: list[str]) -> str | None:
    relative = _text(value)
    if not relative:
        problems.append(f"{where}: no `{name}`")
        return None
    path = files_dir / relative
    if not path.is_file():
        problems.append(f"{where}: `{name}` file not found: {path}")
        return None
    return path.read_text(encoding="utf-8")


def _task_files(value: Any, files_dir: Path, where: str, problems: list[str]) -> dict[str, Path]:
    """A files field is a path, a list of paths, a JSON list in a CSV cell, or {dest: src}."""
    if value is None or value == "":
        return {}
    if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            problems.append(f"{where}: files field is not valid JSON")
            return {}
    if isinstance(value, str):
        pairs = [(Path(value).name, value)]
    elif isinstance(value, list):
        pairs = [(Path(str(item)).name, str(item)) for item in value]
    elif isinstance(value, dict):
        pairs = [(str(dest), str(src)) for dest, src in value.items()]
    else:
        problems.append(f"{where}: files field must be a path, a list or a mapping")
        return {}
    files: dict[str, Path] = {}
    for dest, src in pairs:
        source = files_dir / src
        if not source.exists():
            problems.append(f"{where}: task file not found: {source}")
        elif Path(dest).is_absolute() or ".." in Path(dest).parts:
            problems.append(f"{where}: task file destination escapes the workspace: {dest}")
        else:
            files[dest] = source
    return files


def listing(items: list[str]) -> str:
    """The first few items of a problem list, and how many more there are."""
    shown = "; ".join(items[:_MAX_LISTED])
    return shown + (f"; … and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


# --- Harbor task directories ---------------------------------------------------------------

def _load_harbor(root: Path) -> dict[str, Task]:
    if not root.is_dir():
        raise InputError(f"Harbor task directory not found: {root}", "check `tasks.harbor` in hermit.yaml")
    problems: list[str] = []
    tasks: dict[str, Task] = {}
    for task_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        task = _harbor_task(task_dir, problems)
        if task is not None:
            tasks[task.id] = task
    if problems:
        raise InputError(f"{root}: {len(problems)} problem(s): {listing(problems)}",
                         "a Harbor task directory holds instruction.md, task.toml and tests/test.sh")
    if not tasks:
        raise InputError(f"{root}: no Harbor task directories", "each task is a directory with task.toml")
    return tasks


def _harbor_task(task_dir: Path, problems: list[str]) -> Task | None:
    missing = [name for name in ("instruction.md", "task.toml", "tests/test.sh")
               if not (task_dir / name).is_file()]
    if missing:
        problems.append(f"{task_dir.name}: missing {', '.join(missing)}")
        return None
    try:
        config = tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{task_dir.name}: task.toml: {exc}")
        return None
    environment = config.get("environment") or {}
    env_dir = task_dir / "environment"
    needs_container = bool(environment.get("docker_image")) or any(
        (env_dir / name).is_file() for name in _DOCKER_FILES)
    # A container task's environment/ is an image build context, not workspace files.
    files = {} if needs_container or not env_dir.is_dir() else {
        str(path.relative_to(env_dir)): path for path in sorted(env_dir.rglob("*")) if path.is_file()}
    metadata: dict[str, Any] = {**config, "task_dir": str(task_dir)}
    for section, key in (("agent", "agent_timeout_s"), ("verifier", "verifier_timeout_s")):
        timeout = (config.get(section) or {}).get("timeout_sec")
        if timeout is not None:
            metadata[key] = float(timeout)
    return Task(task_dir.name, (task_dir / "instruction.md").read_text(encoding="utf-8"), None,
                files, task_dir / "tests" / "test.sh", metadata, needs_container)


def require_host_runnable(tasks: dict[str, Task]) -> None:
    """Raise one InputError naming the tasks that need a container (for the local backend)."""
    container = [task.id for task in tasks.values() if task.needs_container]
    if container:
        raise InputError(f"{len(container)} task(s) need a container: {listing(container)}", CONTAINER_HINT)
