"""Tasks (JSONL, CSV, Harbor) and rows files: parsing, k inference, and one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_hermit.errors import ConfigError, InputError
from git_hermit.rollouts.rows import Row, load_split, load_splits, make_rows, parse_row
from git_hermit.rollouts.tasks import load_tasks, require_host_runnable


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


@pytest.fixture
def officeqa(tmp_path) -> dict:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bulletin.txt").write_text("treasury")
    write_jsonl(tmp_path / "tasks.jsonl", [
        {"uid": "UID1", "question": "How much?", "answer": "2,602", "files": ["docs/bulletin.txt"]},
        {"uid": "UID2", "question": "When?", "answer": "March 3, 1977"},
        {"uid": "UID3", "question": "Which?", "answer": 507},
    ])
    return load_tasks({"path": "tasks.jsonl", "id_field": "uid", "prompt_field": "question",
                       "answer_field": "answer", "files_field": "files"}, tmp_path)


def test_jsonl_tasks_with_uid_field_and_files(officeqa, tmp_path):
    assert list(officeqa) == ["UID1", "UID2", "UID3"]
    first = officeqa["UID1"]
    assert (first.prompt, first.expected) == ("How much?", "2,602")
    assert first.files == {"bulletin.txt": tmp_path / "docs" / "bulletin.txt"}
    assert first.metadata["uid"] == "UID1" and not first.needs_container
    assert officeqa["UID3"].expected == "507"      # a JSON number becomes its text


def test_csv_tasks_with_multiline_fields(tmp_path):
    (tmp_path / "q.csv").write_text(
        'uid,question,answer\nUID1,"What were\nthe totals?","2,602"\nUID2,Simple?,yes\n')
    tasks = load_tasks({"path": "q.csv", "id_field": "uid", "prompt_field": "question"}, tmp_path)
    assert tasks["UID1"].prompt == "What were\nthe totals?"
    assert tasks["UID1"].expected == "2,602" and tasks["UID2"].expected == "yes"


def test_prompt_and_answer_from_files(tmp_path):
    (tmp_path / "p1.md").write_text("Do the thing")
    (tmp_path / "a1.txt").write_text("42")
    write_jsonl(tmp_path / "t.jsonl", [{"id": "t1", "prompt_path": "p1.md", "answer_path": "a1.txt"}])
    task = load_tasks({"path": "t.jsonl", "prompt_file_field": "prompt_path",
                       "answer_file_field": "answer_path"}, tmp_path)["t1"]
    assert (task.prompt, task.expected) == ("Do the thing", "42")


def test_duplicates_and_missing_files_are_one_error(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [
        {"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"},
        {"id": "b", "prompt": "z", "files": ["nope.pdf"]}, {"prompt": "no id"}])
    with pytest.raises(InputError) as caught:
        load_tasks({"path": "t.jsonl", "files_field": "files"}, tmp_path)
    message = caught.value.message
    assert "duplicate id(s) a" in message and "nope.pdf" in message and "no `id`" in message
    assert "3 problem(s)" in message


def test_missing_tasks_file_and_unknown_keys(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_tasks({"path": "absent.jsonl"}, tmp_path)
    with pytest.raises(ConfigError, match="unknown key"):
        load_tasks({"path": "t.jsonl", "idfield": "uid"}, tmp_path)
    with pytest.raises(ConfigError, match="needs `path`"):
        load_tasks({}, tmp_path)


def make_harbor_task(root: Path, name: str, *, dockerfile: bool = False, image: str | None = None) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text(f"Solve {name}.")
    toml = '[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 600.0\n'
    if image:
        toml += f'[environment]\ndocker_image = "{image}"\n'
    (task / "task.toml").write_text(toml)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > \"$HERMIT_VERIFIER_DIR/reward.txt\"\n")
    (task / "environment").mkdir()
    (task / "environment" / "data.csv").write_text("a,b\n")
    if dockerfile:
        (task / "environment" / "Dockerfile").write_text("FROM alpine\n")
    return task


def test_harbor_tasks(tmp_path):
    root = tmp_path / "tasks"
    make_harbor_task(root, "host-task")
    make_harbor_task(root, "docker-task", dockerfile=True)
    make_harbor_task(root, "image-task", image="ubuntu:24.04")
    tasks = load_tasks({"harbor": "tasks"}, tmp_path)
    host = tasks["host-task"]
    assert host.prompt == "Solve host-task." and host.verifier == root / "host-task" / "tests" / "test.sh"
    assert host.files == {"data.csv": root / "host-task" / "environment" / "data.csv"}
    assert host.metadata["verifier_timeout_s"] == 30.0 and host.metadata["agent_timeout_s"] == 600.0
    assert not host.needs_container
    assert tasks["docker-task"].needs_container and tasks["image-task"].needs_container
    assert tasks["docker-task"].files == {}
    with pytest.raises(InputError) as caught:
        require_host_runnable(tasks)
    assert "docker-task" in caught.value.message and "Docker-capable backend" in caught.value.hint
    require_host_runnable({"host-task": host})


def test_harbor_task_missing_pieces(tmp_path):
    (tmp_path / "tasks" / "broken").mkdir(parents=True)
    (tmp_path / "tasks" / "broken" / "instruction.md").write_text("x")
    with pytest.raises(InputError, match="broken: missing task.toml, tests/test.sh"):
        load_tasks({"harbor": "tasks"}, tmp_path)


# --- rows ----------------------------------------------------------------------------------

def test_parse_row():
    assert parse_row("UID1#2") == Row("UID1#2", "UID1", 2)
    assert parse_row("  UID1 ") == Row("UID1", "UID1", 1)
    assert parse_row("a#b") == Row("a#b", "a#b", 1)         # '#' without digits is part of the id
    with pytest.raises(InputError, match="start at 1"):
        parse_row("UID1#0")


def test_k_inferred_from_rows(officeqa, tmp_path):
    rows = tmp_path / "train_k2.txt"
    rows.write_text("# training rows\nUID1#1\nUID2#1\n\nUID1#2\nUID2#2\n")
    split = load_split(rows, officeqa)
    assert split.k == 2 and split.tasks == ("UID1", "UID2") and split.name == "train"
    assert [row.row_id for row in split.rows] == ["UID1#1", "UID2#1", "UID1#2", "UID2#2"]


def test_bare_rows_are_k1_or_expanded_when_k_given(officeqa, tmp_path):
    rows = tmp_path / "test.txt"
    rows.write_text("UID1\nUID3\n")
    assert load_split(rows, officeqa, name="test").k == 1
    split = load_split(rows, officeqa, k=3, name="test")
    assert split.k == 3
    assert [row.row_id for row in split.rows] == ["UID1#1", "UID1#2", "UID1#3", "UID3#1", "UID3#2", "UID3#3"]


def test_unequal_row_counts_need_k(officeqa, tmp_path):
    rows = tmp_path / "rows.txt"
    rows.write_text("UID1#1\nUID1#2\nUID2#1\n")
    with pytest.raises(InputError, match="between 1 and 2 rows"):
        load_split(rows, officeqa)
    with pytest.raises(InputError, match="k=2 but UID2 has 1"):
        load_split(rows, officeqa, k=2)


def test_unknown_ids_and_duplicates_in_one_error(officeqa, tmp_path):
    rows = tmp_path / "rows.txt"
    rows.write_text("UID1#1\nNOPE#1\nUID1#1\nGHOST\n")
    with pytest.raises(InputError) as caught:
        load_split(rows, officeqa)
    message = caught.value.message
    assert "2 unknown task id(s): NOPE; GHOST" in message and "duplicate row UID1#1 (first on line 1)" in message


def test_missing_or_empty_rows_file(officeqa, tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_split(tmp_path / "absent.txt", officeqa)
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(InputError, match="lists no rows"):
        load_split(tmp_path / "empty.txt", officeqa)


def test_make_rows_round_trips(officeqa, tmp_path):
    text = make_rows(["UID1", "UID2"], 2)
    assert text == "UID1#1\nUID1#2\nUID2#1\nUID2#2\n"
    (tmp_path / "rows.txt").write_text(text)
    assert load_split(tmp_path / "rows.txt", officeqa).k == 2
    assert make_rows(["UID3"], 1) == "UID3\n"


def test_load_splits_from_data_block(officeqa, tmp_path):
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "train.txt").write_text(make_rows(["UID1", "UID2"], 2))
    (tmp_path / "rows" / "test.txt").write_text(make_rows(["UID3"], 1))
    splits = load_splits({"train": "rows/train.txt", "test": "rows/test.txt", "step_size": 100},
                         officeqa, tmp_path)
    assert set(splits) == {"train", "test"}
    assert (splits["train"].k, splits["test"].k, splits["test"].name) == (2, 1, "test")
