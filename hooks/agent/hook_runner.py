"""The hook runner: the host starts it on every lifecycle event, payload on stdin. It turns the
payload into a HookInput through the host's wire (hook_wire.py beside it, which deploy writes from
the host's module: this runtime names no host), checks it against .hermit-deploy.json's host,
calls the middleware, prints exactly the fields the host
reads, fails open on any error, and logs every call to .hermit-hooks/hook-calls.jsonl.

Start-up cost is paid on every tool call of every rollout, so this file imports only builtin
C modules (`_json`, not `json`, whose import pulls in `re` and costs as much as the
interpreter's own start-up), and ends with os._exit once its output is written. Deployed hooks
import it (`<python> -S -c 'import hook_runner; hook_runner.main(...)' <dir> <Event>`) so its
precompiled bytecode is used; `<python> -S hook_runner.py <Event>` works too, compiling it first.

Containment: the middleware runs in a forked child in its own process group, with stdin,
stdout and stderr on /dev/null or pipes the runner reads (never the host's), a hard CPU limit
(RLIMIT_CPU) and the runner's deadline. Only this parent process writes to the host and it
always exits 0, so no exit code, signal, C-level loop holding the GIL, background child or
flood of output in the middleware can block the host (exit 2 is blocking for Claude Code).
What reaches the host is strict JSON (no NaN/Infinity, no lone surrogates: Codex's parser
rejects them) with each text field cut to MAX_TEXT_CHARS.
"""

from __future__ import annotations

import _json
import _thread
import os
import sys
import time

TYPE_CHECKING = False  # mypy reads the imports below; the hook never pays for `typing`
if TYPE_CHECKING:
    from typing import Any, Callable

    from hermit_hooks import HookInput, HookResult

# The runtime's version: hooks/agent/runtimes.json lists each version's files by hash, so an
# adapter committed with an older runtime still checks, and `git hermit upgrade-runtime`
# commits the newer one. Bump it (and add its entry there) whenever a runtime file changes.
RUNTIME_VERSION = 2

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD_NAME = ".hermit-deploy.json"
LOG_DIR = ".hermit-hooks"
LOG_NAME = "hook-calls.jsonl"
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT_S = 20.0  # below the 30 s hooks.json gives each hook, so the host never kills us
SUMMARY_CHARS = 300
NOOP = ""  # an empty stdout with exit 0 is a no-op for every host
# Claude Code keeps at most 10,000 characters of a hook's text for the model; the same cut on
# every host keeps one adapter's behaviour alike (Codex truncates at its additionalContextLimit).
MAX_TEXT_CHARS = 10_000
MAX_UPDATED_INPUT_CHARS = 32 * 1024   # a rewritten tool call larger than this is dropped
MAX_ANSWER_BYTES = 1024 * 1024        # what the child may hand back; more is refused whole
MAX_CAPTURED_CHARS = 64 * 1024        # the middleware's print()s kept (to report them)
STDERR_KEPT_BYTES = 4096              # the middleware's stderr kept for the log line
LIMIT_AFTER_S = 0.5                   # a child still running then gets its hard CPU limit
REAP_GRACE_S = 2.0                    # a dead child's answer may still be in the pipe this long


# -- JSON through the C accelerator only --------------------------------------------------

class _DecodeContext:
    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo: dict[str, str] = {}


_scan = _json.make_scanner(_DecodeContext())  # type: ignore[arg-type]  # duck-typed context
def loads(text: str) -> Any:
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


def _text(value: str) -> str:
    """``value`` as valid Unicode: a lone surrogate (which UTF-8 cannot hold) becomes U+FFFD."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def strict(value: Any) -> Any:
    """``value`` made strict-JSON-safe: non-finite floats become null, strings valid Unicode,
    keys strings, and anything JSON cannot hold its str()."""
    if isinstance(value, str):
        return _text(value)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value - value == 0.0 else None   # NaN and ±inf fail this
    if isinstance(value, dict):
        return {_text(k) if isinstance(k, str) else _text(str(k)): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return _text(str(value))


_strict_encode = _json.make_encoder(
    {}, str, _json.encode_basestring_ascii, None, ": ", ", ", False, False, False)


def dumps(value: Any) -> str:
    """Compact, strict JSON (what every host's parser accepts)."""
    return "".join(_strict_encode(strict(value), 0))


# -- the deployment: record, state, log ------------------------------------------------------

def find_deployment() -> tuple[str, dict[str, Any]] | None:
    """The deployment root (holding .hermit-deploy.json) and its record, or None."""
    for root in (os.path.dirname(HERE), HERE):
        path = os.path.join(root, RECORD_NAME)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                record = loads(fh.read())
            if not isinstance(record, dict):
                raise ValueError(f"{path} is not a JSON object")
            return root, record
    return None


def load_wire(record: dict[str, Any]) -> Any:
    """The host's wire deployed beside this file (hook_wire.WIRE), which must be the host the
    record names (a deployment redone for another host rewrites both)."""
    from hook_wire import WIRE  # type: ignore[import-not-found]  # written by deploy

    if record.get("host") != WIRE.name:
        raise ValueError(f"hook_wire.py serves {WIRE.name!r}, but {RECORD_NAME} names host "
                         f"{record.get('host')!r}: redeploy the adapter")
    return WIRE


def _state_path(root: str, session_id: object) -> str:
    safe = "".join(c for c in str(session_id or "default") if c.isalnum() or c in "-_.")[:100]
    return os.path.join(root, LOG_DIR, "state", (safe.strip(".") or "default") + ".json")


def load_state(root: str, session_id: object) -> dict[str, Any]:
    try:
        with open(_state_path(root, session_id), encoding="utf-8") as fh:
            state = loads(fh.read())
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(root: str, session_id: object, state: dict[str, Any]) -> None:
    path = _state_path(root, session_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(dumps(state))
    os.replace(tmp, path)


def append_log(root: str, entry: dict[str, Any]) -> None:
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


def read_task(root: str, state: dict[str, Any]) -> str:
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


def _short(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = redact(value if isinstance(value, str) else dumps(value))
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + f"... [{len(text)} chars]"


def _short_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _short_tree(v) for k, v in value.items()}
    return _short(value) if isinstance(value, str) else value


def summarize(inp: HookInput) -> dict[str, Any]:
    keys = ("tool_kind", "tool_name", "tool_input", "output_text", "failed", "exit_code", "cwd",
            "model", "turn_id", "source", "prompt", "session_id")
    return {k: _short(getattr(inp, k)) for k in keys if getattr(inp, k) is not None}


# -- calling the middleware ----------------------------------------------------------------

class MiddlewareError(Exception):
    pass


class _Capped:
    """sys.stdout for the middleware: keeps the first MAX_CAPTURED_CHARS, counts the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.total = 0

    def write(self, text: object) -> int:
        text = str(text)
        self.total += len(text)
        if self.kept < MAX_CAPTURED_CHARS:
            self.parts.append(text[:MAX_CAPTURED_CHARS - self.kept])
            self.kept += len(self.parts[-1])
        return len(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        text = "".join(self.parts)
        return text if self.total <= self.kept else text + f"... [{self.total} chars]"


def as_result(value: Any, HookResult: type[HookResult]) -> HookResult | None:
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


def call_middleware(name: str, inp: HookInput, calls: list[dict[str, Any]]) -> HookResult | None:
    """Run middleware.<name>(inp) with its prints captured; they must not reach the host."""
    from hermit_hooks import HookResult

    captured = _Capped()
    saved_stdout = sys.stdout
    sys.stdout = captured
    started = time.perf_counter()
    entry: dict[str, Any] = {"function": name}
    calls.append(entry)
    try:
        import middleware  # type: ignore[import-not-found]  # the adapter's, beside this file

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


def clip_result(result: HookResult | None, log: dict[str, Any]) -> HookResult | None:
    """``result`` within what the host accepts: each text cut to MAX_TEXT_CHARS (the cut is
    marked), an oversized updated_input dropped. Each change is noted in the log line."""
    if result is None:
        return None
    changes: dict[str, Any] = {}
    cuts: list[str] = []
    for name in ("context", "reason", "system_message"):
        text = getattr(result, name)
        if text is not None and len(text) > MAX_TEXT_CHARS:
            mark = f"\n... [cut: {len(text)} chars]"
            changes[name] = text[:MAX_TEXT_CHARS - len(mark)] + mark
            cuts.append(f"{name} cut from {len(text)} to {MAX_TEXT_CHARS} chars")
    if result.updated_input is not None:
        size = len(dumps(result.updated_input))
        if size > MAX_UPDATED_INPUT_CHARS:
            changes["updated_input"] = None
            cuts.append(f"updated_input dropped: {size} chars of JSON > {MAX_UPDATED_INPUT_CHARS}")
    if cuts:
        log["cut"] = cuts
        result = result.replace(**changes)
    return result


def _join(*parts: str | None) -> str | None:
    text = "\n\n".join(p for p in parts if p)
    return text or None


def handle(host_event: str, payload: dict[str, Any], root: str, record: dict[str, Any],
           log: dict[str, Any]) -> str:
    """One host event end to end; returns what to print. Raises on any error (fail open above)."""
    wire = load_wire(record)
    host = wire.name
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

    result = clip_result(result, log)
    dropped = wire.dropped(host_event, result)
    if dropped:
        log["dropped"] = dropped
    output = wire.render(host_event, result)
    log["output"] = _short_tree(output)
    if dumps(state) != before:
        save_state(root, session_id, state)
    if wire.prints_field:
        return output.get(wire.prints_field, "")
    return dumps(output) if output else NOOP


# -- the process: payload in, one output out, always exit 0 ------------------------------

def read_payload(reads_stdin: bool) -> dict[str, Any]:
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
    log: dict[str, Any] = {"ts": round(time.time(), 3), "event": host_event, "host": None,
                           "runtime": RUNTIME_VERSION, "input": None,
                 "calls": [], "output": None, "error": None}
    # The host reads our fd 1; the middleware (and anything it spawns) must never write there.
    host_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    done = _thread.allocate_lock()
    # what the threads share: root, timeout_s, deadline, child (its pid), limit (a callback)
    where: dict[str, Any] = {"root": os.getcwd(), "deadline": time.monotonic() + DEFAULT_TIMEOUT_S}

    def finish(text: str) -> None:
        if not done.acquire(False):
            return  # the other thread is already answering
        if where.get("child"):
            try:  # the middleware and anything it left running end with the call
                os.killpg(where["child"], 9)
            except OSError:
                pass
        log["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
        try:
            if text:
                data = _text(text).encode("utf-8")
                while data:
                    data = data[os.write(host_out, data):]
        finally:
            append_log(where["root"], log)
            os._exit(0)

    def watchdog() -> None:
        while True:
            remaining = where["deadline"] - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(remaining, 0.25))
            if "limit" in where:
                where.pop("limit")()
        log["error"] = f"timeout: no answer within {where['timeout_s']} s; fail open"
        finish(NOOP)

    try:
        env_timeout = os.environ.get("HERMIT_HOOK_TIMEOUT_S")
        timeout_s = float(env_timeout) if env_timeout else DEFAULT_TIMEOUT_S
        where.update(timeout_s=timeout_s, deadline=time.monotonic() + timeout_s)
        _thread.start_new_thread(watchdog, ())
        deployment = find_deployment()
        if deployment is None:
            raise FileNotFoundError(f"no {RECORD_NAME} beside {HERE}: not a deployed adapter")
        root, record = deployment
        where["root"] = root
        log["host"] = record.get("host")
        if not env_timeout and record.get("hook_timeout_s"):
            where["timeout_s"] = float(record["hook_timeout_s"])
            where["deadline"] = time.monotonic() + where["timeout_s"]
        wire = load_wire(record)
        payload = read_payload(wire.reads_stdin)
        if not host_event:
            host_event = str(payload.get("hook_event_name") or "")
            log["event"] = host_event
        text = contained(lambda: handle(host_event, payload, root, record, log), log, where,
                         host_out, devnull, finish)
    except BaseException as exc:  # fail open on anything, SystemExit and KeyboardInterrupt too
        log["error"] = f"{type(exc).__name__}: {exc}"
        text = NOOP
    finish(text)


# -- containment: the middleware in a child whose end the runner owns -----------------------

def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, have = [], 0
    while have < size:
        chunk = os.read(fd, min(size - have, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"ended ({status})"


def contained(work: Callable[[], str], log: dict[str, Any], where: dict[str, Any], host_out: int,
              devnull: int, finish: Callable[[str], None]) -> str:
    """Run ``work()`` (the middleware calls) in a forked child and return its answer.

    The child gets its own process group, /dev/null as stdin and stdout, and a pipe as stderr
    (a hard CPU limit follows if it runs long); it sends back (answer, log fields) as one
    length-prefixed JSON message and ends with os._exit(0). Any other end (an exit code, a
    signal, RLIMIT_CPU, the deadline) is a logged error and a no-op answer: the host never sees
    the child's status or output.
    """
    answer_r, answer_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never touches the host's descriptors
        status = 0
        try:
            os.close(answer_r)
            os.close(err_r)
            os.close(host_out)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            os.dup2(err_w, 2)
            os.close(err_w)
            os.setpgid(0, 0)   # its own group: the runner ends it and what it started, at once
            try:
                text = work()
            except BaseException as exc:
                log["error"] = f"{type(exc).__name__}: {exc}"
                text = NOOP
            answer = dumps({"text": text, "log": log}).encode("utf-8")
            framed = b"%016x" % len(answer) + answer
            while framed:
                framed = framed[os.write(answer_w, framed):]
        except BaseException:
            status = 70
        os._exit(status)

    try:
        os.setpgid(pid, pid)   # also here: the group must exist before the runner may kill it
    except OSError:
        pass
    where["child"] = pid
    os.close(answer_w)
    os.close(err_w)
    kept: list[bytes] = []
    _thread.start_new_thread(_drain, (err_r, kept))
    box: dict[str, Any] = {}

    def reap() -> None:
        # A child that ends without answering is normally seen by the reader as EOF; but a
        # process it forked may hold the pipe open, so EOF never comes: answer for it here.
        _, status = os.waitpid(pid, 0)
        box["status"] = status
        time.sleep(REAP_GRACE_S)
        if "header" not in box:  # once the answer has begun, the deadline bounds the rest
            log["error"] = (f"middleware process {_describe(status)} before answering (a process "
                            f"it started holds its pipe); fail open" + _stderr_note(kept))
            finish(NOOP)

    _thread.start_new_thread(reap, ())
    forked_at = time.monotonic()
    # the watchdog calls this on its next tick (every 0.25 s): no thread of its own
    where["limit"] = lambda: _limit_cpu_later(pid, where, box, log, forked_at)
    header = _read_exactly(answer_r, 16)
    size = int(header, 16) if header else -1
    if size >= 0:
        box["header"] = True
    if size < 0 or size > MAX_ANSWER_BYTES:
        if size > MAX_ANSWER_BYTES:
            log["error"] = f"middleware answer of {size} bytes is over {MAX_ANSWER_BYTES}; fail open"
            finish(NOOP)
        while "status" not in box:  # EOF: the child is ending
            time.sleep(0.005)
        time.sleep(0.02)   # let _drain take the last of its stderr
        log["error"] = (f"middleware process {_describe(box['status'])} before answering; fail open"
                        + _stderr_note(kept))
        return NOOP
    body = _read_exactly(answer_r, size)
    message = loads(body.decode("utf-8")) if body is not None else None
    if not isinstance(message, dict):
        raise MiddlewareError("the middleware process sent a broken answer")
    box["message"] = True
    for key, value in (message.get("log") or {}).items():
        if key not in ("ts", "event", "host"):   # the runner's own fields stay its own
            log[key] = value
    stderr = _stderr_note(kept)
    if stderr:
        log["stderr"] = stderr.strip("; ")
    answered = message.get("text")
    return answered if isinstance(answered, str) else NOOP


def _drain(fd: int, kept: list[bytes]) -> None:
    """Read the child's stderr to its end, keeping the first STDERR_KEPT_BYTES."""
    have = 0
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            if have < STDERR_KEPT_BYTES:
                kept.append(chunk[:STDERR_KEPT_BYTES - have])
                have += len(kept[-1])
    except OSError:
        return


def _stderr_note(kept: list[bytes]) -> str:
    text = b"".join(kept).decode("utf-8", "replace").strip()
    return f"; stderr: {_short(text)}" if text else ""


def _limit_cpu_later(pid: int, where: dict[str, Any], box: dict[str, Any], log: dict[str, Any],
                     forked_at: float) -> None:
    """A hard RLIMIT_CPU on a child that has not answered within LIMIT_AFTER_S (called by the
    watchdog's ticks): a loop that
    never yields (a C call holding the GIL) is ended by the kernel just after the deadline,
    even if nothing else could interrupt it. Set from here, on the child's pid, so the common
    fast call never pays the import of `resource` (3 ms, a tenth of a call)."""
    if time.monotonic() - forked_at < LIMIT_AFTER_S:
        where["limit"] = lambda: _limit_cpu_later(pid, where, box, log, forked_at)   # next tick
        return
    if "message" in box or "status" in box:
        return
    try:
        import resource

        # The child's CPU time is at most its wall time since the fork: this ends it no later
        # than ~2 s after the deadline, inside the host's own timeout.
        soft = max(1, int(where["deadline"] - forked_at + 1.999))
        resource.prlimit(pid, resource.RLIMIT_CPU, (soft, soft + 1))
        log["cpu_limit_s"] = soft
    except (ImportError, ValueError, OSError, AttributeError):
        pass


if __name__ == "__main__":
    main(sys.argv)
