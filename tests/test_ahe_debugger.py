"""ahe Debugger: job eligibility, traces, ordering, max_tasks, templates, verifier tails,
retry policy and the fallback text (spec/ahe.md §6)."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest
from support.ahe_factory import results, trial

from git_hermit.evolvers.ahe.analysis import classify
from git_hermit.evolvers.ahe.debugger import (
    DEBUG_QUERY, DEBUG_QUERY_K1, SUMMARY_QUERY, SUMMARY_QUERY_K1, TRUNCATED_PREFIX, VERIFIER_BANNER,
    backoff_schedule, build_jobs, error_response, fallback_text, finish, should_retry, tail_chars,
    template_for, write_jobs)

ROOT = PurePosixPath("/runs/step-0002/rollouts")


def jobs_for(spec, k, **kwargs):
    data = results(spec)
    return build_jobs(classify(data, k=k), data, rollouts_root=ROOT, **kwargs)


def test_eligibility_skips_pure_exception_tasks():
    jobs = jobs_for({"ok": "PP", "bad": "PF", "infra": "EE", "slow": "TT", "mixed": "PE"}, k=2)
    assert {j.task for j in jobs} == {"ok", "bad", "slow", "mixed"}


def test_trace_labels_and_counts():
    jobs = {j.task: j for j in jobs_for({"slow": "TE", "mixed": "PE", "bad": "PF"}, k=2)}
    slow = jobs["slow"]  # every reward-less trial of a timeout task is a TIMEOUT trace
    assert [t.label for t in slow.traces] == ["TIMEOUT", "TIMEOUT"] and slow.trace_rewards == [-1.0, -1.0]
    assert (slow.n_pass, slow.n_fail, slow.n_timeout, slow.is_timeout, slow.mode) == (0, 0, 2, True, "debug")
    # a pure-exception trial is never analysed: 1 pass + 1 exception becomes a summary job
    mixed = jobs["mixed"]
    assert [t.label for t in mixed.traces] == ["PASS"] and mixed.mode == "summary"
    assert jobs["bad"].trace_labels == "Trace verdict: trace01=PASS, trace02=FAIL"


def test_trace_paths_exploded_dir_and_hook_log():
    job = jobs_for({"a": "F"}, k=1)[0]
    t = job.traces[0]
    assert t.trajectory == "/runs/step-0002/rollouts/a/1/trajectory.jsonl"
    assert t.steps_dir == "/runs/step-0002/rollouts/a/1/steps"
    assert t.hook_log == "/runs/step-0002/rollouts/a/1/hook-calls.jsonl"
    assert jobs_for({"a": "F"}, k=1, explode_traces=False)[0].traces[0].steps_dir is None


def test_task_without_trajectories_has_no_job():
    data = {"a": [trial("a", 1, "fail", trajectory=None)], "b": [trial("b", 1, "fail")]}
    jobs = build_jobs(classify(data, k=1), data, rollouts_root=ROOT)
    assert [j.task for j in jobs] == ["b"]


def test_ordering_debug_first_then_failures_desc_and_max_tasks():
    spec = {"s1": "PPP", "d1": "PPF", "d3": "FFF", "d2": "PFT", "s2": "PPP"}
    jobs = jobs_for(spec, k=3)
    assert [j.task for j in jobs] == ["d3", "d2", "d1", "s1", "s2"]
    assert [j.task for j in jobs_for(spec, k=3, max_tasks=2)] == ["d3", "d2"]
    assert jobs_for(spec, k=3, max_tasks=0) == []


@pytest.mark.parametrize("spec, k, template", [
    ({"a": "PF"}, 2, DEBUG_QUERY), ({"a": "F"}, 1, DEBUG_QUERY_K1),
    ({"a": "PP"}, 2, SUMMARY_QUERY), ({"a": "P"}, 1, SUMMARY_QUERY_K1),
])
def test_template_chosen_by_mode_and_k(spec, k, template):
    job = jobs_for(spec, k=k)[0]
    first_line = template.splitlines()[0].format(n_total=job.n_total, n_pass=job.n_pass,
                                                 n_fail=job.n_fail, n_timeout=job.n_timeout)
    assert job.query.startswith(first_line)
    assert job.trace_labels in job.query


def test_templates_use_k_not_trace_count():
    # k=2 configured but only one trace survives: still the k>1 template
    data = {"a": [trial("a", 1, "fail"), trial("a", 2, "fail", trajectory=None)]}
    job = build_jobs(classify(data, k=2), data, rollouts_root=ROOT)[0]
    assert "PASS vs FAIL" in job.query and "FAILURE POINT" not in job.query


@pytest.mark.parametrize("template, headings, words", [
    (DEBUG_QUERY, ["ROOT CAUSE", "PASS vs FAIL", "CRITICAL MISTAKE", "GENERAL MECHANISM"], 300),
    (DEBUG_QUERY_K1, ["FAILURE POINT", "ROOT CAUSE", "WHAT SHOULD HAVE BEEN DONE", "GENERAL LESSON"], 300),
    (SUMMARY_QUERY, ["KEY STRATEGY", "REUSABLE PATTERN", "FRAGILITY RISK"], 150),
    (SUMMARY_QUERY_K1, ["KEY STRATEGY", "SUCCESS FACTORS", "REUSABLE PATTERN"], 150),
])
def test_template_sections_in_order(template, headings, words):
    positions = [template.index(f"{i}. {h}:") for i, h in enumerate(headings, start=1)]
    assert positions == sorted(positions)
    assert f"Under {words} words." in template


def test_template_override():
    job = jobs_for({"a": "F"}, k=1, templates={"qa_query_debug_k1": "custom {n_fail} {oops}"})[0]
    assert job.query.startswith("custom {n_fail} {oops}")  # unformattable: used raw
    assert template_for("summary", 2, {"qa_query_summary": "S {n_pass}"}) == "S {n_pass}"


def test_timeout_note_and_hook_audit_mention():
    job = jobs_for({"a": "PT"}, k=2)[0]
    assert job.query.startswith("⚠️ TIMEOUT INFO: 1 of 2 rollouts timed out.")
    assert "hook-calls.jsonl" in job.query and "one file per step" in job.query
    assert "TIMEOUT INFO" not in jobs_for({"a": "PF"}, k=2)[0].query


def test_verifier_tail_chars_then_lines_in_query():
    long = "\n".join(f"line {i:04d}" for i in range(1000))  # 9,999 chars
    data = {"a": [trial("a", 1, "fail", verifier=long), trial("a", 2, "pass", verifier="PASSED all")]}
    job = build_jobs(classify(data, k=2), data, rollouts_root=ROOT)[0]
    stored = job.traces[0].verifier_output
    assert stored.startswith(TRUNCATED_PREFIX) and stored.endswith("line 0999")
    assert len(stored) == len(TRUNCATED_PREFIX) + 4000
    assert VERIFIER_BANNER in job.query
    block = job.query.split("--- Verifier test output (rollout 1, FAIL) ---\n")[1].split("\n--- end")[0]
    assert block.splitlines() == [f"line {i:04d}" for i in range(940, 1000)]
    assert "PASSED all" not in job.query  # passing rollouts get no verifier block
    small = build_jobs(classify(data, k=2), data, rollouts_root=ROOT, verifier_tail_chars=50,
                       verifier_tail_lines=2)[0]
    assert small.traces[0].verifier_output == TRUNCATED_PREFIX + long[-50:]
    assert "line 0998\nline 0999\n--- end" in small.query
    off = build_jobs(classify(data, k=2), data, rollouts_root=ROOT, verifier_output=False)[0]
    assert VERIFIER_BANNER not in off.query and off.verifier_outputs == ["", ""]


def test_tail_chars_short_text_is_stripped_only():
    assert tail_chars("  ok \n", 4000) == "ok"


def test_retry_policy():
    assert should_retry(None) and should_retry("") and should_retry("  \n")
    assert should_retry(error_response("timeout", "exceeded 600s"))
    assert error_response("error", "exit=1: boom") == "[debugger error] exit=1: boom"
    assert not should_retry("1. ROOT CAUSE: x") and not should_retry("[budget-exceeded] partial")
    assert backoff_schedule(3, 2.0) == [2.0, 4.0]
    assert backoff_schedule(4, 0.5) == [0.5, 1.0, 2.0]
    assert backoff_schedule(1, 2.0) == [] and backoff_schedule(0, 2.0) == []


def test_fallback_text_with_failed_lines():
    verifier = "collected 3\nFAILED tests/test_a.py::test_x - assert 1 == 2\n  FAILED indented\nFAILED\ttab"
    data = {"a": [trial("a", 1, "fail", verifier=verifier), trial("a", 2, "pass")]}
    job = build_jobs(classify(data, k=2), data, rollouts_root=ROOT)[0]
    text = fallback_text(job, error_response("timeout", "exceeded 600s"))
    lines = text.splitlines()
    assert lines[0] == "[debugger timeout] exceeded 600s" and lines[1] == ""
    assert lines[2] == "The debugger analysis timed out. Verifier test failures:"
    assert lines[3:5] == ["  - FAILED tests/test_a.py::test_x - assert 1 == 2", "  - FAILED\ttab"]
    assert lines[5] == "(Full verifier output is in the Verifier Test Output section below.)"
    assert lines[-1].startswith("**NOTE**")
    failed = fallback_text(job, error_response("error", "exit=1: x"))
    assert "The debugger analysis failed. Verifier test failures:" in failed


def test_fallback_without_failed_lines_and_timeout_traces():
    job = jobs_for({"a": "TF"}, k=2)[0]
    text = fallback_text(job, error_response("failed", "no answer"))
    assert "Verifier test failures" not in text
    assert "trace01 timed out" in text and text.splitlines()[-1].startswith("**NOTE**")


def test_finish_applies_fallback():
    jobs = jobs_for({"a": "PF", "b": "PP", "c": "FF"}, k=2)
    reports = {r.job.task: r for r in finish(jobs, {"a": "  1. ROOT CAUSE: x \n", "b": "[debugger error] exit=1"})}
    assert reports["a"].response == "1. ROOT CAUSE: x" and not reports["a"].failed
    assert reports["b"].failed and reports["b"].response.startswith("[debugger error] exit=1\n")
    assert reports["c"].failed and reports["c"].response.startswith("[debugger failed] no response")
    assert "query" not in reports["a"].to_dict()


def test_redaction_and_write_jobs(tmp_path):
    data = {"a": [trial("a", 1, "fail", verifier="token=sk-SECRET123\nFAILED t")]}
    jobs = build_jobs(classify(data, k=1), data, rollouts_root=ROOT,
                      redact=lambda text: text.replace("sk-SECRET123", "[REDACTED]"))
    assert "sk-SECRET123" not in jobs[0].query and "token=[REDACTED]" in jobs[0].query
    path = write_jobs(tmp_path, jobs)
    assert json.loads(path.read_text(encoding="utf-8"))[0]["query"] == jobs[0].query
