"""The ``ahe`` evolver (AHE Adapter, seed 000): one framework step's learning.

Classify and diff the rollouts, verdicts, best-ever and the target stop, ``rollback: auto``
(each revert checked, a change group whole), the Agent Debugger per task, the Evolve Agent
(with read-only ``before/<change>/`` copies), manifest validation, and the commits to make.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from git_hermit.accounting.stats import exact_pass_at_1_of
from git_hermit.adapter.screen import Limits, scrub
from git_hermit.adapter.templates import is_fixed, is_learnable, load_template
from git_hermit.evolvers.ahe import analysis, attribution, debugger, groups, overview, queries, records
from git_hermit.evolvers.base import PlannedCommit, StepContext, StepResult
from git_hermit.evolvers.files import make_read_only, remove_tree, rollout_dir, write_json_atomic, write_text_atomic
from git_hermit.hosts import registry as hosts_registry
from git_hermit.model.files import FileChange
from git_hermit.model.learner_json import load_json
from git_hermit.model.records import Change, Manifest, VerdictNote
from git_hermit.model.rollout import Usage
from git_hermit.model.schema import schema_errors
from git_hermit.redact import redact
from git_hermit.agents.agent_files import RefusedFile, read_left_file
from git_hermit.trajectories import explode



@dataclass(frozen=True)
class _Rollback:
    change_id: str
    commit: str
    verdict: str
    files: dict[str, FileChange | None]
    with_ids: tuple[str, ...] = ()        # a group mate: rolled back with these judged changes


def _adapter_files(root: Path) -> dict[str, FileChange]:
    from git_hermit.files import files_in_directory
    return files_in_directory(root)


def _apply(root: Path, files: dict[str, FileChange | None]) -> None:
    for rel, change in files.items():
        path = root / rel
        if change is None:
            if path.exists() or path.is_symlink():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        if change.mode == "120000":
            path.symlink_to(change.content.decode())
        else:
            path.write_bytes(change.content)
            path.chmod(0o755 if change.mode == "100755" else 0o644)


def _changed(before: dict[str, FileChange], after: dict[str, FileChange]) -> dict[str, FileChange | None]:
    return {p: after.get(p) for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)}


class AHEEvolver:
    name = "ahe"

    def step_tasks(self, tasks: tuple[str, ...], step: int, params: Mapping[str, Any]) -> None:
        return None   # one AHE iteration = every training row, every step

    # -------------------------------------------------------------------------------- step
    def learn(self, ctx: StepContext) -> StepResult:
        state = ctx.run_dir / "state"
        restored = _restore_state(ctx, state)
        result = StepResult()
        try:
            return self._learn(ctx, state, result)
        finally:
            # what this step added to the state folder (and its history block, its Debugger's jobs):
            # the run's records, from which the next step rebuilds the folder in any clone
            result.records = _step_records(ctx, state, restored)

    def _learn(self, ctx: StepContext, state: Path, result: StepResult) -> StepResult:
        p = ctx.params

        stats = analysis.classify(ctx.results, k=ctx.k)
        # each earlier evaluation classified once, from the typed results its note was read into
        past_stats = {e.step: analysis.classify(e.results, k=e.scores.k or ctx.k) for e in ctx.history}
        history: records.TaskHistory = {}
        for past in ctx.history:
            history = records.update_task_history(history, past.step, past_stats[past.step])
        history = records.update_task_history(history, ctx.step, stats)
        prev = ctx.history[-1] if ctx.history else None
        prev_stats = past_stats[prev.step] if prev is not None and prev.step == ctx.step - 1 else None
        step_diff = analysis.diff(prev_stats, stats)
        buckets = analysis.stability(history, p["stability_min_iterations"])

        evaluation = None
        if step_diff is not None and ctx.prev_changes:
            evaluation = attribution.evaluate_changes(
                [pc.change for pc in ctx.prev_changes], step_diff, evaluating_iteration=ctx.step - 1,
                rollbacks=[(r.label, r.restores, r.undoes) for r in ctx.prev_rollbacks],
                run=ctx.run, evaluated_commit=ctx.commit)
            records.write_change_evaluation(state / "evaluations", ctx.step, evaluation)
            commit_of = {pc.change.id: pc.commit for pc in ctx.prev_changes}
            for verdict in evaluation.changes:
                commit = commit_of[verdict.change_id]
                first = result.verdicts.get(commit)
                # changes declared together share a commit: one note holds each one's verdict
                result.verdicts[commit] = verdict if first is None else replace(first, also=(*first.also, verdict))
        records.write_stats(state / "stats", ctx.step, stats, step_diff)
        records.write_task_history(state, history)

        # best-ever: strictly higher pass@1 than the best tag's evaluation, compared exactly
        # (ctx.best carries a Fraction), so a tie never moves the tag
        if ctx.best is None or exact_pass_at_1_of(ctx.results) > ctx.best[1]:
            result.best = True
            records.write_best_ever(state, records.best_ever_record(ctx.step, stats, ctx.commit))
        best_record = (records.best_ever_record(ctx.step, stats, ctx.commit) if result.best
                       else self._best_ever_of_history(ctx, stats, past_stats, state))
        # each earlier row keeps the time it was scored at (its block's heading in the history, which
        # the records rebuild in any clone); this step's row and block share one time
        scored_at = records.scored_times(state)
        now = _now()
        score_entries = [records.score_entry(e.step, past_stats[e.step], timestamp=scored_at.get(e.step, ""),
                                             commit=e.commit) for e in ctx.history]
        score_entries.append(records.score_entry(ctx.step, stats, timestamp=now, commit=ctx.commit))
        records.write_scores(state, score_entries)
        records.append_history(state / "evolution_history.md", ctx.step, records.render_history_block(
            ctx.step, stats, step_diff, timestamp=now))

        precision = self._precision(ctx, evaluation)
        result.analysis.update({
            "pass_at_1": stats.pass_rate, "k": ctx.k, "commit_evaluated": ctx.commit,
            "flips": {"flipped": len(step_diff.flipped), "regressed": len(step_diff.regressed)} if step_diff else None,
            "verdicts": {cv.change_id: cv.verdict for cv in evaluation.changes} if evaluation else {},
            "unattributed_regressions": list(evaluation.unattributed_regressions) if evaluation else [],
            "rollback_flips": dict(evaluation.rollback_flips) if evaluation else {},
            "rollback_regressions": dict(evaluation.rollback_regressions) if evaluation else {},
            "precision_recall": {"step": evaluation.prediction.to_dict() if evaluation else None,
                                 "run": precision.to_dict() if precision else None},
        })

        target = float(p["target_pass_rate"])
        if ctx.config.allow_early_stop and records.reached_target(stats, target):
            result.stop = f"pass@1 {stats.pass_rate:.3f} reached target_pass_rate {target}"
            result.analysis["stop"] = result.stop
            return result

        # rollback (Algorithm 1: before the Debugger), each revert checked
        base_dir = ctx.step_dir / "evolve" / "base"
        if not (ctx.step_dir / "evolve" / "base.done").exists():
            if base_dir.exists():
                shutil.rmtree(base_dir)
            ctx.materialise(base_dir)
        rolled_back, undone = self._rollbacks(ctx, evaluation, base_dir, result)
        result.analysis["rollbacks"] = [{"change_id": r.change_id, "commit": r.commit, "verdict": r.verdict,
                                         **({"with": list(r.with_ids)} if r.with_ids else {})}
                                        for r in rolled_back]
        result.analysis["rollbacks_undone"] = undone

        # the Agent Debugger
        overview_text = ""
        if p["debugger"]["enabled"]:
            reports = self._debugger(ctx, stats)
            analysis_dir = state / "analysis" / queries.step_dir(ctx.step)
            overview_path = overview.write_analysis(
                analysis_dir, ctx.step, reports, detail_dir=f"state/analysis/{queries.step_dir(ctx.step)}/detail/")
            overview_text = overview_path.read_text()
            # the Evolve Agent reads `state/…` in its workspace; the note names the directory as it
            # lies in the run's records in git, so the path a reader follows exists in any clone
            detail = f"state/analysis/{queries.step_dir(ctx.step)}/detail/"
            where = f"hermit/{ctx.run}/records:steps/{ctx.step:04d}/{RECORDS_DIR}/{detail}"
            result.analysis["overview"] = (overview_text.replace(f"`{detail}`", f"`{where}`")
                                           .replace("`detail/{task}.md`", f"`{where}{{task}}.md`"))
        # else: no analysis section at all, as upstream, rather than a fallback text per task

        # the Evolve Agent
        query = queries.build_evolution_query(
            ctx.step, stats, step_diff, overview_body=overview.overview_body(overview_text),
            scores=score_entries[:-1], best_ever=best_record, stability=buckets, evaluation=evaluation,
            rollback=p["rollback"], rolled_back=[r.change_id for r in rolled_back],
            rollback_undone=undone, before={cid: f"{rel}/" for cid, rel in _before_dirs(ctx).items()},
            reviews=ctx.reviews, kept=result.analysis.get("rollbacks_kept", {}))
        # seed 000's queries/: the Evolve Agent's input, kept with the step's other state files
        write_text_atomic(state / "queries" / f"{queries.step_dir(ctx.step)}.md", query)
        workspace = self._evolve(ctx, base_dir, state, query)
        self._changes(ctx, base_dir, workspace, rolled_back, result)
        return result

    # -------------------------------------------------------------------------------- pieces
    @classmethod
    def _best_ever_of_history(cls, ctx: StepContext, stats: analysis.StepStats,
                              past_stats: dict[int, analysis.StepStats], state: Path) -> dict[str, Any] | None:
        """best_ever.json as the run's git history says: the evaluation of the best tag's commit
        (its scores note), so a clone that fetched the run hands the Evolve Agent the same record
        as the machine that made it; written to the state folder too (the agent reads it there).
        The state file only when the history holds no evaluation of that commit."""
        if ctx.best is None:
            return cls._read_json(state / "best_ever.json")
        # the evaluation that made it the best: its first (a later one of the same commit ties)
        first = next((e for e in ctx.history if e.commit == ctx.best[0]), None)
        if first is not None:
            record = records.best_ever_record(first.step, past_stats[first.step], first.commit)
        elif ctx.commit == ctx.best[0]:      # this step evaluates the best commit again
            record = records.best_ever_record(ctx.step, stats, ctx.commit)
        else:
            return cls._read_json(state / "best_ever.json")
        if cls._read_json(state / "best_ever.json") != record:
            records.write_best_ever(state, record)
        return record

    @staticmethod
    def _read_json(path: Path) -> Any:
        return json.loads(path.read_text()) if path.is_file() else None

    @staticmethod
    def _precision(ctx: StepContext,
                   evaluation: attribution.ChangeEvaluation | None) -> attribution.PredictionScores | None:
        """The run's prediction counts: earlier steps' from their scores notes (what a clone that
        fetched the run also has; never the ignored working files), plus this step's."""
        total, seen = attribution.PredictionScores(), False
        for past in ctx.history:
            step_counts = (((past.scores.evaluation or {}).get("precision_recall") or {}).get("step") or {})
            counts = step_counts.get("counts")
            if counts:
                total, seen = total + attribution.PredictionScores(**counts), True
        if evaluation is not None:
            total, seen = total + evaluation.prediction, True
        return total if seen else None

    def _rollbacks(self, ctx: StepContext, evaluation: attribution.ChangeEvaluation | None, base_dir: Path,
                   result: StepResult) -> tuple[list[_Rollback], dict[str, str]]:
        p = ctx.params
        undone: dict[str, str] = {}
        if evaluation is None or p["rollback"] != "auto":
            return [], undone
        wanted = set(p["rollback_verdicts"])
        commit_of = {pc.change.id: pc.commit for pc in ctx.prev_changes}
        kept: list[_Rollback] = []
        done_marker = ctx.step_dir / "evolve" / "base.done"
        # a reviewer's `/hermit keep` (git hermit review) on a change, or any change of its group; a
        # resumed step keeps the decision it made (its base already holds the reverts it chose)
        if done_marker.exists():
            reviewer_kept: dict[str, str] = dict(
                (self._read_json(ctx.step_dir / "evolve" / "rollbacks.json") or {}).get("reviewer_kept", {}))
        else:
            keeps = {e.commit: e for e in ctx.reviews if e.command == "keep" and e.commit}
            reviewer_kept = {cv.change_id: f"kept by @{keeps[commit_of[cv.change_id]].reviewer} on pull request "
                                           f"#{keeps[commit_of[cv.change_id]].pr}"
                             for cv in evaluation.changes if cv.verdict in wanted and commit_of[cv.change_id] in keeps}
        if reviewer_kept:
            result.analysis["rollbacks_kept"] = reviewer_kept
        for cv in evaluation.changes:
            if cv.verdict not in wanted:
                continue
            if cv.change_id in reviewer_kept:
                ctx.say(f"rollback of {cv.change_id} ({cv.verdict}) skipped: {reviewer_kept[cv.change_id]} "
                        "(/hermit keep)")
                continue
            files = ctx.revert_files(commit_of[cv.change_id])
            rollback = _Rollback(cv.change_id, commit_of[cv.change_id], cv.verdict, files)
            if not done_marker.exists():
                before = _adapter_files(base_dir)
                _apply(base_dir, files)
                problems = ctx.check(base_dir)
                if problems:
                    _apply(base_dir, _changed(_adapter_files(base_dir), before))   # undo this revert
                    undone[cv.change_id] = f"check_spec failed after the revert: {problems[0]}"
                    continue
            kept.append(rollback)
        if not done_marker.exists():
            decision = {"kept": [r.change_id for r in kept], "undone": undone,
                        **({"reviewer_kept": reviewer_kept} if reviewer_kept else {})}
            write_json_atomic(ctx.step_dir / "evolve" / "rollbacks.json", decision)
            write_json_atomic(ctx.run_dir / "state" / "rollbacks" / f"{queries.step_dir(ctx.step)}.json",
                              {**decision, "commits": {r.change_id: r.commit for r in kept}})
            done_marker.write_text("")
        else:   # resumed: the base already holds the kept reverts; reuse the recorded decision
            saved = self._read_json(ctx.step_dir / "evolve" / "rollbacks.json") or {}
            undone = saved.get("undone", {})
            kept = [r for r in kept if r.change_id in saved.get("kept", [])]
        by_commit: dict[str, list[_Rollback]] = {}
        for r in kept:   # changes declared together share one commit: revert it once
            by_commit.setdefault(r.commit, []).append(r)
        verdict_of = {cv.change_id: cv.verdict for cv in evaluation.changes}
        mates: list[_Rollback] = []
        for commit, group in by_commit.items():
            judged = ", ".join(f"{r.change_id} {r.verdict}" for r in group)
            named = [r.change_id for r in group]
            # a rollback never reverts part of a change group: the members not judged for it go too
            others = [pc.change.id for pc in ctx.prev_changes if pc.commit == commit and pc.change.id not in named]
            verdicts = list(dict.fromkeys(r.verdict for r in group))
            with_text = "".join(f" {o} ({verdict_of.get(o, 'not judged')}) is rolled back with "
                                f"{', '.join(named)}: they are one change group (one commit), and a "
                                "rollback never reverts part of a change." for o in others)
            result.commits.append(PlannedCommit(
                files=group[0].files,
                summary=f"rollback {', '.join(named)}" + (f" with {', '.join(others)}" if others else "")
                        + f" ({', '.join(verdicts)})",
                body=_rollback_body(ctx, evaluation, group, judged, commit, with_text),
                reverts=commit, verdict="HARMFUL" if "HARMFUL" in verdicts else verdicts[0]))
            mates += [_Rollback(o, commit, verdict_of.get(o, ""), group[0].files, tuple(named)) for o in others]
            verdict = result.verdicts.get(commit)
            if verdict is not None:
                def note(v: VerdictNote) -> VerdictNote:
                    why = "rollback: auto" if v.change_id in named else \
                        f"rolled back with {', '.join(named)} (rollback: auto)"
                    return replace(v, rollback_note=why)
                result.verdicts[commit] = replace(note(verdict), also=tuple(note(v) for v in verdict.also))
        kept = kept + mates
        for change_id, why in undone.items():
            ctx.say(f"rollback of {change_id} dropped: {why}")
        return kept, undone

    def _debugger(self, ctx: StepContext, stats: analysis.StepStats) -> list[debugger.DebugReport]:
        cfg = ctx.params["debugger"]
        if cfg.get("explode_traces", True):
            self._explode(ctx)
        jobs = debugger.build_jobs(
            stats, ctx.results, rollouts_root=ctx.rollouts_root, max_tasks=int(cfg.get("max_tasks", 90)),
            verifier_output=bool(cfg.get("verifier_output", True)),
            verifier_tail_chars=int(cfg.get("verifier_tail_chars", 4000)),
            verifier_tail_lines=int(cfg.get("verifier_tail_lines", 60)),
            explode_traces=bool(cfg.get("explode_traces", True)), redact=redact)
        out = ctx.step_dir / "debugger"
        out.mkdir(parents=True, exist_ok=True)
        debugger.write_jobs(out, jobs)
        if not jobs:
            return []
        learner = ctx.learner("debugger")
        rules = queries.debugger_rules()
        retries = max(1, int(cfg.get("retries", 3)))
        schedule = debugger.backoff_schedule(retries, float(cfg.get("backoff_s", 2.0)))
        timeout = float(cfg.get("timeout_s", 600))

        def run(job: debugger.DebugJob) -> tuple[str, str]:
            cached = out / f"{_safe(job.task)}.json"
            if cached.is_file():   # resumed: a finished session is never re-run, but its bill stays in the ledger
                saved = json.loads(cached.read_text())
                for bill in saved.get("usage", []):
                    ctx.ledger.record("debugger", job.task, bill.get("model"), Usage.from_dict(bill.get("usage")),
                                      step=ctx.step)
                return job.task, saved["response"]
            workspace = out / "sessions" / _safe(job.task)
            workspace.mkdir(parents=True, exist_ok=True)
            response = debugger.error_response("failed", "no attempt ran")
            spent: list[dict[str, Any]] = []
            for attempt in range(retries):
                answer = learner.ask(workspace, rules + "\n\n" + job.query, timeout_s=timeout, key=job.task)
                ctx.ledger.record("debugger", job.task, answer.model, answer.usage, step=ctx.step)
                spent.append({"model": answer.model, "usage": answer.usage.to_dict()})
                if answer.ok:
                    response = redact(answer.text)
                    break
                kind: debugger.ErrorKind = "timeout" if answer.error and "timed out" in answer.error else "error"
                response = debugger.error_response(kind, answer.error or "no answer")
                if attempt + 1 < retries:
                    time.sleep(schedule[attempt])
            write_json_atomic(cached, {"task": job.task, "response": response, "usage": spent})
            return job.task, response

        ctx.say(f"agent debugger: {len(jobs)} task(s)")
        with ThreadPoolExecutor(max_workers=max(1, int(cfg.get("concurrency", 16)))) as pool:
            responses = dict(pool.map(run, jobs))
        return debugger.finish(jobs, responses)

    def _explode(self, ctx: StepContext) -> None:
        """One file per step of every trajectory beside it (``steps/``), built aside and renamed
        into place so a killed step never leaves a half-exploded directory that looks done."""
        for attempts in ctx.results.values():
            for r in attempts:
                if not r.trajectory:
                    continue
                directory = rollout_dir(ctx.rollouts_root, r.task, r.attempt)
                source = Path(directory) / r.trajectory
                dest = Path(directory) / "steps"
                if dest.is_dir() or not source.is_file() or source.suffix != ".jsonl":
                    continue
                partial = dest.with_name("steps.partial")
                if partial.exists():
                    shutil.rmtree(partial)
                try:
                    explode(source, partial)
                    partial.rename(dest)
                except Exception as exc:   # an unreadable trace is reported, never fatal
                    ctx.say(f"could not explode {source}: {exc}")
        # (no redaction needed here: the runner stored every rollout artefact redacted)

    def _evolve(self, ctx: StepContext, base_dir: Path, state: Path, query: str) -> Path:
        root = ctx.step_dir / "evolve"
        workspace = root / "workspace"
        done = root / "result.json"
        if done.is_file():
            # resumed after the session: learn() has just rewritten this step's history block,
            # so the cached Evolve output goes back under it (the session is never re-run)
            saved = json.loads(done.read_text())
            text = saved.get("text", "")
            if saved.get("usage"):   # the session's bill survives the resume (ledger, analysis note, log)
                ctx.ledger.record("evolve", f"step-{ctx.step}", saved.get("model"), Usage.from_dict(saved["usage"]),
                                  step=ctx.step)
            records.append_history(state / "evolution_history.md", ctx.step, records.render_history_after(text))
            return workspace
        if workspace.exists():
            remove_tree(workspace)
        (root / "refused.json").unlink(missing_ok=True)    # a fresh session is screened afresh
        workspace.mkdir(parents=True)
        shutil.copytree(base_dir, workspace / "adapter", symlinks=True)
        # `rollback: agent` must be carryable out: the adapter as it was before each judged change
        # (its commit's parent), read-only, so "restore the files to their content before it" can be done
        for pc in ctx.prev_changes:   # (members of a change group each get a copy of the same tree)
            ctx.materialise(workspace / _before_dirs(ctx)[pc.change.id], f"{pc.commit}^")
        if (workspace / "before").exists():
            make_read_only(workspace / "before")
        shutil.copytree(state, workspace / "state", symlinks=True)
        (workspace / "state" / "change_manifest.json").unlink(missing_ok=True)
        start = queries.render_start_prompt(ctx.step, date=datetime.now(timezone.utc).date().isoformat())
        write_text_atomic(workspace / "START.md", start)
        write_text_atomic(workspace / "QUERY.md", query)
        self._evolver_notes(workspace)
        check = workspace / "check_spec"
        # The Evolve Agent's only tool: the adapter's rules, and (once written) the manifest's
        # "no two changes declare one file", reported while the agent can still fix it.
        check.write_text("#!/bin/sh\n# The adapter's validator: the Evolve Agent's only tool.\n"
                         'cd "$(dirname "$0")" || exit 2\n'
                         f'exec "{sys.executable}" -m git_hermit check --dir adapter '
                         f'--template {ctx.config.template} --host {ctx.config.host} '
                         '--manifest state/change_manifest.json "$@"\n')
        check.chmod(0o755)
        learner = ctx.learner("evolve")
        ctx.say("evolve agent: one session")
        answer = learner.ask(workspace, start + "\n\n" + query,
                             timeout_s=float(ctx.params["evolve_timeout_s"]), key=f"step-{ctx.step}")
        ctx.ledger.record("evolve", f"step-{ctx.step}", answer.model, answer.usage, step=ctx.step)
        write_json_atomic(done, {"ok": answer.ok, "error": answer.error, "text": redact(answer.text)[:20000],
                                 "usage": answer.usage.to_dict(), "model": answer.model})
        records.append_history(state / "evolution_history.md", ctx.step,
                               records.render_history_after(redact(answer.text)))
        return workspace

    @staticmethod
    def _evolver_notes(workspace: Path) -> None:
        """.hermit/EVOLVER.md: what middleware can do on each host (the seed's table, as
        each host module's capability_notes state it)."""
        capabilities = _shipped_capabilities()
        lines = ["# What the middleware can do on each host", ""]
        for host, rows in capabilities.items():
            lines += [f"## {host}", ""] + [f"- **{row}**: {text}" for row, text in rows.items()] + [""]
        write_text_atomic(workspace / ".hermit" / "EVOLVER.md", "\n".join(lines))

    def _validate_manifest(self, ctx: StepContext,
                           workspace: Path) -> tuple[list[Change], dict[str, Any] | None, list[str]]:
        limit = Limits.of(ctx.config.evolver).max_file_bytes
        try:    # never through a link (at any level) or a special file: it could name any file of the host
            text = read_left_file(workspace, "state/change_manifest.json", limit=limit)
        except RefusedFile as refused:
            if "symbolic link" in refused.reason:
                return [], None, [f"{refused.reason}; write the manifest itself"]
            if " is over " in refused.reason:
                return [], None, [f"state/change_manifest.json is over the limit of {limit:,} bytes per file"]
            return [], None, [refused.reason]
        if text is None:
            return [], None, [NO_MANIFEST]
        try:
            raw = load_json(text.decode("utf-8", errors="replace"))
        except json.JSONDecodeError as exc:
            return [], None, [f"state/change_manifest.json is not JSON ({exc.msg} at line {exc.lineno})"]
        except ValueError as exc:      # TooDeep: a record could not hold it
            return [], None, [f"state/change_manifest.json is {exc}"]
        problems = schema_errors("learner_manifest", raw)
        if problems:
            return [], raw if isinstance(raw, dict) else None, [f"state/change_manifest.json is invalid {problems[0]}"]
        if raw["iteration"] != ctx.step:
            return [], raw, [f"state/change_manifest.json has iteration {raw['iteration']}, expected {ctx.step}"]
        template = load_template(ctx.config.template)
        known = set(ctx.tasks)
        seen: set[str] = set()
        changes = []
        for item in raw["changes"]:
            change = Change.from_dict(item)
            if change.id in seen:
                return [], raw, [f"change id {change.id!r} appears twice"]
            seen.add(change.id)
            unknown = sorted(set(change.predicted_fixes + change.risk_tasks) - known)
            if unknown:
                return [], raw, [f"{change.id} names unknown task(s): {', '.join(unknown[:5])}"]
            for rel in change.files:
                clean = _adapter_relative(rel)
                if clean.startswith("/") or ".." in Path(clean).parts:
                    return [], raw, [f"{change.id} lists {rel!r}, outside the adapter"]
                if is_fixed(template, clean) or not is_learnable(template, clean):
                    return [], raw, [f"{change.id} lists {rel!r}, which is not a learnable adapter file"]
            changes.append(Change(**{**change.__dict__, "files": tuple(_adapter_relative(f) for f in change.files)}))
        return changes, raw, []

    def _changes(self, ctx: StepContext, base_dir: Path, workspace: Path, rolled_back: list[_Rollback],
                 result: StepResult) -> None:
        template = load_template(ctx.config.template)
        adapter = workspace / "adapter"
        before, after = _adapter_files(base_dir), _adapter_files(adapter)
        edits = _changed(before, after)
        # refused, never repaired: a secret, a link, an oversize, binary or git-special file
        # rejects the whole edit before check_spec (or a revert) reads any of it; the refusal is
        # kept (a rerun reuses it) and the working copy scrubbed of what was refused
        marker = ctx.step_dir / "evolve" / "refused.json"
        refused = (self._read_json(marker) or {}).get("reasons") or ctx.screen(edits, before, adapter)
        if refused:
            write_json_atomic(marker, {"reasons": refused})
            scrub(adapter, edits)
            scrub(workspace / "state", {"change_manifest.json": FileChange(b"")})
        else:
            # edits to fixed files, and files outside the template's learnable set, are reverted and
            # reported, never committed (a manifest that declares them is rejected the same way)
            fixed = sorted(p for p in edits if is_fixed(template, p))
            unlearnable = sorted(p for p in edits if p not in fixed and not is_learnable(template, p))
            for paths, key, what in ((fixed, "fixed_files_reverted", "fixed files"),
                                     (unlearnable, "unlearnable_files_reverted", "files that are not learnable")):
                if paths:
                    _apply(adapter, {p: before.get(p) for p in paths})
                    result.analysis[key] = paths
                    ctx.say(f"reverted the Evolve Agent's edits to {what}: {', '.join(paths)}")
            edits = {p: c for p, c in edits.items() if p not in fixed and p not in unlearnable}
        changes, raw, problems = self._validate_manifest(ctx, workspace)
        result.analysis["learner_manifest"] = raw
        summary = json.loads((ctx.step_dir / "evolve" / "result.json").read_text())
        result.analysis["evolve_output"] = summary.get("text", "")[:4000]
        if not summary.get("ok"):     # how the session ended comes first: it is why nothing was written
            error = str(summary.get("error") or "it gave no answer")
            ended = (f"the Evolve Agent session timed out ({error}; evolver.params.evolve_timeout_s sets its limit)"
                     if "timed out" in error else f"the Evolve Agent session failed: {error}")
            problems = [ended, *(p for p in problems if p != NO_MANIFEST)]
        problems = refused + problems
        if not problems and edits:
            errors = ctx.check(adapter)
            if errors:
                problems = [f"the edited adapter fails check_spec: {errors[0]}"]
        if problems:
            result.rejected.extend(problems)
            result.analysis["rejected"] = problems
            return
        if raw is not None:   # the accepted manifest, for the next Evolve Agent's history
            write_json_atomic(ctx.run_dir / "state" / "manifests" / f"{queries.step_dir(ctx.step)}.json", raw)
        claimed: set[str] = set()
        for group in groups.group_changes(changes):
            files = {p: edits[p] for p in group.files if p in edits}
            if not files:
                result.analysis.setdefault("changes_without_edits", []).extend(group.ids)
                continue
            claimed.update(files)
            members = list(group.members)
            manifest = Manifest(run=ctx.run, step=ctx.step, changes=tuple(members))
            head = members[0]
            trailers: tuple[tuple[str, str], ...]
            if len(members) == 1:
                trailers = (("Hermit-Predicts-Fix", ", ".join(head.predicted_fixes) or "none"),
                            ("Hermit-Risk", ", ".join(head.risk_tasks) or "none"))
                body = ""
            else:   # a change group: every member's id, predictions and risks, said plainly
                trailers = tuple(t for c in members for t in (
                    ("Hermit-Predicts-Fix", f"{c.id}: " + (", ".join(c.predicted_fixes) or "none")),
                    ("Hermit-Risk", f"{c.id}: " + (", ".join(c.risk_tasks) or "none"))))
                body = (f"Change group: {', '.join(group.ids)} declare the same file(s) "
                        f"({', '.join(group.shared)}), so they are one commit and are rolled back together.\n\n")
                result.analysis.setdefault("change_groups", []).append(
                    {"changes": list(group.ids), "shared_files": list(group.shared)})
                ctx.say(f"changes {', '.join(group.ids)} share {', '.join(group.shared)}: committed as one change group")
            body += "\n\n".join(f"{c.id}: {c.description}\n\nFailure pattern: {c.failure_pattern}\n"
                                 f"Component: {c.component}" for c in members)
            result.commits.append(PlannedCommit(files=files, summary=head.description.splitlines()[0][:100],
                                                body=body, change_id=", ".join(group.ids),
                                                trailers=trailers, manifest=manifest))
        undeclared = {p: c for p, c in edits.items() if p not in claimed}
        if undeclared:
            result.commits.append(PlannedCommit(
                files=undeclared, summary=f"undeclared edits ({len(undeclared)} file(s))",
                body="Edits the Evolve Agent made without declaring them in its manifest:\n"
                     + "\n".join(f"- {p}" for p in undeclared), change_id="undeclared"))
            result.analysis["undeclared"] = sorted(undeclared)


_adapter_relative = groups.adapter_relative
NO_MANIFEST = "the Evolve Agent wrote no state/change_manifest.json"

# Where the driver keeps an evolver's records of a step (core/records.py LEARNER): the overview note
# names the Debugger's reports there
RECORDS_DIR = "learner"
HISTORY_RECORD = "history.md"           # the step's blocks of evolution_history.md
JOBS_RECORD = "debugger/jobs.json"      # the Debugger's jobs (its queries), seed 000's Records
# Rewritten whole by every step from the run's notes before anyone reads them (score entries, task
# history) or rebuilt from the steps' blocks (the evolution history): never a step's own record
_REGENERATED = ("evolution_history.md", "iteration_scores.md", "iteration_scores.json", "task_history.json")


def _state_files(state: Path) -> dict[str, bytes]:
    from git_hermit.files import files_in_directory
    if not state.is_dir():
        return {}
    return {rel: change.content for rel, change in files_in_directory(state).items() if change.mode != "120000"}


def _restore_state(ctx: StepContext, state: Path) -> dict[str, bytes]:
    """Rebuild the state folder from the run's records (earlier steps' files, in step order, and the
    evolution history from their blocks): `.hermit/` is a cache, and a clone that fetched the run, or
    a machine whose `.hermit/` was deleted, hands the learners the same folder. What it holds then."""
    if state.exists():
        remove_tree(state)
    state.mkdir(parents=True)
    blocks = []
    for step, files in sorted(ctx.past_records().items()):
        for rel, data in sorted(files.items()):
            if rel.startswith("state/") and rel.split("/", 1)[1] not in _REGENERATED:
                target = state / rel.split("/", 1)[1]
                if ".." in Path(rel).parts:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        if HISTORY_RECORD in files:
            blocks.append(files[HISTORY_RECORD].decode("utf-8", "replace"))
    if blocks:
        write_text_atomic(state / "evolution_history.md", f"{records.HISTORY_HEADER}\n\n" + "".join(blocks))
    return _state_files(state)


def _step_records(ctx: StepContext, state: Path, restored: dict[str, bytes]) -> dict[str, bytes]:
    """The files this step wrote to the state folder (``state/…``; of the files rebuilt from the notes,
    only the iteration scores' table, as a reviewer reads it), its blocks of the evolution history,
    and its Debugger's jobs."""
    files = _state_files(state)
    out = {f"state/{rel}": data for rel, data in files.items() if rel not in _REGENERATED and restored.get(rel) != data}
    if "iteration_scores.md" in files:    # the table as this step's Evolve Agent read it, for a reviewer
        out["state/iteration_scores.md"] = files["iteration_scores.md"]
    history = state / "evolution_history.md"
    if history.is_file():
        text = history.read_text(encoding="utf-8")
        match = re.search(rf"^## Iteration {ctx.step} ", text, re.MULTILINE)
        if match:
            out[HISTORY_RECORD] = text[match.start():].encode("utf-8")
    jobs = ctx.step_dir / "debugger" / "jobs.json"
    if jobs.is_file():
        out[JOBS_RECORD] = jobs.read_bytes()
    return out


def _before_dirs(ctx: StepContext) -> dict[str, str]:
    """Workspace directory (relative) of the adapter before each change this step judges."""
    return {pc.change.id: f"before/{_safe(pc.change.id)}" for pc in ctx.prev_changes}


def _safe(name: str) -> str:
    from git_hermit.rollouts.runner import task_dirname
    return task_dirname(name)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")


def _rollback_body(ctx: StepContext, evaluation: attribution.ChangeEvaluation, group: list[_Rollback], judged: str,
                   commit: str, with_text: str = "") -> str:
    """The evidence of an automatic rollback, for its commit body (GitHub shows no notes): the
    tasks that regressed, the predicted fixes that did not happen, pass@1 before and after."""
    lines = [f"rollback: auto. Step {ctx.step}'s rollouts judged {judged}; its files are restored to "
             f"their state before {commit[:12]}." + with_text]
    by_id = {cv.change_id: cv for cv in evaluation.changes}
    for r in group:
        cv = by_id.get(r.change_id)
        if cv is None:
            continue
        lines += ["", f"{r.change_id} ({r.verdict}): {evaluation.declared_by(r.change_id).description}".strip(),
                  f"- risks realised (predicted tasks that regressed): {', '.join(cv.risk_realized) or 'none'}",
                  f"- predicted fixes that did not happen: {', '.join(cv.still_failed) or 'none'}",
                  f"- predicted fixes that happened: {', '.join(cv.actually_fixed) or 'none'}"]
    prev = ctx.history[-1] if ctx.history else None
    if prev is not None:
        from git_hermit.accounting import stats
        before = {t: sum(a.outcome == "pass" for a in s.attempts) / len(s.attempts)
                  for t, s in prev.scores.tasks.items() if s.attempts}
        after = stats.per_task_pass_at_1(ctx.results)
        if set(before) & set(after):
            comparison = stats.paired_bootstrap(before, after)
            lines += ["", f"Tasks that regressed this step: {', '.join(comparison.flips_down) or 'none'}"
                      + (f" (not predicted by any change: {', '.join(evaluation.unattributed_regressions)})"
                         if evaluation.unattributed_regressions else ""),
                      f"pass@1 on the {prev.scores.split} split (k={ctx.k}): {prev.scores.pass_at_1:.3f} "
                      f"(H_{prev.step - 1}, {prev.commit[:12]}) -> {sum(after.values()) / len(after):.3f} "
                      f"(H_{ctx.step - 1}, {ctx.commit[:12]}): {comparison} (paired bootstrap 95% CI "
                      f"over {comparison.n_tasks} tasks)"]
    return "\n".join(lines)


def _shipped_capabilities() -> dict[str, dict[str, str]]:
    """Each hook host's rows of seed 000's capability table, as its host module states them."""
    return {h.name: dict(h.capability_notes) for h in hosts_registry.hosts()
            if h.hook_wire is not None and h.capability_notes}
