"""The Evolve Agent's inputs: the per-step evolution query (spec/ahe.md §8.4, with §4.5's
attribution table; upstream evolve.py:2563-2919 build_evolution_query) and its system prompt
START.md (§8.3, adapted to an adapter). Paths point into the learner workspace's ``state/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any, Literal

from git_hermit.evolvers.ahe.analysis import StepDiff, StepStats
from git_hermit.evolvers.ahe.attribution import SUGGESTED_ACTIONS, ChangeEvaluation
from git_hermit.evolvers.ahe.records import diff_bucket_lines, pct, regression_lines
from git_hermit.evolvers.base import reviewer_notes
from git_hermit.model.records import ReviewEntry

PROMPTS_DIR = Path(__file__).parent / "prompts"
STATE = "state"
UNSTABLE_SHOWN, POSSIBLY_UNSTABLE_SHOWN, INFRA_NAMES_SHOWN, ATTRIBUTION_TASKS_SHOWN = 20, 15, 10, 5


def step_dir(step: int) -> str:
    return f"step_{step:04d}"


def render_start_prompt(iteration: int, *, date: str = "", text: str | None = None) -> str:
    """START.md with ``${iteration}`` and ``${date}`` filled (``text`` overrides the file)."""
    template = text if text is not None else (PROMPTS_DIR / "START.md").read_text(encoding="utf-8")
    return Template(template).safe_substitute(iteration=iteration, date=date)


def debugger_rules() -> str:
    """DEBUGGER.md: the Agent Debugger session's standing rules."""
    return (PROMPTS_DIR / "DEBUGGER.md").read_text(encoding="utf-8")


def _overview(step: int, stats: StepStats, d: StepDiff | None) -> list[str]:
    lines = ["## 1. Current Iteration Overview", "",
             f"- Results: `{STATE}/stats/{step_dir(step)}.json`"]
    if stats.k > 1:
        lines += [f"- Each task runs {stats.k} times ({stats.k} rollouts per task)",
                  f"- **Pass rate (pass@1)**: {pct(stats.pass_rate)}",
                  "- **Pass@k**: " + " | ".join(f"pass@{i}={pct(v)}" for i, v in stats.pass_at.items()),
                  f"- Tasks: {stats.n_pass} all-pass | {stats.n_fail} has-failure | "
                  f"{stats.n_exception} exception"]
        if stats.trial_stats is not None:
            t = stats.trial_stats
            lines.append(f"- Trials: {t.n_pass}/{t.n_total} passed (trial pass rate "
                         f"{pct(t.trial_pass_rate)}); {t.n_fail} failed, {t.n_exception} exception")
    else:
        lines += [f"- **Pass rate**: {pct(stats.pass_rate)} ({stats.n_pass}/{stats.n_total})",
                  f"- Pass: {stats.n_pass} | Fail: {stats.n_fail} | Exception: {stats.n_exception}"]
    if stats.exception_types:
        lines.append("- Exception types: " + ", ".join(
            f"{name}: {n}" for name, n in sorted(stats.exception_types.items())))
    if stats.timeout_tasks:
        lines.append(f"- ⏱️ {len(stats.timeout_tasks)} tasks TIMED OUT (timeouts count as failures)")
    # upstream subtracts len(timeout_tasks) from n_exception, wrong when a timeout task is a
    # task-level fail; we count the exception tasks that did not time out
    pure_infra = sum(1 for t in stats.tasks_with("exception") if t not in stats.timeout_tasks)
    if pure_infra:
        lines.append(f"- Warning: {pure_infra} tasks had infra errors (NOT agent capability issues)")
    if stats.tokens_per_trial is not None:
        lines.append(f"- Tokens per trial: {stats.tokens_per_trial:,.0f}")
    if d is not None:
        lines += regression_lines(d)
    return lines


def _classification(stats: StepStats) -> list[str]:
    k = stats.k
    passed, failed = stats.tasks_with("pass"), stats.tasks_with("fail")
    lines = ["## 2. Task Classification Details", "",
             f"### ✅ Passed ({len(passed)})" + (f" — all {k} rollouts passed" if k > 1 else ""),
             ", ".join(passed) or "(none)", "",
             f"### ❌ Failed ({len(failed)}) - Primary optimization target"]
    if k > 1 and stats.per_task_rollouts:
        partial = [t for t in failed if stats.per_task_rollouts[t].n_pass > 0]
        zero = [t for t in failed if stats.per_task_rollouts[t].n_pass == 0]
        lines += ["", f"#### Partial pass ({len(partial)}) — high-priority targets"]
        if partial:
            lines.append("Action required: for each, read a passing and a failing rollout of the "
                         "same task and find where they diverge; make the winning strategy the default.")
        for task in partial:
            r = stats.per_task_rollouts[task]
            estimates = ", ".join(f"pass@{i}={v * 100:.0f}%"
                                  for i, v in stats.per_task_pass_at.get(task, {}).items() if v == v)
            lines.append(f"- {task}: {r.n_pass}/{r.total} passed ({estimates})")
        lines += ["", f"#### Zero pass ({len(zero)}) — failed all {k} rollouts", ", ".join(zero) or "(none)"]
    else:
        lines.append(", ".join(failed) or "(none)")
    exceptions = stats.tasks_with("exception")
    timed_out = [t for t in exceptions if t in stats.timeout_tasks]
    infra = [t for t in exceptions if t not in stats.timeout_tasks]
    if timed_out:
        lines += ["", f"### ⏱️ Timed Out ({len(timed_out)}) - count as failures; analyse them for efficiency",
                  ", ".join(timed_out)]
    if infra:
        lines += ["", f"### ⚠️ Infrastructure Exceptions ({len(infra)}, not agent issues, please ignore)"]
        by_type: dict[str, list[str]] = {}
        for task in infra:
            by_type.setdefault(stats.task_exception_types.get(task, "Unknown"), []).append(task)
        for name, tasks in sorted(by_type.items()):
            more = f", ... (+{len(tasks) - INFRA_NAMES_SHOWN} more)" if len(tasks) > INFRA_NAMES_SHOWN else ""
            lines.append(f"- {name} ({len(tasks)}): {', '.join(tasks[:INFRA_NAMES_SHOWN])}{more}")
    return lines


def _cross_step(step: int, stats: StepStats, d: StepDiff, prev_pass_rate: float | None) -> list[str]:
    lines = [f"## 3. Detailed Cross-Iteration Analysis (iteration {step - 1} -> {step})", ""]
    lines += diff_bucket_lines(d, stats.k) or ["- (no task changed bucket)"]
    lines += ["", f"**Net change**: {d.net:+d} (flipped {len(d.flipped)}, regressed {len(d.regressed)})"]
    if prev_pass_rate is not None:
        lines.append(f"**Pass rate change**: {pct(prev_pass_rate)} -> {pct(stats.pass_rate)} "
                     f"({(stats.pass_rate - prev_pass_rate) * 100:+.1f}pp)")
    if d.net < 0:
        lines.append("⚠️ **Net regression**: more tasks regressed than flipped. Diagnose the "
                     "regressions before adding new changes.")
    return lines


def _debugger(step: int, overview_body: str) -> list[str]:
    analysis = f"{STATE}/analysis/{step_dir(step)}"
    return ["## 4. Agent Debugger Analysis (LLM-powered root cause analysis)", "", overview_body.strip(), "",
            f"For a task's full report read `{analysis}/detail/{{task_name}}.md`; it lists the paths "
            "of the rollouts' trajectories, their one-file-per-step copies and hook audits, for "
            "when you need the raw trace."]


def _trends(k: int, scores: Sequence[Mapping[str, Any]]) -> list[str]:
    if k > 1:
        lines = ["## 5. Historical Trends", ""]
        for i in range(1, k + 1):
            points = [f"iter{e['iteration']}: {pct(e['pass_at'][str(i)])}"
                      for e in scores if str(i) in e.get("pass_at", {})]
            if points:
                lines.append(f"- pass@{i}: " + " -> ".join(points))
        return lines
    return ["## 5. Historical Trends (Pass Rate)", "",
            " -> ".join(f"iter{e['iteration']}: {pct(e['pass_rate'])}" for e in scores)]


def _best_ever(step: int, best: Mapping[str, Any]) -> list[str]:
    lines = ["## 6. Best Ever", "",
             f"- Best pass@1: {pct(best['pass_rate'])} at iteration {best['iteration']}"]
    if best["iteration"] != step and best.get("commit"):
        lines.append(f"- The adapter its rollouts ran: commit `{best['commit']}`")
    return lines


def _stability(buckets: Mapping[str, Sequence[str]]) -> list[str]:
    unstable, possibly = list(buckets.get("unstable", ())), list(buckets.get("possibly_unstable", ()))
    lines = ["## 7. Task Stability Analysis (Across All Historical Iterations)", ""]
    if unstable:
        lines.append(f"- Unstable ({len(unstable)}; pass and fail across iterations — do NOT optimize "
                     f"for these): {', '.join(unstable[:UNSTABLE_SHOWN])}")
    if possibly:
        lines.append(f"- Possibly unstable ({len(possibly)}): {', '.join(possibly[:POSSIBLY_UNSTABLE_SHOWN])}")
    lines += [f"- Stable pass: {len(buckets.get('stable_pass', ()))}",
              f"- Stable fail: {len(buckets.get('stable_fail', ()))} (the primary targets)",
              f"- Infra only: {len(buckets.get('infra_only', ()))} (ignore)"]
    return lines


def _attribution(evaluation: ChangeEvaluation, rollback: str, rolled_back: Sequence[str],
                 rollback_undone: Mapping[str, str], before: Mapping[str, str] | None = None) -> list[str]:
    lines = ["## 8. Previous Iteration Change Attribution Report (Auto-Generated)", "",
             "Use this report for your rollback decisions: each change of the previous iteration's "
             "manifest, judged by the tasks that flipped and regressed. Prioritise HARMFUL and "
             "INEFFECTIVE changes for rollback.", "",
             "| Change | Predicted Fixes | Actually Fixed | Regressions | Verdict | Suggested Action |",
             "|---|---|---|---|---|---|"]
    for c, declared in zip(evaluation.changes, evaluation.declared, strict=True):
        fixed = ", ".join(c.actually_fixed[:ATTRIBUTION_TASKS_SHOWN]) or "-"
        risks = ", ".join(c.risk_realized[:ATTRIBUTION_TASKS_SHOWN]) or "-"
        description = declared.description[:40].replace("|", "/").replace("\n", " ")
        lines.append(f"| {c.change_id}: {description} | {c.hit_rate} | {fixed} | {risks} | "
                     f"{c.verdict} | {SUGGESTED_ACTIONS[c.verdict]} |")
    for c in evaluation.changes:
        if c.still_failed:
            lines.append(f"- {c.change_id} predicted but not fixed: {list(c.still_failed)}")
    if evaluation.unattributed_regressions:
        lines.append(f"- ⚠️ Unattributed regressions (no change named them): "
                     f"{list(evaluation.unattributed_regressions)}. They may come from interactions "
                     "between changes.")
    lines.append("")
    if rollback == "auto":
        if rolled_back:
            lines.append("Rollback (`rollback: auto`): these changes were ALREADY rolled back "
                         "automatically, their files restored to before the change: "
                         + ", ".join(rolled_back) + ". Do not roll them back again; if you "
                         "retry their goal, approach it from a different component.")
        else:
            lines.append("Rollback (`rollback: auto`): no change was rolled back automatically.")
        for change_id, reason in rollback_undone.items():
            lines.append(f"- The automatic rollback of {change_id} was undone because check_spec "
                         f"then failed: {reason}. Decide yourself what to do with it.")
        lines.append("Any other rollback is yours to make: restore the change's files (listed in "
                     "the history) to their content before it, and declare it as a change of "
                     "type `rollback`.")
    else:
        lines.append("Rollback (`rollback: agent`): nothing was rolled back for you. To roll a "
                     "change back, restore its files (listed in the history) to their content "
                     "before it, and declare that as a change of type `rollback`.")
    if before:   # what "their content before it" is, for each judged change (read-only copies)
        lines.append("The adapter as it was before each change (read-only; copy the files you "
                     "restore into adapter/): " + ", ".join(f"{cid}: `{path}`" for cid, path in before.items()))
    return lines


def _reviewers(reviews: Sequence[ReviewEntry], kept: Mapping[str, str]) -> list[str]:
    """What reviewers said on the run's pull requests (`/hermit note`), newest last, and the changes
    they kept from the automatic rollback (`/hermit keep`)."""
    lines = reviewer_notes(reviews) or ["## Reviewer Feedback (from the run's pull requests)"]
    for change_id, why in kept.items():
        lines += ["", f"- {change_id} was judged for rollback but a reviewer keeps it ({why}); "
                      "it was not rolled back."]
    return lines


def _instructions(step: int, stats: StepStats, buckets: Mapping[str, Sequence[str]] | None) -> list[str]:
    lines = ["## Execution Instructions", "",
             "1. Analyse: read the overview above, then the detail reports of the tasks that matter.",
             "2. Group the failures into pattern classes and find each class's root cause.",
             "3. Design general mechanisms (not task-specific fixes) at the right component.",
             "4. Implement them in `adapter/`, run `./check_spec` until it passes, and write "
             f"`{STATE}/change_manifest.json` with `\"iteration\": {step}`."]
    if stats.k > 1:
        lines.append(f"- The target is pass@1 over {stats.k} rollouts per task; partial-pass tasks "
                     "are the highest-leverage targets. pass@k is not the target.")
    else:
        lines.append("- The target is the pass rate; analyse timed-out tasks too.")
    lines.append(f"- For deeper analysis, read a rollout's trajectory and hook audit (paths in "
                 f"`{STATE}/analysis/{step_dir(step)}/detail/`).")
    unstable = list((buckets or {}).get("unstable", ()))
    if unstable:
        lines.append("- Unstable tasks to leave alone: " + ", ".join(unstable[:10]))
    return lines


def build_evolution_query(step: int, stats: StepStats, diff: StepDiff | None, *,
                          overview_body: str = "",
                          scores: Sequence[Mapping[str, Any]] = (),
                          best_ever: Mapping[str, Any] | None = None,
                          stability: Mapping[str, Sequence[str]] | None = None,
                          evaluation: ChangeEvaluation | None = None,
                          rollback: Literal["auto", "agent"] = "auto",
                          rolled_back: Sequence[str] = (),
                          rollback_undone: Mapping[str, str] | None = None,
                          before: Mapping[str, str] | None = None,
                          reviews: Sequence[ReviewEntry] = (),
                          kept: Mapping[str, str] | None = None) -> str:
    """The query the Evolve Agent reads on stdin after START.md, sections in §8.4's order.

    ``scores`` are the earlier steps' score entries (this step's not yet among them);
    ``rolled_back`` names the changes ``rollback: auto`` already reverted and
    ``rollback_undone`` those whose revert was dropped because check_spec failed (id → reason);
    ``before`` maps each judged change to the workspace directory holding the adapter before it.
    """
    previous = [e for e in scores if e.get("iteration") == step - 1]
    prev_rate = previous[-1]["pass_rate"] if previous else None
    sections = [[f"Iteration {step} evaluation completed."], _overview(step, stats, diff),
                _classification(stats)]
    if diff is not None:
        sections.append(_cross_step(step, stats, diff, prev_rate))
    if overview_body.strip():
        sections.append(_debugger(step, overview_body))
    if len(scores) >= 2:
        sections.append(_trends(stats.k, scores))
    if best_ever:
        sections.append(_best_ever(step, best_ever))
    if stability:
        sections.append(_stability(stability))
    if evaluation is not None and evaluation.changes:
        sections.append(_attribution(evaluation, rollback, rolled_back, rollback_undone or {}, before or {}))
    if any(e.command == "note" for e in reviews) or kept:
        sections.append(_reviewers(reviews, kept or {}))
    sections.append(_instructions(step, stats, stability))
    return "\n\n".join("\n".join(section) for section in sections) + "\n"
