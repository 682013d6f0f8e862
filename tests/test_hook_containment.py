"""Issue 10 items 7-8: whatever the middleware does, the deployed hook runner answers the host
validly (strict JSON within the host's sizes, exit 0, its pipes closed) and logs the call."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.hook_runtime_helpers import CLAUDE_BASE, CODEX_BASE, deployed, fire, log_entries

SESSION_START = {**CLAUDE_BASE, "source": "startup"}
BASH = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "c1"}


def strict_loads(text: str):
    """Parse as Codex's serde_json would: no NaN/Infinity, no lone surrogates."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    value = json.loads(text, parse_constant=refuse)

    def walk(item):
        if isinstance(item, str):
            item.encode("utf-8")      # a lone surrogate cannot be encoded
        elif isinstance(item, dict):
            for key, each in item.items():
                walk(key)
                walk(each)
        elif isinstance(item, list):
            for each in item:
                walk(each)
    walk(value)
    return value


# -- item 7: strict JSON within the host's sizes ----------------------------------------------

def test_nan_infinity_and_lone_surrogates_become_strict_json(tmp_path):
    extra = ("def before_tool(inp):\n"
             "    return HookResult(context='bad \\ud800 surrogate', updated_input="
             "{'command': 'ls \\udfff', 'n': float('nan'), 'big': float('inf'), 'neg': float('-inf')})\n")
    dest = deployed(tmp_path, extra=extra)
    out = fire(dest, "PreToolUse", {**CLAUDE_BASE, **BASH})
    value = strict_loads(out)
    specific = value["hookSpecificOutput"]
    assert specific["additionalContext"].startswith("bad ") and specific["updatedInput"]["command"].startswith("ls ")
    assert specific["updatedInput"]["n"] is None and specific["updatedInput"]["big"] is None
    for line in (dest / ".hermit-hooks" / "hook-calls.jsonl").read_text().splitlines():
        strict_loads(line)


def test_a_huge_context_is_cut_to_what_the_host_accepts(tmp_path):
    extra = "def session_start(inp):\n    return HookResult(context='m' * 5_000_000, system_message='s' * 300_000)\n"
    dest = deployed(tmp_path, extra=extra)
    out = fire(dest, "SessionStart", SESSION_START)
    value = strict_loads(out)
    context = value["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("mmmm") and len(context) <= 10_000 and "cut" in context
    assert len(out) <= 64 * 1024
    [entry] = log_entries(dest)
    assert "cut" in json.dumps(entry)


def test_a_huge_updated_input_is_dropped_not_sent(tmp_path):
    extra = "def before_tool(inp):\n    return HookResult(updated_input={'command': 'x' * 2_000_000})\n"
    dest = deployed(tmp_path, host="codex", extra=extra)
    out = fire(dest, "PreToolUse", {**CODEX_BASE, **BASH})
    assert len(out) <= 64 * 1024
    if out:
        assert "updatedInput" not in strict_loads(out).get("hookSpecificOutput", {})
    [entry] = log_entries(dest)
    assert "updated_input" in json.dumps(entry)


# -- item 8: the middleware cannot make the runner fail closed --------------------------------

ESCAPES = {
    "os._exit(2)": "import os\ndef before_tool(inp):\n    os._exit(2)\n",
    "os.abort()": "import os\ndef before_tool(inp):\n    os.abort()\n",
    "SIGKILL itself": "import os, signal\ndef before_tool(inp):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "SIGTERM itself": "import os, signal\ndef before_tool(inp):\n    os.kill(os.getpid(), signal.SIGTERM)\n",
    "SIGSEGV": "import ctypes\ndef before_tool(inp):\n    ctypes.string_at(0)\n",
    "exit 2 at import": "import os\nos._exit(2)\n",
    "exit after printing to fd 1": "import os\ndef before_tool(inp):\n    os.write(1, b'{\"decision\": \"block\"}')\n"
                                   "    os._exit(2)\n",
    "stderr then exit 2": "import os, sys\ndef before_tool(inp):\n    sys.stderr.write('blocked!')\n"
                          "    sys.stderr.flush()\n    os._exit(2)\n",
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_exits_and_signals_in_the_middleware_still_answer_exit_0_and_log(tmp_path, case):
    dest = deployed(tmp_path, extra=ESCAPES[case])
    record = json.loads((dest / ".hermit-deploy.json").read_text())
    command = record["hook_command"].replace("EVENT", "PreToolUse")
    body = json.dumps({**CLAUDE_BASE, **BASH, "hook_event_name": "PreToolUse"}).encode()
    done = subprocess.run(command, shell=True, input=body, capture_output=True, cwd=dest, timeout=30)
    assert done.returncode == 0 and done.stdout == b"", (done.returncode, done.stdout, done.stderr)
    assert b"blocked!" not in done.stderr
    [entry] = log_entries(dest)
    assert entry["error"] and "middleware" in entry["error"], entry


def test_a_c_level_loop_holding_the_gil_is_ended_within_the_timeout(tmp_path):
    # catastrophic backtracking runs inside the C regex engine, which never releases the GIL
    extra = "import re\ndef session_start(inp):\n    re.match(r'(a+)+$', 'a' * 60 + 'b')\n"
    dest = deployed(tmp_path, extra=extra)
    started = time.monotonic()
    out = fire(dest, "SessionStart", SESSION_START, env={"HERMIT_HOOK_TIMEOUT_S": "1"})
    assert out == "" and time.monotonic() - started < 5
    [entry] = log_entries(dest)
    assert entry["error"].startswith("timeout") and entry["cpu_limit_s"] <= 3


def test_the_cpu_limit_alone_ends_a_loop_holding_the_gil(tmp_path):
    """Even with the runner frozen (nothing left to kill the child), the kernel ends it."""
    pid_file = tmp_path / "child.pid"
    extra = ("import os, re, signal, time\ndef session_start(inp):\n"
             f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
             "    time.sleep(1.5)\n"                              # the runner sets the limit at 0.5-0.75 s
             "    os.kill(os.getppid(), signal.SIGSTOP)\n"       # then freeze it: only the limit is left
             "    re.match(r'(a+)+$', 'a' * 60 + 'b')\n")
    dest = deployed(tmp_path, extra=extra)
    record = json.loads((dest / ".hermit-deploy.json").read_text())
    command = record["hook_command"].replace("EVENT", "SessionStart")
    body = json.dumps({**SESSION_START, "hook_event_name": "SessionStart"}).encode()
    proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=dest, env={**os.environ, "HERMIT_HOOK_TIMEOUT_S": "1"},
                            start_new_session=True)
    proc.stdin.write(body)
    proc.stdin.close()
    proc.stdin = None
    try:
        deadline = time.monotonic() + 60    # 2 s of CPU; the machine may be busy
        ended = False
        while time.monotonic() < deadline and not ended:
            time.sleep(0.1)
            if pid_file.exists() and pid_file.read_text():
                try:      # the child may go between a look and a read
                    state = Path(f"/proc/{pid_file.read_text()}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (FileNotFoundError, ProcessLookupError):
                    state = "gone"
                ended = state in ("Z", "X", "gone")
        assert ended, "the child outlived its CPU limit"
    finally:
        # the runner's group may be gone already (on a busy machine it can end before being frozen):
        # the ProcessLookupError that made this test flaky under -n 2
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out == b""
    [entry] = log_entries(dest)
    assert entry["error"] and entry["cpu_limit_s"] <= 3


def test_a_background_child_cannot_hold_the_hosts_pipes_open(tmp_path):
    pid_file = tmp_path / "bg.pid"
    extra = ("import subprocess\ndef session_start(inp):\n"
             f"    p = subprocess.Popen(['sleep', '60'], close_fds=False)\n"
             f"    open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
             "    return HookResult(context='ok')\n")
    dest = deployed(tmp_path, extra=extra)
    started = time.monotonic()
    try:
        out = fire(dest, "SessionStart", SESSION_START)    # waits for EOF on stdout and stderr
        assert strict_loads(out)["hookSpecificOutput"]["additionalContext"] == "ok"
        assert time.monotonic() - started < 10
        assert log_entries(dest)[0]["error"] is None
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_unbounded_output_is_cut_and_the_call_still_answers(tmp_path):
    extra = ("import os, sys\ndef session_start(inp):\n"
             "    chunk = 'y' * (1 << 20)\n"
             "    for _ in range(64):\n        sys.stderr.write(chunk)\n        os.write(1, chunk.encode())\n"
             "    return HookResult(context='fine')\n")
    dest = deployed(tmp_path, extra=extra)
    record = json.loads((dest / ".hermit-deploy.json").read_text())
    command = record["hook_command"].replace("EVENT", "SessionStart")
    body = json.dumps({**SESSION_START, "hook_event_name": "SessionStart"}).encode()
    done = subprocess.run(command, shell=True, input=body, capture_output=True, cwd=dest, timeout=30)
    assert done.returncode == 0
    assert strict_loads(done.stdout.decode())["hookSpecificOutput"]["additionalContext"] == "fine"
    assert len(done.stderr) < 64 * 1024     # 64 MB written to stderr reach the host cut
    log = (dest / ".hermit-hooks" / "hook-calls.jsonl").read_text()
    assert len(log) < 8192


def test_an_endless_print_loop_is_cut_at_the_deadline(tmp_path):
    extra = "def session_start(inp):\n    while True:\n        print('z' * 10000)\n"
    dest = deployed(tmp_path, extra=extra)
    started = time.monotonic()
    out = fire(dest, "SessionStart", SESSION_START, env={"HERMIT_HOOK_TIMEOUT_S": "1"})
    assert out == "" and time.monotonic() - started < 5
    [entry] = log_entries(dest)
    assert entry["error"] and len(json.dumps(entry)) < 8192


def test_a_forked_child_holding_the_answer_pipe_cannot_stall_the_call(tmp_path):
    """The middleware forks (the fork keeps every descriptor, the answer pipe too), then dies:
    no EOF ever comes, yet the runner answers within its grace and ends the fork."""
    pid_file = tmp_path / "fork.pid"
    extra = ("import os, time\ndef before_tool(inp):\n"
             "    child = os.fork()\n"
             "    if child == 0:\n        time.sleep(60)\n        os._exit(0)\n"
             f"    open({str(pid_file)!r}, 'w').write(str(child))\n"
             "    os._exit(2)\n")
    dest = deployed(tmp_path, extra=extra)
    started = time.monotonic()
    try:
        assert fire(dest, "PreToolUse", {**CLAUDE_BASE, **BASH}) == ""
        assert time.monotonic() - started < 10
        [entry] = log_entries(dest)
        assert "exited with status 2" in entry["error"]
        stat = Path(f"/proc/{pid_file.read_text()}/stat")
        deadline = time.monotonic() + 5
        while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X") \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    finally:
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
