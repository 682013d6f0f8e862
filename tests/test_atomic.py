"""The one atomic writer (git_hermit/atomic.py, issue 26 item 4): every file git-hermit writes in
place goes through it, a failed write leaves the old file and no temporary one, and concurrent
writers of one path never share a temporary file."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from git_hermit.atomic import write_atomic

TOP = Path(__file__).resolve().parents[1]


def test_it_replaces_the_file_whole_and_keeps_the_umask_mode(tmp_path):
    path = tmp_path / "deep" / "er" / "file.json"
    write_atomic(path, b"one")
    write_atomic(path, b"two", durable=True)
    assert path.read_bytes() == b"two"
    assert os.listdir(path.parent) == ["file.json"]
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"old")
    with pytest.raises(TypeError):
        write_atomic(path, "text, not bytes")      # type: ignore[arg-type]
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["file"]


def test_threads_writing_one_path_never_share_a_temporary_file(tmp_path):
    path = tmp_path / "shared.txt"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for _ in range(50):
                write_atomic(path, str(n).encode() * 1000)
        except BaseException as exc:    # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert path.read_bytes() in {str(n).encode() * 1000 for n in range(4)}
    assert os.listdir(tmp_path) == ["shared.txt"]


def test_no_module_writes_its_own_temporary_file_and_renames_it():
    offenders = []
    for path in sorted((TOP / "git_hermit").rglob("*.py")):
        if path.name == "atomic.py":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"tempfile\.mkstemp|\.tmp\"\)|\.tmp'\)|def \w*atomic_write\b", text):
            offenders.append(str(path.relative_to(TOP)))
    assert offenders == []
