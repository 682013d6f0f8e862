"""The rollout worker's deploy cache: a workspace written from a cached plan is byte- and
mode-identical to a fresh ``deploy`` into the same path, for every host; a later commit (or
another host) renders afresh."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from git_hermit.adapter.deploy import deploy, read_record
from git_hermit.hosts import registry
from git_hermit.rollouts import deploy_cache
from support.deploy_helpers import ahe_adapter


@pytest.fixture(autouse=True)
def _fresh_cache():
    deploy_cache.forget()
    yield
    deploy_cache.forget()


def tree(root: Path) -> dict[str, tuple[str, int, bytes | None]]:
    """Every entry under root: kind, permission bits, bytes of files."""
    entries = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
        entries[path.relative_to(root).as_posix()] = (
            kind, stat.S_IMODE(info.st_mode), path.read_bytes() if kind == "file" else None)
    return entries


def adapters(tmp_path: Path) -> dict[str, Path]:
    from git_hermit.adapter.templates import list_templates, load_template
    found = {"fixture": ahe_adapter(tmp_path / "fixture")}
    for template_id in list_templates():
        seed = load_template(template_id).root
        if (seed / "AGENTS.md").is_file():
            found[template_id.split("@")[0]] = seed
    ch = tmp_path / "ch"
    for rel, text in {"AGENTS.md": "# Policy\n\nRead `memory/NOTES.md` first.\n",
                      "sub_agents/planner/AGENT.md": "---\nname: planner\ndescription: Plans\n---\n\nList steps.\n",
                      "scripts/go.py": "print(1)\n",
                      "memory/NOTES.md": "# Notes\n"}.items():
        (ch / rel).parent.mkdir(parents=True, exist_ok=True)
        (ch / rel).write_text(text)
    found["sub-agents"] = ch
    return found


@pytest.mark.parametrize("host", registry.names())
def test_a_cached_deploy_equals_a_fresh_one_for_every_host(tmp_path, host):
    for name, adapter in adapters(tmp_path).items():
        first, second = tmp_path / f"{name}-{host}-1", tmp_path / f"{name}-{host}-2"
        first.mkdir()
        second.mkdir()
        deploy_cache.deploy_fresh(adapter, first, host, commit="c1")        # renders, fills the cache
        cached_record = deploy_cache.deploy_fresh(adapter, second, host, commit="c1")   # from the plan
        cached = tree(second)
        assert cached_record == read_record(second), name
        shutil.rmtree(second)
        second.mkdir()
        fresh_record = deploy(adapter, second, host)
        assert cached_record == fresh_record, name
        assert cached == tree(second), name
        # the first workspace's path appears nowhere in the second, but for bytecode
        for rel, (kind, _, content) in cached.items():
            if kind == "file" and not rel.endswith(".pyc"):
                assert str(first).encode() not in content, (name, rel)


def test_the_cache_writes_from_the_plan_and_a_later_commit_renders_again(tmp_path, monkeypatch):
    adapter = ahe_adapter(tmp_path)
    calls = []
    real = deploy_cache.deploy
    monkeypatch.setattr(deploy_cache, "deploy", lambda *a, **k: calls.append(a) or real(*a, **k))
    for i in range(3):
        (tmp_path / f"ws{i}").mkdir()
        deploy_cache.deploy_fresh(adapter, tmp_path / f"ws{i}", "codex", commit="c1")
    assert len(calls) == 1
    (adapter / "AGENTS.md").write_text("# New rules\n")       # the adapter of the next commit
    (tmp_path / "ws3").mkdir()
    deploy_cache.deploy_fresh(adapter, tmp_path / "ws3", "codex", commit="c2")
    assert len(calls) == 2
    assert (tmp_path / "ws3" / "AGENTS.md").read_text().startswith("# New rules\n")
    assert (tmp_path / "ws2" / "AGENTS.md").read_text().startswith("# Rules\n")
    (tmp_path / "ws4").mkdir()
    deploy_cache.deploy_fresh(adapter, tmp_path / "ws4", "claude-code", commit="c2")   # another host
    assert len(calls) == 3 and (tmp_path / "ws4" / "CLAUDE.md").is_file()


def test_a_workspace_path_that_needs_quoting_gets_a_full_deploy(tmp_path):
    adapter = ahe_adapter(tmp_path)
    plain, spaced = tmp_path / "ws", tmp_path / "a b" / "ws"
    plain.mkdir()
    spaced.mkdir(parents=True)
    deploy_cache.deploy_fresh(adapter, plain, "codex", commit="c1")
    record = deploy_cache.deploy_fresh(adapter, spaced, "codex", commit="c1")
    hooks = (spaced / ".codex" / "hooks.json").read_text()
    assert "'" + str(spaced) in hooks and str(plain) not in hooks
    assert record == read_record(spaced)


@pytest.mark.parametrize("host", registry.names())
def test_a_used_workspace_reset_to_the_plan_equals_a_fresh_deploy_and_keeps_its_inodes(tmp_path, host):
    """What a rollout may have done to its workspace is undone; files still holding the plan's
    bytes keep their inode (no file is made), and a file linked elsewhere is never written through."""
    adapter = ahe_adapter(tmp_path / "adapter")
    first, used, fresh = tmp_path / "first", tmp_path / "used", tmp_path / "fresh"
    for path in (first, used, fresh):
        path.mkdir()
    deploy_cache.deploy_fresh(adapter, first, host, commit="c1")          # renders, fills the cache
    deploy_cache.deploy_fresh(adapter, used, host, commit="c1")
    inodes = {p: p.lstat().st_ino for p in used.rglob("*")}
    files = sorted(p for p in used.rglob("*") if p.is_file() and p.name != ".hermit-deploy.json")
    changed, removed, linked, symlinked = files[:4]
    changed.write_bytes(b"changed")
    removed.unlink()
    outside, elsewhere = tmp_path / "outside", tmp_path / "elsewhere"
    outside.write_text("outside")
    linked.unlink()
    elsewhere.write_text("elsewhere")
    os.link(elsewhere, linked)
    symlinked.unlink()
    symlinked.symlink_to(outside)
    (used / "new" / "deep").mkdir(parents=True)
    (used / "new" / "deep" / "file").write_text("made by the agent")
    (used / "task.md").write_text("the last task")
    (used / "data.csv").write_text("a task's file")
    record = deploy_cache.deploy_reset(adapter, used, host, commit="c1", keep=frozenset({"task.md"}))
    assert record == read_record(used)
    assert outside.read_text() == "outside" and elsewhere.read_text() == "elsewhere"
    assert (used / "task.md").read_text() == "the last task"            # kept for the caller to overwrite
    (used / "task.md").unlink()
    deploy(adapter, fresh, host)
    expected = tree(fresh)
    got = tree(used)
    assert got.keys() == expected.keys()
    for rel, (kind, mode, content) in got.items():
        if kind == "file" and not rel.endswith(".pyc") and rel != ".hermit-deploy.json":
            assert content.replace(str(used).encode(), b"<ws>") == \
                expected[rel][2].replace(str(fresh).encode(), b"<ws>"), rel
        assert (kind, mode) == expected[rel][:2], rel
    untouched = [p for p in inodes if p.exists() and p not in (removed, linked, symlinked)]
    assert untouched and all(p.lstat().st_ino == inodes[p] for p in untouched)
