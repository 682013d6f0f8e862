"""Judges: turn a finished rollout's workspace and final answer into a JudgeVerdict.

Three kinds (the hermit.yaml ``judge:`` block): ``command`` (a verifier run in the workspace;
reward from reward.txt or a final JSON line), ``answer`` (exact / normalised / numeric with
tolerance, OfficeQA style) and ``llm`` (a rubric, any OpenAI-compatible endpoint). A judge
that crashes or times out yields an ``exception`` JudgeVerdict carrying the exception type.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import tempfile
import time
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Protocol

from git_hermit.accounting.ledger import Price, price_usage
from git_hermit.errors import ConfigError
from git_hermit.model.config_blocks import JudgeConfig
from git_hermit.model.rollout import Outcome, RolloutResult, Usage
from git_hermit.supervise.process import run_capture

from git_hermit.agents.agent_files import RefusedFile, read_left_file
from .tasks import Task, listing

PASS_REWARD = 1.0          # spec/ahe.md §1.1: reward >= 1.0 passes
ANSWER_MODES = ("exact", "normalised", "numeric")
# the verifier's wall clock when neither judge.timeout_s nor the task names one (the schema's 600 s)
DEFAULT_JUDGE_TIMEOUT_S = 600.0
JUDGE_KEYS = {
    "answer": {"kind", "field", "mode", "tolerance"},
    "command": {"kind", "command", "timeout_s"},
    # llm timeout_s is read by the caller and passed in as judge(timeout_s=…), the request timeout
    "llm": {"kind", "model", "base_url", "env_key", "rubric", "max_retries", "timeout_s"},
}


@dataclass(frozen=True)
class JudgeVerdict:
    """A judge's decision. ``output`` is the verifier's whole feedback (for the Debugger only)."""

    outcome: Outcome
    reward: float | None
    output: str
    exception_type: str | None = None
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def from_reward(cls, reward: float, output: str, usage: Usage = Usage()) -> "JudgeVerdict":
        return cls("pass" if reward >= PASS_REWARD else "fail", reward, output, None, usage)

    @classmethod
    def exception(cls, exception_type: str, output: str, usage: Usage = Usage()) -> "JudgeVerdict":
        return cls("exception", None, output, exception_type, usage)

    def apply(self, result: RolloutResult) -> RolloutResult:
        """The rollout's result with this verdict's outcome, reward, output and judge usage (a
        verifier timeout stays an exception here: model.rollout.scored applies ``timeout_as``)."""
        return replace(result, outcome=self.outcome, reward=self.reward,
                       exception_type=self.exception_type, verifier_output=self.output,
                       judge_usage=self.usage, error=self._error_line() or result.error)

    def _error_line(self) -> str | None:
        if self.outcome != "exception":
            return None
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        ours = [line.removeprefix("[hermit] ") for line in lines if line.startswith("[hermit] ")]
        theirs = [line for line in lines if not line.startswith("[hermit] ")]
        if ours and theirs:     # what went wrong, then the verifier's own last word (a crash's error)
            return f"{ours[-1]}; the verifier's last line: {theirs[-1]}"[:300]
        return lines[-1][:300] if lines else self.exception_type


class Judge(Protocol):
    def judge(self, task: Task, workspace: Path, final_answer: str | None, *, timeout_s: float,
              verifier_dir: Path | None = None) -> JudgeVerdict: ...

    def tasks_it_cannot_judge(self, tasks: Mapping[str, Task]) -> list[str]: ...


class JudgeBase(ABC):
    """Runs ``_judge`` and turns any exception it raises into an exception JudgeVerdict."""

    def judge(self, task: Task, workspace: Path, final_answer: str | None, *, timeout_s: float,
              verifier_dir: Path | None = None) -> JudgeVerdict:
        try:
            return self._judge(task, workspace, final_answer, timeout_s=timeout_s, verifier_dir=verifier_dir)
        except Exception as exc:  # a judge crash is the rollout's exception, never the step's
            return JudgeVerdict.exception(type(exc).__name__, f"{type(exc).__name__}: {exc}")

    def tasks_it_cannot_judge(self, tasks: Mapping[str, Task]) -> list[str]:
        """Ids of tasks this judge could not judge (checked before anything runs)."""
        return []

    @abstractmethod
    def _judge(self, task: Task, workspace: Path, final_answer: str | None, *, timeout_s: float,
               verifier_dir: Path | None) -> JudgeVerdict: ...


class MissingExpectedAnswer(Exception):
    """The task has no expected answer for the answer/llm judge."""


# Exception types of verdicts no Python exception stands behind. A timeout's type contains
# "Timeout" (spec §1.1); the first two are Harbor's names for the same situations.
VERIFIER_TIMEOUT = "VerifierTimeoutError"
REWARD_MISSING = "RewardFileNotFoundError"
JUDGE_REPLY_ERROR = "JudgeReplyError"


def make_judge(judge: JudgeConfig | Mapping[str, Any], *, prices: Mapping[str, Price] | None = None,
               base_dir: Path | None = None) -> Judge:
    """Build the judge the hermit.yaml ``judge:`` block describes (ConfigError on bad config). A
    plain mapping (the block as it crosses to a worker) is typed here: JudgeConfig holds the defaults."""
    spec = judge if isinstance(judge, JudgeConfig) else JudgeConfig.from_block(judge)
    kind = spec.kind
    if kind not in JUDGE_KEYS:
        raise ConfigError(f"judge.kind must be one of {', '.join(JUDGE_KEYS)}, got {kind!r}",
                          "e.g. judge: {kind: answer, mode: numeric, tolerance: 0.01}")
    unknown = sorted(set(spec.given) - JUDGE_KEYS[kind])
    if unknown:
        raise ConfigError(f"judge ({kind}): unknown key(s) {', '.join(unknown)}",
                          f"known keys: {', '.join(sorted(JUDGE_KEYS[kind]))}")
    if kind == "answer":
        if spec.mode not in ANSWER_MODES:
            raise ConfigError(f"judge.mode must be one of {', '.join(ANSWER_MODES)}, got {spec.mode!r}")
        tolerance = _number("tolerance", spec.tolerance)
        if not 0.0 <= tolerance < 1.0:
            raise ConfigError(f"judge.tolerance is relative, in [0, 1): got {tolerance}", "e.g. 0.01 for 1%")
        return AnswerJudge(spec.mode, tolerance, spec.field)
    if kind == "command":
        command = shlex.split(spec.command) if isinstance(spec.command, str) else spec.command
        if command is not None and (not command or not all(isinstance(part, str) for part in command)):
            raise ConfigError("judge.command must be a non-empty string or list of strings",
                              "e.g. command: [python, verify.py, '{workspace}']")
        timeout = None if spec.timeout_s is None else _number("timeout_s", spec.timeout_s)
        return CommandJudge(tuple(command) if command else None, timeout, base_dir)
    if not spec.model or not spec.rubric:
        raise ConfigError(f"judge (llm) needs `{'model' if not spec.model else 'rubric'}`",
                          "e.g. judge: {kind: llm, model: …, rubric: …}")
    if not os.environ.get(spec.env_key):
        raise ConfigError(f"judge (llm): environment variable {spec.env_key} is not set",
                          "export it, or name another with judge.env_key")
    return LLMJudge(spec.model, spec.rubric, spec.base_url, spec.env_key,
                    int(_number("max_retries", spec.max_retries)), (prices or {}).get(spec.model))


def judge_timeout_s(judge: JudgeConfig | Mapping[str, Any]) -> float:
    """The wall clock a verdict may take: ``judge.timeout_s``, else DEFAULT_JUDGE_TIMEOUT_S (which
    the command judge puts after a Harbor task's own ``verifier_timeout_s``)."""
    spec = judge if isinstance(judge, JudgeConfig) else JudgeConfig.from_block(judge)
    return DEFAULT_JUDGE_TIMEOUT_S if spec.timeout_s is None else _number("timeout_s", spec.timeout_s)


def _number(key: str, value: Any) -> float:
    """A numeric field of the block (JudgeConfig filled the default in): refused unless a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"judge.{key} must be a number, got {value!r}")
    return float(value)


def check_judge_for_tasks(judge: Judge, tasks: Mapping[str, Task]) -> None:
    """Refuse, before anything runs, a judge that cannot judge some task."""
    missing = judge.tasks_it_cannot_judge(tasks)
    if missing:
        raise ConfigError(f"the {type(judge).__name__} cannot judge {len(missing)} task(s): {listing(missing)}",
                          "give those tasks an expected answer / verifier, or pick another judge")


# --- answer --------------------------------------------------------------------------------

_FINAL_ANSWER_TAG = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.DOTALL | re.IGNORECASE)
# A number: optional accounting parentheses or sign (not a hyphen after a word: 1990-1998),
# optional currency, digits with optional
# thousands separators and decimals, optional exponent, optional percent sign.
_NUMBER = re.compile(
    r"(?P<open>\()?\s*(?:(?<![\w)])(?P<sign>[-+]))?[$€£¥]?\s*"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?\s*%?\s*(?P<close>\))?")
_UNIT_WORDS = ("trillions", "trillion", "billions", "billion", "millions", "million", "thousands",
               "thousand", "hundreds", "hundred", "percentage", "percent")


def extract_final_answer(text: str) -> str:
    """The content of ``<FINAL_ANSWER>…</FINAL_ANSWER>`` when present, else the whole text."""
    match = _FINAL_ANSWER_TAG.search(text)
    return match.group(1) if match else text


def normalise_text(text: str) -> str:
    """Case-fold, NFKC, drop punctuation (keeping decimal points), collapse whitespace."""
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-").casefold()
    text = re.sub(r"(?<=\d)\.(?=\d)", "\0", text)   # protect decimal points
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return " ".join(text.replace("\0", ".").split())


def parse_numbers(text: str) -> list[float]:
    """Every number in ``text``: commas, currency and % stripped, ``(12)`` read as -12."""
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    numbers = []
    for match in _NUMBER.finditer(text):
        value = float(match["digits"].replace(",", "") + (match["exp"] or ""))
        negative = match["sign"] == "-" or (match["open"] is not None and match["close"] is not None)
        numbers.append(-value if negative else value)
    return numbers


def _significant_text(text: str) -> str:
    """The words left once numbers and unit words are gone ('March 3, 1977' → 'march')."""
    words = _NUMBER.sub(" ", unicodedata.normalize("NFKC", text).replace("\u2212", "-"))
    words = re.sub(r"\([^)]*\)", " ", normalise_text(words))
    return " ".join(word for word in words.split() if word not in _UNIT_WORDS and len(word) > 1)


def _is_year(value: float) -> bool:
    return 1900 <= value <= 2100 and value == int(value)


def _close(predicted: float, expected: float, tolerance: float) -> bool:
    # a floor of 1e-9 absorbs float parsing noise when the tolerance is 0
    return math.isclose(predicted, expected, rel_tol=max(tolerance, 1e-9), abs_tol=0.0)


def numeric_match(expected: str, predicted: str, tolerance: float) -> tuple[bool, str]:
    """OfficeQA-style comparison; returns (match, why).

    Every number of the expected answer must appear among the predicted numbers within the
    relative tolerance (unit words are ignored on both sides: '36080 million' matches
    '36,080'). Year-like predicted numbers are ignored unless the expected answer is a year
    or has words. When the expected answer has words ('March 3, 1977') they must appear in
    the prediction too. An expected answer without numbers is compared as normalised text
    (contained in the prediction, parentheticals dropped).
    """
    expected_numbers = parse_numbers(expected)
    expected_words = _significant_text(expected)
    if not expected_numbers:
        want = re.sub(r"\s*\([^)]*\)", "", expected)
        got = re.sub(r"\s*\([^)]*\)", "", predicted)
        ok = bool(normalise_text(want)) and normalise_text(want) in normalise_text(got)
        return ok, f"text {'found' if ok else 'not found'}: expected {expected!r}, got {predicted!r}"
    predicted_numbers = parse_numbers(predicted)
    if not (expected_words or any(_is_year(value) for value in expected_numbers)):
        predicted_numbers = [value for value in predicted_numbers if not _is_year(value)]
    missing = [value for value in expected_numbers
               if not any(_close(got, value, tolerance) for got in predicted_numbers)]
    if missing:
        return False, (f"numbers not found within {tolerance:g}: {missing} "
                       f"(expected {expected!r}, got {predicted!r})")
    if expected_words and expected_words not in _significant_text(predicted):
        return False, f"numbers match but words {expected_words!r} are missing from {predicted!r}"
    return True, f"all {len(expected_numbers)} number(s) match within {tolerance:g}"


@dataclass(frozen=True)
class AnswerJudge(JudgeBase):
    """Compare the agent's final answer with the task's expected answer.

    The answer inside ``<FINAL_ANSWER>…</FINAL_ANSWER>`` is used when the tags are present
    (OfficeQA's convention), else the whole final message; no answer at all is a fail.
    """

    mode: str                         # JudgeConfig's fields (make_judge builds it)
    tolerance: float
    answer_field: str | None = None   # a task record field holding the answer; None: Task.expected

    def expected_for(self, task: Task) -> str | None:
        if self.answer_field is None:
            return task.expected
        value = task.metadata.get(self.answer_field)
        return None if value is None or value == "" else str(value)

    def tasks_it_cannot_judge(self, tasks: Mapping[str, Task]) -> list[str]:
        return [task_id for task_id, task in tasks.items() if self.expected_for(task) is None]

    def _judge(self, task: Task, workspace: Path, final_answer: str | None, *, timeout_s: float,
               verifier_dir: Path | None) -> JudgeVerdict:
        expected = self.expected_for(task)
        if expected is None:
            raise MissingExpectedAnswer(f"task {task.id} has no expected answer"
                                        + (f" in field {self.answer_field!r}" if self.answer_field else ""))
        if not final_answer or not final_answer.strip():
            return JudgeVerdict.from_reward(0.0, "no final answer")
        predicted = extract_final_answer(final_answer).strip()
        if self.mode == "exact":
            ok = predicted == expected.strip()
            why = f"exact: expected {expected.strip()!r}, got {predicted!r}"
        elif self.mode == "normalised":
            ok = normalise_text(predicted) == normalise_text(expected)
            why = f"normalised: expected {normalise_text(expected)!r}, got {normalise_text(predicted)!r}"
        else:
            ok, why = numeric_match(expected, predicted, self.tolerance)
        return JudgeVerdict.from_reward(1.0 if ok else 0.0, ("match: " if ok else "no match: ") + why)


# --- command -------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandJudge(JudgeBase):
    """Run a verifier with cwd = workspace; the reward comes from reward.txt or a JSON line.

    With no ``command`` the task's own verifier (Harbor ``tests/test.sh``) runs under bash.
    Placeholders ``{workspace}``, ``{task_id}``, ``{verifier_dir}``, ``{task_dir}`` and
    ``{base_dir}`` are substituted in the arguments; the same values are in the environment
    as ``HERMIT_WORKSPACE``, ``HERMIT_TASK_ID``, ``HERMIT_VERIFIER_DIR``, ``HERMIT_TASK_DIR``,
    plus ``HERMIT_TESTS_DIR``, ``HERMIT_FINAL_ANSWER_FILE`` and ``HERMIT_EXPECTED_ANSWER``.
    Reward sources, first found wins: ``$HERMIT_VERIFIER_DIR/reward.txt``,
    ``<workspace>/reward.txt`` (one the agent left before the verifier ran is removed first),
    the last stdout line that is a JSON object with a ``reward``.
    """

    command: tuple[str, ...] | None = None
    timeout_s: float | None = None
    base_dir: Path | None = None

    def tasks_it_cannot_judge(self, tasks: Mapping[str, Task]) -> list[str]:
        return [] if self.command else [task_id for task_id, task in tasks.items() if task.verifier is None]

    def _judge(self, task: Task, workspace: Path, final_answer: str | None, *, timeout_s: float,
               verifier_dir: Path | None) -> JudgeVerdict:
        if verifier_dir is None:
            with tempfile.TemporaryDirectory(prefix="hermit-verifier-") as scratch:
                return self._run(task, Path(workspace), final_answer, timeout_s, Path(scratch))
        # a fresh directory: nothing an agent put beside its workspace (a link named reward.txt or
        # final_answer.txt) is written through or read back
        if verifier_dir.is_symlink() or (verifier_dir.exists() and not verifier_dir.is_dir()):
            verifier_dir.unlink()
        elif verifier_dir.exists():
            shutil.rmtree(verifier_dir)
        verifier_dir.mkdir(parents=True)
        return self._run(task, Path(workspace), final_answer, timeout_s, verifier_dir)

    def _run(self, task: Task, workspace: Path, final_answer: str | None, timeout_s: float,
             verifier_dir: Path) -> JudgeVerdict:
        if self.command is None and task.verifier is None:
            raise FileNotFoundError(f"task {task.id} has no verifier and judge.command is not set")
        task_dir = Path(task.metadata.get("task_dir", task.verifier.parent.parent if task.verifier else workspace))
        values = {"{workspace}": str(workspace), "{task_id}": task.id, "{verifier_dir}": str(verifier_dir),
                  "{task_dir}": str(task_dir), "{base_dir}": str(self.base_dir or workspace)}
        argv = [_substitute(part, values) for part in self.command] if self.command else [
            "bash", str(task.verifier)]
        answer_file = verifier_dir / "final_answer.txt"
        answer_file.write_text(final_answer or "", encoding="utf-8")
        stale = workspace / "reward.txt"
        note = ""
        if os.path.lexists(stale):   # the agent must not be able to grade itself (nor leave a link to write through)
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale)
            else:
                stale.unlink()
            note = "[hermit] removed a reward.txt the agent left in the workspace\n"
        env = {**os.environ, "HERMIT_WORKSPACE": str(workspace), "HERMIT_TASK_ID": task.id,
               "HERMIT_VERIFIER_DIR": str(verifier_dir), "HERMIT_TASK_DIR": str(task_dir),
               "HERMIT_TESTS_DIR": str(task.verifier.parent if task.verifier else task_dir),
               "HERMIT_FINAL_ANSWER_FILE": str(answer_file),
               "HERMIT_EXPECTED_ANSWER": task.expected or ""}
        limit = self.timeout_s or task.metadata.get("verifier_timeout_s") or timeout_s
        output, timed_out = _run_with_timeout(argv, workspace, env, limit)
        output = note + output
        if timed_out:
            return JudgeVerdict.exception(VERIFIER_TIMEOUT,
                                     output + f"\n[hermit] verifier timed out after {limit:g}s")
        reward = _reward_from_file(verifier_dir, "reward.txt")
        if reward is None:
            reward = _reward_from_file(workspace, "reward.txt")
        if reward is None:
            reward = _reward_from_json_line(output)
        if reward is None:
            hint = (" (on the host a Harbor verifier writes $HERMIT_VERIFIER_DIR/reward.txt; "
                    "/logs/verifier exists only in its container)" if "/logs/verifier" in output else "")
            return JudgeVerdict.exception(REWARD_MISSING,
                                     output + "\n[hermit] the verifier wrote no reward.txt and no "
                                              f'final JSON line with a "reward"{hint}')
        return JudgeVerdict.from_reward(reward, output)


def _substitute(argument: str, values: Mapping[str, str]) -> str:
    for placeholder, value in values.items():
        argument = argument.replace(placeholder, value)
    return argument


def _run_with_timeout(argv: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float) -> tuple[str, bool]:
    """Run ``argv`` under the process runner; on timeout its whole tree dies. (output, timed_out)."""
    outcome = run_capture(argv, cwd=cwd, env=env, timeout_s=timeout_s, merge_stderr=True)
    return outcome.stdout, outcome.timed_out


def _reward_from_file(directory: Path, name: str) -> float | None:
    """spec §1.1: a reward file that exists but is not a float counts as reward 0 (fail); one that is
    a link or a special file (agent_files) counts as none."""
    try:
        data = read_left_file(directory, name, limit=64 * 1024)
    except RefusedFile:
        return None
    if data is None:
        return None
    try:
        return float(data.decode("utf-8", "replace").strip())
    except ValueError:
        return 0.0


def _reward_from_json_line(output: str) -> float | None:
    """The reward of the last output line that is a JSON object with a ``reward`` key."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "reward" in record:
            try:
                return float(record["reward"])
            except (TypeError, ValueError):
                return 0.0
    return None


# --- llm -----------------------------------------------------------------------------------

_LLM_SYSTEM = """You grade an AI agent's answer to a task against a rubric.
Rubric:
{rubric}

Reply with your reasoning, then on the last line only a JSON object:
{{"reward": 1 or 0, "reason": "<one sentence>"}}. 1 means the answer fully satisfies the rubric."""


@dataclass(frozen=True)
class LLMJudge(JudgeBase):
    """Grade the final answer with a rubric through an OpenAI-compatible chat endpoint."""

    model: str
    rubric: str
    base_url: str | None = None
    env_key: str = "OPENAI_API_KEY"
    max_retries: int = 2
    price: Price | None = None

    def _judge(self, task: Task, workspace: Path, final_answer: str | None, *, timeout_s: float,
               verifier_dir: Path | None) -> JudgeVerdict:
        if not final_answer or not final_answer.strip():
            return JudgeVerdict.from_reward(0.0, "no final answer")
        import openai  # optional extra: only the llm judge needs it

        client = openai.OpenAI(api_key=os.environ.get(self.env_key), base_url=self.base_url,
                               timeout=timeout_s, max_retries=self.max_retries)
        user = f"Task:\n{task.prompt}\n\n"
        if task.expected:
            user += f"Reference answer:\n{task.expected}\n\n"
        user += f"Agent's final answer:\n{extract_final_answer(final_answer)}"
        started = time.monotonic()
        response = client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": _LLM_SYSTEM.format(rubric=self.rubric)},
                      {"role": "user", "content": user}])
        usage = price_usage(_openai_usage(response.usage), self.price)
        text = (response.choices[0].message.content or "") if response.choices else ""
        reward = _reward_from_json_line(text)
        output = f"[llm judge {self.model}, {time.monotonic() - started:.1f}s]\n{text}"
        if reward is None:
            return JudgeVerdict.exception(JUDGE_REPLY_ERROR, output + '\n[hermit] no final {"reward": …} line', usage)
        return JudgeVerdict.from_reward(reward, output, usage)


def _openai_usage(usage: Any) -> Usage:
    """Chat-completions usage → Usage (cached ⊂ input, reasoning ⊂ output, as OpenAI reports)."""
    if usage is None:
        return Usage()
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    return Usage(input_tokens=usage.prompt_tokens or 0,
                 cached_input_tokens=getattr(prompt_details, "cached_tokens", None) or 0,
                 output_tokens=usage.completion_tokens or 0,
                 reasoning_tokens=getattr(completion_details, "reasoning_tokens", None) or 0)
