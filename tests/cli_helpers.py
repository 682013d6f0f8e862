"""Run the real `git hermit` executable in a repository and capture its result."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

GIT_HERMIT = [sys.executable, "-m", "git_hermit"]


@dataclass
class Result:
    code: int
    out: str
    err: str


def hermit(cwd: Path, *args: str, env: dict | None = None, timeout: float = 120) -> Result:
    proc = subprocess.run([*GIT_HERMIT, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)
