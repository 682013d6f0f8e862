"""The pass@1-per-step chart of a report as a PNG (optional ``plot`` extra: matplotlib)."""

from __future__ import annotations

from pathlib import Path

from git_hermit.core.report import StepReport
from git_hermit.errors import InputError


def write_png(report: StepReport, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")       # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--chart needs matplotlib", hint="pip install 'git-hermit[plot]'") from None
    steps = [s.step for s in report.curve]
    values = [s.pass_at_1 for s in report.curve]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ax.plot(steps, values, marker="o")
    for s in report.curve:
        if s.best:
            ax.plot([s.step], [s.pass_at_1], marker="*", markersize=16, color="#d4a017", label="best-ever")
    split = report.curve[-1].split if report.curve else "train"
    ax.set(xlabel="step", ylabel="pass@1", ylim=(0, 1.02), title=f"{report.run}: pass@1 per step ({split} split)")
    ax.set_xticks(steps)
    if any(s.best for s in report.curve):
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
