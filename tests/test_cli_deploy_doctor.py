"""`git hermit deploy` and `git hermit doctor` through the real executable."""

from __future__ import annotations

import json

from support.cli_helpers import hermit
from conftest import snapshot_state


def test_deploy_work_tree_and_rev_for_each_host(repo, tmp_path):
    assert hermit(repo, "init").code == 0
    for host, context, hooks in (("codex", "AGENTS.md", ".codex/hooks.json"),
                                 ("claude-code", "CLAUDE.md", ".claude/settings.json")):
        dest = tmp_path / f"ws-{host}"
        r = hermit(repo, "deploy", "--host", host, str(dest))
        assert r.code == 0, r.err
        assert (dest / context).is_file() and (dest / hooks).is_file()
        record = json.loads((dest / ".hermit-deploy.json").read_text())
        assert record["host"] == host
        command = record["hook_command"]
        assert " -S " in command and command.split()[0].startswith("/")   # absolute interpreter, -S
        again = hermit(repo, "deploy", "--host", host, str(dest))        # idempotent
        assert again.code == 0, again.err
    dest = tmp_path / "ws-rev"
    (repo / "adapter" / "MEMORY.md").write_text((repo / "adapter" / "MEMORY.md").read_text() + "- work tree only\n")
    r = hermit(repo, "deploy", "--host", "codex", "--rev", "hermit/ahe/step-0000", str(dest))
    assert r.code == 0, r.err
    assert "work tree only" not in (dest / ".hermit-adapter" / "MEMORY.md").read_text()


def test_deploy_refuses_foreign_files_unless_forced(repo, tmp_path):
    assert hermit(repo, "init").code == 0
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "AGENTS.md").write_text("the project's own instructions\n")
    r = hermit(repo, "deploy", "--host", "codex", str(dest))
    assert r.code == 7 and "hint:" in r.err and "Traceback" not in r.err
    assert (dest / "AGENTS.md").read_text() == "the project's own instructions\n"
    r = hermit(repo, "deploy", "--host", "codex", "--force", str(dest))
    assert r.code == 0, r.err
    assert (dest / "AGENTS.md").read_text() != "the project's own instructions\n"


def test_deploy_bad_host_and_rev_leave_state(repo, tmp_path):
    assert hermit(repo, "init").code == 0
    before = snapshot_state(repo)
    assert hermit(repo, "deploy", "--host", "vim", str(tmp_path / "x")).code == 2
    r = hermit(repo, "deploy", "--host", "codex", "--rev", "no-such-rev", str(tmp_path / "y"))
    assert r.code == 4 and "error:" in r.err
    assert snapshot_state(repo) == before


def test_doctor_reports_git_config(repo):
    r = hermit(repo, "doctor", "--json")
    data = json.loads(r.out)
    assert "git" in json.dumps(data)
    assert hermit(repo, "init").code == 0
    r = hermit(repo, "doctor")
    assert "notes.rewriteRef" in r.out and "refs/notes/hermit/verdicts" in r.out


def test_doctor_outside_a_repository(tmp_path):
    r = hermit(tmp_path, "doctor")
    assert "git" in r.out and "Traceback" not in r.err
