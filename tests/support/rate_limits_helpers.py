"""Helpers of tests/test_rate_limits.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
import yaml
from support.cli_helpers import hermit
from support.rollouts_e2e_helpers import make_project, result_files

# A stand-in for `codex exec --json`: while the budget file holds a number > 0 it answers as
# Codex does when the model keeps answering 429 (and takes one off); then it answers the task.
FAKE_CODEX = '''#!{python}
import json, sys, time
from pathlib import Path
control = Path({control!r})
prompt = sys.argv[-1]
budget = control / "limited"
left = int(budget.read_text()) if budget.exists() else 0
with open(control / "calls.log", "a") as log:
    log.write(f"{{time.time():.3f}} {{'429' if left > 0 else 'ok'}}\\n")
def emit(event):
    print(json.dumps(event), flush=True)
emit({{"type": "thread.started", "thread_id": "t"}})
emit({{"type": "turn.started"}})
if left > 0:
    budget.write_text(str(left - 1))
    emit({{"type": "error", "message": "Reconnecting... 1/2 (exceeded retry limit, last status: 429 Too Many Requests)"}})
    emit({{"type": "error", "message": "exceeded retry limit, last status: 429 Too Many Requests"}})
    emit({{"type": "turn.failed", "error": {{"message": "exceeded retry limit, last status: 429 Too Many Requests"}}}})
    sys.exit(1)
answer = prompt.split()[-1].rstrip("?")
emit({{"type": "item.completed", "item": {{"id": "i1", "type": "agent_message", "text": answer}}}})
emit({{"type": "turn.completed", "usage": {{"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5}}}})
'''


def _calls(control: Path) -> list[tuple[float, str]]:
    return [(float(t), kind) for t, kind in (line.split() for line in (control / "calls.log").read_text().splitlines())]


# A Codex stand-in whose rate-limited sessions first finish a turn (billed, reported in the
# stream) and then get a 429: as with several model calls and then a 429 on the next one.
FAKE_CODEX_BILLED = FAKE_CODEX.replace(
    "    budget.write_text(str(left - 1))\n",
    "    budget.write_text(str(left - 1))\n"
    "    emit({{\"type\": \"turn.completed\", \"usage\": {{\"input_tokens\": 100, \"cached_input_tokens\": 0, "
    "\"output_tokens\": 20}}}})\n"
    "    emit({{\"type\": \"turn.started\"}})\n")


LIMITED_TOKENS, ANSWER_TOKENS = 120, 15


def _billed_codex_step(repo: Path, limited: int, budget: dict | None = None) -> Path:
    from support.step_support import make_run
    control = make_run(repo, {"t1": "t1", "t2": "t2"}, k=1, concurrency=1)
    fake = control / "codex"
    fake.write_text(FAKE_CODEX_BILLED.format(python=sys.executable, control=str(control)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (control / "limited").write_text(str(limited))
    cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
    cfg["agent"] = {"backend": "codex", "bin": str(fake), "timeout_s": 30,
                    "provider": {"base_url": "http://127.0.0.1:9/v1"}}
    cfg["executor"] = {"kind": "local", "rate_limit": {"retries": 3, "backoff_s": 0.1, "max_backoff_s": 0.5}}
    if budget is not None:
        cfg["budget"] = budget
    (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return control


def _real_host_run(repo: Path, host: str, script, faults: list, agent: dict, code: int = 0):
    """One task through ``rollout`` with the real ``host`` CLI against the scripted model, which
    answers ``script`` after ``faults`` (e.g. a 429 after some billed calls). Returns the result,
    the ledger's entries and the (input, output) tokens the server billed for each answered
    call, in order. ``code``: the exit code expected (17: the one row ended in an exception)."""
    from git_hermit.hostkit.model_server import ScriptedModelServer
    make_project(repo, "print('unused')\n", n_tasks=1, k=1, host=host)
    with open(repo / "tasks.jsonl", "w") as handle:
        handle.write(json.dumps({"id": "t0", "prompt": "Run the check, then answer.", "answer": "42"}) + "\n")
    with ScriptedModelServer(script, faults=faults) as server:
        cfg = yaml.safe_load((repo / "hermit.yaml").read_text())
        provider = {"base_url": server.base_url, "env_key": "SCRIPTED_API_KEY"}
        if host == "codex":           # Codex posts to {base_url}/responses
            provider |= {"base_url": f"{server.base_url}/v1", "wire_api": "responses"}
        cfg["agent"] = {"backend": host, "model": "scripted-model", "provider": provider, **agent}
        cfg["executor"] = {"kind": "local", "rate_limit": {"retries": 2, "backoff_s": 0.2}}
        (repo / "hermit.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        r = hermit(repo, "rollout", "--json", env={"SCRIPTED_API_KEY": "scripted-" + "key" * 4}, timeout=300)
        billed = server.billed()
    assert r.code == code, r.err
    [result_path] = result_files(repo)
    [ledger] = (repo / ".hermit" / "runs" / "ahe" / "evals").glob("*/ledger.json")
    return json.loads(result_path.read_text()), json.loads(ledger.read_text())["entries"], billed

