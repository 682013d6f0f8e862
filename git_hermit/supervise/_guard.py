"""The guard server between git-hermit and its child process trees (run as a script, stdlib only).

``python -I -S _guard.py SOCKET_FD [MAX_IDLE]``: one per git-hermit process, single-threaded.
Each request on the socket (JSON argv/cwd/env/grace and maybe the program's resolved path, plus
five fds: stdin, stdout, stderr, the read end of a control pipe only git-hermit holds, the write
end of a status pipe) goes to a warm guard: a process forked once, a child subreaper in its own
session, which serves one child at a time. It starts ``argv`` (posix_spawn, so vfork + exec)
and watches the control pipe. EOF there (git-hermit exited, even by SIGKILL) or ``K`` SIGKILLs
every descendant; ``T`` sends SIGTERM, then SIGKILL after the grace. When ``argv`` exits its
leftover descendants are killed too (all of them are this child's: one child at a time), the
guard tells the server it is idle and writes ``exit STATUS`` (or ``exec-error ERRNO``) on the
status pipe. A new guard is forked only when none is idle; at most MAX_IDLE stay warm.
Why warm: forking the Python guard per child cost ~2.3 ms of CPU a child (copy-on-write page
faults of the heap, refaults of libpython); a warm guard's posix_spawn costs a fraction.
The server is a subreaper too: what a guard that died leaves running is reparented to it and
killed. When git-hermit closes the socket the server exits, and its idle guards with it.
"""

import array
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


def _kill_tree(deadline_s: float = 2.0) -> bool:
    """SIGKILL every descendant until none is left (a forking tree needs several sweeps);
    False when some survived the deadline (the guard must not serve another child then)."""
    end = time.monotonic() + deadline_s
    while _reap() and _signal_all(signal.SIGKILL) and time.monotonic() < end:
        time.sleep(0.005)
    return not _reap()


def _spawn(request: "dict[str, Any]", stdio: list[int]) -> int:
    """Start the request's child in its cwd with exactly its env and stdio; the guard's own
    cwd goes back to / so a warm guard pins no directory."""
    env = request["env"]
    program = request.get("program")     # the absolute path git-hermit resolved for argv[0]
    if not program:
        # posix_spawnp searches the caller's PATH, not the child's env: make them the same
        if "PATH" in env:
            os.environ["PATH"] = env["PATH"]
        else:
            os.environ.pop("PATH", None)
    os.chdir(request["cwd"])
    try:
        # Python ignores SIGPIPE and SIGXFSZ; the child gets the defaults, as subprocess gives
        return (os.posix_spawn if program else os.posix_spawnp)(
            program or request["argv"][0], request["argv"], env,
            file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio)],
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    finally:
        os.chdir("/")


def _watch(pid: int, control: int, grace: float) -> int:
    """Wait until the child exits or git-hermit says K / T / EOF on the control pipe (T: SIGTERM
    to the tree, then the grace); the wait status to report (the caller kills what is left)."""
    poller = select.poll()
    poller.register(control, select.POLLIN | select.POLLHUP)
    pidfd = -1
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
        tick = -1
    except (AttributeError, OSError):
        tick = 50                          # no pidfd (Linux < 5.3): poll the child
    try:
        while True:
            ready = dict(poller.poll(tick))
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                return wait_status         # the leader is gone: its background children go too
            if control in ready:
                if os.read(control, 1) == b"T":
                    _signal_all(signal.SIGTERM)
                    end = time.monotonic() + grace
                    while time.monotonic() < end and not os.waitpid(pid, os.WNOHANG)[0]:
                        time.sleep(0.02)
                return signal.SIGKILL      # a SIGKILL death's wait status
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _serve_one(payload: bytes, fds: list[int], server: socket.socket) -> bool:
    """Run one request's child to its end; False when this guard must not serve another."""
    stdio, control, status = fds[:3], fds[3], fds[4]
    grace = 0.0
    try:
        request = json.loads(payload)
        grace = float(request["grace"])
        pid = _spawn(request, stdio)
    except OSError as exc:
        report = f"exec-error {exc.errno or 2}\n"
        pid = -1
    except Exception as exc:              # a bad request: say so on its status pipe
        report = f"exec-error 22 {exc}\n"
        pid = -1
    for fd in stdio:       # the child's now: the guard keeps no pipe end a reader waits on
        os.close(fd)
    clean = True
    if pid > 0:
        report = f"exit {_watch(pid, control, grace)}\n"
        clean = _kill_tree()
    os.close(control)
    try:
        # idle before the status: git-hermit's next start, sent once it reads the status,
        # then finds this guard idle and needs no new one
        if clean:
            server.send(b"i")
    except OSError:
        clean = False                      # the server is gone
    try:
        os.write(status, report.encode())
    except OSError:
        pass
    os.close(status)
    return clean


def _recv_fds(sock: socket.socket, size: int) -> "tuple[bytes, list[int]]":
    """recvmsg with the fds received close-on-exec: no child may inherit another's pipe ends
    (socket.recv_fds ignores its flags argument, so MSG_CMSG_CLOEXEC is passed here)."""
    fds = array.array("i")
    data, ancillary, _, _ = sock.recvmsg(size, socket.CMSG_LEN(8 * fds.itemsize), socket.MSG_CMSG_CLOEXEC)
    for level, kind, body in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(body[:len(body) - len(body) % fds.itemsize])
    return data, list(fds)


def _receive(sock: socket.socket) -> "tuple[bytes, list[int]] | None":
    """The next request on a guard's socket (one at a time), or None at EOF (retired)."""
    try:
        data, fds = _recv_fds(sock, 1 << 16)
    except OSError:
        return None
    if not data:
        return None
    need = 8 + struct.unpack("!Q", data[:8])[0] if len(data) >= 8 else 8
    while len(data) < need:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return None
        data += chunk
        if len(data) >= 8:
            need = 8 + struct.unpack("!Q", data[:8])[0]
    return data[8:], fds


def _guard(sock: socket.socket, first: "tuple[bytes, list[int]]") -> None:
    """A warm guard: serves one child at a time, the first request then each one the server
    sends, until the server closes the socket (retired, or git-hermit exited)."""
    os.setsid()
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    request: "tuple[bytes, list[int]] | None" = first
    while request is not None:
        if len(request[1]) != 5 or not _serve_one(request[0], request[1], sock):
            return
        request = _receive(sock)


class _Pool:
    """The server's guards: each one's socket (by fd) and pid, and which are idle (LIFO)."""

    def __init__(self, sock: socket.socket, max_idle: int) -> None:
        self.sock = sock
        self.max_idle = max_idle
        self.guards: "dict[int, tuple[socket.socket, int]]" = {}
        self.idle: list[int] = []
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)

    def dispatch(self, payload: bytes, fds: list[int]) -> None:
        """Hand a request to an idle guard, or fork one when none is idle."""
        message = [struct.pack("!Q", len(payload)), payload]
        while self.idle:
            fd = self.idle.pop()
            try:
                sent = socket.send_fds(self.guards[fd][0], message, fds)
            except OSError:               # it died idle: its EOF is read later
                continue
            self.guards[fd][0].sendall((message[0] + payload)[sent:])
            return
        self.fork((payload, fds))

    def fork(self, first: "tuple[bytes, list[int]]") -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                # keep no end of the other guards' sockets: each must see EOF when the server closes it
                for other, _ in self.guards.values():
                    other.close()
                ours.close()
                self.sock.close()
                _guard(theirs, first)
            finally:
                os._exit(0)
        theirs.close()
        self.guards[ours.fileno()] = (ours, pid)
        self.poller.register(ours.fileno(), select.POLLIN)

    def heard(self, fd: int) -> None:
        """A guard said it is idle, or closed its socket (it exited)."""
        sock, pid = self.guards[fd]
        try:
            said = sock.recv(64)
        except OSError:
            said = b""
        if said and len(self.idle) < self.max_idle:
            self.idle.append(fd)
            return
        self.drop(fd)
        if not said:
            _kill_strays(pid, {p for _, p in self.guards.values()})

    def drop(self, fd: int) -> None:
        """Forget a guard; an idle one reads EOF and exits."""
        sock, _ = self.guards.pop(fd)
        self.poller.unregister(fd)
        if fd in self.idle:
            self.idle.remove(fd)
        sock.close()

    def close(self) -> None:
        """Let every guard go; wait for the idle ones (they exit at EOF at once), so their CPU
        is accounted to this server and by it to git-hermit. Busy ones end with their child."""
        idle = [self.guards[fd][1] for fd in self.idle]
        for fd in list(self.guards):
            self.drop(fd)
        end = time.monotonic() + 1.0
        while idle and time.monotonic() < end:
            try:
                idle = [pid for pid in idle if not os.waitpid(pid, os.WNOHANG)[0]]
            except ChildProcessError:
                break
            if idle:
                time.sleep(0.001)


def _kill_strays(dead: int, guards: "set[int]") -> None:
    """A guard exited: what it left running was reparented to this server (a subreaper too),
    and is SIGKILLed, so a killed guard's child never runs on unwatched."""
    end = time.monotonic() + 1.0
    while time.monotonic() < end:         # its exit (and the reparenting) is done once it is a zombie
        try:
            if os.waitpid(dead, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            break
        time.sleep(0.001)
    for _ in range(10):
        strays = [pid for pid in _children_of(os.getpid()) or () if pid not in guards]
        if not strays:
            return
        for root in strays:
            for pid in [root, *_descendants(root)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.005)
        _reap_guards()


def serve(sock: socket.socket, max_idle: int) -> None:
    """Hand each request to a warm guard until git-hermit closes the socket (it exited)."""
    pool = _Pool(sock, max_idle)
    try:
        while True:
            events = pool.poller.poll(1000)
            if not events:
                _reap_guards()
                continue
            # the guards' news first: a guard that went idle before git-hermit's next request
            # was sent takes that request
            for fd, _ in events:
                if fd != sock.fileno() and fd in pool.guards:
                    pool.heard(fd)
            if any(fd == sock.fileno() for fd, _ in events):
                header, fds = _recv_fds(sock, 8)
                if not header:
                    return
                try:
                    payload = _read_exactly(sock, _length(sock, header))
                    if len(fds) != 5:
                        raise ValueError("a request carries five fds")
                    pool.dispatch(payload, fds)
                except Exception as exc:        # a bad request: say so on its status pipe
                    if len(fds) == 5:
                        os.write(fds[4], f"exec-error 22 {exc}\n".encode())
                finally:
                    for fd in fds:
                        os.close(fd)
            _reap_guards()
    finally:
        pool.close()


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
    # reaped here (not ignored) so the retired guards' CPU is accounted to this server
    _reap()


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    max_idle = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    # orphans of a guard that died are reparented here, to be killed (see _kill_strays)
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    serve(sock, max_idle)


if __name__ == "__main__":
    main()
