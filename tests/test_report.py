"""`git hermit report`: the pull-request description of a step, rendered the way GitHub does.

cmark-gfm (GitHub's fork of cmark) must show the change table; the mermaid block must render to
an SVG in headless Chromium with mermaid.js; links are absolute for a GitHub origin."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.review_support import NODE_TOOLS, copy_demo

MERMAID_JS = NODE_TOOLS / "node" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"


@pytest.fixture
def demo(demo_run, tmp_path):
    return copy_demo(demo_run, tmp_path / "demo")


def _report(repo: Path, *args: str) -> str:
    result = hermit(repo, "report", *args)
    assert result.code == 0, result.err
    return result.out


def test_markdown_report_of_step_2_has_headline_chart_table_changes_rollbacks_ledger(demo):
    text = _report(demo, "2")
    head = text.split("\n\n")[1]
    assert "pass@1 **0.792** on the train split (k=2, 12 tasks)" in head
    assert "95% CI [" in head and "paired bootstrap" in head
    assert "```mermaid\nxychart-beta" in text
    assert '"2 (best)"' in text                    # best-ever as of step 2 is marked
    assert "| 2 | 8657058"[:6] in text and "| best-ever |" in text
    assert "| `chg-1` | skill |" in text and "EFFECTIVE" in text
    assert "reverts" in text and "HARMFUL" in text
    assert "| acting |" in text and "unknown" in text
    assert "### Held-out" in text and "git hermit eval hermit/demo/step-0002" in text
    assert len(text) < 65536


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm is not installed (apt-get install cmark-gfm)")
def test_cmark_gfm_renders_the_change_and_score_tables(demo):
    text = _report(demo, "2")
    rendered = subprocess.run(["cmark-gfm", "-e", "table", "-e", "autolink", "-e", "strikethrough", "-e", "tagfilter"],
                              input=text, capture_output=True, text=True, check=True).stdout
    tables = re.findall(r"<table>.*?</table>", rendered, re.S)
    assert len(tables) >= 3                       # pass@1, changes, ledger
    change_table = next(t for t in tables if "<th>verdict</th>" in t)
    assert "<td><code>chg-1</code></td>" in change_table
    assert "unit-conversion" in change_table and "EFFECTIVE" in change_table
    assert '<pre lang="mermaid"><code>xychart-beta' in rendered or 'class="language-mermaid"' in rendered


def _mermaid_page(block: str, out: Path) -> Path:
    page = out / "chart.html"
    page.write_text(f"""<!doctype html><html><body><div id="out">pending</div>
<script src="{MERMAID_JS.as_uri()}"></script>
<script>
mermaid.initialize({{startOnLoad: false}});
const text = {block!r};
mermaid.render('c1', text)
  .then(r => {{ document.getElementById('out').textContent = 'RENDERED ' + r.diagramType + ' ' +
                (r.svg.includes('<svg') ? 'svg' : 'nosvg'); }})
  .catch(e => {{ document.getElementById('out').textContent = 'ERROR ' + e; }});
</script></body></html>""")
    return page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _render_mermaid(block: str, tmp_path: Path) -> str:
    page = _mermaid_page(block, tmp_path)
    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                           f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=15000", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<div id="out">([^<]*)</div>', proc.stdout)
    assert found, proc.stderr[-2000:]
    return html.unescape(found.group(1))


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")
@pytest.mark.skipif(not MERMAID_JS.is_file(), reason=f"mermaid.js is not installed ({MERMAID_JS}; scripts/install-review-tools.sh)")
def test_mermaid_chart_renders_to_svg_in_headless_chromium(demo, tmp_path):
    text = _report(demo, "4")
    block = re.search(r"```mermaid\n(.*?)```", text, re.S).group(1)
    assert _render_mermaid(block, tmp_path) == "RENDERED xychart svg"
    # the check can fail: a broken chart is reported as a parse error
    assert _render_mermaid(block.replace("y-axis", "y-axis-broken"), tmp_path).startswith("ERROR")


def test_github_origin_gives_absolute_links(demo):
    git(demo, "remote", "add", "origin", "https://github.com/acme/widgets.git")
    text = _report(demo, "2")
    tip = git(demo, "rev-parse", "hermit/demo/step-0002").strip()
    assert f"https://github.com/acme/widgets/commit/{tip}" in text
    assert f"https://github.com/acme/widgets/blob/{tip}/adapter/.agents/skills/unit-conversion/SKILL.md" in text
    assert not re.search(r"\]\((?!https://)", text)          # no relative link (they 404 in PR bodies)


def test_without_github_origin_links_are_short_shas(demo):
    text = _report(demo, "2")
    assert "](" not in text
    assert git(demo, "rev-parse", "--short=7", "hermit/demo/step-0002").strip() in text


def test_a_body_over_the_limit_is_cut_with_a_note(demo):
    from git_hermit.core.report import ChangeRow, build_report
    from git_hermit.core.runs import open_run
    from git_hermit.gitio import Repo
    from git_hermit.render.report import markdown
    from dataclasses import replace
    report = build_report(open_run(Repo.discover(demo), "demo"), "2")
    one = report.changes[0]
    many = tuple(replace(one, id=f"chg-{i}", description="x " * 400) for i in range(200))
    text = markdown(replace(report, changes=many))
    assert len(text) <= 65536 and "Cut to fit GitHub's 65,536-character limit" in text
    assert "### Ledger" in text                   # rows are dropped, not the sections after them
    assert len(markdown(replace(report, changes=many), limit=2000)) <= 2000


def test_html_report_is_self_contained_with_the_chart(demo, tmp_path):
    # the tables come from cmark-gfm's Python binding (the `html` extra); without it the report
    # is the Markdown as preformatted text, which has no <table>
    pytest.importorskip("cmarkgfm", reason="the html extra (cmarkgfm) is not installed")
    out = tmp_path / "r.html"
    result = hermit(demo, "report", "2", "--format", "html", "-o", str(out))
    assert result.code == 0, result.err
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "<table>" in page
    assert "<script" not in page and "src=\"http" not in page


def test_json_report_has_the_same_numbers(demo):
    import json
    data = json.loads(_report(demo, "2", "--format", "json"))
    assert data["step"] == 2 and data["evaluation"]["pass_at_1"] == pytest.approx(0.7916, abs=1e-3)
    assert [c["id"] for c in data["changes"]] == ["chg-1"] and data["head"] == "hermit/demo/step-0002"


def test_open_without_gh_prints_the_exact_command(demo, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("git"), bin_dir / "git")
    result = hermit(demo, "report", "2", "--open", env={"PATH": str(bin_dir)})
    assert result.code == 0, result.err
    command = result.out.strip()
    assert command.startswith("gh pr create --base hermit/demo/step-0001 --head hermit/demo/step-0002 --title ")
    assert "--body-file" in command and "gh" in result.err


def test_chart_png_with_the_plot_extra(demo, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    out = tmp_path / "chart.png"
    result = hermit(demo, "report", "4", "--chart", str(out), "-o", str(tmp_path / "r.md"))
    assert result.code == 0, result.err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_a_step_not_evaluated_yet_says_so(repo_with_history):
    assert hermit(repo_with_history, "init", "--run", "r").code == 0
    text = _report(repo_with_history)
    assert "is not evaluated yet: the next `git hermit step` measures it" in text
    assert "No step of this run is evaluated yet." in text and "```mermaid" not in text
    assert "`hermit/r/step-0000` → `main`" in text


def test_report_of_an_unknown_step_is_one_error(demo):
    result = hermit(demo, "report", "9")
    assert result.code == 4 and result.err.startswith("error: run 'demo' has no step 9") and "hint:" in result.err


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm is not installed (apt-get install cmark-gfm)")
def test_example_flips_and_evidence_render_as_separate_lines_on_github(demo):
    text = _report(demo, "2")
    rendered = subprocess.run(["cmark-gfm", "--unsafe", "-e", "table", "-e", "autolink", "-e", "tagfilter"],
                              input=text, capture_output=True, text=True, check=True).stdout
    flips = re.search(r"Example flips.*?<ul>(.*?)</ul>", rendered, re.S).group(1)
    items = re.findall(r"<li>(.*?)</li>", flips, re.S)
    assert len(items) == 2 and all("<code>chg-1</code> fixed <code>units-" in i and " → after " in i for i in items)
    assert all("(fail)" in i.split("→")[0] and "(pass)" in i.split("→")[1] for i in items), items
    evidence = re.search(r"<summary>evidence</summary>\s*<pre><code[^>]*>(.*?)</code></pre>", rendered, re.S).group(1)
    assert len(evidence.strip().splitlines()) >= 5          # each evidence line its own line, not one paragraph


def test_a_command_agents_cost_is_unknown_not_zero():
    from git_hermit.render.report import _money
    assert _money(0.0, 0) == "unknown" and _money(None, 10) == "unknown" and _money(0.5, 10) == "$0.5000"
