"""A full disk is its own failure (issue 23, item 9): exit 19 with a hint, never a stored result,
never an internal error, and never a lock that outlives its holder.

The disk really fills: each test runs `git hermit` inside bubblewrap with a small tmpfs
(``--size``) mounted over the directory under test — the rollouts' scratch ($TMPDIR), the run's
``.hermit/`` or ``.git/hermit/`` — so every write there meets the kernel's own ENOSPC. Skipped,
with the reason, where bubblewrap cannot make the mount.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_helpers import GIT_HERMIT, hermit
from support.step_support import calls, env_for, make_run

DISK_FULL = 19
ANSWERS = {"t1": "4", "t2": "7"}

# Fills its workspace before it answers; on a full disk its answer (its stdout) is lost too.
AGENT = """#!{python}
import sys
from pathlib import Path
control = Path({control!r})
prompt_file, workspace, task, attempt = sys.argv[1:5]
with open(control / "agent.log", "a") as log:
    log.write(f"{{task}}#{{attempt}}\\n")
try:
    Path(workspace, "scratch.bin").write_bytes(b"x" * 3_000_000)
except OSError:
    pass
print({answers!r}[task])
"""


def _bwrap() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap (bwrap) is not installed: no way to mount a small tmpfs here")
    probe = Path(os.environ.get("TMPDIR", "/tmp"))
    done = subprocess.run([bwrap, "--dev-bind", "/", "/", "--size", "65536", "--tmpfs", str(probe), "true"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"bubblewrap cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    return bwrap


def _on_small_disk(mount: Path | list[Path], size: int, argv: list[str], *, env: dict[str, str], cwd: Path,
                   fill: bool = False) -> subprocess.CompletedProcess[str]:
    """``argv`` with a ``size``-byte tmpfs over each ``mount`` (filled to its last byte first with ``fill``)."""
    mounts = mount if isinstance(mount, list) else [mount]
    args = []
    for path in mounts:
        path.mkdir(parents=True, exist_ok=True)
        args += ["--size", str(size), "--tmpfs", str(path)]
    fills = "".join(f'head -c 100000000 /dev/zero > "{path}/filler" 2>/dev/null; ' for path in mounts) if fill else ""
    return subprocess.run([_bwrap(), "--dev-bind", "/", "/", *args, "sh", "-c", fills + 'exec "$@"', "sh", *argv],
                          cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


def _run(repo: Path) -> Path:
    control = make_run(repo, ANSWERS, k=1)
    agent = control / "agent.py"
    agent.write_text(AGENT.format(python=sys.executable, control=str(control), answers=ANSWERS))
    agent.chmod(0o755)
    return control


def _results(repo: Path) -> list[Path]:
    return sorted((repo / ".hermit").rglob("result.json"))


def _said_disk_full(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == DISK_FULL, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert lines[0].startswith("error: no space left on ") and lines[1].startswith("hint: free space there"), lines
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_a_rollout_that_failed_for_lack_of_space_is_not_a_result(repo, tmp_path):
    control = _run(repo)
    scratch = tmp_path / "small-tmp"
    full = _on_small_disk(scratch, 2 * 1024 * 1024, [*GIT_HERMIT, "rollout"], cwd=repo,
                          env={**env_for(control), "TMPDIR": str(scratch)})
    _said_disk_full(full)
    assert calls(control, "agent")                             # the agents ran, and the disk filled
    assert not any(json.loads(p.read_text())["outcome"] != "pass" for p in _results(repo))
    ran = len(calls(control, "agent"))
    again = hermit(repo, "rollout", "--json", env=env_for(control))   # with room to work
    assert again.code == 0, again.err
    assert json.loads(again.out)["scores"]["pass_at_1"] == 1.0
    assert len(calls(control, "agent")) > ran                  # the rows that met the full disk ran again


def test_results_that_cannot_be_written_exit_18_and_are_run_again(repo, tmp_path):
    control = _run(repo)
    full = _on_small_disk(repo / ".hermit", 16 * 1024, [*GIT_HERMIT, "rollout"], cwd=repo, env=env_for(control))
    _said_disk_full(full)
    assert not _results(repo)                                  # (the tmpfs went with bwrap: nothing kept)
    again = hermit(repo, "rollout", "--json", env=env_for(control))
    assert again.code == 0 and json.loads(again.out)["scores"]["pass_at_1"] == 1.0, again.err


def test_at_0_bytes_free_the_run_lock_is_a_disk_full_error_each_time(repo, tmp_path):
    control = _run(repo)
    twice = [*GIT_HERMIT, "rollout"]
    # both runs on the same full disk: the first must leave no empty lock that refuses the second
    script_argv = ["sh", "-c", '"$@"; echo "first=$?" >&2; exec "$@"', "sh", *twice]
    full = _on_small_disk(repo / ".git" / "hermit", 64 * 1024, script_argv, cwd=repo, env=env_for(control),
                          fill=True)
    first = next(line for line in full.stderr.splitlines() if line.startswith("first="))
    assert first == f"first={DISK_FULL}", full.stderr[-2000:]
    _said_disk_full(full)
    assert "locked" not in full.stderr and "the run lock" in full.stderr, full.stderr[-2000:]
    assert not calls(control, "agent")


def test_an_empty_run_lock_without_a_live_holder_is_stale_at_once(repo):
    control = _run(repo)
    lock = repo / ".git" / "hermit" / "r.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")                  # what a crash (or a full disk) between create and write leaves
    r = hermit(repo, "rollout", env=env_for(control))
    assert r.code == 0, r.err
    assert not lock.exists()


def test_git_running_out_of_space_is_a_disk_full_error(repo, tmp_path):
    """git's own ENOSPC (fast-import's, writing a blob: the repository has no commit, so its object
    directory and git-hermit's quarantine can both be full tmpfs mounts) is exit 19 too, not
    "git failed" (exit 4)."""
    probe = ("import sys\nfrom git_hermit.cli import main\n"
             "from git_hermit.gitio import Repo\nfrom git_hermit.errors import DiskFull\n"
             "try:\n    Repo.discover().write_blobs([bytes(range(256)) * 4000])\n"
             "except DiskFull as exc:\n    print('DISKFULL', exc.message, '|', exc.hint)\n")
    done = _on_small_disk([repo / ".git" / "objects", repo / ".git" / "hermit"], 64 * 1024,
                          [sys.executable, "-c", probe], cwd=repo, env={}, fill=True)
    assert done.stdout.startswith("DISKFULL no space left on the device holding"), done.stdout + done.stderr
