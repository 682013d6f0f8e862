"""`git hermit trace FILE…`: through the CLI, on the real session files in
tests/fixtures/trajectories/ (sources in real/SOURCES.md), every figure checked against a count
made directly on the raw records; inside and outside a repository; sub-agents beside a session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from support.trajectories_real_helpers import _web_search_rollout

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"
REAL = FIXTURES / "real"
RECORDED = FIXTURES / "recorded"
KEYS = {"format", "steps", "tool_calls", "failed_tool_calls", "usage", "model", "truncated", "warnings", "errors"}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def traced(cwd: Path, *paths: Path, extra: tuple[str, ...] = ()) -> list[dict]:
    result = hermit(cwd, "trace", "--json", *extra, *map(str, paths))
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.out.splitlines()]


def claude_by_hand(path: Path) -> dict:
    """Tool calls, failures and tokens of a Claude session counted from its records."""
    raw = rows(path)
    calls = [b for r in raw if r.get("type") == "assistant" for b in r["message"]["content"]
             if isinstance(b, dict) and b.get("type") == "tool_use"]
    failed = [b for r in raw if r.get("type") == "user" and isinstance(r["message"]["content"], list)
              for b in r["message"]["content"] if isinstance(b, dict) and b.get("type") == "tool_result"
              and b.get("is_error")]
    last: dict[str, dict] = {}
    for r in raw:
        if r.get("type") == "assistant" and r["message"].get("usage"):
            last[r["message"]["id"]] = r["message"]["usage"]
    cached = sum(u.get("cache_read_input_tokens", 0) for u in last.values())
    prompt = sum(u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) for u in last.values()) + cached
    return {"tool_calls": len(calls), "failed_tool_calls": len(failed),
            "usage": {"input": prompt, "cached_input": cached,
                      "output": sum(u.get("output_tokens", 0) for u in last.values()), "reasoning": 0}}


def codex_by_hand(path: Path) -> dict:
    raw = rows(path)
    items = [r["payload"] for r in raw if r["type"] == "response_item"]
    calls = [p for p in items if p.get("type", "").endswith("_call")]
    total = [r["payload"]["info"]["total_token_usage"] for r in raw
             if r["payload"].get("type") == "token_count" and r["payload"].get("info")][-1]
    return {"tool_calls": len(calls),
            "usage": {"input": total["input_tokens"], "cached_input": total["cached_input_tokens"],
                      "output": total["output_tokens"], "reasoning": total["reasoning_output_tokens"]}}


def pi_by_hand(path: Path) -> dict:
    raw = rows(path)
    messages = [r["message"] for r in raw if r.get("type") in ("message", "message_end")]
    calls = [b for m in messages if m.get("role") == "assistant" for b in m.get("content") or []
             if isinstance(b, dict) and b.get("type") == "toolCall"]
    usages = [m["usage"] for m in messages if m.get("role") == "assistant" and m.get("usage")]
    return {"tool_calls": len(calls),
            "usage": {"input": sum(u["input"] + u["cacheRead"] + u["cacheWrite"] for u in usages),
                      "cached_input": sum(u["cacheRead"] for u in usages),
                      "output": sum(u["output"] for u in usages), "reasoning": 0}}


@pytest.mark.parametrize("name, by_hand", [
    ("claude-2.1.38-short.jsonl", claude_by_hand),
    ("claude-2.1.39-parallel-calls.jsonl", claude_by_hand),
    ("claude-2.1.39-subagent-agent-aac57f5.jsonl", claude_by_hand),
    ("pi-session-v1-compaction.jsonl", pi_by_hand),
    ("shapes:codex-0.104-mcp-calls.jsonl", codex_by_hand),
    ("shapes:codex-0.104-118-calls.jsonl", codex_by_hand),
])
def test_trace_json_matches_hand_counts_outside_a_repository(name, by_hand, tmp_path):
    path = _real(name)
    (report,) = traced(tmp_path, path)          # tmp_path is no git repository
    assert KEYS <= set(report)
    expected = by_hand(path)
    for key, value in expected.items():
        assert report[key] == value, key
    assert report["steps"] > 0 and report["cost_source"] != "prices"


def _real(name: str) -> Path:
    """A committed real fixture, or (``shapes:``) one shaped as a real file (fixtures/trajectories/shapes/)."""
    if not name.startswith("shapes:"):
        return REAL / name
    return REAL.parent / "shapes" / name.split(":", 1)[1]


def test_trace_text_and_several_files(tmp_path):
    paths = sorted(REAL.glob("*.jsonl")) + sorted(RECORDED.glob("*.jsonl")) + [_web_search_rollout(tmp_path)]
    result = hermit(tmp_path, "trace", *map(str, paths))
    assert result.code == 0, result.err
    for path in paths:
        assert str(path) in result.out
    assert "format: claude-session 2.1.39" in result.out
    assert "format: codex-rollout 0.104.0-alpha.1" in result.out
    assert "tool calls: 2 (other 2); failed: 0" in result.out        # the web search rollout
    assert len(traced(tmp_path, *paths)) == len(paths)


def test_trace_prices_from_hermit_yaml(repo):
    assert hermit(repo, "init", "--run", "demo").code == 0
    config = repo / "hermit.yaml"
    config.write_text(config.read_text() + "prices: {gpt-5.3-codex: {input: 1.0, cached_input: 0.5, output: 10.0}}\n")
    rollout = _web_search_rollout(repo.parent)
    (report,) = traced(repo, rollout)
    usage = report["usage"]
    expected = ((usage["input"] - usage["cached_input"]) * 1.0 + usage["cached_input"] * 0.5
                + usage["output"] * 10.0) / 1e6
    assert report["cost_source"] == "prices"
    assert report["cost_usd"] == pytest.approx(expected)
    text = hermit(repo, "trace", str(rollout)).out
    assert f"cost: ${expected:.4f} (hermit.yaml prices)" in text


def test_trace_lists_subagents_beside_a_session(tmp_path):
    main = tmp_path / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    shutil.copy(REAL / "claude-2.1.38-short.jsonl", main)
    sub_dir = tmp_path / main.stem / "subagents"
    sub_dir.mkdir(parents=True)
    shutil.copy(REAL / "claude-2.1.39-subagent-agent-aac57f5.jsonl", sub_dir / "agent-aac57f5.jsonl")
    (report,) = traced(tmp_path, main)
    (sub,) = report["subagents"]
    assert sub["path"].endswith("subagents/agent-aac57f5.jsonl")
    sub_hand = claude_by_hand(REAL / "claude-2.1.39-subagent-agent-aac57f5.jsonl")["usage"]
    assert sub["usage"] == sub_hand
    assert report["usage_with_subagents"] == {k: report["usage"][k] + sub_hand[k] for k in sub_hand}
    assert report["usage"] == claude_by_hand(REAL / "claude-2.1.38-short.jsonl")["usage"]


def test_trace_unknown_usage_is_null_and_empty_file_is_empty(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    (report,) = traced(tmp_path, empty)
    assert (report["steps"], report["format"], report["usage"]["input"]) == (0, "empty", None)
    assert report["warnings"] == ["empty file: no records"]


def test_trace_bad_input_is_one_error_and_hint(tmp_path):
    result = hermit(tmp_path, "trace", str(tmp_path / "absent.jsonl"))
    assert result.code == 7
    assert result.err.splitlines()[0].startswith("error: trajectory not found")
    assert result.err.splitlines()[1].startswith("hint: ")
    assert "Traceback" not in result.err
    result = hermit(tmp_path, "trace", "--format", "pi", str(REAL / "claude-2.1.38-short.jsonl"))
    assert result.code == 7 and "looks like claude-session, not pi" in result.err
    # several files: the good ones are still reported, the exit code says one failed
    result = hermit(tmp_path, "trace", "--json", str(REAL / "claude-2.1.38-short.jsonl"), str(tmp_path / "absent.jsonl"))
    assert result.code == 7
    good, bad = [json.loads(line) for line in result.out.splitlines()]
    assert good["format"] == "claude-session" and bad["errors"][0].startswith("trajectory not found")


def test_trace_format_option_picks_the_variant(tmp_path):
    (report,) = traced(tmp_path, RECORDED / "codex-0.164.0-exec.jsonl", extra=("--format", "codex"))
    assert report["format"] == "codex-exec"
    (report,) = traced(tmp_path, RECORDED / "claude-code-2.1.317-stream.jsonl", extra=("--format", "claude"))
    assert report["format"] == "claude-stream"


# -- issue 25: the final answer, and a session's sub-agents linked both ways ----------------

NEWER = FIXTURES / "newer"
NEWER_COUNTS = json.loads((NEWER / "counts.json").read_text())


def test_trace_json_has_the_final_answer_clipped(tmp_path):
    """The final answer's first 1,000 characters and its whole length; no answer: null, null."""
    short, long, none = (NEWER / "codex-0.164.0-poll-rollout.jsonl", NEWER / "claude-2.1.217-manual-compaction.jsonl",
                         NEWER / "codex-0.164.0-usage-limit-rollout.jsonl")
    answers = [NEWER_COUNTS[p.name]["final_answer"] for p in (short, long, none)]
    assert len(answers[0]) < 1000 < len(answers[1]) and answers[2] is None
    reports = traced(tmp_path, short, long, none)
    assert [(r["final_answer"], r["final_answer_chars"]) for r in reports] == [
        (answers[0], len(answers[0])), (answers[1][:1000], len(answers[1])), (None, None)]
    assert "final answer: Phase 1 shipped. Seven commits" in hermit(tmp_path, "trace", str(long)).out


def test_trace_links_a_claude_session_and_its_subagent_both_ways(tmp_path):
    shutil.copytree(NEWER / "claude-2.1.317-subagent", tmp_path / "project")
    main = tmp_path / "project" / "32b0dc4c-c5de-4e60-9bcd-49643d5a3e9e.jsonl"
    sub = main.parent / main.stem / "subagents" / "agent-a7aef5509f9d9a44a.jsonl"
    (report, sub_report) = traced(tmp_path, main, sub)
    assert report["parent"] is None
    assert [s["path"] for s in report["subagents"]] == [str(sub)]
    assert report["subagents"][0]["tool_calls"] == NEWER_COUNTS["claude-2.1.317-subagent/" + str(
        sub.relative_to(tmp_path / "project"))]["tool_calls"]
    assert sub_report["parent"] == str(main) and sub_report["subagents"] == []


def test_trace_links_a_codex_rollout_and_its_subagent_rollout_both_ways(tmp_path):
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    shutil.copytree(NEWER / "codex-0.164.0-subagents", day)
    main = day / "rollout-2026-12-01T22-30-28-01a233bb-1708-7710-a9d8-9e0c3460a8f7.jsonl"
    child = day / "rollout-2026-12-01T22-30-28-01a233bb-1779-7951-8938-1432b9d35b98.jsonl"
    (report, child_report) = traced(tmp_path, main, child)
    assert report["parent"] is None
    assert [s["path"] for s in report["subagents"]] == [str(child)]
    assert report["usage_with_subagents"]["input"] == report["usage"]["input"] + child_report["usage"]["input"]
    assert child_report["parent"] == str(main) and child_report["subagents"] == []
    text = hermit(tmp_path, "trace", str(child)).out
    assert f"parent: {main}" in text
