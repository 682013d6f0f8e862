"""The independent test after training (seed 001; seed 000's held-out discipline): when the
run has a ``test`` split, the final snapshot and the seed are evaluated on it, as
`git hermit eval <final> --baseline step-0000 --split test` would, and the difference with its
paired bootstrap CI lands in the final snapshot's scores note. Finished rollouts are reused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from git_hermit.accounting import stats
from git_hermit.core.evaluate import eval_commits
from git_hermit.core.runs import RunContext, best_tag
from git_hermit.rollouts.runner import Progress

SPLIT = "test"


@dataclass(frozen=True)
class HeldOut:
    commit: str
    label: str                       # how the final snapshot was chosen
    seed: str
    pass_at_1: float
    seed_pass_at_1: float
    comparison: stats.PairedComparison | None
    reused: int

    def line(self) -> str:
        text = (f"held-out {SPLIT}: final {self.commit[:12]} ({self.label}) pass@1 {self.pass_at_1:.3f} "
                f"vs seed {self.seed[:12]} {self.seed_pass_at_1:.3f}")
        if self.comparison is not None:
            text += (f": difference {self.comparison} (paired bootstrap 95% CI over "
                     f"{self.comparison.n_tasks} tasks)")
        return text


def final_snapshot(ctx: RunContext) -> tuple[str, str]:
    """The commit `finalize` would hand back now: the best-ever commit when the run keeps one
    (``final: best_ever``) and has it, else the tip (the streaming evolvers have no best)."""
    mode = ctx.config.final_mode
    best = ctx.repo.read_ref(best_tag(ctx.run)) if mode == "best_ever" else None
    if best:
        return best, "best-ever"
    return ctx.tip[1], f"tip, step {ctx.tip[0]}"


def evaluate_final(ctx: RunContext, *, on_progress: Callable[[str], Callable[[Progress], None]] | None = None,
                   keep_exceptions: bool = False) -> HeldOut | None:
    """None when the run has no test split."""
    if SPLIT not in ctx.config.splits():
        return None
    commit, label = final_snapshot(ctx)
    seed = ctx.steps[0][1]
    report = eval_commits(ctx, commit, seed if seed != commit else None, SPLIT, on_progress=on_progress,
                          keep_exceptions=keep_exceptions)
    base = report.baseline.pass_at_1 if report.baseline is not None else report.candidate.pass_at_1
    reused = report.candidate.reused + (report.baseline.reused if report.baseline is not None else 0)
    return HeldOut(commit, label, seed, report.candidate.pass_at_1, base, report.comparison, reused)
