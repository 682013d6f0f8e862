"""Text and JSON views of a run's history (log), one commit's records (show) and checks.

Every field a learner or a remote wrote passes through ``render.escape.terminal`` in the text views
(one line each: a newline in a description cannot fake a line); the JSON views give it exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from git_hermit.core.history import CommitRecords, RunHistory, StepView, exception_types
from git_hermit.core.history import stream_scores as history_stream_scores
from git_hermit.render.escape import terminal as _t
if TYPE_CHECKING:   # the records module is imported where a record is read: a warm `log --json` reads none
    from git_hermit.checked import Fragments
    from git_hermit.core.scores_notes import RowDisagreement
    from git_hermit.model.records import Scores, TaskScore


def _usage_bits(usage: dict[str, Any] | None, by_role: dict[str, Any] | None = None) -> str:
    """The rollouts' tokens and cost, then their judges' part when the note splits it by role."""
    if not usage:
        return ""
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    if not tokens:   # the backend reported no usage (a model call always reads input): not "0, $0.00"
        return "tokens unknown cost unknown"
    cost = usage.get("cost_usd")
    text = f"tokens {_si(tokens)}" + (f" ${cost:.2f}" if cost is not None else " cost unknown")
    judge = (by_role or {}).get("judge")
    if judge and judge.get("input_tokens", 0) + judge.get("output_tokens", 0):
        text += f" (judge {_usage_bits(judge).removeprefix('tokens ')})"
    return text


def _learner_usage(view: StepView) -> str:
    """Tokens and cost of this step's learner sessions (Debugger, Evolve Agent)."""
    ledger = (view.analysis_data.get("ledger") or {}) if view.analysis_data is not None else {}
    roles = [usage for role, usage in ledger.items() if role not in ("acting", "judge")]
    tokens = sum(u.get("input_tokens", 0) + u.get("output_tokens", 0) for u in roles)
    if not tokens:
        return ""
    costs = [u.get("cost_usd") for u in roles]
    cost = f" ${sum(costs):.2f}" if all(c is not None for c in costs) else " cost unknown"
    return f"{_si(tokens)} tokens{cost}"


def _si(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return str(int(n))


STREAM_NOTE = ("each step's rollouts ran a different window of the stream, so the windows' pass@1 are not "
               "comparable with each other; the stream pass@1 (cumulative over all windows so far) is the run's score")


def _streaming(evolver: str | None) -> bool:
    """Whether the run's evolver rolls out a new window of a stream each step (its registry line says)."""
    from git_hermit.evolvers.registry import find
    spec = find(evolver) if evolver else None
    return bool(spec and spec.streaming)


def _train(view: StepView) -> Scores | None:
    """The step's training scores (a note written only by a held-out eval has none)."""
    return view.scores if view.scores is not None and view.scores.split == "train" else None


def _split(view: StepView, name: str) -> dict[str, Any] | None:
    data = view.scores_data   # the note's data, as its record holds it: no record made to look for a split
    if data is None:
        return None
    if data["split"] == name:
        return view.scores.split_summary() if view.scores else None
    return (data.get("splits") or {}).get(name)


def stream_scores(history: RunHistory) -> dict[int, dict[str, Any]]:
    """Per step: the cumulative stream pass@1 (core.history.stream_scores; 0.0 before any attempt)."""
    return {n: {"pass_at_1": entry["pass_at_1"] or 0.0, "tasks": entry["tasks"], "window_tasks": entry["window_tasks"]}
            for n, entry in history_stream_scores(history).items()}


def held_out(history: RunHistory, split: str = "test") -> dict[str, Any] | None:
    """The latest held-out evaluation compared with the seed (train's independent test)."""
    if not history.steps:
        return None
    seed = history.steps[0]
    seed_scores = _split(seed, split)
    for view in reversed(history.steps):
        entry = _split(view, split)
        if view is seed or not entry:
            continue
        ci = entry.get("ci")
        if ci and ci.get("baseline") == seed.commit:
            return {"split": split, "step": view.step, "commit": view.commit, "pass_at_1": entry["pass_at_1"],
                    "seed_pass_at_1": seed_scores["pass_at_1"] if seed_scores else None,
                    "tasks": len(entry.get("tasks") or {}), "ci": ci}
    return None


def _held_out_line(held: dict[str, Any]) -> str:
    ci = held["ci"]
    seed = f" vs seed {held['seed_pass_at_1']:.3f}" if held["seed_pass_at_1"] is not None else ""
    return (f"held-out {held['split']}: step {held['step']} ({held['commit'][:10]}) pass@1 {held['pass_at_1']:.3f}"
            f"{seed}: {ci['delta']:+.1f} points [{ci['low']:+.1f}, {ci['high']:+.1f}] "
            f"(paired bootstrap 95% CI over {held['tasks']} tasks)")


def partial_text(partial: Mapping[str, Any] | None) -> str:
    """" (partial: 3/8 rollouts)" after the pass@1 of a run the budget stopped ('' when whole)."""
    if not partial:
        return ""
    return f" (partial: {partial.get('rollouts', 0)}/{partial.get('expected', '?')} rollouts)"


PARTIAL_NOTE = ("# partial: the budget stopped the step (or rollout) evaluating H_N: its pass@1 is over the "
                "finished rollouts only; raise budget: and run it again to finish it")


def _score_bits(view: StepView) -> str:
    # from the note's data (Scores.to_dict(tasks=False)), as the record would give it: the text log
    # makes no Scores record
    train = view.scores_data if view.scores_data is not None and view.scores_data["split"] == "train" else None
    if train is None:
        return "pass@1 —    "
    text = f"pass@1 {train['pass_at_1']:.3f}{partial_text(train.get('partial'))}"
    ci = train.get("ci")
    if ci:
        text += f" ({ci['delta']:+.1f} [{ci['low']:+.1f}, {ci['high']:+.1f}])"
    return text


def log_lines(history: RunHistory) -> list[str]:
    # One numbering everywhere: row N is H_N, the adapter step N made (step 0: the seed); its
    # pass@1 and its changes' verdicts come from step N+1's rollouts of it.
    lines = []
    streaming = _streaming(history.extra.get("evolver"))
    stream = stream_scores(history) if streaming else {}
    if streaming:
        lines.append(f"note: {STREAM_NOTE}")
    lines.append(f"# row N is H_N (hermit/{history.run}/step-NNNN), made by step N; "
                 "its pass@1 and verdicts come from step N+1's rollouts")
    for view in history.steps:
        marks = []
        if history.best == view.commit:
            marks.append("best")
        if history.final == view.commit:
            marks.append("final")
        head = f"step {view.step:>4}  {view.commit[:10]}  {'window ' if streaming else ''}{_score_bits(view)}"
        if view.step in stream:
            cum = stream[view.step]
            head += f" ({cum['window_tasks']} tasks)  stream pass@1 {cum['pass_at_1']:.3f} ({cum['tasks']} tasks)"
        if marks:
            head += "  [" + ", ".join(marks) + "]"
        scores = view.scores_data or {}   # the note's data, as the Scores record holds it
        flips = (scores.get("evaluation") or {}).get("flips")
        if flips:
            head += f"  flips +{flips.get('flipped', 0)}/-{flips.get('regressed', 0)}"
        unpredicted = (scores.get("evaluation") or {}).get("unattributed_regressions")
        if unpredicted:
            head += f"  unpredicted regressions: {_listed(unpredicted)}"
        if view.exceptions and scores.get("split") == "train":
            head += "  " + exceptions_text(view.exceptions)
        usage = _usage_bits(scores.get("usage"), scores.get("usage_by_role"))
        if usage and not usage.startswith("tokens 0 "):
            head += "  " + usage
        learners = _learner_usage(view)
        if learners:
            head += f"  (learners: {learners})"
        if view.disagreed and scores.get("split") == "train":
            head += f"  ({view.disagreed} row(s) run on two machines disagree: see show)"
        lines.append(head)
        for change in view.changes:
            verdict = change.verdict_name or ("verdict damaged (see the warning)" if change.verdict_damaged else "pending")
            by = change.rolled_back_by or change.rollback_commit
            rolled = f" (rolled back by {by[:10]})" if by else ""
            rolled += "".join(f" (lines removed by rollback {sha[:10]})" for sha in change.lines_removed_by)
            lines.append(f"    {change.commit[:10]} {_t(change.change_id)}: {_t(verdict)}{rolled}  "
                         f"{_t(change.description[:70])}")
        for commit in view.commits:
            if commit.undeclared:
                lines.append(f"    {commit.sha[:10]} undeclared edits")
            if commit.reverts:
                why = f" ({_t(commit.reverts_verdict)})" if commit.reverts_verdict else ""
                lines.append(f"    {commit.sha[:10]} rollback of {_t(commit.reverts[:10])}{why}")
        if scores.get("stop"):
            lines.append(f"    stop: step {scores['step']} stopped training: {_t(scores['stop'])}")
        for problem in view.bad_notes:
            lines.append(f"    warning: {_t(problem)}")
    if any((view.scores_data or {}).get("partial") and (view.scores_data or {}).get("split") == "train"
           for view in history.steps):
        lines.append(PARTIAL_NOTE)
    footer = prediction_line(history)
    if footer:
        lines.append(footer)
    if stream:
        last = stream[max(stream)]
        lines.append(f"stream pass@1 {last['pass_at_1']:.3f} over {last['tasks']} tasks "
                     f"({len(stream)} window(s))")
    held = held_out(history)
    if held:
        lines.append(_held_out_line(held))
    return lines


def exceptions_text(by_type: Mapping[str, int]) -> str:
    """``exceptions 3 (AgentTimeout 2, RewardFileNotFoundError 1)``: rollouts that measured nothing."""
    named = ", ".join(f"{name} {n}" for name, n in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"exceptions {sum(by_type.values())} ({named})"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def run_predictions(history: RunHistory) -> dict[str, Any] | None:
    """The run's prediction precision/recall, as the latest evaluation sums them."""
    for view in reversed(history.steps):
        evaluation = (view.scores_data.get("evaluation") or {}) if view.scores_data else {}
        run = (evaluation.get("precision_recall") or {}).get("run")
        if run:
            return run
    return None


def prediction_line(history: RunHistory) -> str | None:
    run = run_predictions(history)
    if not run:
        return None
    counts = run.get("counts", {})
    return (f"predictions so far: fixes precision {_pct(run.get('fix_precision'))} "
            f"({counts.get('fixes_confirmed', 0)}/{counts.get('fixes_predicted', 0)}), "
            f"recall {_pct(run.get('fix_recall'))}; regressions precision "
            f"{_pct(run.get('regression_precision'))}, recall {_pct(run.get('regression_recall'))}")


def _outcomes(tasks: Mapping[str, TaskScore] | dict[str, Any] | None) -> dict[str, int]:
    from git_hermit.model.records import TaskScore, TaskScores
    if isinstance(tasks, TaskScores):
        return tasks.outcomes()
    counts = {"pass": 0, "fail": 0, "exception": 0}
    for task in (tasks or {}).values():
        outcome = task.outcome if isinstance(task, TaskScore) else task.get("outcome")
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def _step_scores(scores: Scores) -> dict[str, Any]:
    """A step's scores note as `log --json` gives it: each split's tasks counted by outcome
    (``task_outcomes``) instead of listed, so the log stays one short record per step whatever
    the number of tasks; `show --json` has every task's attempts."""
    data = scores.to_dict(tasks=False)
    data["task_outcomes"] = _outcomes(scores.tasks)
    if data.get("splits"):
        data["splits"] = {name: ({k: v for k, v in entry.items() if k != "tasks"}
                                 | {"task_outcomes": _outcomes(entry.get("tasks"))})
                          if isinstance(entry, dict) else entry
                          for name, entry in data["splits"].items()}
    return data


def _step_json(view: StepView, streaming: bool, stream: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """One step of log_json."""
    train = _train(view)
    return {
        "step": view.step, "commit": view.commit,
        "pass_at_1": train.pass_at_1 if train else None,
        # a budget-stopped evaluation: {"rollouts": finished, "expected": the split's}; None when whole
        "partial": train.partial if train else None,
        **({"stream": stream.get(view.step)} if streaming else {}),
        "scores": _step_scores(view.scores) if view.scores else None,
        # the notes' cached data as it is (c.change and c.verdict would make records of it)
        "changes": [{"commit": c.commit, **(c.change.to_dict() if c.change_data is None else c.change_data),
                     "verdict": c.verdict_data if c.verdict_data is not None
                     else c.verdict.to_dict() if c.verdict else None,
                     "rolled_back_by": c.rolled_back_by, "lines_removed_by": list(c.lines_removed_by)}
                    for c in view.changes],
        "rollbacks": [{"commit": c.sha, "reverts": c.reverts, "verdict": c.reverts_verdict}
                      for c in view.rollbacks],
        "undeclared": [c.sha for c in view.commits if c.undeclared],
        "analysis": view.analysis.to_dict() if view.analysis else None,
        "warnings": list(view.bad_notes),
    }


def log_json(history: RunHistory) -> dict[str, Any]:
    streaming = _streaming(history.extra.get("evolver"))
    stream = stream_scores(history) if streaming else {}
    steps = [_step_json(view, streaming, stream) for view in history.steps]
    out = {"run": history.run, "best": history.best, "final": history.final,
           "predictions": run_predictions(history), "steps": steps, "held_out": held_out(history)}
    if streaming:
        out["stream"] = {**(stream[max(stream)] if stream else {"pass_at_1": None, "tasks": 0}),
                         "windows": len(stream), "note": STREAM_NOTE}
    return out


# Names what log_json_parts keeps of a step (_step_json's encoding): a change to what it encodes
# bumps it, so no step of the old form is read
FRAGMENTS_ENCODING = "log-json/4"

# json.dumps(data, sort_keys=True, default=str, check_circular=False) as one reusable encoder: the
# `--json` output of a pipe, and each step of it log_json_parts keeps
_encode = json.JSONEncoder(sort_keys=True, default=str, check_circular=False).encode


def _step_key(view: StepView, blobs: dict[str, dict[str, str]]) -> str | None:
    """What a step's entry of log_json is made of, by name: its number and tip, the blob ids of the
    tip's scores and analysis notes, and for each of its commits (whose id names its message and
    trailers) the blob ids of its manifest and verdict notes and the rollbacks that name it (other
    commits' trailers). None when the step carries warnings (they are not notes): made each time."""
    if view.bad_notes:
        return None
    tip = view.commit
    parts = [str(view.step), tip, blobs["scores"].get(tip, "-"), view.analysis_commit or "-",
             blobs["analysis"].get(view.analysis_commit or tip, "-")]
    manifests, verdicts = blobs["manifest"], blobs["verdicts"]
    for cv in view.commits:   # (its changes are not made: the commit's rollbacks are theirs)
        sha = cv.info.sha
        parts += (sha, manifests.get(sha, "-"), verdicts.get(sha, "-"), cv.rolled_back_by or "-",
                  ",".join(cv.lines_removed_by) or "-")
    return ":".join(parts)


def log_json_parts(history: RunHistory, fragments: Fragments) -> list[bytes]:
    """``_encode(log_json(history))`` and a newline, UTF-8, byte for byte, in parts to join, without
    encoding every step on every
    `log`: a step's entry is encoded once and kept in ``fragments`` under the names of everything it is
    made of (_step_key: commit and note blob ids, which name their contents), so it is never stale; the
    rest is joined around them. A streaming run's log (cumulative scores across steps) is encoded whole."""
    streaming = _streaming(history.extra.get("evolver"))
    if streaming:
        return [_encode(log_json(history)).encode(), b"\n"]
    blobs = {kind: history.blobs.get(kind, {}) for kind in ("manifest", "verdicts", "scores", "analysis")}
    get, put = fragments.get, fragments.put
    parts = [f'{{"best": {_encode(history.best)}, "final": {_encode(history.final)}, '
             f'"held_out": {_encode(held_out(history))}, "predictions": {_encode(run_predictions(history))}, '
             f'"run": {_encode(history.run)}, "steps": ['.encode()]
    for i, view in enumerate(history.steps):
        key = _step_key(view, blobs)
        text = get(key) if key is not None else None
        if text is None:
            text = _encode(_step_json(view, False, {})).encode()   # ASCII: the encoder escapes the rest
            if key is not None:
                put(key, text)
        if i:
            parts.append(b", ")
        parts.append(text)
    parts.append(b"]}\n")
    return parts


def show_json(records: CommitRecords) -> dict[str, Any]:
    info = records.info
    return {
        "commit": info.sha, "subject": info.subject, "parents": list(info.parents),
        "trailers": [list(t) for t in info.trailers], "step": records.step,
        "manifest": records.manifest.to_dict() if records.manifest else None,
        "verdict": records.verdict.to_dict() if records.verdict else None,
        "scores": records.scores.to_dict() if records.scores else None,
        "analysis": records.analysis.to_dict() if records.analysis else None,
        "provenance": records.provenance.to_dict() if records.provenance else None,
        "warnings": list(records.warnings),
    }


def show_lines(records: CommitRecords) -> list[str]:
    info = records.info
    lines = [f"commit {info.sha}", f"    {_t(info.subject)}"]
    for key, value in info.trailers:
        lines.append(f"    {_t(key)}: {_t(value)}")
    if records.manifest:
        lines.append("manifest:")
        for ch in records.manifest.changes:
            lines.append(f"  {_t(ch.id)} [{_t(ch.component)}] {_t(ch.description)}")
            lines.append(f"    files: {_listed(ch.files)}")
            lines.append(f"    failure pattern: {_t(ch.failure_pattern) or '—'}")
            lines.append(f"    predicts fixes: {_listed(ch.predicted_fixes)}")
            lines.append(f"    risks: {_listed(ch.risk_tasks)}")
    if records.verdict:
        v = records.verdict
        for one in (v, *v.also):
            lines.append(f"verdict on {_t(one.change_id)}: {_t(one.verdict)} (judged by step {v.step}'s rollouts)")
            lines.append(f"    fixed: {_listed(one.actually_fixed)}")
            lines.append(f"    still failing: {_listed(one.still_failed)}")
            lines.append(f"    risks realised: {_listed(one.risk_realized)}")
            if v.rollback_commit:   # each member of a change group says why it went
                lines.append(f"    rolled back by {_t(v.rollback_commit[:12])}: "
                             f"{_t(one.rollback_note or v.rollback_note or '')}")
    if records.scores:
        s = records.scores
        counts = {o: sum(1 for t in s.tasks.values() if t.outcome == o) for o in ("pass", "fail", "exception")}
        lines.append(f"scores of this commit ({_t(s.split)}, k={s.k}), measured by step {s.step}'s rollouts: "
                     f"pass@1 {s.pass_at_1:.3f}{partial_text(s.partial)}  "
                     f"tasks {counts['pass']} pass / {counts['fail']} fail / {counts['exception']} exception")
        if s.ci:
            lines.append(f"    vs {_t(s.ci.baseline[:10])}: {s.ci.delta:+.1f} points [{s.ci.low:+.1f}, {s.ci.high:+.1f}]")
        unpredicted = (s.evaluation or {}).get("unattributed_regressions")
        if unpredicted:
            lines.append(f"    unpredicted regressions (no change predicted them): {_listed(unpredicted)}")
        failed = exception_types(s.tasks)
        if failed:
            lines.append(f"    {exceptions_text(failed)}: rollouts without a result (they run again on the next "
                         "`git hermit rollout` of this commit)")
        for split, tasks in [(s.split, {t: score.to_dict() for t, score in s.tasks.items() if score.disagreed}),
                             *((name, entry.get("tasks") or {}) for name, entry in sorted(s.splits.items()))]:
            rows = _disagreed_rows(tasks)
            if rows:
                lines.append(f"    {_t(split)}: {len(rows)} row(s) run on two machines that disagree "
                             f"(kept / other): {_listed(rows)}")
    if records.analysis:
        overview = records.analysis.body.get("overview")
        if overview:
            lines.append("analysis:")
            lines += ["    " + _t(line) for line in str(overview).splitlines()[:40]]
    if records.provenance:
        lines.append(f"provenance (step {records.provenance.step}): the skills this commit wrote and their tasks")
        for name, entry in sorted(records.provenance.skills.items()):
            lines.append(f"  {_t(name)} [{_t(entry.get('level', '?'))}] from {_listed(entry.get('source_task_ids') or [])}")
    if not any((records.manifest, records.verdict, records.scores, records.analysis, records.warnings,
                records.provenance)):
        lines.append("(no git-hermit notes on this commit)")
    lines += [f"warning: {_t(problem)}" for problem in records.warnings]
    return lines


def _listed(items: Any) -> str:
    return ", ".join(_t(item) for item in items) or "—"


def _disagreed_rows(tasks: Mapping[str, Any]) -> list[str]:
    """``task#n kept/other`` for every row of a split's tasks whose machines disagreed (the note's data)."""
    rows = []
    for task, data in sorted(tasks.items()):
        attempts = data.get("attempts") or [] if isinstance(data, Mapping) else []
        for other in (data.get("disagreed") or [] if isinstance(data, Mapping) else []):
            n = int(other.get("attempt", 0))
            kept = attempts[n - 1].get("outcome") if 0 < n <= len(attempts) else "?"
            rows.append(f"{task}#{n} {kept}/{other.get('outcome')}")
    return rows


def disagreement_line(found: "RowDisagreement", remote: str) -> str:
    """One line of `push`/`fetch` for a row both machines ran differently: what each had, what was kept."""
    def said(attempt: Mapping[str, Any]) -> str:    # the reward only when it is what differs
        reward = attempt.get("reward")
        same = found.ours.get("outcome") == found.theirs.get("outcome")
        return _t(attempt.get('outcome')) + (f" (reward {reward:g})" if same and isinstance(reward, (int, float)) else "")
    other = found.theirs if found.kept == found.ours else found.ours
    return (f"{_t(found.task)}#{found.attempt} of {found.commit[:12]} ({_t(found.split)}) ran on both machines: "
            f"{said(found.ours)} here, {said(found.theirs)} on {remote}; kept {said(found.kept)} (the worse), "
            f"the {said(other)} is in the scores note's tasks.{_t(found.task)}.disagreed")
