#!/usr/bin/env python3
"""Find the project's test command, run it with a time limit, and print only the end of its output.

Usage: run_tests.py [--timeout SECONDS] [--lines N] [--dir DIR] [-- extra args for the test runner]
Exit code: the test command's, 124 on timeout, 2 when no test setup is recognised.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path


def detect_command(root: Path) -> list[str] | None:
    """The test command the project itself declares, checked from most to least specific."""
    package_json = root / "package.json"
    if package_json.is_file():
        try:
            scripts = json.loads(package_json.read_text(encoding="utf-8")).get("scripts", {})
        except (ValueError, AttributeError):
            scripts = {}
        if "test" in scripts:
            return ["npm", "test", "--silent", "--"]
    if (root / "pyproject.toml").is_file() or (root / "pytest.ini").is_file() \
            or (root / "setup.cfg").is_file() or (root / "tests").is_dir():
        return [sys.executable, "-m", "pytest", "-q", "-x"]
    if (root / "go.mod").is_file():
        return ["go", "test", "./..."]
    if (root / "Cargo.toml").is_file():
        return ["cargo", "test", "--quiet"]
    makefile = root / "Makefile"
    if makefile.is_file() and any(line.startswith("test:") for line in
                                  makefile.read_text(encoding="utf-8", errors="replace").splitlines()):
        return ["make", "test"]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is killed")
    parser.add_argument("--lines", type=int, default=80, help="how many final output lines to print")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="project root (default: cwd)")
    parser.add_argument("extra", nargs="*", help="arguments passed to the test runner")
    args = parser.parse_args(argv)

    command = detect_command(args.dir)
    if command is None:
        print(f"no test setup recognised in {args.dir} (looked for package.json, pyproject.toml, "
              "pytest.ini, setup.cfg, tests/, go.mod, Cargo.toml, Makefile)")
        return 2
    if shutil.which(command[0]) is None and command[0] != sys.executable:
        print(f"test command {command[0]!r} is not installed")
        return 2
    command += args.extra
    print("$ " + " ".join(command), flush=True)
    try:
        proc = subprocess.run(command, cwd=args.dir, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, errors="replace", timeout=args.timeout)
    except subprocess.TimeoutExpired as expired:
        # What was captured before the kill arrives as bytes even in text mode.
        output = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part
                         for part in (expired.stdout, expired.stderr) if part)
        print("\n".join(output.splitlines()[-args.lines:]))
        print(f"timed out after {args.timeout:g}s")
        return 124
    lines = (proc.stdout + proc.stderr).splitlines()
    if len(lines) > args.lines:
        print(f"... ({len(lines) - args.lines} earlier lines cut)")
    print("\n".join(lines[-args.lines:]))
    print(f"exit code {proc.returncode}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
