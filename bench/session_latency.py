"""Session latency: a real host CLI session with the seed adapter's hooks against the same
session without hooks, on the scripted model (target: hooks cost at most 1.3x).

Usage: python bench/session_latency.py [--runs N] [--host codex|claude-code ...]
Prints, per installed host, both medians, the ratio and the target in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from git_hermit.adapter.deploy import deploy
from git_hermit.adapter.templates import load_template, write_seed
from git_hermit.hostkit.conformance import hook_calls
from git_hermit.hosts import registry
from git_hermit.hosts.locate import cli_version
from git_hermit.hosts.registry import find_host_cli
from git_hermit.hostkit.model_server import ScriptedModelServer, Turn
from git_hermit.hostkit.sessions import run_session

TARGET_RATIO = 1.3
SCRIPT = (Turn.shell("echo hi > out.txt"), Turn.shell("cat out.txt"), Turn.say("done"))


VARIANTS = ("none", "cat", "seed")  # no hooks; every hook a bare `cat >/dev/null`; the seed adapter's


def one_session(host: str, cli: Path, adapter: Path, root: Path, variant: str) -> tuple[float, int]:
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    record = deploy(adapter, workspace, host)
    hooks_file = workspace / record.hooks_config
    if variant == "none":
        hooks_file.unlink()  # the same workspace, minus the hooks
    elif variant == "cat":
        # The host's own cost of starting a hook, without the runner: the same events, a no-op command.
        config = json.loads(hooks_file.read_text())
        for entries in config["hooks"].values():
            for entry in entries:
                for hook in entry["hooks"]:
                    hook["command"] = "cat >/dev/null"
        hooks_file.write_text(json.dumps(config))
    with ScriptedModelServer(SCRIPT) as server:
        result = run_session(host, cli, workspace, server.base_url, "Write out.txt.", home=root / "home", timeout_s=120)
    if not result.ok or not (workspace / "out.txt").exists():
        sys.exit(f"{host} session failed (exit {result.exit_code}): {result.stderr[-400:]}")
    return result.duration_s, len(hook_calls(workspace))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    hook_hosts = [h.name for h in registry.hook_hosts()]
    parser.add_argument("--host", action="append", choices=hook_hosts)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hermit-bench-") as tmp:
        adapter = Path(tmp) / "adapter"
        write_seed(load_template("ahe@1.0"), adapter)
        for host in args.host or hook_hosts:
            cli = find_host_cli(host)
            if cli is None:
                print(f"{host}: not installed (git hermit hosts install); skipped")
                continue
            timings: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
            calls = 0
            for run in range(args.runs):
                for variant in VARIANTS:  # interleaved, so drift hits every variant alike
                    seconds, n = one_session(host, cli, adapter, Path(tmp) / host / f"{run}-{variant}", variant)
                    timings[variant].append(seconds)
                    calls = max(calls, n)
            hooked, bare, cat = (statistics.median(timings[v]) for v in ("seed", "none", "cat"))
            ratio = hooked / bare
            print(f"{host} {cli_version(cli)}: median session with the seed adapter's hooks {hooked:.3f} s "
                  f"({calls} hook calls), without hooks {bare:.3f} s; ratio {ratio:.2f}x "
                  f"(target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'}); "
                  f"the same hooks as `cat` {cat:.3f} s ({cat / bare:.2f}x); {args.runs} runs each")


if __name__ == "__main__":
    main()
