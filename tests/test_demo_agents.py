"""The offline demo's pieces: the bundled benchmark, the scripted acting agent (it follows the
adapter it reads, hooks included), and the scripted Debugger / Evolve Agent over a simulated
multi-step ahe loop (answers judged by the real numeric judge, verdicts by upstream's table).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from datetime import date
from pathlib import Path

import pytest

from git_hermit.adapter.check_spec import check_adapter, has_errors
from git_hermit.adapter.templates import load_template, write_seed
from git_hermit.demo import DEMO_NOTICE
from git_hermit.demo.acting import run_scripted_agent, skill_fits
from git_hermit.demo.benchmark import BenchmarkTask, load_tasks, write_benchmark
from git_hermit.demo.learners import ANSWER_FORMAT_RULE, scripted_debugger, scripted_evolve
from git_hermit.evolvers.ahe.attribution import verdict_for
from git_hermit.evolvers.ahe.debugger import DebugJob, DebugReport, DebugTrace, render_query
from git_hermit.evolvers.ahe.overview import write_analysis
from git_hermit.model.schema import validate
from git_hermit.rollouts.judges import numeric_match
from git_hermit.rollouts.tasks import load_tasks as load_task_records

TOLERANCE = 0.001
TEMPLATE = load_template("ahe@1.0")
TASKS = {t.id: t for t in load_tasks()}
TRAIN = [t for t in TASKS.values() if t.split == "train"]


# --- helpers: a seed adapter, a plain deployment, a fake host hook ---------------------------

def seed_adapter(root: Path) -> Path:
    adapter = root / "adapter"
    write_seed(TEMPLATE, adapter)
    return adapter


def memory_context(adapter: Path) -> str | None:
    entries: list[str] = []
    for line in (adapter / "MEMORY.md").read_text(encoding="utf-8").splitlines()[1:]:
        if line.startswith("- "):
            entries.append(line[2:].strip())
        elif line.startswith("  ") and entries:
            entries[-1] += " " + line.strip()
    return "Lessons from earlier sessions (long-term memory):\n" + "\n".join(
        f"- {e}" for e in entries) if entries else None


class FakeHost:
    """Deploys AGENTS.md and skills where Codex reads them; its hooks hand MEMORY.md over at
    SessionStart (what the real middleware does) and record every call."""

    def __init__(self, adapter: Path):
        self.adapter = adapter
        self.calls: list[tuple[str, dict]] = []

    def deploy(self, workspace: Path, task: BenchmarkTask, bench: Path) -> None:
        workspace.mkdir(parents=True)
        shutil.copyfile(self.adapter / "AGENTS.md", workspace / "AGENTS.md")
        if (self.adapter / ".agents").is_dir():
            shutil.copytree(self.adapter / ".agents", workspace / ".agents")
        for name, source in task.files.items():
            shutil.copyfile(bench / source, workspace / name)

    def run_hook(self, event: str, payload: dict) -> dict | None:
        self.calls.append((event, payload))
        if event == "SessionStart":
            context = memory_context(self.adapter)
            if context:
                return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
        return None


def run_task(host: FakeHost, task: BenchmarkTask, attempt: int, root: Path, bench: Path):
    workspace = root / task.id / str(attempt)
    host.deploy(workspace, task, bench)
    events: list[dict] = []
    answer = run_scripted_agent(workspace, task.prompt, attempt=attempt, emit=events.append,
                                run_hook=host.run_hook)
    ok, why = numeric_match(task.answer, answer, TOLERANCE)
    trajectory = workspace.parent / f"{attempt}.trajectory.jsonl"
    trajectory.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return ok, why, answer, trajectory, events


def family_outcomes(adapter: Path, family: str, root: Path, bench: Path) -> list[bool]:
    host = FakeHost(adapter)
    return [run_task(host, t, a, root, bench)[0]
            for t in TASKS.values() if t.family == family for a in (1, 2)]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("bench")
    write_benchmark(dest)
    return dest


# --- the benchmark ---------------------------------------------------------------------------

def _true_answer(task: BenchmarkTask, bench: Path) -> Decimal:
    """Each expected answer recomputed independently of the data file and the agent."""
    if task.family == "units":
        factor = {"km": 1000, "m": 1, "h": 60, "min": 1, "kg": 1000, "g": 1}
        pairs = re.findall(r"(\d+(?:\.\d+)?)\s*(km|min|kg|m|h|g)\b", task.prompt)
        return sum(Decimal(v) * factor[u] for v, u in pairs)
    if task.family == "csv":
        total = Decimal(0)
        for line in (bench / next(iter(task.files.values()))).read_text().splitlines()[1:]:
            cell = line.rsplit(",", 1)[1]
            total += -Decimal(cell[1:-1]) if cell.startswith("(") else Decimal(cell)
        return total
    if task.family == "dates":
        (y1, m1, d1), (y2, m2, d2) = re.findall(r"(\d{4})-(\d{2})-(\d{2})", task.prompt)
        return Decimal((date(int(y2), int(m2), int(d2)) - date(int(y1), int(m1), int(d1))).days + 1)
    values = [Decimal(v) for v in re.findall(r"\d+(?:\.\d+)?", task.prompt.split(", to")[0])]
    return (sum(values) / len(values)).quantize(Decimal("0.01"), ROUND_HALF_UP)


def test_benchmark_writes_loadable_tasks_rows_and_true_answers(tmp_path):
    info = write_benchmark(tmp_path)
    assert len(info.train_tasks) == 12 and len(info.test_tasks) == 5
    assert {t.family for t in info.tasks} == {"units", "csv", "dates", "mean"}
    records = load_task_records(info.config["tasks"], tmp_path)     # the framework's own loader
    assert set(records) == {t.id for t in info.tasks}
    assert records["csv-3"].files == {"ledger_3.csv": tmp_path / "files" / "ledger_3.csv"}
    train = (tmp_path / "rows/train.txt").read_text().split()
    assert train[:2] == ["units-1#1", "units-1#2"] and len(train) == 24
    assert not set(info.train_tasks) & set(info.test_tasks)
    for task in info.tasks:
        assert Decimal(task.answer) == _true_answer(task, tmp_path), task.id
        # the numeric judge ignores year-like numbers: no answer may look like one
        assert not 1900 <= float(task.answer) <= 2100
    assert info.config["evolver"] == {"name": "ahe", "base": "scripted", "scripted": {
        "debugger": "git_hermit.demo.learners:debugger_session", "evolve": "git_hermit.demo.learners:evolve_session"},
        "params": {"k": 2, "rollback": "auto", "target_pass_rate": 0.95}}
    assert info.config["agent"] == {"backend": "scripted",
                                   "scripted": {"policy": "git_hermit.demo.acting:run_scripted_agent"}}


def test_notice_says_simulated_and_how_to_use_real_agents():
    assert "simulated" in DEMO_NOTICE
    for needle in ("backend: codex", "backend: claude-code", "base_url: http://127.0.0.1:8000/v1",
                   "wire_api: responses", "env_key"):
        assert needle in DEMO_NOTICE


# --- the acting agent ------------------------------------------------------------------------

def test_event_stream_has_codex_exec_shape_and_real_command_output(tmp_path, bench):
    host = FakeHost(seed_adapter(tmp_path))
    ok, _, answer, _, events = run_task(host, TASKS["csv-1"], 1, tmp_path / "ws", bench)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "thread.started" and kinds[1] == "turn.started" and kinds[-1] == "turn.completed"
    commands = [e["item"] for e in events if e["type"] == "item.completed"
                and e["item"]["type"] == "command_execution"]
    head = commands[0]
    assert head["command"] == "head -n 5 ledger_1.csv" and head["exit_code"] == 0
    assert head["aggregated_output"].startswith("date,item,amount\n2025-01-03,consulting,1200")
    messages = [e["item"]["text"] for e in events if e.get("item", {}).get("type") == "agent_message"]
    assert messages[-1] == answer
    usage = events[-1]["usage"]
    assert set(usage) == {"input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens"}
    assert usage["input_tokens"] > usage["cached_input_tokens"] > 0 and usage["output_tokens"] > 0
    # hooks in Codex's order, with Codex's payload fields
    order = [event for event, _ in host.calls]
    assert order[:2] == ["SessionStart", "UserPromptSubmit"] and order[-1] == "Stop"
    pre = next(p for e, p in host.calls if e == "PreToolUse")
    post = next(p for e, p in host.calls if e == "PostToolUse")
    assert pre["tool_name"] == "Bash" and pre["tool_input"] == {"command": "head -n 5 ledger_1.csv"}
    assert post["tool_use_id"] == pre["tool_use_id"] and post["tool_response"] == head["aggregated_output"]
    assert order.count("PreToolUse") == order.count("PostToolUse") == len(commands)


@pytest.mark.parametrize("family", ["units", "csv", "dates"])
def test_family_fails_on_some_attempts_without_guidance(tmp_path, bench, family):
    outcomes = family_outcomes(seed_adapter(tmp_path), family, tmp_path / "ws", bench)
    assert not all(outcomes), f"{family} never fails on the seed adapter"
    assert any(outcomes), f"{family} never passes on the seed adapter (k=2 should give partial passes)"


def test_mean_family_passes_on_the_seed(tmp_path, bench):
    assert all(family_outcomes(seed_adapter(tmp_path), "mean", tmp_path / "ws", bench))


def _write_skill(adapter: Path, name: str, text: str) -> None:
    path = adapter / ".agents" / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_each_family_passes_with_the_right_guidance(tmp_path, bench):
    from git_hermit.demo import learners
    adapter = seed_adapter(tmp_path)
    _write_skill(adapter, "unit-conversion", learners.UNITS_SKILL_TEXT)
    _write_skill(adapter, "csv-column-total", learners.CSV_SKILL_TEXT + learners.CSV_PARENTHESES_STEP)
    with (adapter / "MEMORY.md").open("a", encoding="utf-8") as handle:
        handle.write(learners.DATES_MEMORY)
    for family in ("units", "csv", "dates", "mean"):
        assert all(family_outcomes(adapter, family, tmp_path / family, bench)), family


def test_memory_reaches_the_agent_only_through_the_session_start_hook(tmp_path, bench):
    from git_hermit.demo import learners
    adapter = seed_adapter(tmp_path)
    with (adapter / "MEMORY.md").open("a", encoding="utf-8") as handle:
        handle.write(learners.DATES_MEMORY)

    class NoHooks(FakeHost):
        def run_hook(self, event, payload):
            return None
    host = NoHooks(adapter)
    outcomes = [run_task(host, t, a, tmp_path / "ws", bench)[0]
                for t in TASKS.values() if t.family == "dates" for a in (1, 2)]
    assert not all(outcomes)


def test_a_skill_loads_only_when_its_description_fits():
    from git_hermit.demo import learners
    description = "Use when a task asks for the total or sum of a column in a CSV file."
    assert skill_fits(description, TASKS["csv-1"].prompt)
    assert not skill_fits(description, TASKS["units-1"].prompt)
    units = learners.UNITS_SKILL_TEXT.split("description: ", 1)[1].splitlines()[0]
    assert all(skill_fits(units, t.prompt) for t in TASKS.values() if t.family == "units")
    assert not any(skill_fits(units, t.prompt) for t in TASKS.values() if t.family != "units")


def test_the_integer_answer_rule_breaks_the_decimal_tasks_only(tmp_path, bench):
    adapter = seed_adapter(tmp_path)
    text = (adapter / "AGENTS.md").read_text() + ANSWER_FORMAT_RULE
    (adapter / "AGENTS.md").write_text(text)
    assert not any(family_outcomes(adapter, "mean", tmp_path / "mean", bench))
    seed = family_outcomes(seed_adapter(tmp_path / "seed"), "dates", tmp_path / "d0", bench)
    assert family_outcomes(adapter, "dates", tmp_path / "d1", bench) == seed   # integers unaffected


def test_a_denying_hook_stops_the_command(tmp_path, bench):
    class Denier(FakeHost):
        def run_hook(self, event, payload):
            super().run_hook(event, payload)
            if event == "PreToolUse" and "python3" in payload["tool_input"]["command"]:
                return {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                               "permissionDecisionReason": "no python"}}
            return None
    host = Denier(seed_adapter(tmp_path))
    ok, _, answer, _, events = run_task(host, TASKS["dates-1"], 1, tmp_path / "ws", bench)
    assert not ok and answer == ""
    ran = [e["item"]["command"] for e in events if e.get("item", {}).get("type") == "command_execution"]
    assert not any("python3" in command for command in ran)
    assert "PostToolUse" not in [event for event, _ in host.calls]


def test_python3_in_the_agents_commands_is_the_interpreter_git_hermit_runs_on(tmp_path, bench, monkeypatch):
    """A `python3` found first on PATH (a version manager's shim: pyenv's starts a dozen processes
    a call) is not what runs the demo's arithmetic; the commands' text stays `python3 -c ...`."""
    shims = tmp_path / "shims"
    shims.mkdir()
    marker = tmp_path / "shim-ran"
    (shims / "python3").write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 1\n")
    (shims / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    ok, why, _, _, events = run_task(FakeHost(seed_adapter(tmp_path)), TASKS["mean-1"], 1, tmp_path / "ws", bench)
    ran = [e["item"]["command"] for e in events if e.get("item", {}).get("type") == "command_execution"]
    assert ran and all(command.startswith("python3 -c ") for command in ran)
    assert ok, why
    assert not marker.exists()


def test_real_deployment_hooks_hand_memory_to_the_agent(tmp_path, bench):
    """The template's real middleware, deployed for Codex, run as a host runs hook commands."""
    from git_hermit.adapter.deploy import deploy
    from git_hermit.demo import learners
    adapter = seed_adapter(tmp_path)
    with (adapter / "MEMORY.md").open("a", encoding="utf-8") as handle:
        handle.write(learners.DATES_MEMORY)
    results = []
    for task in (t for t in TASKS.values() if t.family == "dates"):
        for attempt in (1, 2):
            workspace = tmp_path / "ws" / task.id / str(attempt)
            record = deploy(adapter, workspace, "codex")

            def run_hook(event: str, payload: dict) -> dict | None:
                done = subprocess.run(record.command_for(event), shell=True, cwd=workspace, input=json.dumps(payload),
                                      capture_output=True, text=True, timeout=30)
                return json.loads(done.stdout) if done.stdout.strip() else None
            answer = run_scripted_agent(workspace, task.prompt, attempt=attempt, emit=lambda e: None,
                                        run_hook=run_hook)
            results.append(numeric_match(task.answer, answer, TOLERANCE)[0])
    assert all(results)


# --- the scripted learners -------------------------------------------------------------------

def _debug_job(task: str, traces: list[tuple[bool, str, Path]]) -> DebugJob:
    items = tuple(DebugTrace(attempt=i, label="PASS" if ok else "FAIL", reward=1.0 if ok else 0.0,
                             trajectory=path.as_posix(), steps_dir=None, hook_log=None,
                             verifier_output="" if ok else why)
                  for i, (ok, why, path) in enumerate(traces, start=1))
    n_pass = sum(1 for ok, _, _ in traces if ok)
    n_fail = len(traces) - n_pass
    job = DebugJob(task, "debug" if n_fail else "summary", n_pass, n_fail, 0, False, items)
    return DebugJob(**{**job.__dict__, "query": render_query(job, k=2)})


@pytest.mark.parametrize("task_id, root_cause", [
    ("units-1", "[unit-mix]"), ("csv-2", "[csv-isdigit]"), ("dates-2", "[dates-exclusive]")])
def test_debugger_names_the_root_cause_it_sees(tmp_path, bench, task_id, root_cause):
    host = FakeHost(seed_adapter(tmp_path))
    traces = []
    for attempt in (1, 2):
        ok, why, _, path, _ = run_task(host, TASKS[task_id], attempt, tmp_path / "ws", bench)
        traces.append((ok, why, path))
    assert not all(ok for ok, _, _ in traces)
    job = _debug_job(task_id, traces)
    report = scripted_debugger(job.query, [Path(p) for p in job.trace_paths], tmp_path)
    root = report.split("1. ROOT CAUSE:", 1)[1].split("\n\n", 1)[0]
    assert root_cause in root
    for section in ("PASS vs FAIL:", "CRITICAL MISTAKE:", "GENERAL MECHANISM:"):
        assert section in report


def test_debugger_summary_flags_answers_that_need_decimals(tmp_path, bench):
    host = FakeHost(seed_adapter(tmp_path))
    traces = [run_task(host, TASKS["mean-1"], a, tmp_path / "ws", bench) for a in (1, 2)]
    job = _debug_job("mean-1", [(ok, why, path) for ok, why, _, path, _ in traces])
    report = scripted_debugger(job.query, [Path(p) for p in job.trace_paths], tmp_path)
    assert "KEY STRATEGY" in report and "[needs-decimals]" in report


# --- a simulated ahe loop --------------------------------------------------------------------

class Loop:
    """A tiny stand-in for the step driver: rollouts, pass@1, verdicts by upstream's table,
    file-wise rollback of HARMFUL changes, the Debugger's analysis, the Evolve Agent."""

    def __init__(self, root: Path, bench: Path):
        self.root, self.bench = root, bench
        self.workspace = root / "evolve"
        self.adapter = seed_adapter(self.workspace)
        self.state = self.workspace / "state"
        self.pass_at_1: list[float] = []
        self.verdicts: list[dict] = []
        self.rolled_back: list[str] = []
        self.manifests: list[dict] = []
        self._before_edit: dict[str, bytes | None] = {}

    def snapshot(self) -> dict[str, bytes | None]:
        return {p.relative_to(self.adapter).as_posix(): p.read_bytes()
                for p in self.adapter.rglob("*") if p.is_file()}

    def step(self, n: int, previous: dict[str, str] | None) -> dict[str, str]:
        host = FakeHost(self.adapter)
        runs: dict[str, list] = {}
        for task in TRAIN:
            runs[task.id] = [run_task(host, task, a, self.root / f"step{n}", self.bench) for a in (1, 2)]
        labels = {t: "pass" if all(r[0] for r in rs) else "fail" for t, rs in runs.items()}
        self.pass_at_1.append(sum(r[0] for rs in runs.values() for r in rs) / (2 * len(runs)))
        if previous is not None and self.manifests:
            flipped = {t for t in labels if previous[t] == "fail" and labels[t] == "pass"}
            regressed = {t for t in labels if previous[t] == "pass" and labels[t] == "fail"}
            evaluations = []
            for change in self.manifests[-1]["changes"]:
                fixed = [t for t in change["predicted_fixes"] if t in flipped]
                hit = [t for t in change["risk_tasks"] if t in regressed]
                verdict = verdict_for(len(fixed), len(change["predicted_fixes"]), len(hit))
                evaluations.append({"change_id": change["id"], "description": change["description"],
                                    "files": change["files"], "predicted_fixes": change["predicted_fixes"],
                                    "actually_fixed": fixed,
                                    "still_failed": [t for t in change["predicted_fixes"] if t not in flipped],
                                    "risk_realized": hit, "verdict": verdict})
                if verdict == "HARMFUL":                      # rollback: auto, file-wise
                    for rel in change["files"]:
                        old = self._before_edit.get(rel)
                        if old is None:
                            (self.adapter / rel).unlink()
                        else:
                            (self.adapter / rel).write_bytes(old)
                    self.rolled_back.append(change["description"])
            self.verdicts.extend(evaluations)
            path = self.state / "evaluations" / f"step_{n:04d}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"evaluating_iteration": n - 1, "change_evaluations": evaluations}))
        reports = []
        for task, rs in runs.items():
            job = _debug_job(task, [(ok, why, path) for ok, why, _, path, _ in rs])
            reports.append(DebugReport(job, scripted_debugger(job.query, [Path(p) for p in job.trace_paths],
                                                              self.workspace)))
        write_analysis(self.state / "analysis" / f"step_{n:04d}", n, reports)
        self._before_edit = self.snapshot()
        scripted_evolve(self.workspace, n)
        manifest = json.loads((self.state / "change_manifest.json").read_text())
        validate("learner_manifest", manifest)
        assert manifest["iteration"] == n
        violations = check_adapter(self.adapter, TEMPLATE)
        assert not has_errors(violations), [str(v) for v in violations]
        self.manifests.append(manifest)
        return labels


def test_simulated_loop_rises_and_rolls_back_one_harmful_change(tmp_path, bench):
    loop = Loop(tmp_path, bench)
    labels = None
    for n in range(1, 7):
        labels = loop.step(n, labels)
        if loop.pass_at_1[-1] >= 0.95:
            break
    assert loop.pass_at_1[0] < 0.75 and loop.pass_at_1[-1] >= 0.95, loop.pass_at_1
    assert 4 <= len(loop.pass_at_1) <= 6
    verdicts = {v["verdict"] for v in loop.verdicts}
    harmful = [v for v in loop.verdicts if v["verdict"] == "HARMFUL"]
    assert len(harmful) == 1 and harmful[0]["risk_realized"] and not harmful[0]["actually_fixed"]
    assert "EFFECTIVE" in verdicts                            # predictions confirmed ...
    assert any(v["still_failed"] for v in loop.verdicts)      # ... and refuted
    # rolled back, and never re-applied although the reports keep showing its symptom
    assert loop.rolled_back == [harmful[0]["description"]]
    assert "rounded to an integer" not in (loop.adapter / "AGENTS.md").read_text()
    assert (loop.adapter / "AGENTS.md").read_text() == (loop.adapter / "ADAPTER.md").read_text()
    assert (loop.adapter / ".agents/skills/csv-column-total/SKILL.md").read_text().startswith("---\nname:")
    assert any(line.startswith("- ") and "inclusive" in line
               for line in (loop.adapter / "MEMORY.md").read_text().splitlines())
    # the learned adapter carries over to the held-out tasks of the same families
    host = FakeHost(loop.adapter)
    held_out = [run_task(host, t, a, tmp_path / "test", bench)[0]
                for t in TASKS.values() if t.split == "test" for a in (1, 2)]
    seed_host = FakeHost(seed_adapter(tmp_path / "seed"))
    seed_held_out = [run_task(seed_host, t, a, tmp_path / "test0", bench)[0]
                     for t in TASKS.values() if t.split == "test" for a in (1, 2)]
    assert all(held_out) and not all(seed_held_out)


def test_evolver_undoes_a_harmful_rule_left_in_place_when_rollback_is_the_agents(tmp_path, bench):
    """rollback: agent — the verdict is only reported; the Evolve Agent removes the rule itself."""
    loop = Loop(tmp_path, bench)
    adapter = loop.adapter
    (adapter / "AGENTS.md").write_text((adapter / "AGENTS.md").read_text() + ANSWER_FORMAT_RULE)
    (adapter / "ADAPTER.md").write_text((adapter / "AGENTS.md").read_text())
    loop.step(1, None)
    manifest = loop.manifests[0]
    rollback = [c for c in manifest["changes"] if c["type"] == "rollback"]
    assert rollback and {"mean-1", "mean-2", "mean-3"} <= set(rollback[0]["predicted_fixes"])
    assert "rounded to an integer" not in (adapter / "AGENTS.md").read_text()
    assert (adapter / "AGENTS.md").read_text() == (adapter / "ADAPTER.md").read_text()


def test_evolver_with_no_reports_writes_an_empty_manifest(tmp_path):
    seed_adapter(tmp_path)
    summary = scripted_evolve(tmp_path, 3)
    manifest = json.loads((tmp_path / "state" / "change_manifest.json").read_text())
    validate("learner_manifest", manifest)
    assert manifest == {"iteration": 3, "changes": []} and "No change" in summary
