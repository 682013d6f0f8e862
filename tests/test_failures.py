"""Failures are never scores (issue 24, requirement 1).

A rollout that ended in an exception (no reward: the agent timed out or crashed, the judge
crashed, the model refused the key) is not a result: the next `rollout`, `eval` or `step` runs
it again (``--keep-exceptions`` keeps it); a command whose rows are all exceptions exits 17
naming the failure types with their counts and the first error, and writes no scores note; a
step whose exception share passes ``trainer.max_exception_rate`` stops before its learners,
keeps its finished rollouts and resumes once the cause is fixed; `rollout`, `show` and `log`
name the failure types in their text output. Real git, the real executable's entry point, a
`command` agent that hangs past its timeout, a judge that crashes, and the real Codex CLI
against the scripted model server answering 401.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from conftest import git, snapshot_state
from support.step_support import RUN, calls, env_for, make_run, rollouts_dir
from support.rollouts_e2e_helpers import make_project, result_files, scores_note, starts

from git_hermit.errors import EXIT_CODES, RolloutsFailed
from git_hermit.hosts.registry import find_host_cli

FAILED = RolloutsFailed.exit_code

# answers its task unless a file `hang-<task>` beside the repository exists: then it hangs past
# its timeout (1 s), and the rollout ends in an AgentTimeout
HANG_IF_TOLD = """
log("start")
if (pathlib.Path({control!r}) / f"hang-{{task_id}}").exists():
    time.sleep(60)
print(task_id[1:])
"""


def _hanging_project(repo: Path, n_tasks: int = 2, k: int = 1, **config) -> Path:
    control = repo.parent / "hang"
    control.mkdir()
    log = make_project(repo, HANG_IF_TOLD.format(control=str(control)), n_tasks=n_tasks, k=k, agent_timeout_s=1,
                       **config)
    return log


def _hang(repo: Path, *tasks: str) -> None:
    for task in tasks:
        (repo.parent / "hang" / f"hang-{task}").write_text("")


def _unhang(repo: Path) -> None:
    for path in (repo.parent / "hang").glob("hang-*"):
        path.unlink()


def _has_note(repo: Path, rev: str = "hermit/ahe/step-0000") -> bool:
    return git(repo, "notes", "--ref=refs/notes/hermit/scores", "list", rev, check=False).strip() != ""


def test_the_exit_code_is_its_own_and_in_the_exit_code_table():
    assert FAILED not in {code for code in EXIT_CODES if code != FAILED} and FAILED in EXIT_CODES
    table = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text()
    assert f"| {FAILED} |" in table


def test_an_exception_row_runs_again_on_the_next_rollout_and_the_flag_keeps_it(repo):
    log = _hanging_project(repo)
    _hang(repo, "t1")
    first = hermit(repo, "rollout")
    assert first.code == 0, first.err                      # one of two rows failed: still a score
    assert "1 exception" in first.out and "AgentTimeout 1" in first.out, first.out
    assert "agent timed out after 1s" in first.out, first.out        # the first error, in text
    assert scores_note(repo)["tasks"]["t1"]["outcome"] == "exception"
    kept = hermit(repo, "rollout", "--keep-exceptions")
    assert kept.code == 0, kept.err
    assert starts(log) == {"t0#1": 1, "t1#1": 1}                     # nothing ran again
    assert "(2 rollouts reused)" in kept.out, kept.out
    _unhang(repo)                                                     # the cause is fixed
    again = hermit(repo, "rollout", "--json")
    assert again.code == 0, again.err
    assert starts(log) == {"t0#1": 1, "t1#1": 2}                     # only the exception row ran again
    assert json.loads(again.out)["reused"] == 1
    note = scores_note(repo)
    assert {t: s["outcome"] for t, s in note["tasks"].items()} == {"t0": "pass", "t1": "pass"}
    assert note["pass_at_1"] == 1.0


def test_a_rollout_whose_rows_all_time_out_exits_with_its_code_and_writes_no_score(repo):
    log = _hanging_project(repo, n_tasks=2, k=2)
    _hang(repo, "t0", "t1")
    r = hermit(repo, "rollout")
    assert r.code == FAILED, r.out + r.err
    lines = r.err.strip().splitlines()
    assert lines[-2].startswith("error: ") and lines[-1].startswith("hint: "), r.err
    assert "all 4 rollout(s)" in lines[-2] and "AgentTimeout 4" in lines[-2], lines[-2]
    assert "agent timed out after 1s" in lines[-2], lines[-2]
    assert "Traceback" not in r.err
    assert not _has_note(repo)                                         # pass@1 0.000 is never recorded
    assert len(result_files(repo)) == 4                                # what ran is kept on disk
    _unhang(repo)
    fixed = hermit(repo, "rollout")
    assert fixed.code == 0, fixed.err
    assert starts(log) == {row: 2 for row in ("t0#1", "t0#2", "t1#1", "t1#2")}
    assert scores_note(repo)["pass_at_1"] == 1.0


def test_rollout_json_of_all_exceptions_is_one_error_object(repo):
    _hanging_project(repo, n_tasks=1)
    _hang(repo, "t0")
    r = hermit(repo, "rollout", "--json")
    assert r.code == FAILED
    error = json.loads(r.out)
    assert error["code"] == FAILED and "AgentTimeout 1" in error["error"]


def test_a_judge_that_crashes_on_every_row_is_named_with_its_own_message(repo):
    (repo.parent / "verify.py").write_text("raise RuntimeError('verifier exploded')\n")
    make_project(repo, "print(task_id[1:])\n", n_tasks=2, k=1,
                 judge={"kind": "command", "command": [sys.executable, str(repo.parent / "verify.py")]})
    before = snapshot_state(repo)
    r = hermit(repo, "rollout")
    assert r.code == FAILED, r.out + r.err
    assert "RewardFileNotFoundError 2" in r.err, r.err
    assert "RuntimeError: verifier exploded" in r.err, r.err          # the judge's own last word
    assert snapshot_state(repo)[0] == before[0]                         # no ref, no note (.hermit/ keeps the runs)


def test_eval_of_all_exceptions_exits_with_its_code(repo):
    _hanging_project(repo, n_tasks=2, rows={"train": ["t0#1"], "test": ["t0#1", "t1#1"]})
    _hang(repo, "t0", "t1")
    r = hermit(repo, "eval", "hermit/ahe/step-0000", "--split", "test")
    assert r.code == FAILED, r.out + r.err
    assert "AgentTimeout 2" in r.err and "on test" in r.err, r.err
    assert not _has_note(repo)


# --- a step ------------------------------------------------------------------------------------
def _short_timeout(repo: Path, timeout_s: float = 1.0, **trainer) -> None:
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"]["timeout_s"] = timeout_s
    config["trainer"].update(trainer)
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _hold(control: Path, *tasks: str) -> None:
    for task in tasks:
        (control / f"hold-agent-{task}").write_text("")


def test_a_step_of_exceptions_stops_before_its_learners_and_resumes_once_fixed(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=2)
    _short_timeout(repo)
    _hold(control, "t1", "t2")
    before = snapshot_state(repo)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == FAILED, r.out + r.err
    assert "4 of 4 rollout(s)" in r.err and "AgentTimeout 4" in r.err, r.err
    assert "trainer.max_exception_rate" in r.err, r.err
    assert calls(control, "debugger") == [] and calls(control, "evolve") == []   # no learner ran
    assert snapshot_state(repo)[0] == before[0]                                 # nothing published
    assert len(list(rollouts_dir(repo, 1).glob("*/*/result.json"))) == 4          # the work is kept
    for path in control.glob("hold-agent-*"):
        path.unlink()                                                            # the cause is fixed
    again = hermit(repo, "step", env=env_for(control))
    assert again.code == 0, again.out + again.err
    assert sorted(calls(control, "agent")) == sorted(["t1#1", "t1#2", "t2#1", "t2#2"] * 2)
    assert calls(control, "evolve") == [f"step-1"]
    assert git(repo, "rev-parse", "--verify", "-q", f"refs/heads/hermit/{RUN}/step-0001", check=False).strip()


def test_a_step_below_the_rate_learns_and_only_its_exception_rows_run_again_later(repo):
    control = make_run(repo, {"t1": "4", "t2": "7", "t3": "9", "t4": "1"}, k=1)
    _short_timeout(repo)
    _hold(control, "t1")                                    # 1 of 4 rows: 25%, under the default
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert calls(control, "evolve") == ["step-1"]
    log = hermit(repo, "log")
    assert "exceptions 1 (AgentTimeout 1)" in log.out, log.out
    show = hermit(repo, "show", "step-0")
    assert "AgentTimeout 1" in show.out, show.out


def test_the_rate_is_the_users_to_set(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1)
    _short_timeout(repo, max_exception_rate=0.4)
    _hold(control, "t1")                                    # 50% > 0.4
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == FAILED, r.out + r.err
    assert "1 of 2 rollout(s)" in r.err and "0.4" in r.err, r.err
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["trainer"]["max_exception_rate"] = 1.0          # 1.0: a step never stops on exceptions
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    r = hermit(repo, "step", "--keep-exceptions", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert calls(control, "agent").count("t1#1") == 1       # --keep-exceptions: not run again


def test_max_exception_rate_out_of_range_is_a_config_error(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    _short_timeout(repo, max_exception_rate=1.5)
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 5, r.out + r.err
    assert "trainer.max_exception_rate" in r.err


# --- the real Codex CLI with a key its model refuses ----------------------------------------------
@pytest.mark.hosts
def test_real_codex_with_a_refused_key_is_an_exception_named_in_the_error(repo):
    if find_host_cli("codex") is None:
        pytest.skip("the codex CLI is not installed (git hermit hosts install)")
    from git_hermit.hostkit.model_server import Fault, ScriptedModelServer, Turn
    make_project(repo, "print('unused')\n", n_tasks=2, k=1, host="codex")
    with ScriptedModelServer([Turn.say("0")], faults=[Fault(status=401)] * 200) as server:
        cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
        cfg["agent"] = {"backend": "codex", "model": "scripted-model", "timeout_s": 120,
                        "provider": {"base_url": f"{server.base_url}/v1", "env_key": "SCRIPTED_API_KEY",
                                     "wire_api": "responses"}}
        (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        r = hermit(repo, "rollout", env={"SCRIPTED_API_KEY": "a-bad-key"}, timeout=300)
    assert r.code == FAILED, r.out + r.err
    assert "AgentExitError 2" in r.err, r.err
    assert "401 Unauthorized" in r.err, r.err          # the model's answer, not a warning line
    assert not _has_note(repo)
    for path in result_files(repo):
        result = json.loads(path.read_text())
        assert result["outcome"] == "exception" and result["exception_type"] == "AgentExitError", result
