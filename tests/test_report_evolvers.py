"""`git hermit report` of evo-harness and continual-harness steps, rendered as GitHub renders it
(cmark-gfm): their levels and passes, the skills' provenance, the stream score; no "best-ever"
(these evolvers keep no best tag); the rejected level / dropped pass in the commit body; and
`show` of a level commit with its provenance note."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from support.card_support import continual_env, make_continual_run
from support.cli_helpers import hermit
from conftest import git
from support.evo_harness_helpers import env as evo_env, make_evo_run, plan as evo_plan, skill, tip

CMARK = ["cmark-gfm", "--unsafe", "-e", "table", "-e", "autolink", "-e", "strikethrough", "-e", "tagfilter"]
needs_cmark = pytest.mark.skipif(shutil.which("cmark-gfm") is None,
                                 reason="cmark-gfm is not installed (apt-get install cmark-gfm)")


def _html(text: str) -> str:
    return subprocess.run(CMARK, input=text, capture_output=True, text=True, check=True).stdout


def _table_after(html: str, heading: str) -> str:
    return re.search(rf"<h3>{heading}</h3>.*?(<table>.*?</table>)", html, re.S).group(1)


def _evo_step(repo):
    control = make_evo_run(repo, {"t1": "1", "t2": "42", "t3": "3", "t4": "4", "t5": "5", "t6": "42"}, {})
    evo_plan(control, **{
        "1_topic_curator": {"write": {"skills/short-answers/SKILL.md": skill("short-answers", "topic", ["t1", "t3"])}},
        "1_general_curator": {"write": {
            "skills/good-general/SKILL.md": skill("good-general", "general", ["t1", "t3", "t4"]),
            "skills/bad-general/SKILL.md": skill("bad-general", "general", ["t1", "t3", "t9"])}},
        "reflect": {"skip": ["t5"]}})
    r = hermit(repo, "step", env=evo_env(control))
    assert r.code == 0, r.out + r.err
    return control


@needs_cmark
def test_an_evo_harness_steps_report_shows_its_levels_and_the_skills_provenance(repo):
    _evo_step(repo)
    r = hermit(repo, "report", "1")
    assert r.code == 0, r.err
    text = r.out
    assert "made no declared change" not in text and "best-ever" not in text and "(best)" not in text
    assert "made 1 accepted level(s) (topic)" in text and "its online score" in text
    html = _html(text)
    levels = _table_after(html, "Levels")
    rows = dict(re.findall(r"<tr>\s*<td>(\w+)</td>\s*<td>(\w+)</td>", levels))
    assert rows == {"topic": "accepted", "general": "rejected"}, levels
    assert "bad-general" in levels and "t9" in levels
    provenance = re.search(r"learned from.*?(<table>.*?</table>)", html, re.S).group(1)
    assert "<code>short-answers</code>" in provenance and "t1, t3" in provenance
    assert re.search(r"<td>acting</td>\s*<td[^>]*>0</td>\s*<td[^>]*>0</td>\s*<td[^>]*>unknown</td>", html)
    assert "$0.0000" not in html      # a command agent reports no cost: unknown, not free
    data = json.loads(hermit(repo, "report", "1", "--json").out)
    assert data["levels"]["general"]["status"] == "rejected" and data["provenance"][0]["skill"] == "short-answers"


def test_a_rejected_level_is_in_the_commit_body_beside_an_accepted_one(repo):
    _evo_step(repo)
    body = git(repo, "log", "-1", "--format=%b", tip(repo, 1))
    assert "topic curator: 1 skill(s) written" in body or "topic level of step 1" in body
    assert "Rejected in this step:" in body and "general level rejected whole" in body and "t9" in body, body


def test_show_of_a_level_commit_shows_its_provenance(repo):
    _evo_step(repo)
    r = hermit(repo, "show", tip(repo, 1))
    assert r.code == 0, r.err
    assert "provenance (step 1)" in r.out and "short-answers [topic] from t1, t3" in r.out, r.out
    data = json.loads(hermit(repo, "show", tip(repo, 1), "--json").out)
    assert data["commits"][-1]["provenance"]["skills"]["short-answers"]["level"] == "topic"


@needs_cmark
def test_a_continual_harness_steps_report_shows_its_passes_and_the_stream_score(repo):
    control = make_continual_run(repo)
    for _ in range(2):
        r = hermit(repo, "step", env=continual_env(control))
        assert r.code == 0, r.err
    r = hermit(repo, "report", "1")
    assert r.code == 0, r.err
    text = r.out
    assert "made no declared change" not in text and "best-ever" not in text
    assert "Stream pass@1 so far: **" in text and "on the next window of the stream, its online score" in text
    passes = _table_after(_html(text), "Refiner passes")
    found = dict(re.findall(r"<tr>\s*<td>([\w ]+)</td>\s*<td>(\w+)</td>", passes))
    assert {"policy", "subagents", "skills", "memory", "memory fold"} <= set(found), passes
    assert set(found.values()) <= {"applied", "unchanged", "dropped", "skipped"}
    assert "applied" in found.values()


@needs_cmark
def test_a_dropped_pass_is_in_the_commit_body_and_the_report_beside_the_applied_ones(repo):
    control = make_continual_run(repo)
    (control / "refiner.json").write_text(json.dumps({"1": {"skills": "[1]"}}))
    r = hermit(repo, "step", env=continual_env(control))
    assert r.code == 0, r.err
    tip1 = "refs/heads/hermit/r/step-0001"
    subjects = git(repo, "log", "--format=%s", f"refs/heads/hermit/r/step-0000..{tip1}").splitlines()
    assert len(subjects) >= 2 and not any("no adapter changes" in s for s in subjects), subjects
    body = git(repo, "log", "-1", "--format=%b", tip1)
    assert "Dropped in this step:\n- skills pass dropped: the answer is a JSON list, not an object" in body, body
    passes = _table_after(_html(hermit(repo, "report", "1").out), "Refiner passes")
    row = re.search(r"<tr>\s*<td>skills</td>\s*<td>dropped</td>\s*<td>([^<]*)</td>", passes)
    assert row and "JSON list" in row.group(1), passes
