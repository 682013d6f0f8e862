"""CARD.md: the adapter card (core/card.py's facts) as Markdown. Everything a learner or an agent
wrote (change ids and descriptions, skill and sub-agent names, pass and level outcomes) is
escaped: no @mention or #reference pings anyone, no pipe breaks a table, no markup renders.
"""

from __future__ import annotations

from git_hermit.core.card import AdapterCard, RoleSpend, SplitScore, step_branch
from git_hermit.redact import redact
from git_hermit.render.escape import md_cell, md_text

MAX_TEXT = 300


def md(text: object, limit: int = MAX_TEXT) -> str:
    """Untrusted text as one line of inert Markdown, safe in a table cell too (render/escape.py's
    escapers: the same rules as the pull-request body), cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    if len(line) > limit:
        line = line[:limit - 1] + "…"
    return md_cell(md_text(line))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _score(s: SplitScore) -> str:
    text = f"pass@1 **{s.pass_at_1:.3f}**"
    if s.low is not None and s.high is not None:
        text += f" (95% CI {s.low:.3f}–{s.high:.3f}, bootstrap over tasks)"
    text += f", {s.tasks} tasks × k={s.k}"
    if s.partial:
        text += f", partial: {s.partial.get('rollouts')} of {s.partial.get('expected')} rollouts"
    return text


def _money(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:.4f}"


def _spend_table(rows: tuple[RoleSpend, ...]) -> list[str]:
    lines = ["| role | input tokens | output tokens | cost (USD) |", "|---|---:|---:|---:|"]
    lines += [f"| {md(r.role)} | {r.input_tokens:,} | {r.output_tokens:,} | {_money(r.cost_usd)} |" for r in rows]
    if len(rows) > 1:
        costs = [r.cost_usd for r in rows]
        total = sum(c for c in costs if c is not None) if all(c is not None for c in costs) else None
        lines.append(f"| **all** | {sum(r.input_tokens for r in rows):,} | {sum(r.output_tokens for r in rows):,} "
                     f"| {_money(total)} |")
    return lines


def markdown(card: AdapterCard) -> str:
    c = card.contents
    where = f"`hermit/{card.run}/final`" if card.final else (
        f"`{step_branch(card.run, card.step)}`" if card.step is not None else "a commit of the run")
    step = f"step {card.step} of {card.steps}" if card.step is not None else f"the run has {card.steps} steps"
    lines = [f"# Adapter card: {md(card.run)}", "",
             f"The `{md(card.adapter_dir)}/` adapter of run **{md(card.run)}** at `{card.commit[:12]}` ({where}), "
             f"trained by git-hermit.", "",
             "| | |", "|---|---|",
             f"| run | {md(card.run)} |",
             f"| template | {md(card.template)} |",
             f"| seed commit | `{card.seed_commit[:12]}` (`{step_branch(card.run, 0)}`) |",
             f"| final commit | `{card.commit}` ({step}" + (f"; chosen by final: {md(card.final_mode)})" if card.final else ")")
             + " |",
             f"| host | {md(card.host)} |",
             f"| acting agent | {md(card.agent)} |",
             f"| evolver | {md(card.evolver)} (learners: {md(card.learners)}) |",
             "", "## Evolver parameters", "", "| parameter | value |", "|---|---|"]
    lines += [f"| {md(k)} | {md(v)} |" for k, v in card.params]

    lines += ["", "## What it contains", ""]
    if c.context:
        lines.append(f"- context: `{md(c.context)}`")
    if c.skills:
        lines.append(f"- skills ({len(c.skills)}): " + ", ".join(md(s.name) for s in c.skills))
    if c.sub_agents:
        lines.append(f"- sub-agents ({len(c.sub_agents)}): " + ", ".join(md(a.name) for a in c.sub_agents))
    if c.middleware:
        lines.append(f"- hook middleware: `{md(c.middleware)}` ({len(c.hook_events)} host events)")
    if c.memory:
        lines.append(f"- memory: `{md(c.memory)}`" + (", handed over at session start" if c.memory_by_hook else ""))
    if c.scripts:
        lines.append(f"- scripts: " + ", ".join(f"`{md(s)}`" for s in c.scripts))

    lines += ["", "## What was learned", ""]
    if card.kept:
        lines += ["Changes in this adapter, with the verdict the next step's rollouts gave each:", "",
                  "| step | change | component | what it does | verdict |", "|---:|---|---|---|---|"]
        lines += [f"| {k.step} | {md(k.id, 60)} | {md(k.component, 40)} | {md(k.description)} | "
                  f"{md(k.verdict) if k.verdict else 'not judged yet'} |" for k in card.kept]
    if card.rolled_back:
        lines += ["", "Rolled back before this commit: " + "; ".join(
            f"{md(k.id, 60)} of step {k.step} ({md(k.verdict) if k.verdict else 'by hand'})" for k in card.rolled_back)]
    if card.stream:
        lines += ["", f"Each step's {card.stream[0].kind}:", "",
                  "| step | part | outcome | what it changed (or why not) |", "|---:|---|---|---|"]
        lines += [f"| {s.step} | {md(name)} | {md(status)} | {md(what)} |" for s in card.stream
                  for name, status, what in s.parts]
    if not (card.kept or card.rolled_back or card.stream):
        lines.append("No change was recorded: this is the seed adapter.")

    lines += ["", "## Evaluation", ""]
    if card.held_out:
        for s in card.held_out:
            text = f"- held-out `{md(s.split)}`: {_score(s)}"
            if s.delta is not None:
                text += (f"; against `{(s.baseline or '')[:12]}`: {s.delta:+.1f} points "
                         f"(95% CI {_pct(s.delta_low) if s.delta_low is None else f'{s.delta_low:+.1f}'} to "
                         f"{_pct(s.delta_high) if s.delta_high is None else f'{s.delta_high:+.1f}'}, paired bootstrap)")
            lines.append(text)
    else:
        lines.append(f"- held-out: not measured (`git hermit eval {card.commit[:12]} --baseline "
                     f"{step_branch(card.run, 0)} --split test`)")
    if card.training:
        lines.append(f"- training split (what chose it, not a claim): {_score(card.training)}")
    if card.seed_training:
        lines.append(f"- the seed on the training split: {_score(card.seed_training)}")
    if card.stop:
        lines.append(f"- training stopped: {md(card.stop)}")

    lines += ["", "## Spending", ""]
    if card.spending:
        lines += ["Training (every step's ledger):", "", *_spend_table(card.spending)]
    else:
        lines.append("Nothing was spent on training yet.")
    if card.eval_spending:
        lines += ["", "Held-out evaluations (every commit of the run measured on a held-out split):", "",
                  *_spend_table(card.eval_spending)]

    lines += ["", "## Settings that affect trust", ""]
    lines += [f"- {name}: {md(value)}" for name, value in card.settings]

    lines += ["", "## Warnings", ""]
    lines += [f"- {md(w, 1000)}" for w in card.warnings] if card.warnings else ["- none"]
    lines += ["", "---", f"Written by git-hermit {card.version} from the run's refs and notes; "
              f"`git hermit show {card.commit[:12]} --card` prints it again in any clone that fetched the run."]
    return redact("\n".join(lines) + "\n")      # it ships with the plugin: no secret from a config value
