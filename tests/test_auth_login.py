"""Auth as users have it: an API key from `env_key`, or a copy of the user's own login.

The login files are copied into each rollout's private home (mode 0600) and nowhere else;
with a login there is no per-token price, so the ledger says the cost is unknown.
"""

from __future__ import annotations

import json
import stat

import pytest

from git_hermit.accounting.ledger import Ledger, format_usage
from git_hermit.errors import AgentError
from git_hermit.model.rollout import RolloutResult, Usage
from git_hermit.agents import AgentContext, make_agent

TOKEN = "login-token-0123456789abcdef"


def _ctx(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    return AgentContext(rollout_dir=tmp_path, workspace=tmp_path / "ws", home=tmp_path / "home",
                        prompt="hi", timeout_s=5, attempt=1, task_id="t", host="codex")


def test_codex_login_is_copied_into_the_private_home_only(isolated_git_env, tmp_path):
    user_codex = isolated_git_env / ".codex"
    user_codex.mkdir()
    (user_codex / "auth.json").write_text(json.dumps({"tokens": {"access_token": TOKEN}}))
    agent = make_agent({"backend": "codex", "model": "gpt-5.6-luna", "login": "chatgpt"})
    agent.binary = "codex"
    argv, env = agent._command(_ctx(tmp_path))
    copied = tmp_path / "home" / ".codex" / "auth.json"
    assert TOKEN in copied.read_text()
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert env["CODEX_HOME"] == str(tmp_path / "home" / ".codex") and env["HOME"] == str(tmp_path / "home")
    assert not any(TOKEN in value for value in env.values()) and not any(TOKEN in a for a in argv)
    config = (tmp_path / "home" / ".codex" / "config.toml").read_text()
    assert TOKEN not in config and 'model = "gpt-5.6-luna"' in config


def test_claude_login_and_api_key(isolated_git_env, tmp_path, monkeypatch):
    (isolated_git_env / ".claude").mkdir()
    (isolated_git_env / ".claude" / ".credentials.json").write_text(json.dumps({"token": TOKEN}))
    agent = make_agent({"backend": "claude-code", "login": "claude"})
    agent.binary = "claude"
    _, env = agent._command(_ctx(tmp_path))
    assert TOKEN in (tmp_path / "home" / ".claude" / ".credentials.json").read_text()
    assert "ANTHROPIC_API_KEY" not in env
    # an API key named by env_key is passed as the CLI's own variable, and only that one
    monkeypatch.setenv("MY_ANTHROPIC", "sk-ant-test-key")
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "do-not-pass")
    agent = make_agent({"backend": "claude-code", "provider": {"env_key": "MY_ANTHROPIC"}})
    agent.binary = "claude"
    (tmp_path / "again").mkdir()
    _, env = agent._command(_ctx(tmp_path / "again"))
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-test-key"
    assert "do-not-pass" not in env.values()


def test_missing_env_key_is_reported_before_any_rollout(monkeypatch, tmp_path):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    agent = make_agent({"backend": "codex", "bin": "sh", "provider": {"base_url": "http://127.0.0.1:1/v1",
                                                                        "env_key": "NOT_SET_KEY"}})
    with pytest.raises(AgentError) as err:
        agent.check_available()
    assert "NOT_SET_KEY" in err.value.message and err.value.hint


def test_without_a_price_the_cost_is_unknown():
    ledger = Ledger(prices={})
    result = RolloutResult("t", 1, "pass", 1.0, usage=Usage(1000, 200, 300, 50))
    ledger.add_rollout(result, model="gpt-5.6-luna")
    assert ledger.total().cost_usd is None
    assert "cost unknown" in format_usage(ledger.total())
