"""ahe overview/detail files: one-liner extraction (§7.1), groups, detail sections, writing."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from support.ahe_factory import results, trial

from git_hermit.evolvers.ahe.analysis import classify
from git_hermit.evolvers.ahe.debugger import build_jobs, finish
from git_hermit.evolvers.ahe.overview import (
    detail_filename, one_liner, overview_body, render_detail, render_overview, write_analysis)


@pytest.mark.parametrize("response, expected", [
    # rule 1: a failed Debugger response: its FAILED line, or its first line
    ("[debugger timeout] exceeded 600s\n\nThe debugger analysis timed out. Verifier test failures:\n"
     "  - FAILED tests/t.py::test_a - boom\n", "[debugger timeout] verifier: FAILED tests/t.py::test_a - boom"),
    ("[debugger error] exit=1: " + "x" * 200 + "\n\n**NOTE**: none", "[debugger error] exit=1: " + "x" * 75),
    ("[debugger failed] oops\n- FAILED " + "y" * 150,
     "[debugger failed] verifier: FAILED " + "y" * 93),
    # rule 2: the ROOT CAUSE paragraph, whitespace collapsed, no length cap
    ("1. ROOT CAUSE: the agent never ran\n   the tests.\n\n2. PASS vs FAIL: x", "the agent never ran the tests."),
    ("root cause： full-width colon and lower case\nPASS vs FAIL: x", "full-width colon and lower case"),
    ("**ROOT CAUSE:** bold heading\n2. CRITICAL MISTAKE: y", "bold heading"),
    ("ROOT CAUSE:\nstarts on the next line\nand goes on\n3. GENERAL MECHANISM: z",
     "starts on the next line and goes on"),
    ("1. FAILURE POINT: step 4\n2. ROOT CAUSE: k1 cause\n3. WHAT SHOULD HAVE BEEN DONE: run it", "k1 cause"),
    ("ROOT CAUSE: " + "word " * 60, ("word " * 60).strip()),
    # rule 3: the first non-heading line, list marker stripped
    ("# Heading\n\n- first point\n- second", "first point"),
    ("## H\n1. numbered point", "numbered point"),
    ("* starred", "starred"),
    ("", "(no analysis)"),
])
def test_one_liner(response, expected):
    assert one_liner(response) == expected


def reports_for(spec, k, responses):
    data = results(spec)
    jobs = build_jobs(classify(data, k=k), data, rollouts_root=PurePosixPath("/r"))
    return finish(jobs, responses)


def test_overview_groups_and_counts():
    reports = reports_for({"slow": "PT", "bad": "FF", "meh": "PF", "ok": "PP", "fine": "PP"}, 2, {
        "slow": "ROOT CAUSE: looped on retries", "bad": "ROOT CAUSE: wrong file",
        "meh": "ROOT CAUSE: flaky parse", "ok": "KEY STRATEGY: x", "fine": "KEY STRATEGY: y"})
    text = render_overview(3, reports, detail_dir="state/analysis/step_0003/detail/")
    lines = text.splitlines()
    assert lines[0] == "# Debugger Analysis Overview — Iteration 3"
    assert "Analyzed 5 tasks (2 debug + 1 timeout + 2 summary)." in lines
    assert "- **slow** (1/2 timed out): looped on retries" in lines
    debug = lines.index("### Debug (has failures)")
    assert lines[debug + 1:debug + 3] == ["- **bad** (0/2 pass): wrong file", "- **meh** (1/2 pass): flaky parse"]
    summary = lines.index("### Summary (all pass): 2 tasks")
    assert lines[summary + 1] == "fine, ok" and "detail/{task}.md" in lines[summary + 2]
    assert lines[-1] == "Detail per task: `state/analysis/step_0003/detail/`"
    assert text.index("### Timeout") < text.index("### Debug") < text.index("### Summary")
    assert overview_body(text).startswith("Analyzed 5 tasks")


def test_overview_omits_zero_parts_and_empty_groups():
    text = render_overview(1, reports_for({"ok": "P"}, 1, {"ok": "KEY STRATEGY: x"}))
    assert "Analyzed 1 tasks (1 summary)." in text and "### Debug" not in text and "### Timeout" not in text
    assert "Analyzed 0 tasks." in render_overview(1, [])


def test_detail_sections():
    verifier = "\n".join(f"v{i}" for i in range(100))
    data = {"a": [trial("a", 1, "fail", verifier=verifier), trial("a", 2, "pass", verifier="fine"),
                  trial("a", 3, "exception", exception_type="AgentTimeoutError")]}
    jobs = build_jobs(classify(data, k=3), data, rollouts_root=PurePosixPath("/r"))
    report = finish(jobs, {"a": "1. ROOT CAUSE: x"})[0]
    text = render_detail(report)
    lines = text.splitlines()
    assert lines[0] == "# a (1/3 pass) ⏱️ TIMEOUT"
    assert "Analyzed 3 traces (1 pass, 1 fail, 1 timeout)." in lines
    assert "- **trace01** (FAIL): `/r/a/1/trajectory.jsonl`" in lines
    assert "  - hook audit: `/r/a/3/hook-calls.jsonl`" in lines
    assert text.index("## Trace Paths") < text.index("## QA Analysis") < text.index("## Verifier Test Output")
    block = text.split("### trace01 (FAIL)\n\n```\n")[1].split("\n```")[0]
    assert block.splitlines() == [f"v{i}" for i in range(20, 100)]  # last 80 lines
    assert "### trace02" not in text  # passing rollouts have no verifier block


def test_detail_without_verifier_output():
    text = render_detail(reports_for({"a": "F"}, 1, {"a": "ROOT CAUSE: y"})[0])
    assert "## Verifier Test Output" not in text and "(0/1 pass)" in text and "TIMEOUT" not in text


def test_write_analysis(tmp_path):
    reports = reports_for({"x/y": "F", "ok": "P"}, 1, {"x/y": "ROOT CAUSE: z", "ok": "KEY STRATEGY: s"})
    overview = write_analysis(tmp_path / "step_0001", 1, reports)
    assert overview.read_text(encoding="utf-8") == render_overview(1, reports)
    assert (tmp_path / "step_0001" / "detail" / detail_filename("x/y")).read_text(encoding="utf-8") \
        == render_detail(reports[0])
    assert (tmp_path / "step_0001" / "detail" / "ok.md").exists()
    assert (tmp_path / "step_0001" / "reports.json").exists()
    assert not list((tmp_path / "step_0001").glob("*.tmp"))
