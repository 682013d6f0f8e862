"""The run's running records under state/: task history, score entries and their table,
evolution_history.md blocks, best-ever and the stop rule (spec/ahe.md §9, §10; upstream
evolve.py:743-780, 1803-2193, 2361-2413). Render functions are pure; write_* take a directory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from git_hermit.evolvers.ahe.analysis import StepDiff, StepStats
from git_hermit.evolvers.ahe.attribution import ChangeEvaluation
from git_hermit.evolvers.files import write_json_atomic, write_text_atomic

HISTORY_HEADER = "# Agentic Harness Engineering Evolution History"
HISTORY_NAMES_SHOWN = 15
TaskHistory = dict[str, list[list[Any]]]


def pct(value: float) -> str:
    return f"{value * 100:.1f}%"


# --- task history (§10.1) ----------------------------------------------------------------

def update_task_history(history: Mapping[str, Sequence[Sequence[Any]]], step: int,
                        stats: StepStats) -> TaskHistory:
    """A new history with this step's label per task (``[step, label]``, plus the rollout
    split when k > 1); an entry already there for this step is replaced, never doubled."""
    updated: TaskHistory = {task: [list(e) for e in entries if e[0] != step]
                            for task, entries in history.items()}
    for task, label in stats.task_results.items():
        entry: list[Any] = [step, label]
        if task in stats.per_task_rollouts:
            entry.append(stats.per_task_rollouts[task].to_dict())
        updated.setdefault(task, []).append(entry)
    for entries in updated.values():
        entries.sort(key=lambda e: e[0])
    return updated


# --- score entries, best-ever, stop (§9, §10.3) -------------------------------------------

def task_breakdown(stats: StepStats) -> dict[str, int]:
    """best_ever/score ``tasks``: passed_j_of_k counts (k > 1) or pass/fail/exception (k = 1)."""
    if stats.k == 1:
        return {"total": stats.n_total, "pass": stats.n_pass, "fail": stats.n_fail,
                "exception": stats.n_exception}
    counts = {"total": stats.n_total}
    counts.update({f"passed_{j}_of_{stats.k}": 0 for j in range(stats.k, -1, -1)})
    counts["all_exception"] = 0
    for task, label in stats.task_results.items():
        if label == "exception":
            counts["all_exception"] += 1
            continue
        key = f"passed_{min(stats.per_task_rollouts[task].n_pass, stats.k)}_of_{stats.k}"
        counts[key] += 1
    return counts


def score_entry(step: int, stats: StepStats, *, timestamp: str, commit: str = "",
                timing: Mapping[str, float] | None = None) -> dict[str, Any]:
    """One row of iteration_scores (§10.3), with the commit the rollouts ran and tokens/trial."""
    entry: dict[str, Any] = {
        "iteration": step, "pass_rate": round(stats.pass_rate, 4), "k": stats.k,
        "timestamp": timestamp, "commit": commit, "tasks": task_breakdown(stats),
        "tokens_per_trial": stats.tokens_per_trial,
    }
    if timing:
        entry["timing"] = dict(timing)
    if stats.k > 1 and stats.trial_stats is not None:
        t = stats.trial_stats
        entry["trials"] = {"total": t.n_total, "pass": t.n_pass, "fail": t.n_fail,
                           "exception": t.n_exception, "pass_rate": round(t.trial_pass_rate, 4)}
        entry["pass_at"] = {str(i): round(v, 4) for i, v in stats.pass_at.items()}
    return entry


def best_ever_record(step: int, stats: StepStats, commit: str) -> dict[str, Any]:
    """best_ever.json's shape (§9.1) plus the commit the rollouts ran."""
    entry = score_entry(step, stats, timestamp="", commit=commit)
    record = {"iteration": step, "pass_rate": stats.pass_rate, "k": stats.k, "commit": commit,
              "tasks": entry["tasks"]}
    if "trials" in entry:
        record.update(trials=entry["trials"], pass_at=entry["pass_at"])
    return record


def update_best_ever(best: Mapping[str, Any] | None, candidate: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """Keep ``best`` unless the candidate's pass@1 is strictly higher (earliest wins ties)."""
    if best is None or candidate["pass_rate"] > best.get("pass_rate", best.get("capability_rate", 0.0)):
        return dict(candidate), True
    return dict(best), False


def reached_target(stats: StepStats, target_pass_rate: float) -> bool:
    """The early-stop check, run after best-ever and before the Debugger (§9.2)."""
    return stats.pass_rate >= target_pass_rate


# --- iteration_scores.md (§10.4) ------------------------------------------------------------

def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def _tokens(entry: Mapping[str, Any]) -> str:
    value = entry.get("tokens_per_trial")
    return "-" if value is None else f"{value:,.0f}"


def render_scores(entries: Sequence[Mapping[str, Any]]) -> str:
    """The scores table for k > 1 or k = 1 (by the last entry's k) and the trend line."""
    lines = ["# Iteration Scores", ""]
    if not entries:
        return "\n".join(lines + ["(no iterations scored yet)", ""])
    k = int(entries[-1].get("k", 1))
    if k > 1:
        header = ["Iter", *(f"pass@{i}" for i in range(1, k + 1)), "Tasks",
                  *(f"{j}/{k}" for j in range(k, -1, -1)), "Exc", "Trials",
                  "Trial P", "Trial F", "Trial E", "Tok/trial", "Time"]
        rows = []
        for e in entries:
            tasks, trials, pass_at = e.get("tasks", {}), e.get("trials", {}), e.get("pass_at", {})
            rows.append([str(e["iteration"]),
                         *(pct(pass_at[str(i)]) if str(i) in pass_at else "-" for i in range(1, k + 1)),
                         str(tasks.get("total", 0)),
                         *(str(tasks.get(f"passed_{j}_of_{k}", 0)) for j in range(k, -1, -1)),
                         str(tasks.get("all_exception", 0)), str(trials.get("total", 0)),
                         str(trials.get("pass", 0)), str(trials.get("fail", 0)),
                         str(trials.get("exception", 0)), _tokens(e), str(e.get("timestamp", ""))])
    else:
        timed = any(e.get("timing") for e in entries)
        header = ["Iter", "Pass Rate", "Pass", "Fail", "Exc", "Total",
                  *(["Duration", "Eval", "Anlys", "Evolve"] if timed else []), "Tok/trial", "Time"]
        rows = []
        for e in entries:
            tasks, timing = e.get("tasks", {}), e.get("timing") or {}
            times = [f"{timing[key]:.1f}m" if key in timing else "-"
                     for key in ("total_min", "eval_min", "analysis_min", "evolve_min")] if timed else []
            rows.append([str(e["iteration"]), pct(e["pass_rate"]), str(tasks.get("pass", 0)),
                         str(tasks.get("fail", 0)), str(tasks.get("exception", 0)),
                         str(tasks.get("total", 0)), *times, _tokens(e), str(e.get("timestamp", ""))])
    lines += _table(header, rows)
    if len(entries) >= 2:
        first, last = entries[0]["pass_rate"], entries[-1]["pass_rate"]
        lines += ["", f"Pass rate trend: {pct(first)} -> {pct(last)} "
                      f"({(last - first) * 100:+.1f}pp over {len(entries)} iterations)"]
    return "\n".join(lines + [""])


# --- evolution_history.md (§10.2) -------------------------------------------------------------

def _names(tasks: Sequence[str], limit: int | None = None) -> str:
    shown = list(tasks if limit is None else tasks[:limit])
    extra = len(tasks) - len(shown)
    if not shown:
        return "-"
    return ", ".join(shown) + (f", ... (+{extra} more)" if extra > 0 else "")


def diff_bucket_lines(d: StepDiff, k: int) -> list[str]:
    """The cross-step buckets, non-empty ones only, as the query's §3 and the history show them."""
    rollouts = k > 1 and d.has_rollouts
    show = d.rollout_text if rollouts else (lambda task: task)
    if rollouts:
        labelled = [
            ("🎉 Improved fail->all-pass", d.flipped),
            ("🔴 Regressed all-pass->fail - Must be addressed first", d.regressed),
            ("📈 Rollout improved, still not all-pass", d.rollout_improved),
            ("📉 Rollout regressed, still not all-pass", d.rollout_regressed),
            ("📌 Stable fail, same rollout results - Needs new strategy", d.rollout_unchanged),
            ("🛡️ Stable all-pass - Protect, avoid breaking", d.stable_pass),
            ("🆕 New optimization targets exception->fail", d.exception_to_fail),
        ]
    else:
        labelled = [
            ("🎉 Improved fail->pass", d.flipped),
            ("🔴 Regressed pass->fail - Must be addressed first", d.regressed),
            ("📌 Stable fail - Needs new strategy", d.stable_fail),
            ("🛡️ Stable pass - Protect, avoid breaking", d.stable_pass),
            ("🆕 New optimization targets exception->fail", d.exception_to_fail),
        ]
    lines = [f"- {label} ({len(tasks)}): {', '.join(show(t) for t in tasks)}"
             for label, tasks in labelled if tasks]
    for label, tasks in (("Infra recovered exception->pass", d.infra_recovered),
                         ("Infra failure pass->exception", d.infra_lost),
                         ("fail->exception", d.fail_to_exception)):
        if tasks:
            lines.append(f"- {label}: {len(tasks)} (for reference only)")
    return lines


def regression_lines(d: StepDiff, *, rate: Callable[[float], str] = pct) -> list[str]:
    """The regressions count and the retention rate (§2.5), as history and query show them."""
    lines = [f"- Regressions: {len(d.regressed)}"]
    if d.retention is not None:
        kept = len(d.stable_pass)
        lines.append(f"- Retention rate: {rate(d.retention)} ({kept}/{kept + len(d.regressed)} "
                     "previously passing tasks still pass)")
    return lines


def render_history_block(step: int, stats: StepStats, d: StepDiff | None, *, timestamp: str,
                         rollouts_ref: str = "") -> str:
    """The block ``update_history_before`` appends for a step (``timestamp``: YYYY-MM-DD HH:MM)."""
    k = stats.k
    lines = [f"## Iteration {step} — {timestamp}", ""]
    if k > 1:
        lines.append(f"- **Evaluation** (each task x{k} rollouts)")
        lines.append("- " + " | ".join(f"pass@{i}={v:.3f}" for i, v in stats.pass_at.items()))
        split: dict[int, int] = {}
        for task, label in stats.task_results.items():
            if label != "exception":
                n = stats.per_task_rollouts[task].n_pass
                split[n] = split.get(n, 0) + 1
        parts = [f"{split.get(k, 0)} tasks passed all {k} rollouts"]
        parts += [f"{split[j]} tasks passed {j} of {k} rollouts" for j in range(k - 1, 0, -1) if split.get(j)]
        parts += [f"{split.get(0, 0)} tasks failed all {k} rollouts",
                  f"{stats.n_exception} tasks hit exception"]
        lines.append(f"- {stats.n_total} tasks breakdown: " + "; ".join(parts))
        t = stats.trial_stats
        if t is not None:
            lines.append(f"- Per-trial pass rate: {t.trial_pass_rate:.3f} ({t.n_pass}/{t.n_total} trials)")
    else:
        lines.append(f"- Pass rate: {stats.pass_rate:.3f} ({stats.n_pass}/{stats.n_total})")
    if stats.tokens_per_trial is not None:
        lines.append(f"- Tokens per trial: {stats.tokens_per_trial:,.0f}")
    if d is not None:
        lines += regression_lines(d, rate=lambda r: f"{r:.3f}")
    exc = ", ".join(f"{name}: {n}" for name, n in sorted(stats.exception_types.items())) or "None"
    lines.append(f"- Exception stats: {exc}")
    if rollouts_ref:
        lines.append(f"- Rollouts: `{rollouts_ref}`")
    lines += ["", "### Task Details", ""]
    failed = stats.tasks_with("fail")
    if k > 1:
        partial = [t for t in failed if stats.per_task_rollouts[t].n_pass > 0]
        zero = [t for t in failed if stats.per_task_rollouts[t].n_pass == 0]
        passed = stats.tasks_with("pass")
        partial_text = [f"{t} ({stats.per_task_rollouts[t].n_pass}/{stats.per_task_rollouts[t].total})"
                        for t in partial]
        groups = [("✅ All passed", passed), ("🔶 Partial pass", partial_text),
                  ("❌ All failed", zero), ("⚠️ Exception", stats.tasks_with("exception"))]
    else:
        groups = [("✅ Passed", stats.tasks_with("pass")), ("❌ Failed", failed),
                  ("⚠️ Exception", stats.tasks_with("exception"))]
    lines += [f"- {label} ({len(tasks)}): {_names(tasks, HISTORY_NAMES_SHOWN)}" for label, tasks in groups]
    if d is not None:
        lines += ["", f"### Cross-Iteration Changes (iteration {step - 1} -> {step})", ""]
        lines += diff_bucket_lines(d, k) or ["- (no task changed bucket)"]
        lines.append(f"- Net change: {d.net:+d}")
    return "\n".join(lines) + "\n\n"


def render_history_after(evolve_output: str | None) -> str:
    """What follows a step's block once the Evolve Agent has answered (§10.2)."""
    return f"**Evolve Agent Output:**\n\n{(evolve_output or '').strip() or '(no output)'}\n\n---\n\n"


def append_history(path: Path, step: int, text: str) -> None:
    """Append ``text`` (a step's block or its Evolve output) to evolution_history.md. A block
    for ``step`` first cuts the file at any block for ``step`` or later, so a resumed step
    never appears twice (upstream's resume truncation)."""
    current = path.read_text(encoding="utf-8") if path.exists() else f"{HISTORY_HEADER}\n\n"
    starts_block = text.startswith(f"## Iteration {step} ")
    for match in re.finditer(r"^## Iteration (\d+) ", current, re.MULTILINE):
        if starts_block and int(match.group(1)) >= step:
            current = current[: match.start()]
            break
    write_text_atomic(path, current + text)


# --- writers --------------------------------------------------------------------------------

def write_scores(directory: Path, entries: Sequence[Mapping[str, Any]]) -> None:
    """iteration_scores.json (the entries) and iteration_scores.md (their table)."""
    write_json_atomic(directory / "iteration_scores.json", {"scores": list(entries)})
    write_text_atomic(directory / "iteration_scores.md", render_scores(entries))


def read_scores(directory: Path) -> list[dict[str, Any]]:
    path = directory / "iteration_scores.json"
    return json.loads(path.read_text(encoding="utf-8"))["scores"] if path.exists() else []


def scored_times(directory: Path) -> dict[int, str]:
    """When each iteration was scored: the time in its block's heading of evolution_history.md
    (rebuilt from the run's records, so the same in every clone; {} when unreadable)."""
    try:
        text = (directory / "evolution_history.md").read_text(encoding="utf-8")
    except (OSError, ValueError):
        return {}
    return {int(m[1]): m[2] for m in re.finditer(r"^## Iteration (\d+) — (\S.*?)\s*$", text, re.MULTILINE)}


def write_best_ever(directory: Path, record: Mapping[str, Any]) -> None:
    write_json_atomic(directory / "best_ever.json", dict(record))


def write_task_history(directory: Path, history: Mapping[str, Any]) -> None:
    write_json_atomic(directory / "task_history.json", dict(sorted(history.items())))


def write_stats(directory: Path, step: int, stats: StepStats, d: StepDiff | None) -> Path:
    path = directory / f"step_{step:04d}.json"
    write_json_atomic(path, {"step": step, "stats": stats.to_dict(),
                             "diff": d.to_dict() if d is not None else None})
    return path


def write_change_evaluation(directory: Path, step: int, evaluation: ChangeEvaluation) -> Path:
    path = directory / f"step_{step:04d}.json"
    write_json_atomic(path, evaluation.to_dict())
    return path
