"""Run a deployment's installed hook commands the way a host does (shell, JSON on stdin).

Used by the scripted acting agent (which plays a host) and the host part of check_spec.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from git_hermit.adapter.deploy import DeployRecord


def installed_commands(dest: Path, record: DeployRecord) -> dict[str, list[str]]:
    """event → the hook commands the deployment's hooks config registers for it."""
    if not record.hooks_config:
        return {}
    config = json.loads((Path(dest) / record.hooks_config).read_text(encoding="utf-8"))
    return {event: [hook["command"] for group in groups for hook in group.get("hooks", [])
                    if hook.get("type") == "command"]
            for event, groups in config.get("hooks", {}).items()}


@dataclass(frozen=True)
class HookCall:
    event: str
    command: str
    returncode: int | None      # None: the host's timeout hit
    stdout: str
    stderr: str

    def output(self) -> dict[str, Any]:
        """The JSON object the hook printed ({} for no output or non-JSON, as hosts treat it)."""
        text = self.stdout.strip()
        if not text:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}


def fire(commands: Mapping[str, list[str]], event: str, payload: dict[str, Any], *, cwd: Path,
         env: Mapping[str, str], timeout_s: float) -> list[HookCall]:
    """Run every command registered for ``event`` in order with the payload on stdin."""
    calls = []
    body = json.dumps({**payload, "hook_event_name": event})
    for command in commands.get(event, []):
        try:
            done = subprocess.run(command, shell=True, input=body, capture_output=True, text=True,
                                  cwd=cwd, env=dict(env), timeout=timeout_s)
            calls.append(HookCall(event, command, done.returncode, done.stdout, done.stderr))
        except subprocess.TimeoutExpired:
            calls.append(HookCall(event, command, None, "", f"no answer within {timeout_s} s"))
    return calls


def merged_output(calls: list[HookCall]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for call in calls:
        merged.update(call.output())
    return merged
