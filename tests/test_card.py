"""Issue 27, items 3 and 4: `finalize` writes CARD.md beside the adapter (and into the archive and
every converted plugin), made from the run's notes only, so it is the same in a clone after
`git hermit fetch`; learner-written text in it is inert Markdown; `show final` and `report` link it.
"""

from __future__ import annotations

import json
import re
import tarfile

import pytest

from support.card_support import continual_env, demo_copy, make_budget_run, make_continual_run
from support.project import edit_config
from support.cli_helpers import hermit
from conftest import git
from support.review_support import teammate_clone
from support.step_support import change, env_for, make_run, plan

FINAL = "hermit/demo/final"


@pytest.fixture
def demo(demo_run, tmp_path):
    return demo_copy(demo_run, tmp_path)


def _section(card: str, title: str) -> str:
    return card.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_demos_card_says_what_the_adapter_is_and_how_it_was_made(demo):
    card = (demo / "CARD.md").read_text()               # written by the demo's finalize
    final = git(demo, "rev-parse", FINAL).strip()
    seed = git(demo, "rev-parse", "hermit/demo/step-0000").strip()
    assert card.startswith("# Adapter card: demo\n")
    table = card.split("## Evolver parameters")[0]
    assert "| template | ahe@1.0 |" in table and f"`{seed[:12]}`" in table and final in table
    assert "| evolver | ahe (learners: scripted) |" in table and "chosen by final: best\\_ever" in table
    params = _section(card, "Evolver parameters")
    assert "| k | 2 |" in params and "| rollback | auto |" in params and "target\\_pass\\_rate | 0.95" in params
    contents = _section(card, "What it contains")
    assert "skills (3): csv-column-total, debug-failing-test, unit-conversion" in contents
    assert "sub-agents (1): reviewer" in contents and "memory: `MEMORY.md`, handed over at session start" in contents
    learned = _section(card, "What was learned")
    # every change the final commit holds, with the verdict its note gives; the rolled-back one apart
    expected = {}
    for sha in git(demo, "rev-list", "--no-merges", f"hermit/demo/step-0000..{FINAL}").split():
        note, trailers = _note(demo, "verdicts", sha), _trailers(demo, sha)
        if note and "Hermit-Reverts" not in trailers and sha != _reverted(demo):
            expected[trailers["Hermit-Step"], note["change_id"]] = note["verdict"].replace("_", "\\_")
    rows = {(cells[1], cells[2]): cells[5] for line in learned.splitlines()
            if re.match(r"\| \d+ \| chg-", line) for cells in [[c.strip() for c in line.split("|")]]}
    assert rows == expected and len(rows) == 4, (rows, expected)
    assert "Rolled back before this commit: chg-2 of step 1 (HARMFUL)" in learned
    evaluation = _section(card, "Evaluation")
    assert "held-out: not measured" in evaluation and "training split (what chose it, not a claim): pass@1 **1.000**" in evaluation
    spending = _section(card, "Spending")
    for role in ("acting", "debugger", "evolve"):
        assert re.search(rf"\| {role} \| [\d,]+ \| [\d,]+ \| unknown \|", spending), spending
    trust = _section(card, "Settings that affect trust")
    assert "- sandbox: off" in trust and "learner output limits: files ≤ 262,144 bytes" in trust
    warnings = _section(card, "Warnings")
    assert "chosen on the training split" in warnings and "not evaluated on a held-out split" in warnings
    assert "the acting agent is scripted" in warnings


def _note(repo, kind: str, sha: str) -> dict | None:
    text = git(repo, "notes", f"--ref=hermit/{kind}", "show", sha, check=False)
    return json.loads(text) if text.strip() else None


def _trailers(repo, sha: str) -> dict[str, str]:
    text = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", sha)
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def _reverted(repo) -> str:
    """The change commit the demo's one rollback reverted."""
    for sha in git(repo, "rev-list", FINAL).split():
        trailers = _trailers(repo, sha)
        if "Hermit-Reverts" in trailers:
            return git(repo, "rev-parse", trailers["Hermit-Reverts"]).strip()
    raise AssertionError("the demo has no rollback")


def test_the_card_is_not_committed_and_check_still_holds(demo):
    assert "CARD.md" not in git(demo, "ls-tree", "-r", "--name-only", FINAL)
    assert (demo / "CARD.md").is_file() and not (demo / "adapter" / "CARD.md").exists()
    assert git(demo, "status", "--porcelain") == ""          # an output, excluded like .hermit/
    assert "/CARD.md" in (demo / ".git" / "info" / "exclude").read_text().splitlines()
    r = hermit(demo, "check", FINAL, "--static")
    assert r.code == 0, r.out + r.err


def test_the_card_is_the_same_in_a_clone_after_fetch(demo, tmp_path):
    other = teammate_clone(demo, tmp_path)
    shown = hermit(other, "show", "final", "--card")
    assert shown.code == 0, shown.err
    assert shown.out == (demo / "CARD.md").read_text()
    r = hermit(other, "finalize")
    assert r.code == 0, r.err
    assert (other / "CARD.md").read_text() == (demo / "CARD.md").read_text()


def test_a_held_out_evaluation_puts_its_result_and_ci_in_the_card(demo):
    r = hermit(demo, "eval", FINAL, "--baseline", "hermit/demo/step-0000", "--split", "test")
    assert r.code == 0, r.out + r.err
    assert hermit(demo, "finalize").code == 0
    evaluation = _section((demo / "CARD.md").read_text(), "Evaluation")
    line = next(line for line in evaluation.splitlines() if line.startswith("- held-out `test`"))
    assert re.search(r"pass@1 \*\*\d\.\d{3}\*\* \(95% CI \d\.\d{3}–\d\.\d{3}, bootstrap over tasks\)", line), line
    assert re.search(r"against `[0-9a-f]{12}`: [+-]\d+\.\d points \(95% CI [+-]\d+\.\d to [+-]\d+\.\d, paired", line), line
    assert "not evaluated on a held-out split" not in (demo / "CARD.md").read_text()
    spending = _section((demo / "CARD.md").read_text(), "Spending")
    assert "Held-out evaluations (" in spending and re.search(r"\| acting \| [\d,]+ \|", spending.split("Held-out")[1])


def test_finalize_puts_the_card_into_the_archive_and_convert_into_the_plugin(demo, tmp_path):
    archive = tmp_path / "final.tar.gz"
    r = hermit(demo, "finalize", "--archive", str(archive))
    assert r.code == 0 and f"card written to {demo / 'CARD.md'}" in r.out, r.out + r.err
    with tarfile.open(archive) as tar:
        assert tar.extractfile("CARD.md").read().decode() == (demo / "CARD.md").read_text()
        assert tar.extractfile("adapter/MEMORY.md").read() == git(demo, "show", f"{FINAL}:adapter/MEMORY.md").encode()
    for target in ("claude-code", "codex", "pi"):
        out = tmp_path / target
        assert hermit(demo, "convert", "--target", target, "-o", str(out), "--allow-lossy").code == 0
        assert next(out.rglob("CARD.md")).read_text() == (demo / "CARD.md").read_text()


def test_learner_written_text_in_the_card_pings_nobody_and_breaks_no_table(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": "- answer t1: 4\n"}, changes=[change(
        "chg-1", ["MEMORY.md"], fixes=["t1"],
        description="cc @octocat and @org/team | see #12 and GH-3 <img src=x onerror=alert(1)> **bold**")])
    assert hermit(repo, "step", env=env_for(control)).code == 0
    assert hermit(repo, "step", env=env_for(control)).code == 0
    edit_config(repo, evolver={**_evolver(repo), "params": {"k": 1, "final": "last"}})
    assert hermit(repo, "finalize", env=env_for(control)).code == 0
    card = (repo / "CARD.md").read_text()
    row = next(line for line in card.splitlines() if "| chg-1 |" in line)
    assert row.count(" | ") == 4, row                          # five cells: the pipe in the text is escaped
    # mentions and refs only inside code spans (GitHub links neither there), markup escaped
    assert "`@octocat`" in card and "`@org/team`" in card and "`#12`" in card and "`GH-3`" in card
    assert not re.search(r"(?<!`)(@octocat|@org|#12|GH-3)|(?<!\\)<img|(?<!\\)\*\*bold", card), card


def _evolver(repo) -> dict:
    import yaml
    return yaml.safe_load((repo / "hermit.yaml").read_text())["evolver"]


def test_a_streaming_evolvers_card_lists_each_steps_passes(repo):
    control = make_continual_run(repo)
    assert hermit(repo, "step", env=continual_env(control)).code == 0
    r = hermit(repo, "finalize", env=continual_env(control))
    assert r.code == 0, r.err
    card = (repo / "CARD.md").read_text()
    learned = _section(card, "What was learned")
    assert "Each step's passes:" in learned
    for part in ("policy", "subagents", "skills", "memory"):
        assert re.search(rf"\| 1 \| {part} \| (applied|unchanged|dropped) \|", learned), learned
    assert "planner-1" in learned and "check-answer-1" in learned
    assert "| evolver | continual-harness" in card and "sub-agents (2): planner-1, reviewer" in card


def test_a_budget_stop_is_a_warning_on_the_card(repo):
    control = make_budget_run(repo, max_usd=0.07)
    assert hermit(repo, "step", env=env_for(control)).code == 16
    edit_config(repo, evolver={**_evolver(repo), "params": {"k": 2, "final": "last"}})
    assert hermit(repo, "finalize", env=env_for(control)).code == 0
    warnings = _section((repo / "CARD.md").read_text(), "Warnings")
    assert "the budget stopped step 1's evaluation of H\\_0 (3 of 8 rollouts)" in warnings, warnings
    assert "- budget: max\\_usd 0.07" in (repo / "CARD.md").read_text()
    spending = _section((repo / "CARD.md").read_text(), "Settings that affect trust")
    assert "prices: fake-model, scripted" in spending


def test_show_final_and_report_link_the_card(demo):
    shown = hermit(demo, "show", "final")
    assert shown.code == 0, shown.err
    assert shown.out.rstrip().splitlines()[-1] == \
        "card: CARD.md (written by `git hermit finalize`); `git hermit show final --card` prints it"
    data = json.loads(hermit(demo, "show", "final", "--json").out)
    assert data["card"] == {"run": "demo", "path": "CARD.md", "command": "git hermit show final --card"}
    assert data["commits"][-1]["commit"] == git(demo, "rev-parse", FINAL).strip()
    assert "card:" not in hermit(demo, "show", "step-2").out            # not the final commit
    step = int(git(demo, "log", "-1", "--format=%(trailers:key=Hermit-Step,valueonly)", FINAL).strip())
    report = hermit(demo, "report", str(step))
    assert report.code == 0, report.err
    assert "### Adapter card" in report.out and "<details><summary>CARD.md</summary>" in report.out
    assert "#### Adapter card: demo" in report.out
    assert "### Adapter card" not in hermit(demo, "report", "1").out


def test_show_final_before_finalize_says_so(repo):
    make_continual_run(repo)
    r = hermit(repo, "show", "final")
    assert r.code == 4 and "has no final commit yet" in r.err and "git hermit finalize" in r.err
