"""Find an installed host CLI by its executable name, and its version.

Order: ``$GIT_HERMIT_HOSTS_DIR/node/node_modules/.bin``, ``$HOME/.cache/git-hermit/hosts`` (where
`hosts install` puts them), the same folder in the account's own home from the password database
(CLIs installed before HOME was replaced, e.g. by a test or a sandbox, are still found), then PATH.
Which binary a host has is its host module's business (registry.find_host_cli).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path


def default_hosts_dir() -> Path:
    """``~/.cache/git-hermit/hosts``, ``~`` being $HOME: where `hosts install` puts the CLIs."""
    return Path(os.path.expanduser("~")) / ".cache" / "git-hermit" / "hosts"


def account_hosts_dir() -> Path:
    """The same folder in the account's home as the password database has it (whatever $HOME is)."""
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "git-hermit" / "hosts"


def hosts_dirs() -> list[Path]:
    """Where the host CLIs are looked for, in order; the first is where `hosts install` writes."""
    dirs = []
    if os.environ.get("GIT_HERMIT_HOSTS_DIR"):
        dirs.append(Path(os.environ["GIT_HERMIT_HOSTS_DIR"]))
    dirs.append(default_hosts_dir())
    if account_hosts_dir() not in dirs:
        dirs.append(account_hosts_dir())
    return dirs


def find_cli(name: str) -> Path | None:
    """The executable ``name`` from the hosts dirs, else PATH; None when not installed."""
    for base in hosts_dirs():
        candidate = base / "node" / "node_modules" / ".bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def find_node() -> Path | None:
    found = shutil.which("node")
    return Path(found) if found else None


def cli_version(path: Path | str) -> str:
    """The bare version the CLI reports ('0.164.0' from 'codex-cli 0.164.0'), or '' if unknown."""
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    # some CLIs print their version on stderr
    match = re.search(r"\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?", proc.stdout or proc.stderr or "")
    return match.group(0) if match else ""
