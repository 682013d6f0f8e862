"""The hook runner: the host starts it on every lifecycle event, payload on stdin. It reads the host from .hermit-deploy.json, turns the payload into
a HookInput through that host's wire, calls the middleware, prints exactly the fields the host
reads, fails open on any error, and logs every call to .hermit-hooks/hook-calls.jsonl.

Start-up cost is paid on every tool call of every rollout, so this file imports only builtin
C modules (`_json`, not `json`, whose import pulls in `re` and costs as much as the
interpreter's own start-up), and ends with os._exit once its output is written. Deployed hooks
import it (`<python> -S -c 'import hook_runner; hook_runner.main(...)' <dir> <Event>`) so its
precompiled bytecode is used; `<python> -S hook_runner.py <Event>` works too, compiling it first.
"""

from __future__ import annotations

import _json
import _thread
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD_NAME = ".hermit-deploy.json"
LOG_DIR = ".hermit-hooks"
LOG_NAME = "hook-calls.jsonl"
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT_S = 20.0  # below the 30 s hooks.json gives each hook, so the host never kills us
SUMMARY_CHARS = 300
NOOP = ""  # an empty stdout with exit 0 is a no-op for every host


# -- JSON through the C accelerator only --------------------------------------------------

class _DecodeContext:
    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo: dict = {}


_scan = _json.make_scanner(_DecodeContext())
_encode = _json.make_encoder(
    {}, str, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)


def loads(text: str):
    """Parse one JSON document (whitespace around it allowed); ValueError otherwise."""
    text = text.strip()
    try:
        value, end = _scan(text, 0)
    except (StopIteration, ValueError, SystemError) as exc:
        # Off the happy path the C scanner imports json.decoder for its error type, and
        # without it may raise SystemError: report every failure as one ValueError.
        raise ValueError(f"not JSON ({type(exc).__name__})") from None
    if end != len(text):
        raise ValueError(f"extra data after JSON at character {end}")
    return value


def dumps(value) -> str:
    """Compact JSON; values JSON cannot hold are written as their str()."""
    return "".join(_encode(value, 0))


# -- the deployment: record, state, log ------------------------------------------------------

def find_deployment() -> tuple[str | None, dict | None]:
    """The deployment root (holding .hermit-deploy.json) and its record, or (None, None)."""
    for root in (os.path.dirname(HERE), HERE):
        path = os.path.join(root, RECORD_NAME)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                record = loads(fh.read())
            if not isinstance(record, dict):
                raise ValueError(f"{path} is not a JSON object")
            return root, record
    return None, None


def _state_path(root: str, session_id) -> str:
    safe = "".join(c for c in str(session_id or "default") if c.isalnum() or c in "-_.")[:100]
    return os.path.join(root, LOG_DIR, "state", (safe.strip(".") or "default") + ".json")


def load_state(root: str, session_id) -> dict:
    try:
        with open(_state_path(root, session_id), encoding="utf-8") as fh:
            state = loads(fh.read())
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(root: str, session_id, state: dict) -> None:
    path = _state_path(root, session_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(dumps(state))
    os.replace(tmp, path)


def append_log(root: str, entry: dict) -> None:
    try:
        os.makedirs(os.path.join(root, LOG_DIR), exist_ok=True)
        fd = os.open(os.path.join(root, LOG_DIR, LOG_NAME),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (dumps(entry) + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:
        pass  # a log we cannot write must not break the agent's session


def read_task(root: str, state: dict) -> str:
    try:
        with open(os.path.join(root, "task.md"), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return state.get("first_prompt") or ""


_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "SK-", "BEARER")


def redact(text: str) -> str:
    """Mask what looks like a credential before it reaches the log (tool inputs carry env
    assignments and headers). `re` costs milliseconds to import, so only when a marker shows."""
    upper = text.upper()
    if not any(marker in upper for marker in _SECRET_MARKERS):
        return text
    import re

    text = re.sub(r"(?i)\b([\w.-]*(?:key|token|secret|passw(?:or)?d)[\w.-]*[\"']?\s*[=:]\s*[\"']?)"
                  r"[^\s\"',;&|]+", r"\1***", text)
    text = re.sub(r"(?i)\b(bearer\s+)[\w.~+/-]+=*", r"\1***", text)
    return re.sub(r"\bsk-[\w-]{8,}", "sk-***", text)


def _short(value):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = redact(value if isinstance(value, str) else dumps(value))
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + f"... [{len(text)} chars]"


def _short_tree(value):
    if isinstance(value, dict):
        return {k: _short_tree(v) for k, v in value.items()}
    return _short(value) if isinstance(value, str) else value


def summarize(inp) -> dict:
    keys = ("tool_kind", "tool_name", "tool_input", "output_text", "failed", "exit_code", "cwd",
            "model", "turn_id", "source", "prompt", "session_id")
    return {k: _short(getattr(inp, k)) for k in keys if getattr(inp, k) is not None}


# -- calling the middleware ----------------------------------------------------------------

class MiddlewareError(Exception):
    pass


def as_result(value, HookResult):
    """The middleware's return value as a HookResult (None stays None); TypeError if unusable."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = HookResult(**value)
    elif not isinstance(value, HookResult):
        if not all(hasattr(value, name) for name in HookResult.__slots__):
            raise TypeError(f"middleware returned {type(value).__name__}, not HookResult or None")
        value = HookResult(**{name: getattr(value, name) for name in HookResult.__slots__})
    for name in ("context", "reason", "system_message"):
        if getattr(value, name) is not None and not isinstance(getattr(value, name), str):
            raise TypeError(f"HookResult.{name} must be str or None")
    if value.updated_input is not None and not isinstance(value.updated_input, dict):
        raise TypeError("HookResult.updated_input must be a dict or None")
    return value


def call_middleware(name: str, inp, calls: list):
    """Run middleware.<name>(inp) with its prints captured; they must not reach the host."""
    import io  # already loaded by the interpreter at start-up: free

    from hermit_hooks import HookResult

    captured = io.StringIO()
    saved_stdout = sys.stdout
    sys.stdout = captured
    started = time.perf_counter()
    entry = {"function": name}
    calls.append(entry)
    try:
        import middleware

        function = getattr(middleware, name, None)
        if function is None:
            raise MiddlewareError(f"middleware.py defines no {name}()")
        try:
            result = as_result(function(inp), HookResult)
        except SystemExit as exc:
            raise MiddlewareError(f"middleware {name}() exited with {exc.code!r}") from None
    finally:
        sys.stdout = saved_stdout
        entry["ms"] = round((time.perf_counter() - started) * 1000, 2)
    printed = captured.getvalue()
    if printed:
        entry["stdout"] = _short(printed)
        raise MiddlewareError(f"middleware {name}() printed to stdout (use stderr or the result)")
    if result is not None:
        entry["result"] = {k: _short(v) for k, v in result.to_dict().items()
                           if v not in (None, False)}
    return result


def _join(*parts) -> str | None:
    text = "\n\n".join(p for p in parts if p)
    return text or None


def handle(host_event: str, payload: dict, root: str, record: dict, log: dict) -> str:
    """One host event end to end; returns what to print. Raises on any error (fail open above)."""
    from hook_hosts import WIRES

    host = record.get("host")
    wire = WIRES.get(host)
    if wire is None:
        raise ValueError(f"unknown host {host!r} in {RECORD_NAME}")
    if host_event not in wire.CALLS and host_event not in wire.BEFORE_MODEL_AFTER:
        raise ValueError(f"unknown event {host_event!r} for host {host}")
    # A sub-agent's queue is its own (Claude Code tags its events with agent_id).
    session_id = "-".join(str(payload[k]) for k in ("session_id", "agent_id") if payload.get(k)) or None
    state = load_state(root, session_id)
    before = dumps(state)
    prompt = payload.get("prompt")
    if host_event == "UserPromptSubmit" and isinstance(prompt, str) and not state.get("first_prompt"):
        state["first_prompt"] = prompt
    # A sub-agent's task is its session's: the first prompt lives in the session's state.
    task_state = load_state(root, payload.get("session_id")) if payload.get("agent_id") else state
    inp = wire.to_input(host_event, payload, task=read_task(root, task_state), workspace=root)
    log["input"] = summarize(inp)
    calls = log["calls"]
    queue = state.setdefault("queue", [])

    function = wire.CALLS.get(host_event)
    result = call_middleware(function, inp, calls) if function else None
    if function == "before_model":
        if result is not None and result.context:
            queue.append(result.context)
        result = None  # its output is ignored: only its context is queued

    blocked = False
    if host_event == "Stop" and result is not None and result.block:
        turn = str(inp.turn_id or "")
        if payload.get("stop_hook_active") or turn in state.get("blocked_turns", []):
            log["note"] = "stop block dropped: a stop blocks once per turn"
            result = result.replace(block=False)
        else:
            blocked = True
            state["blocked_turns"] = (state.get("blocked_turns", []) + [turn])[-20:]

    if host_event in wire.BEFORE_MODEL_AFTER and (host_event != "Stop" or blocked):
        emulated = call_middleware("before_model", inp.replace(event="before_model"), calls)
        if emulated is not None and emulated.context:
            queue.append(emulated.context)

    if queue and host_event in wire.DELIVERS_QUEUE and (host_event != "Stop" or blocked):
        from hermit_hooks import HookResult

        base = result if result is not None else HookResult()
        result = base.replace(context=_join(base.context, *queue))
        log["delivered_queue"] = len(queue)
        queue.clear()

    dropped = wire.dropped(host_event, result)
    if dropped:
        log["dropped"] = dropped
    output = wire.render(host_event, result)
    log["output"] = _short_tree(output)
    if dumps(state) != before:
        save_state(root, session_id, state)
    if wire.name == "pi":
        return output.get("context", "")
    return dumps(output) if output else NOOP


# -- the process: payload in, one output out, always exit 0 ------------------------------

def read_payload(reads_stdin: bool) -> dict:
    if not reads_stdin or sys.stdin is None or sys.stdin.isatty():
        return {}
    data = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
    if len(data) > MAX_PAYLOAD_BYTES:
        while sys.stdin.buffer.read(1 << 20):
            pass  # drain, so the host is not left writing into a closed pipe
        raise ValueError(f"payload larger than {MAX_PAYLOAD_BYTES} bytes")
    if not data.strip():
        raise ValueError("empty payload on stdin")
    payload = loads(data.decode("utf-8", errors="replace"))
    if not isinstance(payload, dict):
        raise ValueError("payload is not a JSON object")
    return payload


def main(argv: list[str]) -> None:
    started = time.perf_counter()
    host_event = argv[1] if len(argv) > 1 else ""
    log: dict = {"ts": round(time.time(), 3), "event": host_event, "host": None, "input": None,
                 "calls": [], "output": None, "error": None}
    # The host reads our fd 1; the middleware (and anything it spawns) must never write there.
    host_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    done = _thread.allocate_lock()
    where = {"root": os.getcwd(), "deadline": time.monotonic() + DEFAULT_TIMEOUT_S}

    def finish(text: str) -> None:
        if not done.acquire(False):
            return  # the other thread is already answering
        log["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
        try:
            if text:
                os.write(host_out, text.encode("utf-8"))
        finally:
            append_log(where["root"], log)
            os._exit(0)

    def watchdog() -> None:
        while True:
            remaining = where["deadline"] - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(remaining, 0.25))
        log["error"] = f"timeout: no answer within {where['timeout_s']} s; fail open"
        finish(NOOP)

    try:
        env_timeout = os.environ.get("HERMIT_HOOK_TIMEOUT_S")
        timeout_s = float(env_timeout) if env_timeout else DEFAULT_TIMEOUT_S
        where.update(timeout_s=timeout_s, deadline=time.monotonic() + timeout_s)
        _thread.start_new_thread(watchdog, ())
        root, record = find_deployment()
        if root is None:
            raise FileNotFoundError(f"no {RECORD_NAME} beside {HERE}: not a deployed adapter")
        where["root"] = root
        log["host"] = record.get("host")
        if not env_timeout and record.get("hook_timeout_s"):
            where["timeout_s"] = float(record["hook_timeout_s"])
            where["deadline"] = time.monotonic() + where["timeout_s"]
        from hook_hosts import WIRES

        wire = WIRES.get(record.get("host"))
        payload = read_payload(wire.reads_stdin if wire is not None else True)
        if not host_event:
            host_event = str(payload.get("hook_event_name") or "")
            log["event"] = host_event
        text = handle(host_event, payload, root, record, log)
    except BaseException as exc:  # fail open on anything, SystemExit and KeyboardInterrupt too
        log["error"] = f"{type(exc).__name__}: {exc}"
        text = NOOP
    finish(text)


if __name__ == "__main__":
    main(sys.argv)
