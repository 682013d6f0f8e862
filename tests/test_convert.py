"""Issue 27, item 1: `git hermit convert REV --target HOST` writes the adapter at REV (default: the
run's final tag) as the host's own plugin; a conversion that would drop a component is refused
with one line per component (exit 22) unless --allow-lossy, which lists them; bad input gets one
error/hint and leaves everything as it was; the plugin's hooks run without git-hermit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.card_support import demo_copy, files_under, make_continual_run
from support.cli_helpers import hermit
from conftest import git, snapshot_state

LOSSY_EXIT = 22
FINAL = "hermit/demo/final"


@pytest.fixture
def demo(demo_run, tmp_path) -> Path:
    return demo_copy(demo_run, tmp_path)


def _adapter_at(repo: Path, rev: str) -> dict[str, bytes]:
    names = git(repo, "ls-tree", "-r", "--name-only", rev, "adapter/").split()
    return {n.removeprefix("adapter/"): subprocess.run(["git", "show", f"{rev}:{n}"], cwd=repo, capture_output=True,
                                                       check=True).stdout for n in names}


def test_claude_code_plugin_carries_every_component_of_the_final_adapter(demo, tmp_path):
    out = tmp_path / "plugin"
    r = hermit(demo, "convert", "--target", "claude-code", "-o", str(out))
    assert r.code == 0, r.err
    plugin = out / "plugins" / "demo"
    market = json.loads((out / ".claude-plugin" / "marketplace.json").read_text())
    assert market["name"] == "hermit-demo" and market["plugins"][0]["source"] == "./plugins/demo"
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    final = git(demo, "rev-parse", FINAL).strip()
    assert manifest["name"] == "demo" and final[:12] in manifest["version"]
    # the adapter as committed at the final tag, byte for byte, runner files included, and the
    # host's wire (written from its host module, as deploy does)
    adapter = _adapter_at(demo, FINAL)
    carried = files_under(plugin / "adapter")
    assert b"WIRE = ClaudeCodeWire()" in carried.pop("hook_wire.py")
    assert carried == adapter
    # skills and sub-agents where Claude Code looks for them
    for skill in ("csv-column-total", "debug-failing-test", "unit-conversion"):
        assert (plugin / "skills" / skill / "SKILL.md").read_bytes() == adapter[f".agents/skills/{skill}/SKILL.md"]
    assert (plugin / "agents" / "reviewer.md").read_bytes() == adapter["agents/reviewer.md"]
    # the context as an output style the plugin forces, the default instructions kept
    style = (plugin / "output-styles" / "demo.md").read_text()
    assert "force-for-plugin: true" in style and "keep-coding-instructions: true" in style
    assert adapter["AGENTS.md"].decode().strip() in style
    # hooks: every event of the adapter's hooks.json, run from the plugin's own root with python3
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(json.loads(adapter["hooks.json"])["hooks"])
    for event, groups in hooks.items():
        command = groups[0]["hooks"][0]["command"]
        assert command.startswith("python3 -S ") and command.endswith(f'"${{CLAUDE_PLUGIN_ROOT}}/adapter" {event}')
    record = json.loads((plugin / ".hermit-deploy.json").read_text())
    assert record["host"] == "claude-code"
    # nothing names this machine: the repository, the interpreter, the build directory
    for path, data in files_under(out).items():
        text = data.decode("utf-8", "replace")
        assert str(demo) not in text and sys.executable not in text and ".hermit" + "-tmp" not in text, path
    # the card, as `show final --card` prints it; the command's summary names what went where
    assert (plugin / "CARD.md").read_text() == hermit(demo, "show", "final", "--card").out
    for line in ("skills", "sub-agents", "hooks", "memory", "context",
                 f"claude plugin marketplace add {out}", "claude plugin install demo@hermit-demo"):
        assert line in r.out, r.out


def test_convert_takes_any_revision_of_the_run_and_json_says_what_it_wrote(demo, tmp_path):
    out = tmp_path / "seed-plugin"
    r = hermit(demo, "convert", "hermit/demo/step-0000", "--target", "claude-code", "-o", str(out),
               "--name", "seed-adapter", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["commit"] == git(demo, "rev-parse", "hermit/demo/step-0000").strip()
    assert data["name"] == "seed-adapter" and data["dropped"] == []
    assert set(data["carried"]) == {"context", "skills", "sub-agents", "hooks", "memory", "scripts"}
    plugin = Path(data["plugin"])
    carried = files_under(plugin / "adapter")
    carried.pop("hook_wire.py", None)
    assert carried == _adapter_at(demo, "hermit/demo/step-0000")
    assert not (plugin / "skills" / "csv-column-total").exists()      # learned later, not in the seed


def test_the_plugins_hooks_run_the_middleware_without_git_hermit(demo, tmp_path):
    """The SessionStart hook as Claude Code runs it (its command through a shell, the plugin root in
    the environment), with the system interpreter and no git-hermit on any path: the memory comes out."""
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system python3 in /usr/bin or /bin")
    out = tmp_path / "plugin"
    assert hermit(demo, "convert", "--target", "claude-code", "-o", str(out)).code == 0
    plugin = out / "plugins" / "demo"
    command = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"][0]["hooks"][0]
    env = {"PATH": "/usr/bin:/bin", "CLAUDE_PLUGIN_ROOT": str(plugin), "HOME": str(tmp_path)}
    project = tmp_path / "project"
    project.mkdir()
    payload = {"session_id": "s1", "transcript_path": str(project / "t.jsonl"), "cwd": str(project),
               "hook_event_name": "SessionStart", "source": "startup"}
    done = subprocess.run(["/bin/sh", "-c", command["command"]], input=json.dumps(payload), cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Lessons from earlier sessions" in context
    # the entry a learner added at step 3, as the final adapter's MEMORY.md holds it
    learned = next(line[2:] for line in (plugin / "adapter" / "MEMORY.md").read_text().splitlines()
                   if line.startswith("- A date range"))
    assert learned in context
    log = [json.loads(line) for line in (plugin / ".hermit-hooks" / "hook-calls.jsonl").read_text().splitlines()]
    assert log[-1]["event"] == "SessionStart" and log[-1]["error"] is None, log[-1]


@pytest.mark.parametrize("target, lines", [
    ("codex", ["context: AGENTS.md — Codex reads no instructions file from a plugin",
               "sub-agents: reviewer — Codex loads no agent roles from a plugin"]),
    ("pi", ["sub-agents: reviewer — Pi has no sub-agents",
            "hooks: before_tool, after_tool, stop, before_model — Pi runs no shell hooks"]),
])
def test_a_lossy_conversion_is_refused_with_one_line_per_component_and_writes_nothing(demo, tmp_path, target, lines):
    out = tmp_path / "plugin"
    before = snapshot_state(demo)
    r = hermit(demo, "convert", "--target", target, "-o", str(out))
    assert r.code == LOSSY_EXIT, r.out + r.err
    err = r.err.splitlines()
    assert err[0].startswith("error: ") and f"would drop {len(lines)} component(s)" in err[0], r.err
    assert [line.strip() for line in err[1:-1]] and len(err[1:-1]) == len(lines), r.err
    for expected, got in zip(lines, err[1:-1]):
        assert got.strip().startswith(expected), r.err
    assert err[-1].startswith("hint: ") and "--allow-lossy" in err[-1]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["demo"]   # no temporary left
    assert snapshot_state(demo) == before


@pytest.mark.parametrize("target, dropped", [("codex", {"context", "sub-agents"}), ("pi", {"sub-agents", "hooks"})])
def test_allow_lossy_writes_the_plugin_and_lists_what_it_left_out(demo, tmp_path, target, dropped):
    out = tmp_path / "plugin"
    r = hermit(demo, "convert", "--target", target, "-o", str(out), "--allow-lossy")
    assert r.code == 0, r.err
    assert f"left out ({len(dropped)}, --allow-lossy):" in r.out
    for component in dropped:
        assert f"  {component}: " in r.out, r.out
    data = json.loads(hermit(demo, "convert", "--target", target, "-o", str(tmp_path / "again"), "--allow-lossy",
                             "--json").out)
    assert {d["component"] for d in data["dropped"]} == dropped
    readme = next(out.rglob("README.md")).read_text()
    assert "Left out (converted with --allow-lossy)" in readme
    assert (Path(data["plugin"]) / "CARD.md").is_file() and (Path(data["plugin"]) / "skills" / "unit-conversion").is_dir()


def test_codex_and_pi_formats(demo, tmp_path):
    codex = tmp_path / "codex"
    assert hermit(demo, "convert", "--target", "codex", "-o", str(codex), "--allow-lossy").code == 0
    plugin = codex / "plugins" / "demo"
    manifest = json.loads((plugin / ".codex-plugin" / "plugin.json").read_text())
    assert manifest["skills"] == "./skills/" and manifest["hooks"] == "./hooks/hooks.json"
    assert json.loads((codex / ".agents" / "plugins" / "marketplace.json").read_text())["plugins"][0]["source"] == {
        "source": "local", "path": "./plugins/demo"}
    command = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"][0]["hooks"][0]
    assert '"${PLUGIN_ROOT}/adapter" SessionStart' in command["command"]
    pi = tmp_path / "pi"
    assert hermit(demo, "convert", "--target", "pi", "-o", str(pi), "--allow-lossy").code == 0
    package = json.loads((pi / "package.json").read_text())
    assert "pi-package" in package["keywords"] and package["pi"]["skills"] == ["./skills"]
    extension = (pi / "extensions" / "hermit.ts").read_text()
    assert 'const PYTHON: string = "python3";' in extension and "RUNS_SESSION_START: boolean = true" in extension
    assert (demo / "adapter").exists() and "Work non-interactively" in (pi / "context.md").read_text()


def test_continual_harness_memory_notes_and_sub_agents(repo, tmp_path):
    """A continual-harness adapter's memory is a notes file the policy tells the agent to read: Claude
    Code and Pi carry it with the policy, Codex (whose plugins take no policy) refuses it too."""
    make_continual_run(repo)
    seed = "hermit/r/step-0000"
    r = hermit(repo, "convert", seed, "--target", "codex", "-o", str(tmp_path / "codex"))
    assert r.code == LOSSY_EXIT
    assert [line.strip().split(":")[0] for line in r.err.splitlines()[1:-1]] == ["context", "sub-agents", "memory"]
    assert "memory: memory/NOTES.md" in r.err
    r = hermit(repo, "convert", seed, "--target", "pi", "-o", str(tmp_path / "pi"))
    assert r.code == LOSSY_EXIT and [line.strip().split(":")[0] for line in r.err.splitlines()[1:-1]] == ["sub-agents"]
    out = tmp_path / "claude"
    r = hermit(repo, "convert", seed, "--target", "claude-code", "-o", str(out))
    assert r.code == 0, r.err
    plugin = out / "plugins" / "r"
    notes = git(repo, "show", f"{seed}:adapter/memory/NOTES.md").strip()
    assert notes in (plugin / "output-styles" / "r.md").read_text()
    assert (plugin / "agents" / "reviewer.md").is_file()
    assert not (plugin / "hooks").exists() and not (plugin / ".hermit-deploy.json").exists()   # no middleware


def test_scripts_without_a_middleware_are_refused_everywhere(demo, tmp_path):
    """Scripts reach the agent only through the middleware's session_start listing their paths."""
    git(demo, "checkout", "-q", "-b", "no-middleware", FINAL)
    git(demo, "rm", "-q", "adapter/middleware.py")
    git(demo, "commit", "-q", "-m", "no middleware")
    for target in ("claude-code", "codex", "pi"):
        r = hermit(demo, "convert", "no-middleware", "--target", target, "-o", str(tmp_path / target))
        assert r.code == LOSSY_EXIT, (target, r.err)
        assert "scripts: scripts/run_tests.py — nothing hands their paths" in r.err, r.err


@pytest.mark.parametrize("args, code, message", [
    (["nosuchrev", "--target", "claude-code"], 4, "unknown revision 'nosuchrev'"),
    (["--target", "nosuchhost"], 2, "'nosuchhost' is not one of"),
    (["--target", "claude-code", "--name", "Bad Name"], 7, "invalid plugin name 'Bad Name'"),
    (["--target", "claude-code", "-o", "FULL"], 7, "exists and is not empty"),
    (["--target", "claude-code", "-o", "FILE"], 7, "exists and is not a directory"),
    (["--target", "claude-code", "-o", "adapter/inside"], 7, "inside the run's adapter directory"),
])
def test_bad_input_gets_one_error_and_hint_and_changes_nothing(demo, tmp_path, args, code, message):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine\n")
    (tmp_path / "file").write_text("a file\n")
    args = [str(tmp_path / "full") if a == "FULL" else str(tmp_path / "file") if a == "FILE" else a for a in args]
    before = snapshot_state(demo)
    r = hermit(demo, "convert", *args)
    assert r.code == code, r.out + r.err
    lines = r.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and message in lines[0] and lines[1].startswith("hint: ")
    assert snapshot_state(demo) == before
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine\n" and sorted(os.listdir(tmp_path / "full")) == ["keep.txt"]


def test_without_a_final_tag_convert_asks_for_finalize(repo, tmp_path):
    make_continual_run(repo)
    r = hermit(repo, "convert", "--target", "claude-code", "-o", str(tmp_path / "p"))
    assert r.code == 4 and "has no final adapter yet" in r.err and "git hermit finalize" in r.err
    assert not (tmp_path / "p").exists()


def test_an_empty_output_directory_is_used(demo, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert hermit(demo, "convert", "--target", "claude-code", "-o", str(out)).code == 0
    assert (out / "plugins" / "demo" / "CARD.md").is_file()
