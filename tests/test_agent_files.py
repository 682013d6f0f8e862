"""Files an agent leaves are untrusted (issue 23, item 1): its answer, the memory notes folded
back, its hook log and its output beside the workspace are read without following a link, with
the sandbox on (the agent cannot read the host's file, but it can name it in a link that
git-hermit would follow outside) and off; a FIFO is refused, not waited on.

Through `git hermit rollout` on a continual-harness run (whose sessions hand their memory notes
back): every file under `.hermit/` and every note is searched for the planted file's content.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.project import build_project
from git_hermit.supervise import sandbox

AGENT = """#!{python}
import os, sys, pathlib
workspace = pathlib.Path(sys.argv[2])
planted = {planted!r}
def link(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(planted, path)
link(workspace / "answer.txt")
link(workspace / ".hermit-adapter" / "memory" / "NOTES.md")     # the deployed notes the session edits
link(workspace / ".hermit-hooks" / "hook-calls.jsonl")
link(workspace / "reward.txt")                                   # a link the verifier would write through
if {outside!r}:    # unsandboxed, the agent also reaches its output beside the workspace
    link(workspace.parent / "out" / "trajectory.txt")
    (workspace / "memory" / "NOTES.md").unlink()
    os.mkfifo(workspace / "memory" / "NOTES.md")                 # the notes at the root: a FIFO
print("4")
"""


def _run(repo: Path, tmp_path: Path, *, sandboxed: bool) -> str:
    planted = tmp_path / "users-own-file"
    marker = "PLANTED-" + uuid.uuid4().hex
    planted.write_text(marker + "\n")
    agent = tmp_path / "agent.py"     # outside the repository: the sandbox shows only what it runs
    build_project(repo, init_args=("--template", "continual-harness@1.0"),
                  tasks=[{"id": "t1", "prompt": "?", "answer": "4"}], rows={"train": ["t1"]},
                  scripts={agent: AGENT.format(python=sys.executable, planted=str(planted), outside=not sandboxed)},
                  config={"agent": {"backend": "command", "timeout_s": 60,
                                    "command": [str(agent), "{prompt_file}", "{workspace}"]},
                          "tasks": {"path": "tasks.jsonl"},
                          **({"sandbox": {"enabled": True, "network": "none"}} if sandboxed else {})})
    return marker


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no-sandbox"])
def test_links_the_agent_leaves_are_refused_never_followed(repo, tmp_path, sandboxed):
    if sandboxed:
        ok, detail = sandbox.probe()
        if not ok:
            pytest.skip(f"the sandbox cannot run here: {detail}")
    marker = _run(repo, tmp_path, sandboxed=sandboxed)
    r = hermit(repo, "rollout", "--json", timeout=180)
    assert r.code == 0, r.err
    task = json.loads(r.out)["scores"]["tasks"]["t1"]
    assert task["outcome"] == "fail", task            # a refused answer is no answer
    [result_file] = (repo / ".hermit").rglob("result.json")
    result = json.loads(result_file.read_text())
    assert result["final_answer"] is None
    for refused in ("answer.txt is a symbolic link", ".hermit-adapter/memory/NOTES.md is a symbolic link",
                    ".hermit-hooks/hook-calls.jsonl is a symbolic link"):
        assert refused in result["error"], result["error"]
    if not sandboxed:
        assert "trajectory.txt is a symbolic link" in result["error"], result["error"]
        assert "memory/NOTES.md is a FIFO" in result["error"], result["error"]
    assert not (result_file.parent / "memory").exists()             # nothing to fold back
    # the planted file's content is nowhere git-hermit wrote
    for path in (repo / ".hermit").rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert marker not in path.read_text(errors="replace"), path
    notes = git(repo, "log", "--all", "--format=%H %N", "--notes=hermit/scores")
    assert marker not in notes
    assert marker + "\n" == (tmp_path / "users-own-file").read_text()   # nothing was written through a link


def test_what_is_refused_and_why(tmp_path):
    from git_hermit.agents.agent_files import RefusedFile, read_left_file
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's file\n")
    root = tmp_path / "workspace"
    (root / "real").mkdir(parents=True)
    (root / "real" / "answer.txt").write_text("42\n")
    (root / "linked-dir").symlink_to(tmp_path)                  # a directory link on the way
    import os
    os.link(outside, root / "hard.txt")                          # another name of the user's file
    os.mkfifo(root / "fifo")
    (root / "big.txt").write_bytes(b"x" * 2048)
    assert read_left_file(root, "real/answer.txt") == b"42\n"
    assert read_left_file(root, "absent.txt") is None
    for relative, why in (("linked-dir/outside.txt", "linked-dir is a symbolic link"),
                          ("hard.txt", "hard.txt is a hard link"), ("fifo", "fifo is a FIFO"),
                          ("big.txt", "big.txt is over 1,024 bytes"), ("../outside.txt", "not a plain relative path")):
        with pytest.raises(RefusedFile, match=why.replace(".", r"\.")):
            read_left_file(root, relative, limit=1024)
