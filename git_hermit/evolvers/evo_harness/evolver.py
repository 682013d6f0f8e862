"""The ``evo-harness`` evolver: one step = one fixed batch of the training stream.

Reflect on each failed run (one Worker call each, role ``reflect``), then the Topic Curator and
the General Curator (roles ``topic_curator``, ``general_curator``) edit native skill files in a
learner workspace, one level after the other; each level's diff is validated as one atomic unit
and becomes one commit, or is dropped whole with its reasons. No score gate. Every phase
checkpoints into the step directory, so a killed step resumes without re-calling a learner.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from string import Template as TextTemplate
from typing import TYPE_CHECKING, Any, Mapping

from git_hermit.adapter.check_spec import FrontMatterError, parse_front_matter
from git_hermit.adapter.screen import scrub
from git_hermit.adapter.templates import Template, load_template
from git_hermit.errors import AgentError, ConfigError
from git_hermit.evolvers.files import write_json_atomic, write_text_atomic
from git_hermit.evolvers.base import PlannedCommit, StepContext, StepResult, reviewer_notes, window
from git_hermit.evolvers.evo_harness import reflection
from git_hermit.evolvers.evo_harness.params import EvoParams
from git_hermit.evolvers.evo_harness.validate import LevelVerdict, changed_files, validate_level
from git_hermit.hosts import registry
from git_hermit.model.files import FileChange
from git_hermit.model.records import Provenance
from git_hermit.redact import redact

if TYPE_CHECKING:   # config imports the evolver registry: the evolvers name its type only
    from git_hermit.config import RunConfig

PROMPTS = Path(__file__).resolve().parent / "prompts"
LEVELS = ("topic", "general")
# learners that cannot edit a directory: the seed makes the Worker an editing agent (error at start)
ONE_SHOT_BASES = ("llm", "openai", "anthropic")


def _prompt(name: str, **values: Any) -> str:
    return TextTemplate((PROMPTS / name).read_text(encoding="utf-8")).safe_substitute(
        {k: str(v) for k, v in values.items()})


def _files(root: Path) -> dict[str, FileChange]:
    from git_hermit.files import files_in_directory
    return files_in_directory(root)


@dataclass(frozen=True)
class Skipped:
    """A level with nothing to compile: no learner call, no commit."""

    reason: str


@dataclass(frozen=True)
class Refused:
    """A level whose edit adapter.screen refused (a secret, link, oversize or special file)."""

    verdict: LevelVerdict

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.verdict.reasons


def _step_records(root: Path) -> dict[str, bytes]:
    """The step's records: every reflection (the Worker's reply, its experience with the evidence),
    and each level's decision, curator reply and the experiences it was shown."""
    out: dict[str, bytes] = {}
    for path in sorted((root / "reflections").glob("*.json")):
        out[f"reflections/{path.name}"] = path.read_bytes()
    for level in LEVELS:
        for name in ("outcome.json", "session.json", "workspace/EXPERIENCES.md"):
            path = root / level / name
            if path.is_file() and not path.is_symlink():
                out[f"{level}/{Path(name).name}"] = path.read_bytes()
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]


class EvoHarnessEvolver:
    name = "evo-harness"

    def step_tasks(self, tasks: tuple[str, ...], step: int, params: Mapping[str, Any]) -> tuple[str, ...]:
        p = EvoParams.read(params)
        if p.max_steps is not None and step > p.max_steps:
            return ()
        return window(tasks, step, p.batch_size)

    def step_limit(self, params: Mapping[str, Any]) -> tuple[int | None, str]:
        """`train` consumes the stream once: max_steps batches, or all of them (null)."""
        return EvoParams.read(params).max_steps, "max_steps"

    def check_config(self, config: RunConfig) -> None:
        """Refuse a Worker that cannot edit files (seed 001: an error at start), before the step
        runs and pays for any rollout."""
        base_kind = config.learner_base
        if base_kind in ONE_SHOT_BASES:
            raise ConfigError(f"evo-harness needs a learner that edits files; evolver.base {base_kind!r} cannot",
                              hint=f"use evolver.base: {' or '.join(h.name for h in registry.learner_hosts())} (or scripted in tests)")

    # ------------------------------------------------------------------------------------ step
    def learn(self, ctx: StepContext) -> StepResult:
        p = EvoParams.read(ctx.params)
        self.check_config(ctx.config)
        template = load_template(ctx.config.template)
        root = ctx.step_dir / "evo"
        result = StepResult()
        experiences, reflections = self._reflect(ctx, p, root)
        supported: dict[str, tuple[str, ...]] = {}
        for exp in experiences:
            supported[exp["task"]] = (*supported.get(exp["task"], ()), exp["id"])
        result.analysis.update({
            "batch": list(self._batch(ctx)), "reflections": reflections,
            "experiences": [{k: e[k] for k in ("id", "task", "lesson", "trigger", "scope_hint")} for e in experiences],
            "levels": {}})

        base = root / "base"
        if not (root / "base.done").exists():
            if base.exists():
                shutil.rmtree(base)
            ctx.materialise(base)
            (root / "base.done").write_text("")
        for level in LEVELS:
            verdict, after = self._level(ctx, p, template, root, level, base, experiences, supported)
            if isinstance(verdict, Refused):   # containment: the level is refused and the step exits 8
                result.rejected.extend(f"{level} curator: {why}" for why in verdict.reasons)
                verdict = verdict.verdict
            if isinstance(verdict, Skipped):
                result.analysis["levels"][level] = {"status": "skipped", "reasons": [verdict.reason]}
                continue
            result.analysis["levels"][level] = {
                "status": "accepted" if verdict.accepted else "rejected", "reasons": list(verdict.reasons),
                "written": verdict.written, "deleted": list(verdict.deleted), "files": sorted(verdict.files)}
            if not verdict.accepted:
                # the seed: a level that breaks a rule is rejected whole, with its reason — a normal
                # outcome of a step (recorded in the analysis note), not a failed command
                ctx.say(f"{level} curator: the level is rejected whole ({'; '.join(verdict.reasons)})")
                continue
            if verdict.files:
                commit = self._commit(ctx, level, verdict)
                result.commits.append(replace(commit, provenance=Provenance(ctx.run, ctx.step, verdict.written)))
            base = after      # the next level starts from the accepted snapshot
        levels = result.analysis["levels"]
        rejected = [name for name in LEVELS if levels.get(name, {}).get("status") == "rejected"]
        # GitHub shows commit bodies, not notes: every rejected level is said in one, whether or not
        # another level was committed (the step's last commit), else in the "no adapter changes" one
        lines = [f"{name} level rejected whole: " + "; ".join(levels[name]["reasons"]) for name in rejected]
        if not result.commits and rejected:
            lines += [f"{name} level skipped: " + "; ".join(levels[name]["reasons"])
                      for name in LEVELS if levels.get(name, {}).get("status") == "skipped"]
            result.unchanged = "\n".join(lines)
        elif result.commits and rejected:
            last = result.commits[-1]
            result.commits[-1] = replace(last, body="\n\n".join(
                x for x in (last.body, "Rejected in this step:\n" + "\n".join(f"- {line}" for line in lines)) if x))
        result.records = _step_records(root)
        return result

    # ------------------------------------------------------------------------------ pieces
    @staticmethod
    def _batch(ctx: StepContext) -> tuple[str, ...]:
        order = {t: i for i, t in enumerate(ctx.tasks)}
        return tuple(sorted(ctx.results, key=lambda t: order.get(t, len(order))))

    def _reflect(self, ctx: StepContext, p: EvoParams, root: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """One Worker call per failed rollout (checkpointed); the experiences and each run's status."""
        from git_hermit.evolvers.files import rollout_dir
        out = root / "reflections"
        out.mkdir(parents=True, exist_ok=True)
        skills = self._skill_list(ctx)
        experiences: list[dict[str, Any]] = []
        status: dict[str, str] = {}
        learner = None
        for task in self._batch(ctx):
            for run in ctx.results[task]:
                if not reflection.needs_reflection(run, p.success_threshold):
                    continue
                exp_id = reflection.experience_id(run)
                cached = out / f"{_safe(exp_id)}.json"
                if cached.is_file():    # resumed: a finished reflection is never re-run or re-billed
                    saved = json.loads(cached.read_text())
                else:
                    evidence = reflection.evidence(run, Path(rollout_dir(ctx.rollouts_root, run.task, run.attempt)),
                                                   p.max_evidence_chars)
                    workspace = out / "sessions" / _safe(exp_id)
                    workspace.mkdir(parents=True, exist_ok=True)
                    learner = learner or ctx.learner("reflect")
                    answer = learner.ask(workspace, _prompt("REFLECT.md", skills=skills, evidence=evidence),
                                         timeout_s=float(ctx.params["reflect_timeout_s"]), key=exp_id)
                    ctx.ledger.record("reflect", exp_id, answer.model, answer.usage, step=ctx.step)
                    if not answer.ok:   # Worker errors propagate: the step stops and resumes here
                        raise AgentError(f"the reflect worker failed on {exp_id}: {answer.error}",
                                         hint="fix the learner and rerun `git hermit step`; finished "
                                              "reflections are reused")
                    parsed = reflection.parse(answer.text, p.max_evidence_chars)
                    saved = {"task": run.task, "skip": parsed.skip, "experience": parsed.experience,
                             "problem": parsed.problem, "reply": redact(answer.text)[:4000]}
                    write_json_atomic(cached, saved)
                if saved["experience"]:
                    experiences.append({"id": exp_id, "task": saved["task"], **saved["experience"]})
                    status[exp_id] = "experience"
                else:
                    status[exp_id] = "skip" if saved["skip"] else f"unusable: {saved['problem']}"
        return experiences, status

    @staticmethod
    def _skill_list(ctx: StepContext) -> str:
        """``- name [level]: description`` for each skill of H_{N-1}, from git (no checkout)."""
        key = load_template(ctx.config.template).settings.get("provenance_key", "flashrsi")
        lines = []
        for path, file in sorted(ctx.adapter_files("skills").items()):
            if not path.endswith("/SKILL.md"):
                continue
            try:
                fm = parse_front_matter(file.content.decode("utf-8", errors="replace"))
            except FrontMatterError:
                continue
            prov = fm.data.get(key)
            level = prov.get("level", "?") if isinstance(prov, dict) else "native"
            lines.append(f"- {fm.data.get('name')} [{level}]: {fm.data.get('description')}")
        return "\n".join(lines) or "(none yet)"

    @staticmethod
    def _experiences_text(experiences: list[dict[str, Any]], limit: int) -> str:
        blocks = [f"### {e['id']} (task {e['task']})\n- lesson: {e['lesson']}\n- trigger: {e['trigger']}\n"
                  f"- scope_hint: {e['scope_hint']}\n- evidence: {e['evidence']}" for e in experiences]
        return reflection.clip("\n\n".join(blocks), limit)

    def _level(self, ctx: StepContext, p: EvoParams, template: Template, root: Path, level: str, base: Path,
               experiences: list[dict[str, Any]], supported: dict[str, tuple[str, ...]]
               ) -> tuple[LevelVerdict | Skipped | Refused, Path]:
        """Run one curator level (or reuse its checkpoint): its verdict and its edited adapter."""
        here = root / level
        workspace = here / "workspace"
        after = workspace / "adapter"
        outcome_path = here / "outcome.json"
        skip = None
        if level == "topic" and not experiences:
            skip = "no candidate experiences in this batch"
        elif level == "general" and len(supported) < p.general_min_tasks:
            skip = (f"{len(supported)} task(s) with candidate experiences, fewer than general_min_tasks "
                    f"{p.general_min_tasks}: the existing general skills stay as they are")
        if skip is not None:    # decided from the checkpointed reflections alone: the same on resume
            write_json_atomic(outcome_path, {"status": "skipped", "reasons": [skip]})
            ctx.say(f"{level} curator: skipped ({skip})")
            return Skipped(skip), base
        if not (here / "session.json").is_file():
            if workspace.exists():
                shutil.rmtree(workspace)
            (here / "refused.json").unlink(missing_ok=True)     # a fresh session is screened afresh
            workspace.mkdir(parents=True)
            shutil.copytree(base, after, symlinks=True)
            text = self._experiences_text(experiences, p.max_evidence_chars)
            write_text_atomic(workspace / "EXPERIENCES.md", text + "\n")
            prompt = _prompt(f"{level.upper()}_CURATOR.md", key=template.settings.get("provenance_key", "flashrsi"),
                             algorithm=template.settings.get("provenance_algorithm", "evo_harness"),
                             tasks=", ".join(sorted(supported)), experiences=text, **p.limits())
            feedback = reviewer_notes(ctx.reviews)   # already redacted and bounded by `git hermit review`
            if feedback:
                prompt = prompt.rstrip("\n") + "\n\n" + "\n".join(feedback) + "\n"
            role = f"{level}_curator"
            ctx.say(f"{level} curator: one session on {len(experiences)} experience(s)")
            answer = ctx.learner(role).ask(workspace, prompt, key=f"step-{ctx.step}-{level}",
                                           timeout_s=float(ctx.params["curator_timeout_s"]))
            ctx.ledger.record(role, f"step-{ctx.step}", answer.model, answer.usage, step=ctx.step)
            if not answer.ok:
                raise AgentError(f"the {level} curator session failed: {answer.error}",
                                 hint="fix the learner and rerun `git hermit step`; finished reflections "
                                      "and levels are reused")
            write_json_atomic(here / "session.json", {"text": redact(answer.text)[:4000],
                                                      "usage": answer.usage.to_dict()})
        # validation is deterministic: on resume it is recomputed from the two kept directories
        before_files, after_files = _files(base), _files(after)
        files = changed_files(before_files, after_files)
        # screened before anything reads the edited files; a refusal is kept (a rerun reuses it)
        # and the working copy scrubbed of what was refused
        marker = here / "refused.json"
        refused = (json.loads(marker.read_text()) if marker.is_file() else {}).get("reasons") \
            or ctx.screen(files, before_files, after)
        if refused:
            write_json_atomic(marker, {"reasons": refused})
            scrub(after, files)
        verdict = (LevelVerdict(level, tuple(refused), files) if refused else
                   validate_level(level=level, before=before_files, after=after_files, after_dir=after,
                                  template=template, supported=supported, limits=p.limits()))
        write_json_atomic(outcome_path, {"status": "accepted" if verdict.accepted else "rejected",
                                         "reasons": list(verdict.reasons), "written": verdict.written,
                                         "deleted": list(verdict.deleted)})
        return (Refused(verdict) if refused else verdict), after

    @staticmethod
    def _commit(ctx: StepContext, level: str, verdict: LevelVerdict) -> PlannedCommit:
        written = sorted(verdict.written)
        parts = []
        if written:
            parts.append(f"{len(written)} skill(s) written")
        if verdict.deleted:
            parts.append(f"{len(verdict.deleted)} deleted")
        summary = f"{level} curator: " + (", ".join(parts) or "skill files edited")
        lines = [f"{level} level of step {ctx.step}, validated as one unit."]
        lines += [f"- {name}: from {', '.join(verdict.written[name]['source_task_ids'])}" for name in written]
        lines += [f"- {name}: deleted" for name in verdict.deleted]
        return PlannedCommit(files=verdict.files, summary=summary, body="\n".join(lines),
                             change_id=f"step-{ctx.step}-{level}")
