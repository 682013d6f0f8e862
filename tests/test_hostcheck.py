"""check_hosts(): the adapter deployed per host, its context file measured, one synthetic session
per host run through the installed hook commands, outputs held to what each host reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_hermit import resources
from git_hermit.adapter.check_spec import ERROR, WARNING
from git_hermit.adapter.hostcheck import check_hosts
from git_hermit.hosts import registry

CODEX_CONTEXT_BYTES = registry.get("codex").context_limit.limit

MIDDLEWARE = '''\
import os
from hermit_hooks import HookResult
HERE = os.path.dirname(os.path.abspath(__file__))
def session_start(inp):
    with open(os.path.join(HERE, "MEMORY.md"), encoding="utf-8") as fh:
        entries = [line[2:] for line in fh.read().splitlines() if line.startswith("- ")]
    return HookResult(context="\\n".join(entries)) if entries else None
def before_tool(inp):
    if "rm -rf" in (inp.tool_input or {}).get("command", ""):
        return HookResult(deny=True, reason="refused")
def after_tool(inp): return None
def stop(inp): return None
def before_model(inp): return None
'''


def adapter(tmp_path: Path, extra: str = "", agents: str = "# Rules\n") -> Path:
    root = tmp_path / "adapter"
    root.mkdir()
    (root / "AGENTS.md").write_text(agents)
    (root / "MEMORY.md").write_text("# Memory\n\n- Prefer `make test` over raw pytest.\n")
    (root / "middleware.py").write_text(MIDDLEWARE + extra)
    return root


def rules(violations, severity=None) -> set[tuple[str, str]]:
    return {(v.rule, v.message.split(":")[0]) for v in violations
            if severity is None or v.severity == severity}


def test_a_good_adapter_passes_on_every_host(tmp_path):
    assert check_hosts(adapter(tmp_path)) == []


def test_the_seed_template_passes(tmp_path):
    seed = resources.templates_dir() / "ahe"
    if not (seed / "middleware.py").is_file():
        pytest.skip("templates/ahe is not there yet")
    assert [v for v in check_hosts(seed) if v.severity == ERROR] == []


def test_codex_context_file_over_32_kib_is_an_error(tmp_path):
    found = check_hosts(adapter(tmp_path, agents="# Rules\n" + "x" * CODEX_CONTEXT_BYTES))
    assert ("host-context-size", "codex") in rules(found, ERROR)
    assert [v.path for v in found if v.rule == "host-context-size"][0] == "AGENTS.md"


def test_a_middleware_that_does_not_hand_the_memory_over(tmp_path):
    found = check_hosts(adapter(tmp_path, "def session_start(inp):\n    return HookResult(context='hi')\n"))
    assert {("host-memory-handover", h) for h in registry.names()} <= rules(found, ERROR)


def test_context_with_allow_is_a_codex_only_warning(tmp_path):
    extra = "def before_tool(inp):\n    return HookResult(allow=True, context='careful')\n"
    found = check_hosts(adapter(tmp_path, extra))
    assert rules(found) == {("host-context-dropped", "codex")}
    assert all(v.severity == WARNING for v in found)


def test_a_raising_middleware_is_reported_per_host(tmp_path):
    found = check_hosts(adapter(tmp_path, "def after_tool(inp):\n    raise KeyError('x')\n"))
    assert {("host-hook-error", "codex"), ("host-hook-error", "claude-code")} <= rules(found, ERROR)
    assert any("KeyError" in v.message for v in found)


def test_an_output_field_the_host_does_not_read_is_an_error(tmp_path):
    """A tampered runner (hook_runner.py is a fixed file) that adds systemMessage to every output."""
    root = adapter(tmp_path)
    shipped = (resources.hooks_dir() / "agent" / "hook_runner.py").read_text()
    main_guard = 'if __name__ == "__main__":'
    (root / "hook_runner.py").write_text(shipped.replace(main_guard, (
        "_handle = handle\n"
        "def handle(*args):\n"
        "    out = _handle(*args)\n"
        "    return out[:-1] + ', \"systemMessage\": \"hi\"}' if out.startswith('{') else out\n\n\n")
        + main_guard))
    found = check_hosts(root)
    assert ("host-output-fields", "codex") in rules(found, ERROR)
    assert ("host-output-fields", "claude-code") not in rules(found)


def test_an_adapter_without_middleware_is_checked_for_context_size_only(tmp_path):
    root = tmp_path / "ch"
    root.mkdir()
    (root / "AGENTS.md").write_text("# Policy\n")
    assert check_hosts(root) == []
    (root / "AGENTS.md").write_text("y" * (CODEX_CONTEXT_BYTES + 1))
    assert rules(check_hosts(root)) == {("host-context-size", "codex")}


def test_an_undeployable_adapter_is_reported_not_raised(tmp_path):
    root = tmp_path / "broken"
    root.mkdir()
    found = check_hosts(root)
    assert {v.rule for v in found} == {"host-deploy"} and len(found) == 3
