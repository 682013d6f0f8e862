"""Write the shipped hook runtime's entry into hooks/agent/runtimes.json (older entries kept).

Run after changing a runtime file (hook_runner.py, hermit_hooks.py, hooks.json) and bumping
hook_runner.RUNTIME_VERSION; `--check` fails when the entry is not current (CI, tests).

    python scripts/gen_runtimes.py [--check] [--replace]
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parent.parent / "hooks" / "agent"
FILES = ("hook_runner.py", "hermit_hooks.py", "hooks.json")


def main(argv: list[str]) -> int:
    path = AGENT / "runtimes.json"
    data = json.loads(path.read_text())
    found = re.search(r"^RUNTIME_VERSION = (\d+)$", (AGENT / "hook_runner.py").read_text(), re.M)
    if found is None:
        print("hook_runner.py defines no RUNTIME_VERSION", file=sys.stderr)
        return 1
    entry = {name: hashlib.sha256((AGENT / name).read_bytes()).hexdigest() for name in FILES}
    version = found.group(1)
    older = {v: files for v, files in data["versions"].items() if v != version}
    if data["versions"].get(version) == entry:
        return 0
    if entry in older.values():
        print(f"an older version has exactly these files: RUNTIME_VERSION {version} names no change", file=sys.stderr)
        return 1
    if "--check" in argv:
        print(f"{path} is not current for runtime {version}: run python scripts/gen_runtimes.py", file=sys.stderr)
        return 1
    if version in data["versions"] and "--replace" not in argv:
        # a released version's files are what adapters committed: changing them breaks their check
        print(f"runtime {version} is already listed with other files: bump hook_runner.RUNTIME_VERSION "
              "(or pass --replace while that version is unreleased)", file=sys.stderr)
        return 1
    data["versions"][version] = entry
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"runtime {version}: {path} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
