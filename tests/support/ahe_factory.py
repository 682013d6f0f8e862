"""Builders of RolloutResult sets for the ahe evolver's tests (not a test module)."""

from __future__ import annotations

from git_hermit.model.rollout import RolloutResult, Usage


def trial(task: str, attempt: int, outcome: str, *, reward: float | None = None,
          exception_type: str | None = None, timed_out: bool = False, verifier: str = "",
          tokens: int = 0, trajectory: str | None = "trajectory.jsonl") -> RolloutResult:
    if reward is None and outcome != "exception":
        reward = 1.0 if outcome == "pass" else 0.0
    return RolloutResult(task=task, attempt=attempt, outcome=outcome, reward=reward,
                         exception_type=exception_type, timed_out=timed_out,
                         verifier_output=verifier, usage=Usage(input_tokens=tokens),
                         trajectory=trajectory, hook_log="hook-calls.jsonl")


def results(spec: dict[str, str]) -> dict[str, list[RolloutResult]]:
    """``{"task": "PFT"}``: one trial per letter, P=pass F=fail E=exception T=timeout."""
    out: dict[str, list[RolloutResult]] = {}
    for task, letters in spec.items():
        trials = []
        for attempt, letter in enumerate(letters, start=1):
            if letter == "P":
                trials.append(trial(task, attempt, "pass"))
            elif letter == "F":
                trials.append(trial(task, attempt, "fail"))
            elif letter == "E":
                trials.append(trial(task, attempt, "exception", exception_type="RuntimeError"))
            elif letter == "T":
                trials.append(trial(task, attempt, "exception", exception_type="AgentTimeoutError"))
            else:
                raise ValueError(letter)
        out[task] = trials
    return out
