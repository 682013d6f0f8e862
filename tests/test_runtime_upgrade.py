"""Upgradeable adapters (issue 26, item 2): the hook runtime carries a version; an adapter
committed with the previous runtime (tests/fixtures/runtime-v1/: the files git-hermit committed
before the wire moved into the host modules) keeps checking, deploying and answering hooks after
the upgrade; `check` says which runtime it has and that a newer one exists; `upgrade-runtime`
commits the newest on the run's tip as one reviewable commit, and the next step measures it."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, change, env_for, make_run, memory_lines, plan
from support.step_helpers import chain, note, rev, run_step, step_ref, trailers

from git_hermit import resources
from git_hermit.adapter import runtime
from git_hermit.adapter.deploy import deploy

V1 = Path(__file__).parent / "fixtures" / "runtime-v1"
AGENT = resources.hooks_dir() / "agent"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_runtimes_json_knows_the_shipped_runtime_and_the_previous_one():
    versions = runtime.known_versions()
    current = runtime.current_version()
    runner = (AGENT / "hook_runner.py").read_text()
    assert f"RUNTIME_VERSION = {current}\n" in runner
    # the newest entry is exactly the shipped files (regenerate: python scripts/gen_runtimes.py)
    assert versions[current] == {name: _sha(AGENT / name) for name in versions[current]}
    assert versions[1] == {p.name: _sha(p) for p in V1.iterdir()}
    assert current > 1 and "hook_hosts.py" in versions[1] and "hook_hosts.py" not in versions[current]


def _v1_run(repo: Path) -> Path:
    """A run whose seed commit carries runtime 1, as the previous git-hermit's `init` wrote it."""
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, allow_early_stop=False)
    for source in V1.iterdir():
        shutil.copyfile(source, repo / "adapter" / source.name)
    git(repo, "add", "adapter")
    git(repo, "commit", "-q", "--amend", "--no-edit")
    git(repo, "update-ref", step_ref(0), "HEAD")
    return control


def _check(repo: Path, *args: str) -> dict:
    r = hermit(repo, "check", "--no-preflight", "--json", *args)
    assert r.code == 0, r.out + r.err
    return json.loads(r.out)


def test_an_adapter_of_the_previous_runtime_checks_and_says_a_newer_one_exists(repo):
    _v1_run(repo)
    found = _check(repo, step_ref(0))     # the host part too: deployed for each host, sessions fired
    assert found["ok"], found
    assert found["runtime"] == {"version": 1, "current": runtime.current_version(), "outdated": True}
    assert not [v for v in found["violations"] if v["rule"] in ("fixed-file", "unknown-file")], found
    r = hermit(repo, "check", "--no-preflight", "--static")
    assert r.code == 0, r.err
    assert "hook runtime 1: it keeps working" in r.out and "upgrade-runtime" in r.out, r.out


def test_an_adapter_of_the_previous_runtime_still_answers_hooks(repo, tmp_path):
    _v1_run(repo)
    ws = tmp_path / "ws"
    record = deploy(repo / "adapter", ws, "codex")
    assert (ws / ".hermit-adapter" / "hook_hosts.py").read_bytes() == (V1 / "hook_hosts.py").read_bytes()
    payload = {"session_id": "s1", "cwd": str(ws), "hook_event_name": "SessionStart", "source": "startup",
               "model": "m", "transcript_path": str(ws / "t.jsonl")}
    done = subprocess.run(record.command_for("SessionStart"), shell=True, cwd=ws, input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "additionalContext" in out["hookSpecificOutput"], out
    [line] = (ws / ".hermit-hooks" / "hook-calls.jsonl").read_text().splitlines()
    assert json.loads(line)["error"] is None and "runtime" not in json.loads(line)   # runtime 1 ran


def test_upgrade_runtime_commits_the_new_runtime_on_the_tip_and_the_step_measures_it(repo):
    control = _v1_run(repo)
    seed = rev(repo, step_ref(0))
    status = git(repo, "status", "--porcelain")
    r = hermit(repo, "upgrade-runtime", "--run", RUN)
    assert r.code == 0, r.out + r.err
    upgraded = rev(repo, step_ref(0))
    assert chain(repo, upgraded, seed) == [upgraded]                 # one commit on the tip
    assert f"Hermit-Runtime: 1 -> {runtime.current_version()}" in trailers(repo, upgraded)
    assert "adapter/hook_hosts.py" in r.out and "adapter/hook_runner.py" in r.out, r.out
    changed = set(git(repo, "diff", "--name-only", seed, upgraded).split())
    v1, now = runtime.known_versions()[1], runtime.known_versions()[runtime.current_version()]
    assert changed == {f"adapter/{name}" for name in v1 if v1[name] != now.get(name)}
    assert {"adapter/hook_hosts.py", "adapter/hook_runner.py"} <= changed
    assert git(repo, "show", f"{upgraded}:adapter/hook_runner.py") == (AGENT / "hook_runner.py").read_text()
    assert rev(repo, f"{upgraded}:adapter/hook_hosts.py") == ""
    assert git(repo, "status", "--porcelain") == status             # work tree and index untouched
    found = _check(repo, "--static", upgraded)
    assert found["runtime"]["version"] == runtime.current_version() and not found["runtime"]["outdated"]
    again = hermit(repo, "upgrade-runtime", "--run", RUN)
    assert again.code == 0 and "nothing to do" in again.out, again.out + again.err
    assert rev(repo, step_ref(0)) == upgraded
    # the next step starts from the upgraded tip and measures it like any commit
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})},
         changes=[change("chg-1", ["MEMORY.md"], fixes=["t1"])])
    run_step(repo, control)
    assert note(repo, "scores", upgraded)["pass_at_1"] is not None    # the upgraded tip was rolled out
    tip1 = rev(repo, step_ref(1))
    assert git(repo, "merge-base", "--is-ancestor", upgraded, tip1, check=False) == ""
    assert rev(repo, f"{tip1}:adapter/hook_hosts.py") == ""


def test_a_runtime_changed_by_hand_is_no_known_version_and_is_not_upgraded(repo):
    _v1_run(repo)
    runner = repo / "adapter" / "hook_runner.py"
    runner.write_text(runner.read_text() + "\n# edited\n")
    git(repo, "commit", "-q", "-am", "edit the runner")
    git(repo, "update-ref", step_ref(0), "HEAD")
    r = hermit(repo, "check", "--no-preflight", "--static")
    assert r.code == 1 and "fixed-file" in r.out and "no known version" in r.out, r.out + r.err
    before = rev(repo, step_ref(0))
    r = hermit(repo, "upgrade-runtime", "--run", RUN)
    assert r.code != 0 and "error:" in r.err and "hint:" in r.err and "Traceback" not in r.err, r.err
    assert rev(repo, step_ref(0)) == before
