"""A learner's text is untrusted wherever it is shown (issue 23, items 2, 5, 6).

A run whose scripted Evolve Agent writes a hostile change description (terminal escapes, script
tags, a Markdown heading, table and mermaid block, mentions, an unclosed HTML comment) and a file
named with a ``|``; its second change is judged HARMFUL and rolled back, so the rollback evidence
quotes it. Then: `log`, `show` and `report` print no control character raw, and `--json` gives the
text exactly (item 5); the pull-request body renders in cmark-gfm (GitHub's fork, with its tagfilter)
with none of the learner's syntax and every mention inert (item 6); the HTML report, and the
Markdown rendered by cmark-gfm --unsafe, run no script in headless Chromium (item 2).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git
from support.step_support import change, env_for, make_run, memory_lines, plan

from support import hostile

PIPE_FILE = "scripts/a|b.py"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """Three steps: chg-1 (hostile description, a file named with '|') fixes t1 and t2; chg-2
    (hostile too) regresses t2, is judged HARMFUL and rolled back at step 3."""
    from support.review_support import isolated_env
    root = tmp_path_factory.mktemp("hostile")
    env = isolated_env(root / "home")
    with pytest.MonkeyPatch.context() as patch:      # the run is built once, under its own identity
        for key, value in env.items():
            patch.setenv(key, value)
        repo = root / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        control = make_run(repo, {"t1": "4", "t2": "7", "t3": "9"}, allow_early_stop=False)
        plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4", "t2": "7"})}, write={PIPE_FILE: "print(1)\n"},
             changes=[change("chg-1", ["MEMORY.md", PIPE_FILE], fixes=["t1", "t2"], risks=["t3"],
                             description=hostile.DESCRIPTION, component="memory " + hostile.HTML)])
        plan(control, 2, append={"MEMORY.md": memory_lines({"t2": "8"})},
             changes=[change("chg-2", ["MEMORY.md"], fixes=["t3"], risks=["t2"], description=hostile.DESCRIPTION)])
        plan(control, 3, append={"MEMORY.md": memory_lines({"t3": "9"})}, changes=[change("chg-3", ["MEMORY.md"])])
        for _ in range(3):
            r = hermit(repo, "step", env=env_for(control), timeout=300)
            assert r.code == 0, r.out + r.err
        rollback = git(repo, "log", "-1", "--format=%H", "--grep=Hermit-Reverts", "hermit/r/step-0003").strip()
    assert rollback
    return repo, env, rollback


def _run(repo: Path, env: dict, *args: str) -> str:
    r = hermit(repo, *args, env=env)
    assert r.code == 0, r.err
    return r.out + r.err


# ------------------------------------------------------------------------------ item 5: terminal
def test_log_show_and_report_print_no_control_character_raw(hostile_run):
    repo, env, rollback = hostile_run
    for args in (("log",), ("show", "step-1"), ("show", "step-2"), ("show", rollback), ("report", "2"),
                 ("report", "3")):
        text = _run(repo, env, *args)
        raw = hostile.RAW_CONTROL.findall(text)
        assert not raw, (args, sorted(set(raw)))
        if args[-1] != rollback:             # (show prints a commit's subject, not its body)
            assert "\\x1b" in text, args                                 # shown, not dropped
    log = _run(repo, env, "log")
    line = next(line for line in log.splitlines() if " chg-1: " in line)
    assert "\\x1b]0;owned-title\\x07" in line
    # a newline in a field cannot fake a line of the log
    assert not any(line.startswith("## Injected") for line in _run(repo, env, "show", "step-1").splitlines())


def test_json_output_keeps_the_text_exactly(hostile_run):
    repo, env, _ = hostile_run
    data = json.loads(_run(repo, env, "log", "--json"))
    [chg1] = [c for c in data["steps"][1]["changes"] if c["id"] == "chg-1"]
    assert chg1["description"] == hostile.DESCRIPTION
    assert PIPE_FILE in chg1["files"]
    shown = json.loads(_run(repo, env, "show", "step-1", "--json"))
    assert shown["commits"][-1]["manifest"]["changes"][0]["description"] == hostile.DESCRIPTION


# ------------------------------------------------------------------------------ item 6: Markdown
needs_cmark = pytest.mark.skipif(shutil.which("cmark-gfm") is None,
                                 reason="cmark-gfm is not installed (apt-get install cmark-gfm)")


def _cmark(text: str) -> str:
    """GitHub's renderer before its sanitizer: raw HTML on, only the tagfilter in the way."""
    return subprocess.run(["cmark-gfm", "--unsafe", "-e", "table", "-e", "autolink", "-e", "strikethrough",
                           "-e", "tagfilter"], input=text, capture_output=True, text=True, check=True).stdout


def _outside_code(rendered: str) -> str:
    return re.sub(r"<code>.*?</code>|<pre.*?</pre>", "", rendered, flags=re.S)


@needs_cmark
@pytest.mark.parametrize("step", ["1", "2", "3"])
def test_the_pull_request_body_renders_none_of_the_learners_markdown(hostile_run, step):
    repo, env, _ = hostile_run
    body = _run(repo, env, "report", step)
    rendered = _cmark(body)
    prose = _outside_code(rendered)
    assert "<h2>Injected heading</h2>" not in rendered
    assert "<th>forged</th>" not in rendered
    assert len(re.findall(r'lang="mermaid"|language-mermaid', rendered)) == 1     # only the report's own chart
    for tag in ("<img", "<svg", "<details open", "<input", "<iframe", "<!-- the rest"):
        assert tag not in rendered, tag
    # the sections after the quoted text are all there (no comment swallowed them)
    for heading in ("<h3>Changes</h3>", "<h3>Rollbacks</h3>", "<h3>Held-out</h3>", "<h3>Ledger</h3>"):
        assert heading in rendered, heading
    assert rendered.index("<h3>Ledger</h3>") > rendered.index("<h3>Rollbacks</h3>")
    # mentions and references are inert: only inside code (GitHub links neither there)
    for ref in ("@octocat", "#1", "octo/repo#2"):
        assert ref not in prose.replace("&quot;", ""), ref
        assert ref in rendered
    # every row of the changes table has its 10 cells: the '|' in the file name shifted nothing
    table = next(t for t in re.findall(r"<table>.*?</table>", rendered, re.S) if "<th>verdict</th>" in t)
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
    assert rows and all(len(re.findall(r"<td[ >]", row)) == 10 for row in rows)
    if step == "1":
        assert "<code>scripts/a|b.py</code>" in table


@needs_cmark
def test_the_rollback_evidence_is_quoted_as_code(hostile_run):
    repo, env, _ = hostile_run
    rendered = _cmark(_run(repo, env, "report", "3"))
    evidence = re.search(r"<summary>evidence</summary>(.*?)</details>", rendered, re.S)
    assert evidence, rendered[-3000:]
    block = re.search(r"<pre[^>]*><code[^>]*>(.*?)</code></pre>", evidence.group(1), re.S)
    assert block and "Injected heading" in html.unescape(block.group(1))


# ------------------------------------------------------------------------------ item 2: HTML
needs_chromium = pytest.mark.skipif(hostile.chromium() is None,
                                    reason="Chromium is not installed (apt-get install chromium)")


@needs_chromium
def test_the_control_page_runs_every_script(tmp_path):
    """The check can fail: the same elements in a page of their own all run their script."""
    page = tmp_path / "control.html"
    page.write_text(f"<!doctype html><html><body>{hostile.HTML}</body></html>")
    assert hostile.scripts_that_ran(page, tmp_path) == set(hostile.SCRIPTS)


@needs_chromium
@pytest.mark.parametrize("step", ["1", "3"])
def test_the_html_report_runs_no_script(hostile_run, tmp_path, step):
    pytest.importorskip("nh3", reason="the html extra is not installed")
    pytest.importorskip("cmarkgfm", reason="the html extra is not installed")
    repo, env, _ = hostile_run
    page = tmp_path / f"report-{step}.html"
    _run(repo, env, "report", step, "--format", "html", "-o", str(page))
    text = page.read_text()
    assert "Injected heading" in text                         # the learner's text is shown, as text
    assert hostile.scripts_that_ran(page, tmp_path) == set()
    for tag in ("<img", "<svg onload", "<input", "<iframe", "<script"):
        assert tag not in text, tag
    assert not re.search(r"<[a-z][^>]*\son[a-z]+=", text)        # no element carries an event handler


@needs_chromium
@needs_cmark
def test_the_markdown_rendered_unsafe_by_cmark_gfm_runs_no_script(hostile_run, tmp_path):
    """GitHub's renderer without its sanitizer: raw HTML on, only the tagfilter between the learner's
    text and the browser. Nothing the learner wrote is HTML, so nothing runs."""
    repo, env, _ = hostile_run
    for step in ("1", "3"):
        page = tmp_path / f"cmark-{step}.html"
        page.write_text("<!doctype html><html><body>" + _cmark(_run(repo, env, "report", step)) + "</body></html>")
        assert hostile.scripts_that_ran(page, tmp_path) == set(), step


# ------------------------------------------------------------------------------ the escapers
@needs_cmark
def test_each_markdown_escaper_shows_the_text_as_it_is():
    from git_hermit.render.escape import md_cell, md_code, md_comment, md_fence, md_text, mermaid_label, terminal
    # (a URL is left a link, as GitHub makes one of any URL, so the sample has none)
    samples = [hostile.DESCRIPTION.replace("https://", ""), "a | b \\| c", "`tick` ``two``", "*em* _u_ [l](x) ![i](y) &amp; ~~s~~ $x$",
               "# not a heading", "--> --!> <!-- x", "back\\slash at the end\\"]
    for text in samples:
        flat = terminal(" ".join(text.split()))
        shown = _cmark(md_text(text))
        assert html.unescape(re.sub(r"</?(p|code)>", "", shown)).strip() == flat, text
        cell = _cmark(f"| h |\n|---|\n| {md_cell(md_text(text))} |\n| {md_cell(md_code(text))} |\n")
        assert len(re.findall(r"<td>", cell)) == 2, (text, cell)
        assert html.unescape(re.search(r"<td><code>(.*?)</code></td>", cell, re.S).group(1)) == flat, text
        block = _cmark("\n".join(md_fence(text)) + "\n")
        assert html.unescape(re.search(r"<code>(.*?)</code>", block, re.S).group(1)).rstrip("\n") == \
            terminal(text, newlines=True).replace("\r\n", "\n"), text
        after = _cmark(f"<!-- {md_comment(text)} -->\n\nvisible after\n")
        assert "visible after" in after, text
        label = mermaid_label(text)
        assert not re.search(r'["\n`\[\]{}<>]', label), label


def test_the_cli_prints_text_only_through_the_escaping_echo():
    """Every `click.echo` of cli.py is in the functions that escape (text) or encode (JSON) what they
    write, so a new command's output cannot skip render.escape.terminal."""
    import ast
    import git_hermit.cli as cli_module
    tree = ast.parse(Path(cli_module.__file__).read_text())
    allowed = {"_echo", "_echo_json", "_fail", "trace"}     # trace: its --json lines
    found = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "echo"
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "click"):
                    found.append(function.name)
    assert found and set(found) <= allowed, sorted(set(found) - allowed)


def test_an_error_stays_one_line_and_each_detail_one_line_whatever_they_quote(repo, capsys):
    """A revision (or a learner's file name) holding a newline cannot start a line of its own on
    stderr, such as a forged `hint:`; an error's listed details each keep exactly one line."""
    r = hermit(repo, "show", "nosuch\nhint: run rm -rf ~")
    assert r.code != 0
    assert [line.split(":")[0] for line in r.err.splitlines()] in (["error"], ["error", "hint"]), r.err
    assert not any(line.startswith("hint: run rm") for line in r.err.splitlines()), r.err
    from git_hermit import cli
    with pytest.raises(SystemExit):
        cli._fail("a plugin would drop 2 component(s):", "pass --allow-lossy", 22, as_json=False,
                  details=("memory: notes.md\nhint: forged", "skills: \x1b]52;c;Zm9v\x07"))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and lines[0].startswith("error: ") and lines[3] == "hint: pass --allow-lossy", lines
    assert lines[1].startswith("  memory: notes.md") and "\x1b" not in lines[2], lines
