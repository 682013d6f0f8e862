"""`git hermit rollout` / `eval` end to end with ``command`` agents on real repositories.

Covers the rollout runner's promises: the timeout kills the agent's whole process group,
a driver killed with SIGKILL resumes without re-running finished rows, per-host slots cap
concurrency, a crashing judge is a rollout exception, bad inputs are one error line and
change nothing, and `eval --baseline` prints a paired CI and the flips.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from git_hermit.rollouts.executors import PREPARE_AHEAD
from support.cli_helpers import GIT_HERMIT, hermit
from conftest import git, snapshot_state
from support.rollouts_e2e_helpers import AGENT_PRELUDE, ANSWER_IF_EVEN, commit_candidate, make_project, result_files, scores_note, starts  # noqa: F401


def test_rollout_judges_every_row_and_writes_scores_note(repo):
    log = make_project(repo, ANSWER_IF_EVEN)
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    note = scores_note(repo)
    assert json.loads(r.out)["scores"] == note
    assert {t: s["outcome"] for t, s in note["tasks"].items()} == {"t0": "pass", "t1": "fail", "t2": "pass", "t3": "fail"}
    assert note["k"] == 2 and note["pass_at_1"] == 0.5
    assert sorted(starts(log)) == sorted(f"t{i}#{a}" for i in range(4) for a in (1, 2))
    assert len(result_files(repo)) == 8
    one = result_files(repo)[0].parent
    assert (one / "trajectory.txt").read_text().startswith("working on")


GRANDCHILD_THEN_SLEEP = """
marker = {marker!r}
log("start")
if task_id == "t0":
    # the grandchild ignores SIGTERM (inherited by sleep), so only a SIGKILL of the group stops it
    subprocess.Popen(["sh", "-c", f"trap '' TERM; sleep 2; echo late > {{marker}}"])
    time.sleep(60)
print(task_id[1:])
"""


def test_timeout_kills_the_whole_process_group(repo, tmp_path):
    log = make_project(repo, GRANDCHILD_THEN_SLEEP.format(marker=str(tmp_path / "late-marker")),
                       n_tasks=2, k=1, agent_timeout_s=1)      # t1 answers: not every row is an exception
    started = time.monotonic()
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert time.monotonic() - started < 20
    attempt = scores_note(repo)["tasks"]["t0"]["attempts"][0]
    assert attempt["outcome"] == "exception" and attempt["exception_type"].endswith("Timeout")
    time.sleep(max(0.0, started + 3.5 - time.monotonic()))   # past the grandchild's 2 s sleep
    assert not (tmp_path / "late-marker").exists()

    # timeout_as: fail scores the same timeout as a fail (its type still says Timeout)
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["evolver"]["params"]["timeout_as"] = "fail"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    for path in result_files(repo):
        path.unlink()
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    attempt = scores_note(repo)["tasks"]["t0"]["attempts"][0]
    assert attempt["outcome"] == "fail" and attempt["exception_type"].endswith("Timeout")
    # issue 14.5: timeout_as is applied when results are read, once: the stored rollout is the
    # timeout as it happened, so switching back re-scores the reused rollout (no agent runs again
    # with --keep-exceptions; without it an exception row runs again, issue 24)
    stored = [p.stat().st_mtime_ns for p in result_files(repo)]
    cfg["evolver"]["params"]["timeout_as"] = "exception"
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = hermit(repo, "rollout", "--json", "--keep-exceptions")
    assert r.code == 0, r.err
    assert [p.stat().st_mtime_ns for p in result_files(repo)] == stored
    attempt = scores_note(repo)["tasks"]["t0"]["attempts"][0]
    assert attempt["outcome"] == "exception" and attempt["exception_type"].endswith("Timeout")
    assert starts(log)["t0#1"] == 2


def test_background_children_die_when_the_agent_exits(repo, tmp_path):
    make_project(repo, f"""
subprocess.Popen(["sh", "-c", "sleep 1; echo late > {tmp_path / 'late-marker'}"])
print(task_id[1:])
""", n_tasks=1, k=1)
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert scores_note(repo)["tasks"]["t0"]["outcome"] == "pass"
    time.sleep(1.5)
    assert not (tmp_path / "late-marker").exists()


SLOW_COUNTED = """
log("start")
time.sleep(0.4)
log("end")
print(task_id[1:])
"""


def test_resume_after_kill_9_reruns_only_unfinished_rows(repo):
    log = make_project(repo, SLOW_COUNTED, n_tasks=6, k=2, trainer={"concurrency": 2})
    all_rows = {f"t{i}#{a}" for i in range(6) for a in (1, 2)}
    driver = subprocess.Popen([*GIT_HERMIT, "rollout"], cwd=repo, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(result_files(repo)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    finished = {f"{p.parent.parent.name}#{p.parent.name}" for p in result_files(repo)}
    assert 3 <= len(finished) < len(all_rows), "the driver must be killed mid-run"
    time.sleep(0.6)   # let the orphaned agents of the killed driver finish (they write no result)

    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["reused"] == len(finished)
    counts = starts(log)
    assert set(counts) == all_rows
    assert all(counts[row] == 1 for row in finished), counts            # finished rows never re-run
    rerun = {row for row, n in counts.items() if n > 1}
    assert all(counts[row] == 2 for row in rerun)
    # at most the jobs in flight when the driver died: with workspaces prepared ahead that is
    # PREPARE_AHEAD x concurrency (an agent may have ended just before its result was stored)
    assert len(rerun) <= PREPARE_AHEAD * 2
    assert scores_note(repo)["pass_at_1"] == 1.0


TIMED = """
log("start")
time.sleep(0.3)
log("end")
print(task_id[1:])
"""


def intervals(log: Path) -> list[tuple[float, float]]:
    events: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        row, event, stamp = line.split()
        events.setdefault(row, {})[event] = float(stamp)
    return sorted((e["start"], e["end"]) for e in events.values())


def max_overlap(spans: list[tuple[float, float]]) -> int:
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


@pytest.mark.parametrize("slots,expect_at_most", [({"codex": 1}, 1), (None, 4)])
def test_per_host_slots_cap_concurrent_agents(repo, slots, expect_at_most):
    executor = {"kind": "local", **({"slots": slots} if slots else {})}
    log = make_project(repo, TIMED, n_tasks=4, k=1, host="codex", executor=executor)
    r = hermit(repo, "rollout")
    assert r.code == 0, r.err
    overlap = max_overlap(intervals(log))
    if slots:
        assert overlap == 1
    else:
        assert overlap > 1   # the same rows do overlap without the cap, so the cap is what holds


def test_judge_crash_is_an_exception_outcome(repo):
    (repo.parent / "verify.py").write_text("raise RuntimeError('verifier exploded')\n")
    make_project(repo, ANSWER_IF_EVEN, n_tasks=2, k=1,
                 judge={"kind": "command", "command": [sys.executable, str(repo.parent / "verify.py")]})
    r = hermit(repo, "rollout", "--json")
    assert r.code == 17, r.err            # every row an exception: no score (issue 24; test_failures.py)
    for path in result_files(repo):
        result = json.loads(path.read_text())
        assert result["outcome"] == "exception" and result["exception_type"] == "RewardFileNotFoundError"
    result = json.loads(result_files(repo)[0].read_text())
    assert "verifier exploded" in result["verifier_output"]


def test_eval_against_baseline_prints_ci_and_flips(repo):
    # the candidate adapter carries a hint that makes the agent solve t1 too
    make_project(repo, """
hint = (pathlib.Path(workspace) / ".hermit-adapter" / "HINT.md").exists()
print(task_id[1:] if task_id in ("t0", "t2") or (hint and task_id == "t1") else "no idea")
""", rows={"train": ["t0#1"], "test": [f"t{i}#1" for i in range(4)]})
    baseline = commit_candidate(repo, "solve t1\n")
    r = hermit(repo, "eval", "HEAD", "--baseline", baseline, "--split", "test")
    assert r.code == 0, r.err
    assert "pass@1 0.750" in r.out and "pass@1 0.500" in r.out
    # each pass@1 carries its bootstrap CI over the 4 tasks (3 of 4 pass: the CI spans [0.25, 1.0])
    assert re.search(r"candidate \w+\s+pass@1 0\.750 \[0\.250, 1\.000\] \(95% CI\)", r.out), r.out
    assert re.search(r"difference: \+25\.0 points \[[+-]\d+\.\d, [+-]\d+\.\d\]", r.out), r.out
    assert re.search(r"flips: \+1 t1\s+-0", r.out), r.out
    note = scores_note(repo, "HEAD")
    assert note["split"] == "test" and note["ci"]["delta"] == 25.0 and note["ci"]["baseline"] == baseline
    one = hermit(repo, "rollout", "HEAD", "--split", "test")
    assert re.search(r"pass@1 0\.750 \[0\.250, 1\.000\] \(bootstrap 95% CI over 4 tasks\)", one.out), one.out


def _rows_with_unknown_task(repo: Path) -> tuple[str, ...]:
    (repo / "rows" / "train.txt").write_text("t0#1\nnope#1\n")
    return ("rollout",)


def _missing_agent_binary(repo: Path) -> tuple[str, ...]:
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["agent"]["command"] = ["no-such-agent-binary-xyz", "{prompt_file}"]
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return ("rollout",)


def _missing_split(repo: Path) -> tuple[str, ...]:
    return ("eval", "HEAD", "--split", "heldout")


@pytest.mark.parametrize("break_it,code", [(_rows_with_unknown_task, 7), (_missing_agent_binary, 12),
                                           (_missing_split, 5)])
def test_bad_input_is_one_error_line_and_changes_nothing(repo, break_it, code):
    log = make_project(repo, ANSWER_IF_EVEN)
    args = break_it(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "broken input")
    before = snapshot_state(repo)
    r = hermit(repo, *args)
    assert r.code == code, r.err
    lines = r.err.strip().splitlines()
    assert lines[-2].startswith("error: ") and lines[-1].startswith("hint: "), r.err
    assert "Traceback" not in r.err
    assert snapshot_state(repo) == before
    assert not log.exists() and result_files(repo) == []   # nothing ran


def test_changed_agent_backend_does_not_reuse_results(repo):
    make_project(repo, ANSWER_IF_EVEN, n_tasks=2, k=1)
    assert hermit(repo, "rollout").code == 0
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["agent"] = {"backend": "scripted", "timeout_s": 30,
                    "scripted": {"policy": "git_hermit.demo.acting:run_scripted_agent"}}
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = hermit(repo, "rollout", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["reused"] == 0
    assert {json.loads(p.read_text())["agent"] for p in result_files(repo)} == {"scripted"}
