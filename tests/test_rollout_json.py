"""`git hermit rollout --json`: printed as it is encoded, in the bytes json.dumps gives for the
whole, with memory flat in the number of rows (a 2,000-row rollout's ledger is 2,000 entries)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_helpers import GIT_HERMIT, hermit
from support.rollout_reuse_helpers import rows_of_k
from support.rollouts_e2e_helpers import make_project, scores_note

from git_hermit.model.jsonstream import LazyList, LazyMap, json_chunks

# `git hermit ARGS` with its output to /dev/null (as to a pipe a program reads), tracemalloc
# measuring what printing the output takes: the peak once the rollouts are done and their
# scores noted, over what was held then. A process of its own: the captured output of an
# in-process call, and the garbage a test left, would be measured with it.
_MEASURE = """
import sys, tracemalloc
import git_hermit.core.evaluate as evaluate
done = evaluate.rollout_commit
held = []

def rollout_commit(*args, **kwargs):
    result = done(*args, **kwargs)
    held.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.reset_peak()
    return result

evaluate.rollout_commit = rollout_commit
tracemalloc.start()
from git_hermit.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
sys.stderr.write("\\nprinting %d\\n" % (tracemalloc.get_traced_memory()[1] - held[0]))
"""


def _printing_json_rollout(repo: Path, k: int) -> int:
    """The bytes printing `git hermit rollout --json` on 8 tasks x ``k`` rows takes at its peak."""
    rows_of_k(repo, k)
    first = hermit(repo, "rollout", "--json")       # the rows not run yet run (on the run's tip)
    assert first.code == 0, first.err
    taken = []
    for _ in range(2):     # the least of two: a peak may hold garbage not collected yet
        proc = subprocess.run([sys.executable, "-c", _MEASURE, "rollout", "--json"], cwd=repo, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        assert proc.returncode == 0, proc.stderr
        taken.append(int(proc.stderr.rsplit("printing ", 1)[1]))
    return min(taken)


def test_rollout_json_prints_with_memory_flat_in_the_rows(repo):
    """8 tasks x 6 attempts, then x 60 (48 -> 480 rows). Printing the output may take a fixed
    amount whatever the rows: each row's ledger entry and task score are made as they are written.
    Before, the whole output was built first (every entry's and score's dicts, then one string):
    ~2.1 KB a row, on top of what the rollouts left; now ~11 bytes. Bound: 64 bytes a row."""
    make_project(repo, "print(task_id[1:])\n", n_tasks=8, k=6, agent_command=["echo", "1"])
    small = _printing_json_rollout(repo, 6)
    large = _printing_json_rollout(repo, 60)
    per_row = (large - small) / (8 * 60 - 8 * 6)
    assert per_row <= 64, f"{per_row:.0f} bytes more per extra row to print ({small} vs {large} bytes)"


def _lazy(value, depth=0):
    """``value`` with each list as a LazyList and each dict as a LazyMap (alternately a plain dict
    holding lazy values), as the CLI hands its output over."""
    if isinstance(value, list):
        return LazyList(lambda: (_lazy(item, depth + 1) for item in value))
    if isinstance(value, dict):
        if depth % 2:
            return {key: _lazy(item, depth + 1) for key, item in value.items()}
        return LazyMap(list(value), lambda key: _lazy(value[key], depth + 1))
    return value


ODD = {"z": [], "a": {}, "é \"q\"\n": [1, [2, [3, {}]], {"b": None, "a": [True, False]}],
       "m": {"y": [{"k": 0.1, "j": 1e300}], "x": "line\nnext", "w": {"v": [[], [{}]]}},
       "s": {"b", "a"} and "set", "p": Path("/x")}


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("value", [ODD, [ODD, [], {}], [], {}, {"only": []}, 3, "s"],
                         ids=["odd", "list", "empty-list", "empty-dict", "nested-empty", "number", "string"])
def test_json_written_a_piece_at_a_time_is_the_json_of_the_whole(value, indent, sort_keys):
    """json_chunks with lists and dicts made lazily gives byte for byte what json.dumps of the
    whole gives: either layout (a pipe's one line, a terminal's indented), sorted or not, empty
    containers, odd keys, values only ``default`` can encode."""
    whole = json.dumps(value, indent=indent, sort_keys=sort_keys, default=str)
    assert "".join(json_chunks(_lazy(value), indent=indent, sort_keys=sort_keys, default=str)) == whole
    assert "".join(json_chunks(value, indent=indent, sort_keys=sort_keys, default=str)) == whole


def test_rollout_json_is_the_json_of_its_scores_and_ledger_whole(repo):
    """The printed JSON is what json.dumps of the whole output gives (one line to a pipe, keys
    sorted): its scores are the commit's scores note, its ledger the rows' billing."""
    make_project(repo, "print(task_id[1:] if int(task_id[1:]) % 2 == 0 else 'no')\n", n_tasks=3, k=2)
    for _ in range(2):                        # run, then every row reused
        r = hermit(repo, "rollout", "--json")
        assert r.code == 0, r.err
        data = json.loads(r.out)
        assert r.out == json.dumps(data, sort_keys=True, default=str) + "\n"
        note = scores_note(repo)
        assert data["scores"]["tasks"] == note["tasks"] and data["scores"]["pass_at_1"] == note["pass_at_1"] == pytest.approx(2 / 3)
        assert [e["key"] for e in data["ledger"]["entries"]] == [f"t{i}#{a}" for i in range(3) for a in (1, 2)]
        assert sorted(data) == ["ledger", "pass_at_1_ci", "reused", "scores"]
    assert data["reused"] == 6


def test_eval_json_with_a_baseline_is_the_json_of_the_whole(repo):
    """`eval --json` writes both runs' ledgers an entry at a time too, in the same bytes."""
    make_project(repo, "print(task_id[1:])\n", n_tasks=2, k=2,
                 rows={"train": ["t0#1"], "test": ["t0#1", "t0#2", "t1#1", "t1#2"]})
    r = hermit(repo, "eval", "hermit/ahe/step-0000", "--baseline", "hermit/ahe/step-0000", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert r.out == json.dumps(data, sort_keys=True, default=str) + "\n"
    assert [e["key"] for e in data["candidate"]["ledger"]["entries"]] == ["t0#1", "t0#2", "t1#1", "t1#2"]
    assert data["baseline"]["ledger"]["entries"] == data["candidate"]["ledger"]["entries"]


def test_rollout_json_to_a_terminal_is_the_indented_json_of_the_whole(repo):
    """At a terminal the output is indented, as json.dumps(indent=2) lays out the whole."""
    import os
    import pty
    import threading
    make_project(repo, "print(task_id[1:])\n", n_tasks=2, k=2)
    leader, follower = pty.openpty()
    read: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:            # the terminal closed: the process ended
                return
            if not chunk:
                return
            read.append(chunk)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([*GIT_HERMIT, "rollout", "--json"], cwd=repo, stdout=follower,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(follower)
    reader.join(10)
    os.close(leader)
    assert proc.returncode == 0, proc.stderr
    text = b"".join(read).decode().replace("\r\n", "\n")
    data = json.loads(text)
    assert "\n  " in text and text == json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    assert len(data["ledger"]["entries"]) == 4
