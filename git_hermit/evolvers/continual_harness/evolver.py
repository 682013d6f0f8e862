"""The ``continual-harness`` evolver (seed 002): the Refiner of one step's window.

Fold the memory the sessions left, then four passes in order, one learner call each (policy,
sub-agents, skills, memory), each applied to a working copy of the adapter and checked with
check_spec: a passing pass becomes its own commit, a failing one is dropped with its reason.
No score gates anything. Each pass's raw answer is checkpointed, so a killed step resumes
without calling the learner again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from git_hermit.adapter.check_spec import FrontMatterError, parse_front_matter
from git_hermit.adapter.templates import load_template
from git_hermit.errors import ConfigError
from git_hermit.evolvers.base import PlannedCommit, StepContext, StepResult, window
from git_hermit.evolvers.continual_harness import deltas, evidence
from git_hermit.evolvers.continual_harness.deltas import DeltaError, HarnessLayout
from git_hermit.evolvers.params import param_defaults
from git_hermit.model.files import FileChange
from git_hermit.redact import redact

PASSES = ("policy", "subagents", "skills", "memory")
# from the evolver's params.schema.json (which config.py validates hermit.yaml against)
DEFAULTS = {key: param_defaults("continual-harness")[key]
            for key in ("step_size", "feedback", "memory_max_changes", "refiner_timeout_s")}
PROMPTS = Path(__file__).resolve().parent / "prompts"
LOG_RECORD = "log.json"       # the step's entry of state/continual_harness.json, in its records
FEEDBACK_NOTE = ("\nThe judge's verdict is shown for each task scored below 1: a signal of what went wrong, "
                 "not a score to optimise.\n")


@dataclass(frozen=True)
class PassOutcome:
    name: str
    status: str                     # applied | unchanged | dropped
    changes: tuple[str, ...] = ()
    reason: str | None = None
    analysis: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "changes": list(self.changes)}
        if self.reason:
            out["reason"] = self.reason
        if self.analysis:
            out["analysis"] = self.analysis[:2000]
        return out


def _params(given: dict[str, Any]) -> dict[str, Any]:
    """The evolver's parameters with their defaults; a bad value is a ConfigError, not a traceback."""
    p = {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    for key in ("step_size", "memory_max_changes", "refiner_timeout_s"):
        least = 0 if key == "memory_max_changes" else 1
        if isinstance(p[key], bool) or not isinstance(p[key], (int, float)) or p[key] < least:
            raise ConfigError(f"evolver.params.{key} must be a positive number, not {p[key]!r}",
                              hint=f"e.g. {key}: {DEFAULTS[key]}")
    if not isinstance(p["feedback"], bool):
        raise ConfigError(f"evolver.params.feedback must be true or false, not {p['feedback']!r}")
    return p


def render_prompt(name: str, values: dict[str, Any]) -> str:
    text = (PROMPTS / f"{name}.md").read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", str(value))
    return text


def _files(root: Path) -> dict[str, FileChange]:
    from git_hermit.files import files_in_directory
    return files_in_directory(root)


def _diff(before: dict[str, FileChange], after: dict[str, FileChange]) -> dict[str, FileChange | None]:
    return {p: after.get(p) for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)}


def _fresh_copy(source: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, symlinks=True)
    return dest


def _write_json(path: Path, data: Any) -> None:
    from git_hermit.rollouts.runner import atomic_write
    atomic_write(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())


class ContinualHarnessEvolver:
    name = "continual-harness"

    def step_tasks(self, tasks: tuple[str, ...], step: int, params: dict[str, Any]) -> tuple[str, ...]:
        return window(tasks, step, int(_params(params)["step_size"]))

    def step_limit(self, params: dict[str, Any]) -> tuple[int | None, str]:
        """`train` runs every window of the stream once; its end stops training."""
        return None, "the stream"

    # ------------------------------------------------------------------------------------ step
    def learn(self, ctx: StepContext) -> StepResult:
        p = _params(ctx.params)
        layout = HarnessLayout.of(load_template(ctx.config.template))
        work = ctx.step_dir / "refiner"
        work.mkdir(parents=True, exist_ok=True)
        attempts = evidence.read_window(ctx.results, ctx.rollouts_root, feedback=bool(p["feedback"]))
        window_text = evidence.render_window(attempts)
        failures = evidence.render_failures(attempts)

        # H_{N-1}, materialised afresh on every (re)run: the passes are re-applied from their
        # checkpointed answers, so only the learner calls need remembering.
        given = work / "given"
        if given.exists():
            shutil.rmtree(given)
        ctx.materialise(given)
        current = _fresh_copy(given, work / "current")
        result = StepResult()
        analysis: dict[str, Any] = {
            "window": sorted(ctx.results), "rollouts": len(attempts), "feedback": bool(p["feedback"]),
            "failure_signatures": sum(len(a.signatures) for a in attempts), "passes": {}}

        analysis["memory_fold"] = self._fold(ctx, layout, attempts, given, current, work, result)

        common = {"window": window_text, "window_size": len(ctx.results),
                  "feedback_note": FEEDBACK_NOTE if p["feedback"] else "", "failures": failures}
        for name in PASSES:
            outcome, current = self._pass(ctx, name, p, layout, common, current, work, result)
            analysis["passes"][name] = outcome.to_dict()
            ctx.say(f"refiner {name}: {outcome.status}"
                    + (f" ({outcome.reason})" if outcome.reason else
                       f" ({'; '.join(outcome.changes)})" if outcome.changes else ""))
        result.analysis = analysis
        dropped = {n: o for n, o in analysis["passes"].items() if o["status"] == "dropped"}
        if not result.commits and dropped:
            # GitHub shows commit bodies, not notes: say why this step changed nothing
            result.unchanged = "\n".join(f"{n} pass dropped: {o.get('reason', '')}" for n, o in dropped.items())
        result.records = self._log(ctx, analysis)
        result.records["failures.md"] = failures.encode("utf-8")    # the window's failure signatures
        for name in PASSES:      # each pass's answer as the learner gave it (its checkpoint)
            if (work / f"{name}.json").is_file():
                result.records[f"passes/{name}.json"] = (work / f"{name}.json").read_bytes()
        return result

    # ------------------------------------------------------------------------------- memory fold
    def _fold(self, ctx: StepContext, layout: HarnessLayout, attempts: list[evidence.WindowAttempt], given: Path,
              current: Path, work: Path, result: StepResult) -> dict[str, Any]:
        sessions = [a.session_notes for a in attempts if a.session_notes is not None]
        if not sessions:
            return {"status": "skipped", "reason": "the rollouts returned no session memory "
                                                   f"({evidence.SESSION_NOTES} in the rollout directory)"}
        path = given / layout.memory
        base = path.read_text(encoding="utf-8") if path.is_file() else ""
        text, folded = deltas.fold_session_notes(base, base, sessions)
        if not folded:
            return {"status": "unchanged", "sessions": len(sessions)}
        candidate = _fresh_copy(current, work / "fold")
        (candidate / layout.memory).write_text(text, encoding="utf-8")
        before = _files(current)
        files = _diff(before, _files(candidate))
        refused = ctx.screen(files, before, candidate)      # session notes are the acting agent's output
        if refused:
            shutil.rmtree(candidate)             # rebuilt from the session notes on a rerun
            result.rejected.extend(f"memory fold: {why}" for why in refused)
            return {"status": "dropped", "sessions": len(sessions), "reason": "refused: " + "; ".join(refused)}
        problems = ctx.check(candidate)
        if problems:
            return {"status": "dropped", "sessions": len(sessions),
                    "reason": "; ".join(str(v) for v in problems[:5])}
        self._commit(result, "memory", f"fold {len(folded)} session note(s): {', '.join(folded)}", files)
        _fresh_copy(candidate, current)   # the passes start from the folded memory
        return {"status": "applied", "sessions": len(sessions), "topics": folded}

    # ------------------------------------------------------------------------------------ passes
    def _pass(self, ctx: StepContext, name: str, p: dict[str, Any], layout: HarnessLayout, common: dict[str, Any],
              current: Path, work: Path, result: StepResult) -> tuple[PassOutcome, Path]:
        prompt = redact(render_prompt(name, {**common, **self._values(name, p, layout, current)}))
        answer = self._ask(ctx, name, prompt, current, work, float(p["refiner_timeout_s"]),
                           isolated=not p["feedback"])
        if not answer["ok"]:
            return PassOutcome(name, "dropped", reason=f"the learner failed: {answer['error'] or 'no answer'}"), current
        if answer.get("refused"):   # resumed: refused before, its checkpoint scrubbed of what was refused
            return self._refused(result, name, answer["refused"]), current
        candidate = _fresh_copy(current, work / f"{name}-adapter")
        try:
            text = answer["text"]
            analysis = ""
            if name == "policy":
                changes = deltas.apply_policy(candidate, layout, deltas.parse_policy(text, layout.policy_chars))
            elif name == "subagents":
                delta = deltas.parse_subagents(text)
                analysis = delta.analysis
                changes = deltas.apply_component(candidate, layout.agents_root, layout.agent_file, delta,
                                                 verb="created")
            elif name == "skills":
                delta = deltas.parse_skills(text)
                analysis = delta.analysis
                changes = deltas.apply_component(candidate, layout.skills_root, layout.skill_file, delta,
                                                 verb="added")
            else:
                mem = deltas.parse_memory(text, int(p["memory_max_changes"]))
                analysis = mem.analysis
                changes = deltas.apply_memory(candidate, layout, mem)
        except DeltaError as exc:
            return PassOutcome(name, "dropped", reason=str(exc)), current
        except (ValueError, OSError, RecursionError) as exc:
            # an answer that crashes applying it is dropped like a malformed one: its checkpoint
            # is re-applied on every rerun, so raising here would wedge the run
            return PassOutcome(name, "dropped", reason=f"the answer cannot be applied ({type(exc).__name__})"), current
        before = _files(current)
        files = _diff(before, _files(candidate))
        refused = ctx.screen(files, before, candidate)
        if refused:    # refused before check_spec reads the candidate; the step exits 8
            # the checkpoint keeps the refusal, not the refused text: a rerun reuses the refusal
            _write_json(work / f"{name}.json", {**answer, "text": redact(answer["text"]), "refused": refused})
            shutil.rmtree(candidate)
            return self._refused(result, name, refused), current
        problems = ctx.check(candidate)
        if problems:
            reason = "check_spec: " + "; ".join(str(v) for v in problems[:5])
            return PassOutcome(name, "dropped", tuple(changes), reason, analysis), current
        if not files:
            return PassOutcome(name, "unchanged", tuple(changes), analysis=analysis), current
        applied = [c for c in changes if not c.startswith("skipped")] or [f"{len(files)} file(s)"]
        self._commit(result, name, "; ".join(applied), files, body=analysis)
        return PassOutcome(name, "applied", tuple(changes), analysis=analysis), candidate

    @staticmethod
    def _refused(result: StepResult, name: str, reasons: list[str]) -> PassOutcome:
        result.rejected.extend(f"refiner {name} pass: {why}" for why in reasons)
        return PassOutcome(name, "dropped", reason="refused: " + "; ".join(reasons))

    def _values(self, name: str, p: dict[str, Any], layout: HarnessLayout, current: Path) -> dict[str, Any]:
        if name == "policy":
            path = current / layout.policy
            return {"policy": path.read_text(encoding="utf-8") if path.is_file() else "(empty)",
                    "policy_file": layout.policy, "limit": layout.policy_chars}
        if name == "subagents":
            return {"overview": _overview(current / layout.agents_root, layout.agent_file, "No sub-agents yet."),
                    "agents_root": layout.agents_root, "agent_file": layout.agent_file,
                    "subagent_chars": 12000}
        if name == "skills":
            return {"overview": _overview(current / layout.skills_root, layout.skill_file, "No skills yet."),
                    "skills_root": layout.skills_root, "skill_file": layout.skill_file}
        path = current / layout.memory
        return {"overview": path.read_text(encoding="utf-8") if path.is_file() else "No memory notes yet.",
                "memory_file": layout.memory, "max_changes": p["memory_max_changes"]}

    def _ask(self, ctx: StepContext, name: str, prompt: str, current: Path, work: Path,
             timeout_s: float, *, isolated: bool) -> dict[str, Any]:
        """The pass's raw answer: the checkpoint if one exists, else one learner call (saved if it answered)."""
        cached = work / f"{name}.json"
        if cached.is_file():
            return json.loads(cached.read_text(encoding="utf-8"))
        learner = ctx.learner(name)
        # The learner gets a copy of the harness to look at; its answer text is what counts.
        # Without feedback the copy lives outside the run directory, where a session that looks
        # around cannot reach the rollouts' result.json files (the judge's labels).
        with tempfile.TemporaryDirectory(prefix="hermit-refiner-") as scratch:
            workspace = _fresh_copy(current, (Path(scratch) if isolated else work) / f"{name}-workspace")
            reply = learner.ask(workspace, prompt, timeout_s=timeout_s, key=f"step-{ctx.step}-{name}")
        ctx.ledger.record(name, f"step-{ctx.step}", reply.model, reply.usage, step=ctx.step)
        answer = {"ok": reply.ok, "text": reply.text, "error": reply.error, "model": reply.model}
        if reply.ok:
            _write_json(cached, answer)
        return answer

    @staticmethod
    def _commit(result: StepResult, name: str, what: str, files: dict[str, FileChange | None],
                body: str = "") -> None:
        result.commits.append(PlannedCommit(files=files, summary=f"{name}: {what}", body=body,
                                            trailers=(("Hermit-Pass", name),)))

    def _log(self, ctx: StepContext, analysis: dict[str, Any]) -> dict[str, bytes]:
        """``state/continual_harness.json`` (one entry per step: the earlier ones from the run's
        records, so any clone writes the same log) and the step's ``report.md``; the step's records."""
        log_path = ctx.run_dir / "state" / "continual_harness.json"
        entry = json.loads(redact(json.dumps({"step": ctx.step, "commit": ctx.commit,
                                              "time": datetime.now(timezone.utc).isoformat(), **analysis})))
        earlier = [json.loads(files[LOG_RECORD]) for step, files in sorted(ctx.past_records().items())
                   if LOG_RECORD in files and step < ctx.step]
        _write_json(log_path, {"steps": [*earlier, entry]})
        lines = [f"# Step {ctx.step}: the Refiner's passes", "",
                 f"Window: {', '.join(analysis['window'])} ({analysis['rollouts']} rollouts, "
                 f"{analysis['failure_signatures']} failure signature(s)).", ""]
        fold = analysis["memory_fold"]
        lines.append(f"- memory fold: {fold['status']}" + (f" ({fold['reason']})" if fold.get("reason") else ""))
        for name, out in analysis["passes"].items():
            lines.append(f"- {name}: {out['status']}" + (f" ({out['reason']})" if out.get("reason") else ""))
            lines += [f"  - {c}" for c in out["changes"]]
        from git_hermit.rollouts.runner import atomic_write
        report = redact("\n".join(lines) + "\n").encode()
        atomic_write(ctx.step_dir / "output" / "report.md", report)
        return {LOG_RECORD: (json.dumps(entry, indent=2, ensure_ascii=False) + "\n").encode(), "report.md": report}


def _overview(root: Path, leaf: str, empty: str) -> str:
    """Each entry's name, description and body (and its helper scripts' names)."""
    if not root.is_dir():
        return empty
    parts = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        path = folder / leaf
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            fm = parse_front_matter(text)
            head, body = f"{folder.name}: {fm.data.get('description', '')}", fm.body.strip()
        except FrontMatterError:
            head, body = folder.name, text.strip()
        scripts = sorted(s.relative_to(folder).as_posix() for s in (folder / "scripts").rglob("*") if s.is_file()) \
            if (folder / "scripts").is_dir() else []
        parts.append(f"### {head}\n" + (f"Scripts: {', '.join(scripts)}\n" if scripts else "") + f"\n{body}")
    return "\n\n".join(parts) if parts else empty
