"""The guard server between git-hermit and its child process trees (run as a script, stdlib only).

``python -I -S _guard.py SOCKET_FD``: one per git-hermit process, single-threaded. Each request
on the socket (JSON argv/cwd/env/grace and maybe the program's resolved path, plus five fds:
stdin, stdout, stderr, the read end of a control pipe only git-hermit holds, the write end of a
status pipe) is served by forking a guard: a child subreaper in its own session that starts
``argv`` and watches the control pipe.
EOF there (git-hermit exited, even by SIGKILL) or ``K`` SIGKILLs every descendant; ``T`` sends
SIGTERM, then SIGKILL after the grace. When ``argv`` exits its leftover descendants are killed
too, and the guard writes ``exit STATUS`` (or ``exec-error ERRNO``) on the status pipe.
Forking this small process costs ~1 ms where starting a Python guard per child cost 15-20 ms.
"""

import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import time

TYPE_CHECKING = False     # no typing import at run time: this script starts once per git-hermit process
if TYPE_CHECKING:
    from typing import Any

PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)


def _children_of(pid: int) -> list[int] | None:
    """Direct children via /proc/PID/task/*/children (None when the kernel lacks that file)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(p) for p in handle.read().split())
    except FileNotFoundError:
        return None if pid == os.getpid() else []
    except OSError:
        return []
    return found


def _descendants_by_scan(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields follow the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found, queue = [], [root]
    while queue:
        for pid in children.get(queue.pop(), ()):
            found.append(pid)
            queue.append(pid)
    return found


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (orphans are reparented to us: we are a subreaper)."""
    if _children_of(root) is None:
        return _descendants_by_scan(root)
    found, queue = [], [root]
    while queue:
        for pid in _children_of(queue.pop()) or ():
            found.append(pid)
            queue.append(pid)
    return found


def _reap() -> bool:
    """Reap finished children; False when we have none left (so no descendant is alive)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _signal_all(sig: int) -> int:
    pids = _descendants(os.getpid())
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return len(pids)


def _kill_tree(deadline_s: float = 2.0) -> None:
    """SIGKILL every descendant until none is left (a forking tree needs several sweeps)."""
    end = time.monotonic() + deadline_s
    while _reap() and _signal_all(signal.SIGKILL) and time.monotonic() < end:
        time.sleep(0.005)
    _reap()


def _guard(request: "dict[str, Any]", fds: list[int]) -> None:
    """The forked guard of one child tree; never returns."""
    stdin, stdout, stderr, control, status = fds
    os.setsid()
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])     # posix_spawnp (no "program") searches this PATH
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        # Python ignores SIGPIPE and SIGXFSZ; the child gets the defaults, as subprocess gives.
        # "program": the absolute path git-hermit resolved once for argv[0] (no PATH search here)
        program = request.get("program")
        spawn = os.posix_spawn if program else os.posix_spawnp
        pid = spawn(program or request["argv"][0], request["argv"], os.environ,
                    setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as exc:
        os.write(status, f"exec-error {exc.errno or 2}\n".encode())
        os._exit(0)
    # stdin/stdout/stderr belong to the child now; the guard keeps no pipe end the reader waits on
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2, stdin, stdout, stderr):
        if fd != devnull:
            os.dup2(devnull, fd)
    grace = float(request["grace"])
    poller = select.poll()
    poller.register(control, select.POLLIN | select.POLLHUP)
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
        tick = -1
    except (AttributeError, OSError):
        tick = 50                          # no pidfd (Linux < 5.3): poll the child
    while True:
        ready = dict(poller.poll(tick))
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            _kill_tree()                   # the leader is gone: its background children go too
            os.write(status, f"exit {wait_status}\n".encode())
            os._exit(0)
        if control in ready:
            command = os.read(control, 1)
            if command == b"T":
                _signal_all(signal.SIGTERM)
                end = time.monotonic() + grace
                while time.monotonic() < end and not os.waitpid(pid, os.WNOHANG)[0]:
                    time.sleep(0.02)
            _kill_tree()
            os.write(status, f"exit {signal.SIGKILL}\n".encode())   # a SIGKILL death's wait status
            os._exit(0)


def serve(sock: socket.socket) -> None:
    """Fork one guard per request until git-hermit closes the socket (it exited)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    while True:
        if not poller.poll(1000):
            _reap_guards()
            continue
        header, fds, _, _ = socket.recv_fds(sock, 8, 8)
        if not header:
            return
        try:
            request = json.loads(_read_exactly(sock, _length(sock, header)))
            if len(fds) != 5:
                raise ValueError("a request carries five fds")
            if os.fork() == 0:
                sock.close()
                try:
                    _guard(request, fds)
                finally:
                    os._exit(1)
        except Exception as exc:            # a bad request: say so on its status pipe
            if len(fds) == 5:
                os.write(fds[4], f"exec-error 22 {exc}\n".encode())
        finally:
            for fd in fds:
                os.close(fd)
        _reap_guards()


def _length(sock: socket.socket, header: bytes) -> int:
    return struct.unpack("!Q", header + _read_exactly(sock, 8 - len(header)))[0]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError("git-hermit closed the socket mid-request")
        data += chunk
    return bytes(data)


def _reap_guards() -> None:
    # reaped here (not ignored) so the guards' and agents' CPU is accounted to this server
    _reap()


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    serve(sock)


if __name__ == "__main__":
    main()
