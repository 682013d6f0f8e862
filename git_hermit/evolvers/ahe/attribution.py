"""Scoring a step's declared changes against the next step's diff: the verdict table
(spec/ahe.md §4.2-4.4; upstream evolve.py:2239-2329 evaluate_changes) and the prediction
precision/recall the paper reports (§4.7; not in upstream's code). Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from git_hermit.evolvers.ahe.analysis import StepDiff
from git_hermit.model.records import VerdictName, VerdictNote

HARMFUL: Final = "HARMFUL"
MIXED: Final = "MIXED"
EFFECTIVE: Final = "EFFECTIVE"
PARTIALLY_EFFECTIVE: Final = "PARTIALLY_EFFECTIVE"
INEFFECTIVE: Final = "INEFFECTIVE"
VERDICTS: tuple[VerdictName, ...] = (HARMFUL, MIXED, EFFECTIVE, PARTIALLY_EFFECTIVE, INEFFECTIVE)
# evolve.py:2837-2843, shown beside each verdict in the evolution query
SUGGESTED_ACTIONS: Mapping[str, str] = {
    HARMFUL: "❌ Must rollback",
    MIXED: "⚠️ Keep effective parts, rollback harmful parts",
    EFFECTIVE: "✅ Keep",
    PARTIALLY_EFFECTIVE: "⚠️ Keep, continue monitoring",
    INEFFECTIVE: "🔸 Rollback or redesign",
}


def verdict_for(n_fixed: int, n_predicted: int, n_risk_hit: int) -> VerdictName:
    """The §4.3 decision table, top-down, first match wins."""
    if n_risk_hit > 0 and n_fixed == 0:
        return HARMFUL
    if n_risk_hit > 0:
        return MIXED
    if n_predicted > 0 and n_fixed == n_predicted:
        return EFFECTIVE
    if n_fixed > 0:
        return PARTIALLY_EFFECTIVE
    return INEFFECTIVE


def _field(change: Any, name: str, default: Any) -> Any:
    # the lead's manifest model is a dataclass; raw manifests are dicts
    value = change.get(name, default) if isinstance(change, Mapping) else getattr(change, name, default)
    return default if value is None else value


@dataclass(frozen=True)
class Declared:
    """What a judged change declared beyond its predictions, for its change_evaluation.json entry (the
    verdict note leaves these to the manifest note on the same commit)."""

    description: str
    files: tuple[str, ...]


def _entry(note: VerdictNote, declared: Declared) -> dict[str, Any]:
    # a `change_evaluations` entry of §4.4: the verdict note's own fields, in upstream's order
    return {
        "change_id": note.change_id, "description": declared.description, "files": list(declared.files),
        "predicted_fixes": list(note.predicted_fixes), "actually_fixed": list(note.actually_fixed),
        "still_failed": list(note.still_failed), "predicted_risks": list(note.predicted_risks),
        "risk_realized": list(note.risk_realized), "hit_rate": note.hit_rate, "verdict": note.verdict,
    }


@dataclass(frozen=True)
class PredictionScores:
    """Counts behind fix/regression precision and recall; summed over steps to aggregate.

    Predictions are counted as sets of tasks over the whole manifest: a task two changes
    both predicted to fix is one prediction.
    """

    fixes_predicted: int = 0        # distinct predicted_fixes
    fixes_confirmed: int = 0        # ... of which flipped
    flipped: int = 0                # tasks that flipped
    flipped_predicted: int = 0      # ... of which some change predicted
    risks_predicted: int = 0        # distinct risk_tasks
    risks_confirmed: int = 0        # ... of which regressed
    regressed: int = 0              # tasks that regressed
    regressed_predicted: int = 0    # ... of which some change named as a risk

    @staticmethod
    def _ratio(numerator: int, denominator: int) -> float | None:
        return numerator / denominator if denominator else None

    @property
    def fix_precision(self) -> float | None:
        return self._ratio(self.fixes_confirmed, self.fixes_predicted)

    @property
    def fix_recall(self) -> float | None:
        return self._ratio(self.flipped_predicted, self.flipped)

    @property
    def regression_precision(self) -> float | None:
        return self._ratio(self.risks_confirmed, self.risks_predicted)

    @property
    def regression_recall(self) -> float | None:
        return self._ratio(self.regressed_predicted, self.regressed)

    def __add__(self, other: "PredictionScores") -> "PredictionScores":
        return PredictionScores(*(a + b for a, b in zip(self._counts(), other._counts())))

    def _counts(self) -> tuple[int, ...]:
        return (self.fixes_predicted, self.fixes_confirmed, self.flipped, self.flipped_predicted,
                self.risks_predicted, self.risks_confirmed, self.regressed, self.regressed_predicted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fix_precision": self.fix_precision, "fix_recall": self.fix_recall,
            "regression_precision": self.regression_precision,
            "regression_recall": self.regression_recall,
            "counts": dict(zip(("fixes_predicted", "fixes_confirmed", "flipped", "flipped_predicted",
                                "risks_predicted", "risks_confirmed", "regressed", "regressed_predicted"),
                               self._counts())),
        }


@dataclass(frozen=True)
class ChangeEvaluation:
    """The verdicts on one manifest (§4.4 change_evaluation.json) plus its prediction scores."""

    evaluating_iteration: int
    changes: tuple[VerdictNote, ...]   # each change's verdict note, as the model writes it
    unattributed_regressions: tuple[str, ...]
    prediction: PredictionScores
    # flips / regressions of tasks a rollback of the previous step was expected to move, and no
    # change predicted: the rollback's, kept out of the prediction counts (task → which rollback)
    rollback_flips: Mapping[str, str] = field(default_factory=dict)
    rollback_regressions: Mapping[str, str] = field(default_factory=dict)
    declared: tuple[Declared, ...] = ()   # beside ``changes``, one for each

    @property
    def summary(self) -> str:
        return ", ".join(f"{c.change_id}: {c.verdict}" for c in self.changes)

    def with_verdict(self, *verdicts: str) -> list[VerdictNote]:
        return [c for c in self.changes if c.verdict in verdicts]

    def declared_by(self, change_id: str) -> Declared:
        return next((d for c, d in zip(self.changes, self.declared) if c.change_id == change_id), Declared("", ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "evaluating_iteration": self.evaluating_iteration,
            "change_evaluations": [_entry(c, d) for c, d in zip(self.changes, self.declared, strict=True)],
            "unattributed_regressions": list(self.unattributed_regressions),
            "summary": self.summary,
            "prediction": self.prediction.to_dict(),
            **({"rollback_flips": dict(self.rollback_flips)} if self.rollback_flips else {}),
            **({"rollback_regressions": dict(self.rollback_regressions)} if self.rollback_regressions else {}),
        }


def evaluate_changes(manifest_changes: Iterable[Any], diff: StepDiff, *,
                     evaluating_iteration: int = 0,
                     rollbacks: Sequence[tuple[str, Sequence[str], Sequence[str]]] = (),
                     run: str = "", evaluated_commit: str | None = None) -> ChangeEvaluation:
    """Judge each change by the tasks that flipped / regressed (§4.2, §4.3).

    Only task-level fail→pass counts as a fix and pass→fail as a regression; a change's
    verdict looks only at its own predicted_fixes and risk_tasks (order and duplicates kept).
    ``rollbacks`` — (label, tasks it restores, tasks it undoes) for each rollback made since the
    changes' commit: a flip of a restored task (a regression of an undone one) that no change
    predicted is the rollback's, and is not counted as an unpredicted fix (regression).
    Each verdict is the verdict note of ``run``'s step ``evaluating_iteration + 1`` (whose rollouts
    judged it), on ``evaluated_commit``.
    """
    flipped, regressed = set(diff.flipped), set(diff.regressed)
    verdicts: list[VerdictNote] = []
    declared: list[Declared] = []
    all_fixes: set[str] = set()
    all_risks: set[str] = set()
    for change in manifest_changes:
        predicted = tuple(str(t) for t in _field(change, "predicted_fixes", ()))
        risks = tuple(str(t) for t in _field(change, "risk_tasks", ()))
        fixed = tuple(t for t in predicted if t in flipped)
        realized = tuple(t for t in risks if t in regressed)
        verdicts.append(VerdictNote(
            run=run, step=evaluating_iteration + 1, change_id=str(_field(change, "id", "unknown")),
            verdict=verdict_for(len(fixed), len(predicted), len(realized)),
            actually_fixed=fixed, still_failed=tuple(t for t in predicted if t not in flipped),
            risk_realized=realized, predicted_fixes=predicted, predicted_risks=risks,
            hit_rate=f"{len(fixed)}/{len(predicted)}", evaluated_commit=evaluated_commit,
        ))
        declared.append(Declared(str(_field(change, "description", "")),
                                 tuple(str(f) for f in _field(change, "files", ()))))
        all_fixes.update(predicted)
        all_risks.update(risks)
    rollback_flips: dict[str, str] = {}
    rollback_regressions: dict[str, str] = {}
    for label, restores, undoes in rollbacks:
        for task in restores:
            if task in flipped and task not in all_fixes:
                rollback_flips.setdefault(task, label)
        for task in undoes:
            if task in regressed and task not in all_risks:
                rollback_regressions.setdefault(task, label)
    flips_counted = flipped - set(rollback_flips)
    regressions_counted = regressed - set(rollback_regressions)
    prediction = PredictionScores(
        fixes_predicted=len(all_fixes), fixes_confirmed=len(all_fixes & flipped),
        flipped=len(flips_counted), flipped_predicted=len(flips_counted & all_fixes),
        risks_predicted=len(all_risks), risks_confirmed=len(all_risks & regressed),
        regressed=len(regressions_counted), regressed_predicted=len(regressions_counted & all_risks),
    )
    return ChangeEvaluation(
        evaluating_iteration=evaluating_iteration, changes=tuple(verdicts), declared=tuple(declared),
        unattributed_regressions=tuple(sorted(regressions_counted - all_fixes - all_risks)), prediction=prediction,
        rollback_flips=dict(sorted(rollback_flips.items())),
        rollback_regressions=dict(sorted(rollback_regressions.items())))


def aggregate_precision_recall(evaluations: Sequence[ChangeEvaluation]) -> PredictionScores:
    """Run-level precision/recall: the steps' counts summed (micro-average), as the paper's
    figures pool every prediction of the run (§4.7)."""
    total = PredictionScores()
    for evaluation in evaluations:
        total = total + evaluation.prediction
    return total
