"""Helpers of tests/test_conformance.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

from pathlib import Path as _Path

TESTS = _Path(__file__).resolve().parents[1]

import json
import subprocess
import sys
from pathlib import Path
import pytest
from git_hermit.hostkit import conformance
from git_hermit.hosts.locate import cli_version, find_node
from git_hermit.hosts.registry import find_host_cli
from git_hermit.rollouts.trajectories import summarize

def require_cli(host: str) -> Path:
    if find_node() is None:
        pytest.skip("node is not installed")
    cli = find_host_cli(host)
    if cli is None:
        pytest.skip(f"the {host} CLI is not installed (git hermit hosts install)")
    return cli

