"""Benchmark: stream-read a ~100 MB synthetic trajectory: a ``codex exec --json`` stream, a
Codex rollout or a Claude Code session file (``--format``; default the exec stream).

Figure: ``summarize`` throughput (MB/s) and peak RSS, measured in a fresh child process so
generating the file does not pollute it (peak RSS = the child's VmHWM, else ``getrusage``). Reference, same file, same kind of child: raw line
iteration + ``json.loads`` of every line (the floor any JSONL reader pays). Printed as ratios.

    python bench/trajectory_read.py [--mb 100] [--format codex-exec|codex-rollout|claude-session] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

WORDS = ("error", "test", "src", "build", "passed", "failed", "import", "def", "return", "value",
         "module", "path", "line", "assert", "warning", "config", "/ws/app.py", "OK", "0x1f", "{}")


def _commands(rng: random.Random, corpus: str, item: int):
    """One turn's tool calls: (id, command, output, exit code), the exec stream's mix."""
    for _ in range(rng.randint(5, 40)):
        item += 1
        size = rng.choices((40, 200, 1500, 8000, 64000), weights=(30, 30, 20, 15, 5))[0]
        start = rng.randint(0, len(corpus) - size)
        yield item, f"pytest -q tests/test_{item % 97}.py", corpus[start:start + size], \
            (1 if rng.random() < 0.15 else 0)


def generate_rollout(path: Path, target_mb: int, seed: int = 7) -> int:
    """A Codex rollout of about ``target_mb`` MB: per turn a prompt, calls with their outputs
    ("Process exited with code N" headers), an answer, the running token_count."""
    rng = random.Random(seed)
    corpus = " ".join(rng.choice(WORDS) for _ in range(400_000))
    written, item, total = 0, 0, 0
    with open(path, "w", encoding="utf-8") as out:
        def emit(kind: str, payload: dict) -> None:
            nonlocal written
            line = json.dumps({"timestamp": "2026-07-01T00:00:00.000Z", "type": kind, "payload": payload}) + "\n"
            out.write(line)
            written += len(line)

        emit("session_meta", {"id": "019f0000-0000-7000-8000-000000000001", "cli_version": "0.145.0"})
        while written < target_mb * 1_000_000:
            emit("event_msg", {"type": "task_started"})
            emit("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": corpus[:rng.randint(40, 400)]}]})
            for item, command, output, code in _commands(rng, corpus, item):
                emit("response_item", {"type": "function_call", "name": "exec_command", "call_id": f"call_{item}",
                                       "arguments": json.dumps({"cmd": command})})
                emit("response_item", {"type": "function_call_output", "call_id": f"call_{item}", "output":
                                       f"Chunk ID: x\nWall time: 0.1 seconds\nProcess exited with code {code}\n"
                                       f"Original token count: 1\nOutput:\n{output}"})
                call = rng.randint(10_000, 200_000)
                total += call
                usage = {"input_tokens": call, "cached_input_tokens": 0, "output_tokens": 50,
                         "reasoning_output_tokens": 0}
                emit("event_msg", {"type": "token_count", "info": {
                    "total_token_usage": {**usage, "input_tokens": total}, "last_token_usage": usage}})
            emit("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": corpus[:rng.randint(80, 1200)]}]})
            emit("event_msg", {"type": "task_complete", "last_agent_message": "done"})
    return written


def generate_claude(path: Path, target_mb: int, seed: int = 7) -> int:
    """A Claude Code session file of about ``target_mb`` MB, chained by parentUuid: per turn a
    prompt, then per call an assistant record (its usage) and the user record of its result."""
    rng = random.Random(seed)
    corpus = " ".join(rng.choice(WORDS) for _ in range(400_000))
    written, item, parent = 0, 0, None
    with open(path, "w", encoding="utf-8") as out:
        def emit(record: dict) -> None:
            nonlocal written, parent
            record = {"parentUuid": parent, "isSidechain": False, "sessionId": "s", "version": "2.1.219",
                      "uuid": f"u{written}", "timestamp": "2026-07-01T00:00:00.000Z", **record}
            parent = record["uuid"]
            line = json.dumps(record) + "\n"
            out.write(line)
            written += len(line)

        while written < target_mb * 1_000_000:
            emit({"type": "user", "message": {"role": "user", "content": corpus[:rng.randint(40, 400)]}})
            for item, command, output, code in _commands(rng, corpus, item):
                emit({"type": "assistant", "message": {
                    "id": f"msg_{item}", "model": "claude-opus-5", "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"toolu_{item}", "name": "Bash",
                                 "input": {"command": command}}],
                    "usage": {"input_tokens": 3, "cache_read_input_tokens": rng.randint(10_000, 200_000),
                              "output_tokens": 50}}})
                emit({"type": "user", "message": {"role": "user", "content": [{
                    "type": "tool_result", "tool_use_id": f"toolu_{item}", "content": output,
                    "is_error": bool(code)}]}})
            emit({"type": "assistant", "message": {"id": f"msg_{item}_end", "role": "assistant",
                                                   "content": [{"type": "text", "text": "done"}],
                                                   "usage": {"input_tokens": 3, "output_tokens": 5}}})
    return written


def generate(path: Path, target_mb: int, seed: int = 7) -> int:
    """Write a Codex exec stream of about ``target_mb`` MB; the line mix mirrors real runs:
    per turn a few reasoning items, many command executions (outputs from a line to ~64 KB,
    some failing), a file change, an agent message, and the turn's usage."""
    rng = random.Random(seed)
    corpus = " ".join(rng.choice(WORDS) for _ in range(400_000))   # ~2.4 MB to slice outputs from
    target = target_mb * 1_000_000
    written = 0
    item = 0
    with open(path, "w", encoding="utf-8") as out:
        def emit(record: dict) -> None:
            nonlocal written
            line = json.dumps(record) + "\n"
            out.write(line)
            written += len(line)

        emit({"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"})
        while written < target:
            emit({"type": "turn.started"})
            for _ in range(rng.randint(5, 40)):
                item += 1
                if rng.random() < 0.3:
                    emit({"type": "item.completed", "item": {"id": f"item_{item}", "type": "reasoning",
                                                             "text": corpus[:rng.randint(50, 600)]}})
                    continue
                size = rng.choices((40, 200, 1500, 8000, 64000), weights=(30, 30, 20, 15, 5))[0]
                start = rng.randint(0, len(corpus) - size)
                command = f"/bin/bash -lc 'pytest -q tests/test_{item % 97}.py'"
                exit_code = 1 if rng.random() < 0.15 else 0
                emit({"type": "item.started", "item": {"id": f"item_{item}", "type": "command_execution",
                                                       "command": command, "aggregated_output": "",
                                                       "exit_code": None, "status": "in_progress"}})
                emit({"type": "item.completed", "item": {
                    "id": f"item_{item}", "type": "command_execution", "command": command,
                    "aggregated_output": corpus[start:start + size], "exit_code": exit_code,
                    "status": "failed" if exit_code else "completed"}})
            item += 1
            emit({"type": "item.completed", "item": {"id": f"item_{item}", "type": "file_change", "status": "completed",
                                                     "changes": [{"path": "/ws/app.py", "kind": "update"}]}})
            item += 1
            emit({"type": "item.completed", "item": {"id": f"item_{item}", "type": "agent_message",
                                                     "text": corpus[:rng.randint(80, 1200)]}})
            emit({"type": "turn.completed", "usage": {
                "input_tokens": rng.randint(10_000, 200_000), "cached_input_tokens": rng.randint(0, 9_000),
                "cache_write_input_tokens": 0, "output_tokens": rng.randint(100, 5_000),
                "reasoning_output_tokens": rng.randint(0, 90)}})
    return written


_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    path, mode, fmt = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

    def peak_kb():
        # VmHWM is this address space's own peak; ru_maxrss can carry the forking parent's
        # peak across exec on Linux, which would hide the reader's footprint
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    if mode == "summarize":
        from git_hermit.trajectories import summarize
    base_kb = peak_kb()
    start = time.perf_counter()
    if mode == "summarize":
        summary = summarize(path, fmt)
        detail = {"steps": summary.steps, "tool_calls": summary.tool_calls,
                  "failed": summary.failed_tool_calls, "input_tokens": summary.usage.input_tokens}
    else:
        lines = 0
        with open(path, "rb") as stream:
            for raw in stream:
                json.loads(raw)
                lines += 1
        detail = {"lines": lines}
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "base_kb": base_kb,
                      "peak_kb": peak_kb(), **detail}))
""")


def measure(path: Path, modes: tuple[str, ...], fmt: str = "codex-exec", repeats: int = 5) -> dict[str, dict]:
    """Per mode, the fastest of ``repeats`` fresh child runs, the modes interleaved so both
    see the same load (the machine is shared: noise only ever slows a run down)."""
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    for _ in range(repeats):
        for mode in modes:
            done = subprocess.run([sys.executable, "-c", _CHILD, str(path), mode, fmt], check=True,
                                  capture_output=True, text=True)
            runs[mode].append(json.loads(done.stdout))
    return {mode: min(results, key=lambda run: run["seconds"]) for mode, results in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the synthetic trajectory")
    parser.add_argument("--format", default="codex-exec", choices=sorted(GENERATORS),
                        help="the synthetic trajectory's format")
    parser.add_argument("--keep", type=Path, help="write the file here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{args.format}-synthetic.jsonl"
        size = GENERATORS[args.format](path, args.mb)
        megabytes = size / 1e6
        measured = measure(path, ("summarize", "json-lines"), args.format)
    ours, reference = measured["summarize"], measured["json-lines"]
    ours_rate = megabytes / ours["seconds"]
    ref_rate = megabytes / reference["seconds"]
    print(f"file: {megabytes:.1f} MB, {reference['lines']} lines (synthetic {args.format})")
    print(f"summarize:             {ours['seconds']:.2f} s  {ours_rate:6.1f} MB/s  peak RSS {ours['peak_kb'] / 1024:.1f} MB "
          f"(after imports {ours['base_kb'] / 1024:.1f} MB)  steps {ours['steps']}, tool calls {ours['tool_calls']}, "
          f"failed {ours['failed']}")
    print(f"reference json.loads:  {reference['seconds']:.2f} s  {ref_rate:6.1f} MB/s  peak RSS "
          f"{reference['peak_kb'] / 1024:.1f} MB (after start {reference['base_kb'] / 1024:.1f} MB)")
    print(f"ratio: throughput {ours_rate / ref_rate:.2f}x the reference; "
          f"peak RSS {ours['peak_kb'] / reference['peak_kb']:.2f}x; "
          f"RSS growth while reading {(ours['peak_kb'] - ours['base_kb']) / 1024:.1f} MB "
          f"for a {megabytes:.0f} MB file")


GENERATORS = {"codex-exec": generate, "codex-rollout": generate_rollout, "claude-session": generate_claude}


if __name__ == "__main__":
    main()
