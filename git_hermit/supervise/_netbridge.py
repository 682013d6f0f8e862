"""The sandbox's side of the network bridge (run as a script inside bubblewrap, stdlib only).

``python -I -S _netbridge.py PORT=SOCKET ... -- argv...``: listens on 127.0.0.1:PORT inside the
sandbox's own network namespace for each pair, relays every connection to the unix SOCKET that
git-hermit serves outside (bound into the sandbox), then runs ``argv`` and exits with its status.
Nothing else inside can reach the outside: the namespace has only its own loopback.
"""

import os
import socket
import sys
import threading


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` closes, then close ``dst``'s writing side."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def main() -> None:
    split = sys.argv.index("--")
    pairs, argv = sys.argv[1:split], sys.argv[split + 1:]
    for pair in pairs:
        port, _, path = pair.partition("=")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(64)
        threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        os.write(2, f"exec-error {exc.errno}\n".encode())
        os._exit(255)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
