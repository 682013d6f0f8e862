"""`kill -9` of `git hermit step` (its whole process group, or only its main pid) ends every
agent and learner process it started within 2 s, even ones that left the process group with
setsid; the scratch it left is cleaned at the next start, and the rerun resumes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import GIT_HERMIT
from conftest import git
from support.step_support import RUN, calls, env_for, make_run, start_step, wait_for
from git_hermit.supervise.scratch import scratch_root

# A `command` agent that starts a grandchild in a new session (out of the step's process group,
# as Codex's PTY commands are) and, while the hold file exists, runs on "forever".
LONG_AGENT = '''#!{python}
import subprocess, sys, time
from pathlib import Path
control = Path({control!r})
task = sys.argv[3]
with open(control / "agent.log", "a") as log:
    log.write(task + "\\n")
subprocess.Popen(["sh", "-c", "sleep 300; : " + str(control)], start_new_session=True)
while (control / "hold-agent").exists():
    (control / f"running-{{task}}").write_text("")
    time.sleep(0.05)
print("I do not know")
'''

# A stand-in for the Codex CLI as a learner session: the same escape, then a Codex event stream.
FAKE_CODEX = '''#!{python}
import json, subprocess, sys, time
from pathlib import Path
control = Path({control!r})
with open(control / "learner.log", "a") as log:
    log.write("session\\n")
if "change_manifest.json" in sys.argv[-1]:      # the Evolve Agent: no change this step
    Path("state").mkdir(exist_ok=True)
    Path("state/change_manifest.json").write_text(json.dumps({{"iteration": 1, "changes": []}}))
subprocess.Popen(["sh", "-c", "sleep 300; : " + str(control)], start_new_session=True)
while (control / "hold-learner").exists():
    (control / "running-learner").write_text("")
    time.sleep(0.05)
for event in ({{"type": "thread.started", "thread_id": "t"}},
              {{"type": "item.completed", "item": {{"id": "i1", "type": "agent_message",
                                                   "text": "## Root cause\\nunknown\\n\\n## Fix\\nnone"}}}},
              {{"type": "turn.completed", "usage": {{"input_tokens": 10, "cached_input_tokens": 0,
                                                   "output_tokens": 5}}}}):
    print(json.dumps(event), flush=True)
'''


def _ours(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line names ``marker``, via /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _script(path: Path, text: str, control: Path) -> Path:
    path.write_text(text.format(python=sys.executable, control=str(control)))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _kill(proc: subprocess.Popen, whole_group: bool) -> float:
    if whole_group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    return killed_at


def _gone_within(marker: str, killed_at: float, limit_s: float = 2.0) -> None:
    while _ours(marker) and time.monotonic() - killed_at < limit_s + 1:
        time.sleep(0.02)
    left = _ours(marker)
    took = time.monotonic() - killed_at
    for pid in left:              # do not leave them running if the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} processes still running {took:.2f}s after the kill"
    assert took <= limit_s, f"the children took {took:.2f}s to die"


def _setup_long_agent(repo: Path) -> Path:
    control = make_run(repo, {"t1": "4", "t2": "5"}, k=1)
    agent = _script(control / "long_agent.py", LONG_AGENT, control)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["agent"]["command"] = [str(agent), "{prompt_file}", "{workspace}", "{task_id}", "{attempt}"]
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (control / "hold-agent").write_text("")
    return control


@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "main-pid"])
def test_kill_9_during_rollouts_ends_every_agent_and_the_rerun_resumes(repo, whole_group):
    control = _setup_long_agent(repo)
    proc = start_step(repo, control)
    marker = str(control)
    wait_for(lambda: (control / "running-t1").exists() and (control / "running-t2").exists()
             and len(_ours(marker)) >= 4, "both agents and their escaped grandchildren", proc)
    scratch_dirs = list(scratch_root().glob(f"pid-ns-*/{proc.pid}-*/rollout-*"))
    assert scratch_dirs
    killed_at = _kill(proc, whole_group)
    _gone_within(marker, killed_at)
    (control / "hold-agent").unlink()
    r = subprocess.run([*GIT_HERMIT, "step"], cwd=repo, capture_output=True, text=True,
                       env={**os.environ, **env_for(control)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert git(repo, "rev-parse", "--verify", "-q", f"refs/heads/hermit/{RUN}/step-0001").strip()
    assert not any(d.exists() for d in scratch_dirs)          # the killed run's scratch is gone
    assert sorted(calls(control, "agent")) == ["t1", "t1", "t2", "t2"]
    assert not _ours(marker)


def test_kill_9_of_the_main_pid_during_a_learner_session_ends_it(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    fake = _script(control / "codex", FAKE_CODEX, control)
    config = yaml.safe_load((repo / "hermit.yaml").read_text())
    config["evolver"].update(base="codex", model={"name": "scripted-model", "bin": str(fake),
                                                  # a keyless local endpoint: the preflight's credentials check passes
                                                  "provider": {"base_url": "http://127.0.0.1:9/v1"}})
    config["evolver"].pop("scripted")
    (repo / "hermit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (control / "hold-learner").write_text("")
    proc = start_step(repo, control)
    marker = str(control)
    wait_for(lambda: (control / "running-learner").exists() and len(_ours(marker)) >= 2,
             "the learner session and its escaped child", proc)
    home_files = [p for p in scratch_root().glob(f"pid-ns-*/{proc.pid}-*/*/home")]
    assert home_files and all(oct(p.parent.parent.stat().st_mode & 0o777) == "0o700" for p in home_files)
    killed_at = _kill(proc, whole_group=False)
    _gone_within(marker, killed_at)
    (control / "hold-learner").unlink()
    r = subprocess.run([*GIT_HERMIT, "step"], cwd=repo, capture_output=True, text=True,
                       env={**os.environ, **env_for(control)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert calls(control, "agent") == ["t1#1"]                # the finished rollout was reused
    assert not any(p.exists() for p in home_files)
    assert not _ours(marker)
    assert calls(control, "learner") == ["session"] * 3   # killed debugger, its rerun, evolve
