"""The guard between git-hermit and one child process tree (run as a script, stdlib only).

``python -I -S _guard.py CONTROL_FD GRACE_S -- argv...``: becomes a child subreaper, starts
``argv`` and watches CONTROL_FD, the read end of a pipe only git-hermit holds open. EOF there
(git-hermit exited, even by SIGKILL) or ``K`` SIGKILLs every descendant; ``T`` sends SIGTERM,
then SIGKILL after GRACE_S. When ``argv`` exits its leftover descendants are killed too, and
the guard exits with the child's status (a signal death is re-raised on the guard itself).
"""

import ctypes
import os
import select
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
EXEC_FAILED = 255          # with "exec-error ERRNO" on stderr: the program could not start


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (orphans are reparented to us: we are a subreaper)."""
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


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


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
    while _signal_all(signal.SIGKILL) and time.monotonic() < end:
        _reap()
        time.sleep(0.005)
    _reap()


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def main() -> None:
    control = int(sys.argv[1])
    grace = float(sys.argv[2])
    argv = sys.argv[4:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        os.write(2, f"exec-error {exc.errno}\n".encode())
        os._exit(EXEC_FAILED)
    # stdin/stdout/stderr belong to the child now; the guard keeps no pipe end the reader waits on
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
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
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            _kill_tree()                   # the leader is gone: its background children go too
            _exit_like(status)
        if control in ready:
            command = os.read(control, 1)
            if command == b"T":
                _signal_all(signal.SIGTERM)
                end = time.monotonic() + grace
                while time.monotonic() < end and not os.waitpid(pid, os.WNOHANG)[0]:
                    time.sleep(0.02)
            _kill_tree()
            os._exit(128 + signal.SIGKILL)


if __name__ == "__main__":
    main()
