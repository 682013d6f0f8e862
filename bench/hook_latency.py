"""Hook latency: what one hook call of a deployed adapter costs the host, against the bare
interpreter start-up (`<interpreter> -S -c pass`) measured in the same run (target: <= 2x).

Runner part: a real deployment (the seed templates/ahe, and a minimal middleware to separate
the runner's own cost from the middleware's), one real subprocess per call, fed a Codex-shaped
session's payloads in the order Codex fires them. The session-level part (a real CLI with vs
without hooks) belongs to the conformance benchmark: see `session_part` below.

    python bench/hook_latency.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from git_hermit.adapter.deploy import deploy
from git_hermit.resources import templates_dir

MINIMAL_MIDDLEWARE = """\
from hermit_hooks import HookResult
def session_start(inp): return HookResult(context="memory")
def before_tool(inp): return None
def after_tool(inp): return None
def stop(inp): return None
def before_model(inp): return None
"""

BASE = {"session_id": "bench-session", "transcript_path": "/tmp/rollout.jsonl", "model": "gpt-5.6-luna"}
TURN = {"turn_id": "turn-1", "permission_mode": "bypassPermissions"}
CALL = {**TURN, "tool_name": "Bash", "tool_input": {"command": "python -m pytest -q tests/"},
        "tool_use_id": "call_1"}
OUTPUT = "".join(f"tests/test_{i}.py ....\n" for i in range(60)) + "240 passed in 3.1s\n"
# One Codex session with one tool call, in the order the hooks fired (spec/hosts.md).
SESSION = [
    ("SessionStart", {**BASE, "permission_mode": "bypassPermissions", "source": "startup"}),
    ("UserPromptSubmit", {**BASE, **TURN, "prompt": "Fix the failing test in src/parser.py."}),
    ("PreModelRequest", {**BASE, "turn_id": "turn-1"}),
    ("PreToolUse", {**BASE, **CALL}),
    ("PostToolUse", {**BASE, **CALL, "tool_response": OUTPUT}),
    ("PreModelRequest", {**BASE, "turn_id": "turn-1"}),
    ("Stop", {**BASE, **TURN, "stop_hook_active": False, "last_assistant_message": "Done."}),
]


def timed(argv: list[str], stdin: bytes, cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed: {done.stderr.decode()[-300:]}")
    return elapsed


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def runner_part(rounds: int) -> int:
    work = Path(tempfile.mkdtemp(prefix="hermit-bench-hooks-"))
    adapters = {}
    seed = templates_dir() / "ahe"
    if (seed / "middleware.py").is_file():
        adapters["seed middleware (templates/ahe)"] = seed
    minimal = work / "minimal"
    minimal.mkdir()
    (minimal / "AGENTS.md").write_text("# Rules\n")
    (minimal / "MEMORY.md").write_text("# Memory\n\n- a lesson\n")
    (minimal / "middleware.py").write_text(MINIMAL_MIDDLEWARE)
    adapters["minimal middleware"] = minimal

    deployments = {}
    for name, adapter in adapters.items():
        dest = work / ("deploy-" + name.split()[0])
        record = deploy(adapter, dest, "codex")
        payloads = [(shlex.split(record.command_for(event)),
                     json.dumps({**p, "cwd": str(dest), "hook_event_name": event}).encode())
                    for event, p in SESSION]
        deployments[name] = (dest, payloads)
    reference = [record.interpreter, "-S", "-c", "pass"]

    samples: dict[str, list[float]] = {name: [] for name in deployments}
    samples["reference"] = []
    for _ in range(2):  # warm the page cache and the bytecode before measuring
        timed(reference, b"", work)
        for dest, payloads in deployments.values():
            for argv, body in payloads:
                timed(argv, body, dest)
    for _ in range(rounds):  # interleaved, so load on the machine hits every series alike
        for name, (dest, payloads) in deployments.items():
            for argv, body in payloads:
                samples["reference"].append(timed(reference, b"", work))
                samples[name].append(timed(argv, body, dest))

    ref_median, ref_p95 = summary(samples["reference"])
    print(f"hook latency per call, {rounds} Codex sessions x {len(SESSION)} events per series")
    print(f"  reference `{Path(reference[0]).name} -S -c pass`: median {ref_median:.1f} ms, "
          f"p95 {ref_p95:.1f} ms")
    worst = 0.0
    for name in deployments:
        median, p95 = summary(samples[name])
        ratio = median / ref_median
        worst = max(worst, ratio)
        print(f"  runner, {name}: median {median:.1f} ms, p95 {p95:.1f} ms "
              f"-> {ratio:.2f}x the reference median (p95 {p95 / ref_p95:.2f}x); target <= 2x")
        argv, body = deployments[name][1][3]  # a PreToolUse call
        print(f"    imports (cumulative, -X importtime): {import_costs(argv, body, deployments[name][0])}")
        errors = [line for line in (work / ("deploy-" + name.split()[0]) / ".hermit-hooks" / "hook-calls.jsonl")
                  .read_text().splitlines() if json.loads(line)["error"]]
        if errors:
            print(f"    warning: {len(errors)} calls logged an error, e.g. {errors[0][:200]}")
    return 0 if worst <= 2.0 else 1


def import_costs(argv: list[str], body: bytes, cwd: Path) -> str:
    """The runtime's own modules' cumulative import time (`-X importtime`), for one call."""
    traced = [argv[0], "-X", "importtime", *argv[1:]]
    stderr = subprocess.run(traced, input=body, capture_output=True, cwd=cwd).stderr.decode()
    costs = {}
    for line in stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] in ("hook_runner", "hook_wire", "hermit_hooks", "middleware"):
            costs[parts[2]] = int(parts[1])
    return ", ".join(f"{name} {us / 1000:.2f} ms" for name, us in costs.items())


def session_part() -> None:
    """Session level (a real CLI run with vs without hooks on the scripted model server): the
    conformance benchmark owns it and plugs in here; the runner part above needs no CLI."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    status = runner_part(args.rounds)
    session_part()
    return status


if __name__ == "__main__":
    sys.exit(main())
