"""A step's ``step.json`` and ``ledger.json`` are read within the bound every record has.

The records ref is read by every command that needs a step's ledger (estimate, the budget of a
step); a record over MAX_RECORD_BYTES (4 MiB) is one git-hermit never writes and fetch never takes,
so one found in this repository is damage: named with its path and the bound, exit 18, never read
into memory whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import copy_demo

RUN = "demo"
REF = f"refs/hermit/{RUN}/records"
OVER = 4 * 1024 * 1024 + 1          # one byte over what a record may hold


def _plant(repo: Path, tmp_path: Path, path: str, content: bytes) -> None:
    """Replace ``path`` in the run's records by hand (neither fetch nor a step writes such a record)."""
    index = {"GIT_INDEX_FILE": str(tmp_path / "index")}
    git(repo, "read-tree", REF, env=index)
    blob_file = tmp_path / "blob"
    blob_file.write_bytes(content)
    blob = git(repo, "hash-object", "-w", str(blob_file)).strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=index)
    tree = git(repo, "write-tree", env=index).strip()
    git(repo, "update-ref", REF, git(repo, "commit-tree", tree, "-p", REF, "-m", "by hand").strip())


def test_a_ledger_json_over_the_bound_is_damage_named_exit_18(demo_run, tmp_path):
    repo = copy_demo(demo_run, tmp_path / "repo")
    assert hermit(repo, "estimate").code == 0
    _plant(repo, tmp_path, "steps/0001/ledger.json", b'{"entries": []' + b" " * OVER + b"}")
    result = hermit(repo, "estimate")
    assert result.code == 18, (result.out, result.err)
    error = next(line for line in result.err.splitlines() if line.startswith("error: "))
    assert "steps/0001/ledger.json" in error and "4,194,304" in error, error
    assert any(line.startswith("hint: ") for line in result.err.splitlines())
    assert "Traceback" not in result.err


@pytest.mark.parametrize("name", ["step.json", "ledger.json"])
def test_the_step_and_ledger_readers_check_the_size_before_reading(demo_run, tmp_path, name):
    from git_hermit.core.records import RunRecords
    from git_hermit.errors import DamagedRecord
    from git_hermit.gitio import Repo
    repo = copy_demo(demo_run, tmp_path / "repo")
    _plant(repo, tmp_path, f"steps/0001/{name}", b"{" + b" " * OVER + b"}")
    with Repo.discover(repo) as opened:
        records = RunRecords(opened, RUN)
        read = (lambda: records.steps_of([1])) if name == "step.json" else (lambda: records.ledgers([1]))
        with pytest.raises(DamagedRecord) as raised:
            read()
        assert f"steps/0001/{name}" in raised.value.message and "4,194,304" in raised.value.message
        # a record within the bound still reads (the other step's)
        assert 2 in (records.steps_of([2]) if name == "step.json" else records.ledgers([2]))
