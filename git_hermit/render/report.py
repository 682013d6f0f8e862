"""A step's pull-request description as GitHub Markdown (and a self-contained HTML page).

Markdown: a headline with split, k and CI; a mermaid ``xychart-beta`` of pass@1 per step with
the same numbers in a table (so nothing depends on the chart); one row per change; rollbacks
with their reasons; held-out results; the ledger. Links are absolute GitHub URLs when origin is
on GitHub (relative links break in PR bodies), else short SHAs (GitHub autolinks those).
Kept under GitHub's 65,536-character body limit, cut with a note when longer. Every text a learner
or a remote wrote (descriptions, file names, task ids, rollback evidence, run and split names) goes
through ``render.escape`` for its context; the HTML page is sanitized after rendering.
"""

from __future__ import annotations

import html
import re
from typing import Any

from git_hermit.core.report import ChangeRow, Score, StepReport
from git_hermit.render.escape import md_cell, md_code, md_fence, md_text, md_url_path, mermaid_label, sanitize_html
from git_hermit.render.card import markdown as card_markdown
from git_hermit.render.views import partial_text

GITHUB_BODY_LIMIT = 65536


_SHA = re.compile(r"[0-9a-f]{7,64}")


def _list(items: tuple[str, ...] | list[str]) -> str:
    return ", ".join(md_text(item) for item in items) if items else "—"


def _commit(report: StepReport, sha: str) -> str:
    if not _SHA.fullmatch(sha):       # a note's "commit" that is no commit id: shown as the text it is
        return md_code(sha)
    if report.repo_slug:
        return f"[`{sha[:7]}`](https://github.com/{report.repo_slug}/commit/{sha})"
    return sha[:7]     # GitHub autolinks a bare 7-character SHA in a pull request body


def _short(sha: str) -> str:
    return sha[:7] if _SHA.fullmatch(sha) else md_cell(md_code(sha))


def _file(report: StepReport, sha: str, path: str) -> str:
    full = path if path.startswith(report.adapter.rstrip("/") + "/") else f"{report.adapter.rstrip('/')}/{path}"
    if report.repo_slug and _SHA.fullmatch(sha):
        return f"[{md_code(path)}](https://github.com/{report.repo_slug}/blob/{sha}/{md_url_path(full)})"
    return md_code(path)


def _ci(score: Score) -> str:
    if score.ci_delta is None:
        return "—"
    return f"{score.ci_delta:+.1f} points [{score.ci_low:+.1f}, {score.ci_high:+.1f}]"


def _measure(score: Score) -> str:
    return (f"pass@1 **{score.pass_at_1:.3f}**{partial_text(score.partial)} on the {md_text(score.split)} split "
            f"(k={score.k}, {score.tasks} tasks)")


def headline(report: StepReport) -> str:
    parts = []
    if report.changes:
        made = f"{len(report.changes)} declared change(s)"
    elif report.levels:
        accepted = [n for n, lv in report.levels.items() if lv.get("status") == "accepted"]
        made = (f"{len(accepted)} accepted level(s) ({', '.join(md_text(n) for n in accepted)})" if accepted
                else "no change (no level accepted)")
    elif report.passes or report.memory_fold:
        applied = [n for n, ps in report.passes.items() if ps.get("status") == "applied"]
        folded = (report.memory_fold or {}).get("status") == "applied"
        made = (f"{len(applied)} applied pass(es)" + (f" ({', '.join(md_text(n) for n in applied)})" if applied else "")
                + (" and a memory fold" if folded else "")) if applied or folded else "no change (no pass applied)"
    else:
        made = "no declared change"
    if report.undeclared:
        made += f", {len(report.undeclared)} commit(s) of undeclared edits"
    if report.rollbacks:
        made += f" and rolled back {len(report.rollbacks)} earlier change(s)"
    parts.append(f"Step {report.step} of run {md_code(report.run)} ({md_text(report.evolver)}) made {made}.")
    ev = report.evaluation
    if ev is not None:
        text = f"Its adapter H_{report.step} ({_commit(report, report.tip)}) scores {_measure(ev)}"
        if ev.ci_delta is not None:
            text += (f", **{ev.ci_delta:+.1f} points** (95% CI [{ev.ci_low:+.1f}, {ev.ci_high:+.1f}], paired "
                     f"bootstrap over tasks) against step {report.step - 1}")
        text += "."
        if ev.best and report.has_best:
            text += " It is the run's best-ever commit so far."
        parts.append(text)
    else:
        parts.append(f"H_{report.step} ({_commit(report, report.tip)}) is not evaluated yet: the next "
                     "`git hermit step` measures it and judges these changes.")
    if report.evaluated_before is not None:
        parts.append(f"The rollouts that led to it measured H_{report.step - 1} at "
                     f"{_measure(report.evaluated_before)}.")
    if ev is not None and ev.split == "train":
        parts.append("These are training-split figures; a held-out `git hermit eval` is the claim.")
    if report.stream is not None:
        st = report.stream
        parts.append(f"Stream pass@1 so far: **{st['pass_at_1']:.3f}** over {st['tasks']} tasks "
                     f"({st['windows']} window(s)).")
    if report.stop:
        parts.append(f"Training stopped here: {md_text(report.stop)}.")
    return " ".join(parts)


def _unpredicted(report: StepReport) -> list[str]:
    """First in the body: what broke that no change said it might."""
    if not report.unpredicted:
        return []
    return ["### Unpredicted regressions", "",
            f"When the next step measured H_{report.step}, {len(report.unpredicted)} task(s) regressed that no "
            f"change of this step predicted as a risk: {_list(report.unpredicted)}.", ""]


def _reasons(items: Any) -> str:
    reasons = [str(r) for r in (items or []) if str(r).strip()]
    return "; ".join(md_text(r) for r in reasons) if reasons else "—"


def _levels(report: StepReport) -> list[str]:
    """evo-harness: each curator level accepted or rejected whole with its reasons; the skills' provenance."""
    if not report.levels:
        return []
    out = ["### Levels", "", "| level | outcome | reasons | files |", "|---|---|---|---|"]
    for name, lv in report.levels.items():
        files = ", ".join(md_code(f) for f in lv.get("files") or []) or "—"
        out.append("| " + " | ".join(md_cell(x) for x in (md_text(name), md_text(str(lv.get("status", "?"))),
                                                             _reasons(lv.get("reasons")), files)) + " |")
    out.append("")
    if report.provenance:
        out += ["Skills and the tasks they were learned from (provenance notes):", "",
                "| skill | level | source tasks | commit |", "|---|---|---|---|"]
        for row in report.provenance:
            out.append("| " + " | ".join(md_cell(x) for x in (md_code(row.skill), md_text(row.level),
                                                                 _list(row.source_task_ids),
                                                                 _commit(report, row.commit))) + " |")
        out.append("")
    return out


def _passes(report: StepReport) -> list[str]:
    """continual-harness: each Refiner pass applied, unchanged or dropped with its reason; the memory fold."""
    if not report.passes and not report.memory_fold:
        return []
    out = ["### Refiner passes", "", "| pass | outcome | reason | changes |", "|---|---|---|---|"]
    rows = dict(report.passes)
    if report.memory_fold:
        rows = {"memory fold": report.memory_fold, **rows}
    for name, ps in rows.items():
        changes = [str(c) for c in ps.get("changes") or []]
        if ps.get("evicted"):
            changes.append("evicted: " + ", ".join(str(e) for e in ps["evicted"]))
        out.append("| " + " | ".join(md_cell(x) for x in (md_text(name), md_text(str(ps.get("status", "?"))),
                                                             md_text(str(ps.get("reason") or "—")),
                                                             "<br>".join(md_text(c) for c in changes) or "—")) + " |")
    if report.skipped:
        out += ["", f"Passes skipped: {md_text(report.skipped)}."]
    out.append("")
    return out


def mermaid_chart(report: StepReport) -> str:
    """An ``xychart-beta`` of pass@1 per step (best-ever marked in its x label)."""
    labels = [f"{s.step} (best)" if s.best else str(s.step) for s in report.curve]
    values = [f"{s.pass_at_1:.3f}" for s in report.curve]
    split = report.curve[-1].split if report.curve else "train"
    return "\n".join([
        "```mermaid",
        "xychart-beta",
        f'    title "pass@1 per step ({mermaid_label(split)} split)"',   # only the split name is not ours
        "    x-axis [" + ", ".join(f'"{label}"' for label in labels) + "]",
        '    y-axis "pass@1" 0 --> 1',
        "    bar [" + ", ".join(values) + "]",
        "    line [" + ", ".join(values) + "]",
        "```",
    ])


def _change_row(report: StepReport, c: ChangeRow) -> str:
    files = ", ".join(_file(report, c.commit, f) for f in c.files) or "—"
    flips = "—"
    if c.verdict is not None:
        flips = (f"fixed: {_list(c.fixed)}; still failing: {_list(c.still_failing)}; "
                 f"risks realised: {_list(c.risks_realised)}")
    rolled = f"yes, by {_commit(report, c.rolled_back_by)}" if c.rolled_back_by else ("no" if c.verdict else "—")
    cells = [md_code(c.id), md_text(c.component), files, md_text(c.description), _list(c.predicted_fixes),
             _list(c.risks), md_text(c.verdict) if c.verdict else "pending (next step)", flips, rolled,
             _commit(report, c.commit)]
    return "| " + " | ".join(md_cell(x) for x in cells) + " |"


def _answer(text: Any, outcome: Any) -> str:
    shown = md_code(str(text)) if text not in (None, "") else "no answer"
    return f"{shown} ({md_text(str(outcome))})" if outcome else shown


def _example(change_id: str, e: dict[str, Any]) -> str:
    verb = "fixed" if e.get("kind") == "fixed" else "regressed"
    line = (f"- {md_code(change_id)} {verb} {md_code(str(e.get('task', '?')))}: before "
            f"{_answer(e.get('before'), e.get('before_outcome'))} → after {_answer(e.get('after'), e.get('after_outcome'))}")
    if e.get("judge"):
        line += f"; judge: {md_text(str(e['judge']))}"
    return line


def _stacked_on(report: StepReport) -> str:
    """The pull request's base in the stack: step N-1's branch (the run's base branch below step 2)."""
    return report.base if report.step <= 1 else f"hermit/{report.run}/step-{report.step - 1:04d}"


def _money(cost: float | None, tokens: int = 1) -> str:
    # no price, or a backend that reports no usage (a `command` agent: 0 tokens, "$0"): unknown
    return "unknown" if cost is None or (not cost and not tokens) else f"${cost:.4f}"


def markdown(report: StepReport, limit: int = GITHUB_BODY_LIMIT) -> str:
    head = [f"## {md_text(report.title)}", "", headline(report), "",
            f"{md_code(report.head)} → {md_code(_stacked_on(report))} · run {md_code(report.run)} · step {report.step}", "",
            *_unpredicted(report), *_levels(report), *_passes(report)]
    measured = ("Each adapter version H_N as the next step's rollouts measured it"
                + (": on the next window of the stream, its online score." if report.streaming else "."))
    curve = ["### pass@1 per step", "", measured, ""]
    if report.curve:
        curve += [mermaid_chart(report), "",
                  "| step | commit | split | k | tasks | pass@1 | vs previous step (95% CI) | |",
                  "|---:|---|---|---:|---:|---:|---|---|"]
        for s in report.curve:
            curve.append(f"| {s.step} | {_commit(report, s.commit)} | {md_cell(md_text(s.split))} | {s.k} | {s.tasks} | "
                         f"{s.pass_at_1:.3f}{partial_text(s.partial)} | {_ci(s)} | {'best-ever' if s.best and report.has_best else ''} |")
    else:
        curve.append("No step of this run is evaluated yet.")
    curve.append("")
    changes = ["### Changes", ""]
    rows: list[str] = []
    if report.changes:
        changes += ["| id | component | files | description | predicted fixes | risks | verdict | flips | "
                    "rolled back | commit |", "|---|---|---|---|---|---|---|---|---|---|"]
        rows = [_change_row(report, c) for c in report.changes]
    elif report.levels or report.passes or report.memory_fold:
        changes.append("This evolver declares no change manifest: its levels or passes above are its changes.")
    else:
        changes.append("This step declared no change.")
    tail: list[str] = [""]
    examples = [(c.id, e) for c in report.changes for e in c.examples]
    if examples:
        # a list: each example its own line on GitHub (a paragraph's lines run together)
        tail += ["Example flips (the first attempt before and after the change, and the judge):", ""]
        tail += [_example(cid, e) for cid, e in examples]
        tail.append("")
    if report.undeclared:
        tail += ["Undeclared edits (committed apart, never merged into a declared change): "
                 + ", ".join(_commit(report, sha) for sha in report.undeclared), ""]
    tail += ["### Rollbacks", ""]
    if report.rollbacks:
        for r in report.rollbacks:
            what = ", ".join(md_code(cid) for cid in r.change_ids)
            inner = ", ".join(x for x in (_commit(report, r.reverts) if what else "", md_text(r.verdict or "")) if x)
            target = what or _commit(report, r.reverts)
            tail.append(f"- {_commit(report, r.commit)} reverts {target}" + (f" ({inner})" if inner else ""))
            if r.reason:
                # the evidence quotes learners' text: a code block, where nothing is Markdown or HTML
                tail += ["", "  <details><summary>evidence</summary>", ""]
                tail += ["  " + line if line else "" for line in md_fence(r.reason, "text")]
                tail += ["", "  </details>", ""]
    else:
        tail.append("None in this step.")
    tail += ["", "### Held-out", ""]
    if report.held_out:
        tail += ["| split | k | tasks | pass@1 | vs baseline (95% CI) |", "|---|---:|---:|---:|---|"]
        for s in report.held_out:
            base = f" vs {_short(s.ci_baseline)}" if s.ci_baseline else ""
            tail.append(f"| {md_cell(md_text(s.split))} | {s.k} | {s.tasks} | {s.pass_at_1:.3f}{partial_text(s.partial)} | {_ci(s)}{base} |")
    else:
        tail.append(f"No held-out result on this commit yet: "
                    f"{md_code(f'git hermit eval {report.head} --baseline hermit/{report.run}/step-0000 --split test')}.")
    tail += ["", "### Ledger", "", f"Tokens and cost of step {report.step}: its rollouts of H_{report.step - 1}, "
             "its judge and its learners.", ""]
    if report.ledger:
        tail += ["| role | input tokens | output tokens | cost (USD) |", "|---|---:|---:|---:|"]
        for row in report.ledger:
            tail.append(f"| {md_cell(md_text(row.role))} | {row.input_tokens:,} | {row.output_tokens:,} | {_money(row.cost_usd, row.input_tokens + row.output_tokens)} |")
        tail.append("")
        tail.append("Cost is \"unknown\" where hermit.yaml sets no price for the model, or the agent reports no usage.")
    else:
        tail.append("No ledger recorded for this step.")
    if report.predictions:
        p = report.predictions
        counts = p.get("counts", {})
        tail += ["", f"Predictions so far in this run: fixes precision {_pct(p.get('fix_precision'))} "
                 f"({counts.get('fixes_confirmed', 0)}/{counts.get('fixes_predicted', 0)}), recall "
                 f"{_pct(p.get('fix_recall'))}; regressions precision {_pct(p.get('regression_precision'))}, "
                 f"recall {_pct(p.get('regression_recall'))}."]
    if report.card is not None:
        tail += ["", "### Adapter card", "", f"This step's tip is the run's final adapter (`hermit/{report.run}/final`). "
                 "`git hermit finalize` writes its card as `CARD.md` beside the adapter; "
                 "`git hermit show final --card` prints it in any clone.", "",
                 "<details><summary>CARD.md</summary>", ""]
        # its headings one level under this section's (escaped learner text never starts a line with #)
        tail += ["###" + line if line.startswith("#") else line for line in card_markdown(report.card).splitlines()]
        tail += ["", "</details>"]
    for note in report.notes:
        tail += ["", f"> warning: {md_text(note)}"]
    tail += ["", f"<sub>Written by `git hermit report` from refs and notes (`refs/notes/hermit/*`); "
             f"`git hermit fetch` then `git hermit show step-{report.step}` shows the records.</sub>", ""]
    text = "\n".join(head + curve + changes + rows + tail)
    if len(text) <= limit:
        return text
    # Too long for a PR body: drop change rows from the end, then say so.
    kept = list(rows)
    while kept:
        kept.pop()
        cut = (f"\n*Cut to fit GitHub's {limit:,}-character limit: {len(rows) - len(kept)} of {len(rows)} "
               f"changes are not shown; `git hermit report {report.step} -o FILE` writes them all.*\n")
        text = "\n".join(head + curve + changes + kept) + "\n" + cut + "\n".join(tail)
        if len(text) <= limit:
            return text
    note = f"\n\n*Cut to fit GitHub's {limit:,}-character limit.*\n"
    return text[: limit - len(note)].rsplit("\n", 1)[0] + note


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


# ------------------------------------------------------------------------------------------ html
def _svg_chart(report: StepReport) -> str:
    """The pass@1 curve as inline SVG (no script, no network)."""
    if not report.curve:
        return ""
    w, h, pad = 560, 240, 40
    n = len(report.curve)
    xs = [pad + (w - 2 * pad) * (i / max(n - 1, 1)) for i in range(n)]
    ys = [h - pad - (h - 2 * pad) * s.pass_at_1 for s in report.curve]
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
    marks = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{6 if s.best else 4}" fill="{"#d4a017" if s.best else "#2f6fdf"}">'
        f"<title>step {s.step}: {s.pass_at_1:.3f}</title></circle>"
        f'<text x="{x:.1f}" y="{h - pad + 16}" text-anchor="middle" font-size="12">{s.step}{" ★" if s.best else ""}</text>'
        for x, y, s in zip(xs, ys, report.curve))
    axis = (f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#888"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#888"/>'
            f'<text x="{pad - 6}" y="{pad + 4}" text-anchor="end" font-size="11">1</text>'
            f'<text x="{pad - 6}" y="{h - pad + 4}" text-anchor="end" font-size="11">0</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
            f'aria-label="pass@1 per step">{axis}<polyline fill="none" stroke="#2f6fdf" stroke-width="2" '
            f'points="{points}"/>{marks}</svg>')


def html_page(report: StepReport) -> str:
    """A self-contained page (inline CSS and SVG) from the Markdown, for readers without GitHub."""
    try:
        import cmarkgfm
        from cmarkgfm.cmark import Options
        # unsafe: the report's own <details> and <sub> stay; whatever else HTML it holds goes in
        # the sanitizer, which runs after rendering (a learner's text was escaped before it)
        body = sanitize_html(cmarkgfm.github_flavored_markdown_to_html(markdown(report),
                                                                       options=Options.CMARK_OPT_UNSAFE))
    except ImportError:   # without the html extra: the Markdown as preformatted text, still complete
        body = f"<pre>{html.escape(markdown(report))}</pre>"
    chart = _svg_chart(report)
    # the mermaid block needs JavaScript; the inline SVG above shows the same numbers
    body = body.replace('<pre lang="mermaid">', '<pre lang="mermaid" hidden>')
    style = ("body{font:15px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem}"
             "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .5rem;"
             "vertical-align:top}code{background:#f3f3f3;padding:0 .2rem}")
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(report.title)}"
            f"</title><style>{style}</style></head><body>\n{chart}\n{body}\n</body></html>\n")


def report_json(report: StepReport) -> dict[str, Any]:
    data = report.to_dict()
    data["title"] = report.title
    return data
