"""A probe hook for conformance runs: logs each payload a host sends and answers from a plan.

Run by the host as ``python -S probe_hook.py <plan.json> <log.jsonl>`` (stdlib only). The plan
is a list of rules {event, match?, once?, output?, exit?, stderr?}; the first rule whose event
equals the payload's and whose ``match`` occurs in the payload's tool input answers the call.
"""

import json
import sys
from pathlib import Path


def main(plan_path: str, log_path: str) -> int:
    payload = json.loads(sys.stdin.read() or "{}")
    event = payload.get("hook_event_name", "")
    with open(log_path, "a") as log:
        log.write(json.dumps(payload) + "\n")
    used_path = Path(log_path + ".used")
    used = set(used_path.read_text().split()) if used_path.exists() else set()
    haystack = json.dumps(payload.get("tool_input") or "")
    for index, rule in enumerate(json.loads(Path(plan_path).read_text())):
        if rule["event"] != event or str(index) in used or rule.get("match", "") not in haystack:
            continue
        if rule.get("once"):
            # Hooks run one after another, so a plain append cannot race.
            with open(used_path, "a") as handle:
                handle.write(f"{index}\n")
        if rule.get("stderr"):
            sys.stderr.write(rule["stderr"])
        if "output" in rule:
            sys.stdout.write(json.dumps(rule["output"]))
        return int(rule.get("exit", 0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
