"""Helpers of tests/test_conformance.py that other tests use too (moved out of the test file: no test
imports another test file's helpers)."""

from __future__ import annotations

from pathlib import Path
import pytest
from git_hermit.hosts.locate import find_node
from git_hermit.hosts.registry import find_host_cli

def require_cli(host: str) -> Path:
    if find_node() is None:
        pytest.skip("node is not installed")
    cli = find_host_cli(host)
    if cli is None:
        pytest.skip(f"the {host} CLI is not installed (git hermit hosts install)")
    return cli

