"""The ``continual-harness`` evolver (seed 002): the Refiner of one step's window.

Fold the memory the sessions left, then the passes of ``components`` in order (policy,
sub-agents, skills, memory), each one learner call — asked again when its reply cannot be used,
and once more to compress an over-long policy — applied to a working copy of the adapter and
checked with check_spec: a passing pass becomes its own commit, a failing one is dropped with
its reason. No score gates anything; ``min_signals`` may skip a quiet window. Every reply is
checkpointed, so a killed step resumes without calling the learner again for it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from git_hermit.adapter.check_spec import FrontMatterError, parse_front_matter
from git_hermit.adapter.templates import load_template
from git_hermit.errors import ConfigError
from git_hermit.evolvers.base import PlannedCommit, StepContext, StepResult, reviewer_notes, window
from git_hermit.evolvers.continual_harness import deltas, evidence
from git_hermit.evolvers.continual_harness.deltas import DeltaError, HarnessLayout, OverLimit
from git_hermit.evolvers.params import param_defaults
from git_hermit.model.files import FileChange
from git_hermit.model.learner import Exchange, Sampling
from git_hermit.redact import redact

PASSES = ("policy", "subagents", "skills", "memory")
# from the evolver's params.schema.json (which config.py validates hermit.yaml against)
DEFAULTS = {key: param_defaults("continual-harness")[key]
            for key in ("step_size", "components", "feedback", "trace_chars", "task_info_chars", "memory_max_changes",
                        "min_signals", "max_tokens", "temperature", "refiner_timeout_s")}
PROMPTS = Path(__file__).resolve().parent / "prompts"
LOG_RECORD = "log.json"       # the step's entry of state/continual_harness.json, in its records
FEEDBACK_NOTE = ("\nThe judge's verdict is shown for each task scored below 1: a signal of what went wrong, "
                 "not a score to optimise.\n")
ASKS = 3                 # calls for one usable reply: the first, and two asks again
COMPRESS_TARGET = 0.85   # of the policy's limit: what an over-long policy is asked to shrink to
MEMORY_FULL = 0.8        # of the memory cap: past it the memory pass is told to merge and prune first


@dataclass(frozen=True)
class PassOutcome:
    name: str
    status: str                     # applied | unchanged | dropped
    changes: tuple[str, ...] = ()
    reason: str | None = None
    analysis: str = ""
    asks: int = 1                   # learner calls it took (asked again, asked to compress)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "changes": list(self.changes)}
        if self.reason:
            out["reason"] = self.reason
        if self.analysis:
            out["analysis"] = self.analysis[:2000]
        if self.asks > 1:
            out["asks"] = self.asks
        return out


@dataclass(frozen=True)
class Answer:
    """A pass's conversation with the Refiner: its parsed answer when usable (``problem`` when
    not), its rounds as checkpointed, and a screening refusal recorded on an earlier run."""

    ok: bool
    parsed: Any = None              # str (policy) | deltas.ComponentDelta | deltas.MemoryDelta
    rounds: tuple[dict[str, Any], ...] = ()
    asks: int = 1
    problem: str = ""
    refused: tuple[str, ...] = ()


def _params(p: Mapping[str, Any]) -> Mapping[str, Any]:
    """The evolver's parameters (config.params: their defaults applied there, once), checked: a bad
    value is a ConfigError, not a traceback."""
    nullable = ("max_tokens", "temperature")
    for key in ("step_size", "trace_chars", "task_info_chars", "memory_max_changes", "min_signals",
                "refiner_timeout_s", *nullable):
        if key in nullable and p[key] is None:
            continue
        least = 1 if key in ("step_size", "refiner_timeout_s", "max_tokens") else 0
        if isinstance(p[key], bool) or not isinstance(p[key], (int, float)) or p[key] < least:
            raise ConfigError(f"evolver.params.{key} must be a number of at least {least}, not {p[key]!r}",
                              hint=f"e.g. {key}: {DEFAULTS[key]}")
    if not isinstance(p["feedback"], bool):
        raise ConfigError(f"evolver.params.feedback must be true or false, not {p['feedback']!r}")
    components = p["components"]
    if not isinstance(components, list) or not components or any(c not in PASSES for c in components) \
            or len(set(components)) != len(components):
        raise ConfigError(f"evolver.params.components must list passes of {', '.join(PASSES)}, each once, "
                          f"not {components!r}", hint=f"e.g. components: [{', '.join(PASSES)}]")
    return p


def _sampling(p: Mapping[str, Any]) -> Sampling:
    return Sampling(max_tokens=p["max_tokens"], temperature=p["temperature"])


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
    from git_hermit.atomic import write_atomic
    write_atomic(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(), durable=True)


class ContinualHarnessEvolver:
    name = "continual-harness"

    def step_tasks(self, tasks: tuple[str, ...], step: int, params: Mapping[str, Any]) -> tuple[str, ...]:
        return window(tasks, step, int(_params(params)["step_size"]))

    def step_limit(self, params: Mapping[str, Any]) -> tuple[int | None, str]:
        """`train` runs every window of the stream once; its end stops training."""
        return None, "the stream"

    def check_config(self, config: Any) -> None:
        """Before anything runs: a session Refiner (codex, claude-code …) takes no sampling
        settings, so ``max_tokens`` or ``temperature`` set for one is refused, never ignored."""
        from git_hermit.learners import is_session_base
        given = (config.evolver or {}).get("params") or {}
        base = (config.evolver or {}).get("base")
        named = [key for key in ("max_tokens", "temperature") if given.get(key) is not None]
        if named and base is not None and is_session_base(base):
            raise ConfigError(f"evolver.params.{named[0]} applies to a one-shot Refiner, not a {base} session",
                              hint=f"remove {' and '.join(named)}, or set evolver.base: llm (or anthropic) "
                                   "for a Refiner that takes them")

    # ------------------------------------------------------------------------------------ step
    def learn(self, ctx: StepContext) -> StepResult:
        p = _params(ctx.params)
        layout = HarnessLayout.of(load_template(ctx.config.template))
        work = ctx.step_dir / "refiner"
        work.mkdir(parents=True, exist_ok=True)
        seen = evidence.read_window(ctx.results, ctx.rollouts_root, feedback=bool(p["feedback"]),
                                    trace_chars=int(p["trace_chars"]), task_info_chars=int(p["task_info_chars"]))
        window_text = evidence.render_window(seen)
        failures = evidence.render_failures(seen)

        # H_{N-1}, materialised afresh on every (re)run: the passes are re-applied from their
        # checkpointed answers, so only the learner calls need remembering.
        given = work / "given"
        if given.exists():
            shutil.rmtree(given)
        ctx.materialise(given)
        current = _fresh_copy(given, work / "current")
        result = StepResult()
        analysis: dict[str, Any] = {
            "window": sorted(ctx.results), "rollouts": len(seen.attempts), "feedback": bool(p["feedback"]),
            "failure_signatures": seen.signatures, "passes": {}}

        analysis["memory_fold"] = self._fold(ctx, layout, seen.attempts, given, current, work, result)
        passes: list[str] = list(p["components"])
        if seen.signatures < int(p["min_signals"]) and analysis["memory_fold"]["status"] != "applied":
            analysis["skipped"] = (f"{seen.signatures} failure signature(s), below min_signals={p['min_signals']}, "
                                   "and no session note folded")
            ctx.say(f"refiner: passes skipped ({analysis['skipped']})")
            result.unchanged = f"the Refiner's passes were skipped: {analysis['skipped']}"
            passes = []

        common = {"window": window_text, "window_size": len(ctx.results),
                  "feedback_note": FEEDBACK_NOTE if p["feedback"] else "", "failures": failures}
        for name in passes:
            outcome, current = self._pass(ctx, name, p, layout, common, current, work, result)
            analysis["passes"][name] = outcome.to_dict()
            ctx.say(f"refiner {name}: {outcome.status}"
                    + (f" ({outcome.reason})" if outcome.reason else
                       f" ({'; '.join(outcome.changes)})" if outcome.changes else ""))
        result.analysis = analysis
        dropped = {n: o for n, o in analysis["passes"].items() if o["status"] == "dropped"}
        said = [f"{n} pass dropped: {o.get('reason', '')}" for n, o in dropped.items()]
        if analysis["memory_fold"].get("status") == "dropped":
            said.insert(0, f"memory fold dropped: {analysis['memory_fold'].get('reason', '')}")
        # GitHub shows commit bodies, not notes: every dropped pass is said in one, whether or not
        # another pass was committed (the step's last commit), else in the "no adapter changes" one
        if not result.commits and dropped:
            result.unchanged = "\n".join(said)
        elif result.commits and said:
            last = result.commits[-1]
            result.commits[-1] = replace(last, body="\n\n".join(
                x for x in (last.body, "Dropped in this step:\n" + "\n".join(f"- {line}" for line in said)) if x))
        result.records = self._log(ctx, analysis)
        result.records["failures.md"] = failures.encode("utf-8")    # the window's failure signatures
        for name in PASSES:      # each pass's answer as the learner gave it (its checkpoint)
            if (work / f"{name}.json").is_file():
                result.records[f"passes/{name}.json"] = (work / f"{name}.json").read_bytes()
        return result

    # ------------------------------------------------------------------------------- memory fold
    def _fold(self, ctx: StepContext, layout: HarnessLayout, attempts: Sequence[evidence.WindowAttempt], given: Path,
              current: Path, work: Path, result: StepResult) -> dict[str, Any]:
        sessions = [a.session_notes for a in attempts if a.session_notes is not None]
        if not sessions:
            return {"status": "skipped", "reason": "the rollouts returned no session memory "
                                                   f"({evidence.SESSION_NOTES} in the rollout directory)"}
        path = given / layout.memory
        base = path.read_text(encoding="utf-8") if path.is_file() else ""
        text, folded, evicted = deltas.fold_session_notes(base, base, sessions, layout.memory_bytes)
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
        cap = f"; evicted to stay within {layout.memory_bytes} bytes: {', '.join(evicted)}" if evicted else ""
        self._commit(result, "memory", f"fold {len(folded)} session note(s): {', '.join(folded)}{cap}", files)
        _fresh_copy(candidate, current)   # the passes start from the folded memory
        return {"status": "applied", "sessions": len(sessions), "topics": folded,
                **({"evicted": list(evicted)} if evicted else {})}

    # ------------------------------------------------------------------------------------ passes
    def _pass(self, ctx: StepContext, name: str, p: Mapping[str, Any], layout: HarnessLayout, common: dict[str, Any],
              current: Path, work: Path, result: StepResult) -> tuple[PassOutcome, Path]:
        prompt = redact(render_prompt(name, {**common, **self._values(name, p, layout, current)}))
        feedback = reviewer_notes(ctx.reviews)      # already redacted and bounded by `git hermit review`
        if feedback:
            prompt = prompt.rstrip("\n") + "\n\n" + "\n".join(feedback) + "\n"
        answer = self._converse(ctx, name, prompt, layout, current, work, p)
        if not answer.ok:
            return PassOutcome(name, "dropped", reason=answer.problem, asks=answer.asks), current
        if answer.refused:   # resumed: refused before, its checkpoint scrubbed of what was refused
            return self._refused(result, name, list(answer.refused)), current
        candidate = _fresh_copy(current, work / f"{name}-adapter")
        try:
            parsed = answer.parsed
            analysis = ""
            if isinstance(parsed, str):
                changes = deltas.apply_policy(candidate, layout, parsed)
            elif isinstance(parsed, deltas.ComponentDelta):
                analysis = parsed.analysis
                root, leaf, verb = ((layout.agents_root, layout.agent_file, "created") if name == "subagents"
                                    else (layout.skills_root, layout.skill_file, "added"))
                changes = deltas.apply_component(candidate, root, leaf, parsed, verb=verb)
            else:
                analysis = parsed.analysis
                changes = deltas.apply_memory(candidate, layout, parsed, int(p["memory_max_changes"]))
        except (ValueError, OSError, RecursionError) as exc:
            # an answer that crashes applying it is dropped like a malformed one: its checkpoint
            # is re-applied on every rerun, so raising here would wedge the run
            return PassOutcome(name, "dropped", reason=f"the answer cannot be applied ({type(exc).__name__})"), current
        before = _files(current)
        files = _diff(before, _files(candidate))
        refused = ctx.screen(files, before, candidate)
        if refused:    # refused before check_spec reads the candidate; the step exits 8
            # the checkpoint keeps the refusal, not the refused text: a rerun reuses the refusal
            _write_json(work / f"{name}.json", {"rounds": [{**r, "answered": redact(r["answered"])}
                                                           for r in answer.rounds], "refused": refused})
            shutil.rmtree(candidate)
            return self._refused(result, name, refused), current
        problems = ctx.check(candidate)
        if problems:
            reason = "check_spec: " + "; ".join(str(v) for v in problems[:5])
            return PassOutcome(name, "dropped", tuple(changes), reason, analysis, answer.asks), current
        if not files:
            return PassOutcome(name, "unchanged", tuple(changes), analysis=analysis, asks=answer.asks), current
        applied = [c for c in changes if not c.startswith("skipped")] or [f"{len(files)} file(s)"]
        self._commit(result, name, "; ".join(applied), files, body=analysis)
        return PassOutcome(name, "applied", tuple(changes), analysis=analysis, asks=answer.asks), candidate

    @staticmethod
    def _refused(result: StepResult, name: str, reasons: list[str]) -> PassOutcome:
        result.rejected.extend(f"refiner {name} pass: {why}" for why in reasons)
        return PassOutcome(name, "dropped", reason="refused: " + "; ".join(reasons))

    def _values(self, name: str, p: Mapping[str, Any], layout: HarnessLayout, current: Path) -> dict[str, Any]:
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
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        used = len(text.encode())
        room = (f"The file holds {used:,} of its {layout.memory_bytes:,}-byte cap"
                + (": it is nearly full, so merge overlapping notes and retire the least useful ones before "
                   "adding any (the oldest notes are evicted first when it overflows)."
                   if used > layout.memory_bytes * MEMORY_FULL else
                   "; when it overflows, the oldest notes are evicted first."))
        return {"overview": text or "No memory notes yet.", "memory_file": layout.memory,
                "max_changes": p["memory_max_changes"], "memory_room": room}

    def _converse(self, ctx: StepContext, name: str, prompt: str, layout: HarnessLayout, current: Path,
                  work: Path, p: Mapping[str, Any]) -> "Answer":
        """The pass's usable answer. A reply that cannot be used is asked for again with the reason
        (ASKS calls in all); an over-long policy is asked once to be compressed. Every reply is
        checkpointed as it comes, so a rerun replays them and asks only what is still open."""
        cached = work / f"{name}.json"
        saved = json.loads(cached.read_text(encoding="utf-8")) if cached.is_file() else {}
        rounds: list[dict[str, Any]] = list(saved.get("rounds") or [])
        if not rounds and isinstance(saved.get("text"), str):   # one answer, as a step before asking again kept it
            rounds = [{"asked": None, "answered": saved["text"], "model": saved.get("model")}]
        if saved.get("refused"):
            return Answer(True, rounds=tuple(rounds), refused=tuple(saved["refused"]))
        asked, unusable, compressed = prompt, 0, False
        for index in range(ASKS + 1):      # at most ASKS asks for a usable reply, one more to compress
            if index < len(rounds):
                reply_text = str(rounds[index]["answered"])
            else:
                earlier = tuple(Exchange(prompt if i == 0 else str(r["asked"]), str(r["answered"]))
                                for i, r in enumerate(rounds))
                reply = self._call(ctx, name, asked, earlier, current, work, p)
                if not reply.ok:   # not checkpointed: a rerun asks this round again
                    return Answer(False, rounds=tuple(rounds), asks=len(rounds) + 1,
                                  problem=f"the learner failed: {reply.error or 'no answer'}")
                reply_text = reply.text
                rounds.append({"asked": None if index == 0 else asked, "answered": reply_text, "model": reply.model})
                _write_json(cached, {"rounds": rounds})
            try:
                return Answer(True, parsed=self._parse(name, reply_text, layout), rounds=tuple(rounds),
                              asks=len(rounds))
            except OverLimit as exc:
                if compressed:
                    return Answer(False, rounds=tuple(rounds), asks=len(rounds),
                                  problem=f"{exc}, still after it was asked to compress it")
                compressed = True
                asked = (f"Your policy above is {exc.length} characters, over the limit of {exc.limit}. Reply "
                         f"again with the COMPLETE policy compressed to at most {int(exc.limit * COMPRESS_TARGET)} "
                         "characters: merge, shorten and drop what the observed failures do not need. "
                         "Markdown only, nothing else.")
            except DeltaError as exc:
                unusable += 1
                if unusable >= ASKS:
                    return Answer(False, rounds=tuple(rounds), asks=len(rounds),
                                  problem=str(exc) + (f" (asked {len(rounds)} times)" if len(rounds) > 1 else ""))
                asked = (f"Your answer above could not be used: {exc}. Reply again with "
                         + ("the COMPLETE policy as Markdown and nothing else." if name == "policy" else
                            "only the JSON object the output format asks for: no prose, no code fences."))
        return Answer(False, rounds=tuple(rounds), asks=len(rounds), problem="no usable answer")

    @staticmethod
    def _parse(name: str, text: str, layout: HarnessLayout) -> Any:
        """The pass's answer parsed (DeltaError when it cannot be used; OverLimit: a policy too long)."""
        if name == "policy":
            return deltas.parse_policy(text, layout.policy_chars)
        if name == "subagents":
            return deltas.parse_subagents(text)
        if name == "skills":
            return deltas.parse_skills(text)
        return deltas.parse_memory(text)

    @staticmethod
    def _call(ctx: StepContext, name: str, asked: str, earlier: tuple[Exchange, ...], current: Path,
              work: Path, p: Mapping[str, Any]) -> Any:
        """One learner call of the pass's conversation, entered in the ledger."""
        learner = ctx.learner(name)
        # The learner gets a copy of the harness to look at; its answer text is what counts.
        # Without feedback the copy lives outside the run directory, where a session that looks
        # around cannot reach the rollouts' result.json files (the judge's labels).
        with tempfile.TemporaryDirectory(prefix="hermit-refiner-") as scratch:
            workspace = _fresh_copy(current, (Path(scratch) if not p["feedback"] else work) / f"{name}-workspace")
            reply = learner.ask(workspace, asked, timeout_s=float(p["refiner_timeout_s"]),
                                key=f"step-{ctx.step}-{name}", earlier=earlier, sampling=_sampling(p))
        ctx.ledger.record(name, f"step-{ctx.step}", reply.model, reply.usage, step=ctx.step)
        return reply

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
        lines.append(f"- memory fold: {fold['status']}" + (f" ({fold['reason']})" if fold.get("reason") else "")
                     + (f"; evicted {', '.join(fold['evicted'])}" if fold.get("evicted") else ""))
        if analysis.get("skipped"):
            lines.append(f"- passes skipped: {analysis['skipped']}")
        for name, out in analysis["passes"].items():
            lines.append(f"- {name}: {out['status']}" + (f" ({out['reason']})" if out.get("reason") else ""))
            lines += [f"  - {c}" for c in out["changes"]]
        from git_hermit.atomic import write_atomic
        report = redact("\n".join(lines) + "\n").encode()
        write_atomic(ctx.step_dir / "output" / "report.md", report, durable=True)
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
