"""Run acting agents and learner sessions in a bubblewrap sandbox (hermit.yaml's ``sandbox:``).

Inside: the system directories read-only, the workspace and a private home writable, the
host CLI's install directory and the Python runtime read-only; nothing of the user's home,
other repositories, or the workspace's ``.git``. ``network``: ``full`` shares the host's
network; ``none`` gives a namespace with only its own loopback; ``restricted`` gives the same
namespace plus a bridge (``_netbridge.py``): inside, 127.0.0.1:PROXY_PORT and each loopback
model endpoint's port relay over unix sockets bound into the sandbox to git-hermit, which
serves an allow-list HTTP proxy (CONNECT / absolute-URI, ports 80 and 443, the ``allow`` hosts
and their subdomains, and the model endpoint) and forwards to the loopback endpoints. What is
enforced: no packet leaves the namespace except through those sockets, so any other host or
loopback port is unreachable whatever the program does. What is not: hostnames are checked,
not what a program sends to an allowed host; a program that ignores HTTPS_PROXY gets no
network at all rather than a bypass; ``full`` enforces nothing on the network.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from functools import partial
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from git_hermit.model.config_blocks import SandboxConfig
from git_hermit.supervise._netbridge import pump

BRIDGE = Path(__file__).with_name("_netbridge.py")
NETWORKS = ("restricted", "none", "full")
PROXY_PORT = 3128               # inside the sandbox's own namespace: no clash with the host
NET_DIR = "/run/hermit-net"     # where the bridge's sockets appear inside
ALLOWED_PORTS = (80, 443)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The parts of /etc a program needs (names, certificates, locale): not the rest (shadow, keys).
ETC = ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "ssl", "ca-certificates",
       "ca-certificates.conf", "pki", "localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
       "alternatives", "mime.types", "os-release", "debian_version", "bash.bashrc", "profile", "inputrc",
       "gitconfig", "subversion", "terminfo", "host.conf", "gai.conf", "protocols", "services")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed process may reach (picklable: it travels with a rollout job)."""

    network: str = "restricted"
    allow: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()      # model endpoint URLs let through besides ``allow``
    readable: tuple[str, ...] = ()       # extra read-only paths (a host CLI's install dir)
    hidden: tuple[str, ...] = ()         # paths inside a readable one that stay out of reach (empty there)

    def with_endpoint(self, *urls: str | None) -> "SandboxSpec":
        return replace(self, endpoints=self.endpoints + tuple(u for u in urls if u))

    def with_readable(self, *paths: Path | str | None, hidden: Sequence[Path | str] = ()) -> "SandboxSpec":
        return replace(self, readable=self.readable + tuple(str(p) for p in paths if p),
                       hidden=self.hidden + tuple(str(p) for p in hidden))


def default_endpoint(backend: str | None) -> str | None:
    """The model endpoint a host reaches when hermit.yaml names no provider.base_url."""
    from git_hermit.hosts import registry
    return registry.get(backend).default_endpoint if backend and registry.known(backend) else None


def spec_from_config(sandbox: SandboxConfig, *, backend: str | None = None,
                     provider: dict[str, Any] | None = None) -> SandboxSpec | None:
    """hermit.yaml's ``sandbox:`` block as a spec for one backend, or None when it is disabled
    (absent: disabled). Refuses (ConfigError) when it is enabled and bubblewrap cannot run here."""
    from git_hermit.errors import ConfigError
    if not sandbox.enabled:
        return None
    ok, detail = probe()
    if not ok:
        raise ConfigError(f"sandbox.enabled is true but the sandbox cannot run here: {detail}",
                          hint="install bubblewrap (apt-get install bubblewrap), or run unsandboxed "
                               "explicitly with `sandbox: {enabled: false}` in hermit.yaml")
    endpoint = (provider or {}).get("base_url") or default_endpoint(backend)
    spec = SandboxSpec(network=sandbox.network, allow=sandbox.allow)
    return spec.with_endpoint(endpoint)


# -- can bubblewrap run here? ------------------------------------------------------------------
_probe: tuple[bool, str] | None = None
_probe_lock = threading.Lock()


def probe() -> tuple[bool, str]:
    """(works, one line saying why or why not): one throw-away sandbox with every namespace."""
    global _probe
    with _probe_lock:
        if _probe is None:
            _probe = _run_probe()
        return _probe


def bwrap_path() -> str | None:
    """``$GIT_HERMIT_BWRAP`` (a path) or ``bwrap`` on PATH."""
    override = os.environ.get("GIT_HERMIT_BWRAP")
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which("bwrap")


def _run_probe() -> tuple[bool, str]:
    bwrap = bwrap_path()
    if bwrap is None and os.environ.get("GIT_HERMIT_BWRAP"):
        return False, f"GIT_HERMIT_BWRAP={os.environ['GIT_HERMIT_BWRAP']} is not an executable file"
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    argv = [bwrap, *_base_args(SandboxSpec(network="none")), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap could not run: {exc}"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return False, f"bwrap cannot create its namespaces here ({reason}); user namespaces may be disabled"
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    return True, f"{version or 'bwrap'} works here (user, pid, network namespaces)"


def require() -> None:
    ok, detail = probe()
    if not ok:
        raise SandboxUnavailable(detail)


# -- the bwrap command line --------------------------------------------------------------------
def _base_args(spec: SandboxSpec) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp",
            "--dir", "/run"]
    if spec.network == "full":
        args.append("--share-net")
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC:
        if os.path.lexists(f"/etc/{name}"):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _code_paths() -> list[str]:
    """Read-only code the sandbox needs: the interpreter hooks and the bridge run on (with its
    standard library), and git-hermit itself with its data folders (the Evolve Agent's
    ``check_spec`` runs ``python -m git_hermit check``)."""
    from git_hermit import resources
    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), str(resources._PACKAGE_DIR)}
    for name in ("hooks", "schemas", "templates"):
        try:
            paths.add(str(resources.data_dir(name)))
        except FileNotFoundError:
            pass
    return sorted(p for p in paths if not any(p == s or p.startswith(s + "/") for s in SYSTEM))


def install_dir(binary: Path | str) -> str:
    """What to expose of a program: its npm tree (a host CLI's ``node_modules`` and the folder
    holding it) or else the program's own directory."""
    path = Path(binary).absolute()
    for candidate in (path, Path(os.path.realpath(path))):
        parts = candidate.parts
        if "node_modules" in parts:
            return str(Path(*parts[:parts.index("node_modules")]))
    return str(Path(os.path.realpath(path)).parent)


def _masks(root: Path) -> list[str]:
    """Hide a ``.git`` inside a writable directory (a worktree's file or a clone's directory)."""
    git = root / ".git"
    if git.is_dir():
        return ["--tmpfs", str(git)]
    if git.exists():
        return ["--ro-bind", "/dev/null", str(git)]
    return []


def wrap(argv: Sequence[str], *, spec: SandboxSpec, workspace: Path, home: Path,
         env: dict[str, str], readable: Sequence[Path | str] = ()) -> tuple[list[str], dict[str, str]]:
    """``argv`` as a bwrap command line, and the environment to start it with."""
    require()
    bwrap = bwrap_path()
    if bwrap is None:      # require() found it a moment ago: only a removal in between lands here
        raise SandboxUnavailable("bubblewrap (bwrap) disappeared")
    args = [bwrap, *_base_args(spec)]
    for path in [*_code_paths(), *spec.readable, *map(str, readable)]:
        if path and os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in spec.hidden:             # an empty read-only directory (or file) in its place
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path):
            args += ["--ro-bind", "/dev/null", path]
    for writable in (workspace, home):
        args += ["--bind", str(writable), str(writable), *_masks(writable)]
    args += ["--chdir", str(workspace), "--setenv", "TMPDIR", "/tmp"]
    env = dict(env)
    env.pop("TMPDIR", None)
    inner = list(argv)
    if spec.network == "restricted":
        gateway = _gateway(spec)
        args += ["--ro-bind", str(gateway.directory), NET_DIR]
        pairs = [f"{PROXY_PORT}={NET_DIR}/proxy.sock"]
        pairs += [f"{port}={NET_DIR}/fwd-{port}.sock" for port in gateway.forwards]
        python = os.path.realpath(sys.executable)
        args += ["--ro-bind", str(BRIDGE), f"{NET_DIR}-bridge.py"]
        inner = [python, "-I", "-S", f"{NET_DIR}-bridge.py", *pairs, "--", *inner]
        proxy = f"http://127.0.0.1:{PROXY_PORT}"
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
            env[name] = proxy
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    else:
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
            env.pop(name, None)
    return [*args, "--", *inner], env


# -- git-hermit's side: the allow-list proxy and the loopback forwards ---------------------------
def _host_allowed(host: str, allowed: Sequence[str]) -> bool:
    host = host.lower().rstrip(".")
    return any(host == a or host.endswith("." + a) for a in allowed)


@dataclass
class Gateway:
    """Unix sockets in a private directory: ``proxy.sock`` (allow-list proxy) and one
    ``fwd-PORT.sock`` per loopback model endpoint. Served by daemon threads for the process's life."""

    directory: Path
    hosts: tuple[str, ...]                          # allowed by name, ports 80/443
    endpoints: tuple[tuple[str, int], ...]          # allowed exactly (host, port)
    forwards: dict[int, tuple[str, int]] = field(default_factory=dict)

    def start(self) -> None:
        self._listen(self.directory / "proxy.sock", self._proxy)
        for port, target in self.forwards.items():
            self._listen(self.directory / f"fwd-{port}.sock", partial(self._forward, target=target))

    def _listen(self, path: Path, handler: Callable[[socket.socket], None]) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(64)

        def serve() -> None:
            while True:
                client, _ = server.accept()
                threading.Thread(target=handler, args=(client,), daemon=True).start()
        threading.Thread(target=serve, daemon=True, name=f"hermit-gateway-{path.name}").start()

    def allows(self, host: str, port: int) -> bool:
        if (host.lower(), port) in self.endpoints:
            return True
        return port in ALLOWED_PORTS and _host_allowed(host, self.hosts)

    def _forward(self, client: socket.socket, target: tuple[str, int]) -> None:
        try:
            upstream = socket.create_connection(target, timeout=30)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        _splice(client, upstream)

    def _proxy(self, client: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = client.recv(4096)
                if not chunk:
                    client.close()
                    return
                head += chunk
            line, _, rest = head.partition(b"\r\n")
            method, target, version = line.decode("latin-1").split(" ", 2)
            if method.upper() == "CONNECT":
                host, _, port = target.rpartition(":")
                host, port_n = host.strip("[]"), int(port)
            else:
                parts = urlsplit(target)
                host, port_n = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
            if not self.allows(host, port_n):
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                               + f"git-hermit sandbox: {host}:{port_n} is not in sandbox.allow\n".encode())
                client.close()
                return
            upstream = socket.create_connection((host, port_n), timeout=30)
            upstream.settimeout(None)
            if method.upper() == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _, _, extra = head.partition(b"\r\n\r\n")
                if extra:
                    upstream.sendall(extra)
            else:
                parts = urlsplit(target)
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                upstream.sendall(f"{method} {path} {version}\r\n".encode("latin-1") + rest)
        except (OSError, ValueError):
            try:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
            client.close()
            return
        _splice(client, upstream)


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Relay both ways until each side closes (the same pump the in-sandbox bridge uses)."""
    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


_gateways: dict[tuple[Any, ...], Gateway] = {}
_gateways_lock = threading.Lock()


def _gateway(spec: SandboxSpec) -> Gateway:
    """This process's gateway for ``spec`` (started on first use)."""
    from git_hermit.supervise.scratch import process_dir
    key = (spec.allow, spec.endpoints)
    with _gateways_lock:
        gateway = _gateways.get(key)
        if gateway is None:
            endpoints, forwards = [], {}
            for url in spec.endpoints:
                parts = urlsplit(url if "://" in url else f"https://{url}")
                host = (parts.hostname or "").lower()
                port = parts.port or (443 if parts.scheme == "https" else 80)
                endpoints.append((host, port))
                if host in LOOPBACK and port != PROXY_PORT:
                    forwards[port] = ("127.0.0.1" if host == "localhost" else host, port)
            directory = process_dir() / f"net-{len(_gateways)}"
            directory.mkdir(mode=0o700)
            gateway = Gateway(directory, spec.allow, tuple(endpoints), forwards)
            gateway.start()
            _gateways[key] = gateway
        return gateway
