"""Find the installed host CLIs (codex, claude, pi) and their versions.

Order: ``$GIT_HERMIT_HOSTS_DIR/node/node_modules/.bin``, the default cache dir of the
*real* user (tests replace HOME, so it is computed from the password database), then PATH.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

HOSTS = ("codex", "claude-code")   # the hook hosts doctor checks; Pi runs no hooks
PINNED_PACKAGES = {"codex": "@openai/codex@0.164.0", "claude-code": "@anthropic-ai/claude-code@2.1.317",
                   "pi": "@mariozechner/pi-coding-agent@0.73.1"}
_BINARY = {"codex": "codex", "claude-code": "claude", "claude": "claude", "pi": "pi"}


def default_hosts_dir() -> Path:
    """``~/.cache/git-hermit/hosts`` of the user running the process (not $HOME)."""
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "git-hermit" / "hosts"


def hosts_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("GIT_HERMIT_HOSTS_DIR"):
        dirs.append(Path(os.environ["GIT_HERMIT_HOSTS_DIR"]))
    dirs.append(default_hosts_dir())
    return dirs


def binary_name(host: str) -> str:
    try:
        return _BINARY[host]
    except KeyError:
        raise ValueError(f"unknown host {host!r}; known: {', '.join(PINNED_PACKAGES)}") from None


def find_host_cli(host: str) -> Path | None:
    """The host's CLI ('codex', 'claude-code'/'claude' or 'pi'), or None when it is not installed."""
    name = binary_name(host)
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
    # pi prints its version on stderr
    match = re.search(r"\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?", proc.stdout or proc.stderr or "")
    return match.group(0) if match else ""
