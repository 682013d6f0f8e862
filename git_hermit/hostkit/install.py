"""`git hermit hosts install`: put the pinned host CLIs where git-hermit finds them.

Each host's npm package is installed at its pinned version into ``<hosts dir>/node``
(``$GIT_HERMIT_HOSTS_DIR``, else ``~/.cache/git-hermit/hosts``), the first place
``registry.find_host_cli`` looks; a package already there at its pinned version is left alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from git_hermit.errors import AgentError, InputError
from git_hermit.hosts import registry
from git_hermit.hosts.locate import cli_version, hosts_dirs
from git_hermit.hosts.registry import binary_name


@dataclass(frozen=True)
class Installed:
    host: str
    package: str
    version: str
    path: Path
    changed: bool          # False: it was already there at the pinned version


def _installed_version(prefix: Path, package: str) -> str:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text()).get("version", "")
    except (OSError, ValueError):
        return ""


def npm_failure(output: str) -> str:
    """What npm said went wrong: its ``npm error`` lines (``npm ERR!`` before npm 9), never the
    ``npm notice`` lines it prints last (a new npm version is out), which are not the cause."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("npm error", "npm ERR!"))]
    said = errors or [line for line in lines if not line.startswith(("npm notice", "npm warn", "npm WARN"))] or lines
    return " / ".join(said)[-300:] or "no message"


def install_hosts(hosts: list[str] | None = None, *, say: Callable[[str], None] = print) -> list[Installed]:
    """Install each host's pinned package (every registered host by default); return what is there now."""
    pinned = registry.pinned_packages()
    hosts = list(hosts or pinned)
    unknown = [h for h in hosts if h not in pinned]
    if unknown:
        raise InputError(f"unknown host(s) {', '.join(unknown)}", hint=f"known: {', '.join(pinned)}")
    prefix = hosts_dirs()[0] / "node"
    missing = [h for h in hosts if _installed_version(prefix, pinned[h].rsplit("@", 1)[0])
               != pinned[h].rsplit("@", 1)[1]]
    npm = shutil.which("npm") or ""
    if missing and not npm:
        raise AgentError(f"npm is not installed, and {', '.join(missing)} need it",
                         hint="install Node.js 20 or newer (with npm), then rerun `git hermit hosts install`")
    prefix.mkdir(parents=True, exist_ok=True)
    done = []
    for host in hosts:
        spec = pinned[host]
        package, version = spec.rsplit("@", 1)
        changed = host in missing
        if changed:
            say(f"{host}: installing {spec} into {prefix}")
            # Claude Code declares engines.node >= 22 but runs on Node 20; Pi's skipped install
            # scripts (koffi, protobufjs) are not needed to run it.
            proc = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                                   "--no-update-notifier", "--loglevel=error", spec], capture_output=True, text=True)
            if proc.returncode != 0:
                raise AgentError(f"npm could not install {spec}: {npm_failure(proc.stderr or proc.stdout)}",
                                 hint="check npm's access to its registry, then rerun `git hermit hosts install`")
            got = _installed_version(prefix, package)
            if got != version:
                raise AgentError(f"{package} is at {got or 'nothing'} after npm install, expected {version}",
                                 hint=f"remove {prefix / 'node_modules' / package} and rerun")
        binary = prefix / "node_modules" / ".bin" / binary_name(host)
        done.append(Installed(host, package, cli_version(binary) or version, binary, changed))
    return done
