"""Issue 24's smaller defects, one test each (written before each fix, through the CLI on real
repositories): what a step says of an empty commit, `check` on another host's limits, rows with
gaps, `compare` of an unknown run, the root config's run beside a second run, `hermit/<run>.yaml`
paths, `init` on a detached HEAD, a timed-out Evolve session, the AHE records' Time and
tokens_per_trial, the context-file size rule, `notes.displayRef` right after `init`, bare
repositories, `hosts install`'s home and npm's notice, and the README's `report 2` example.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from support.cli_helpers import hermit
from conftest import git
from support.step_support import RUN, env_for, make_run


def _config(repo: Path, name: str = "hermit.yaml") -> dict:
    return yaml.safe_load((repo / name).read_text())


def _write_config(repo: Path, config: dict, name: str = "hermit.yaml") -> None:
    (repo / name).write_text(yaml.safe_dump(config, sort_keys=False))


# --- a step that learned nothing still made one commit ----------------------------------------------
def test_a_step_that_made_only_its_empty_commit_says_so_not_zero_commits(repo):
    control = make_run(repo, {"t1": "4"}, k=1)           # the scripted Evolve Agent edits nothing
    r = hermit(repo, "step", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert "(0 commit(s))" not in r.out
    assert "(1 commit, no adapter changes)" in r.out, r.out
    tip, seed = (git(repo, "rev-parse", f"hermit/{RUN}/step-{n:04d}").strip() for n in (1, 0))
    assert git(repo, "rev-list", "--count", f"{seed}..{tip}").strip() == "1"


# --- check: what another host lacks is not this run's problem ------------------------------------
def test_check_on_a_codex_run_does_not_warn_about_pis_missing_sub_agents(repo_with_history):
    repo = repo_with_history
    assert hermit(repo, "init", "--example").code == 0
    assert (repo / "adapter" / "agents").is_dir() and any((repo / "adapter" / "agents").iterdir())
    assert _config(repo)["host"] == "codex"
    r = hermit(repo, "check", "--no-preflight")
    assert r.code == 0, r.out + r.err
    assert "pi has no sub-agents" not in r.out, r.out
    pi = hermit(repo, "check", "--no-preflight", "--host", "pi")      # deployed for Pi: it is said
    assert "pi has no sub-agents" in pi.out, pi.out
    config = _config(repo)
    config["host"] = "pi"
    _write_config(repo, config)
    assert "pi has no sub-agents" in hermit(repo, "check", "--no-preflight").out


# --- rows with gaps ------------------------------------------------------------------------------
def test_rows_with_a_gap_in_a_tasks_attempts_are_an_error_with_a_hint(repo):
    """Seed 000: a task's k rows are <task>#1 … <task>#k; `t1#1, t1#3` is a row lost or mistyped,
    so it is refused before anything runs (exit 7) instead of running as a k=2 task."""
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=2)
    (repo / "rows" / "train.txt").write_text("t1#1\nt1#3\nt2#1\nt2#2\n")
    before = git(repo, "for-each-ref")
    r = hermit(repo, "rollout", env=env_for(control))
    assert r.code == 7, r.out + r.err
    error, hint = r.err.strip().splitlines()[-2:]
    assert "t1 (#1, #3: no #2)" in error and error.startswith("error: "), r.err
    assert hint == "hint: number each task's rows #1 … #k, without gaps", r.err
    assert git(repo, "for-each-ref") == before and not (control / "agent.log").exists()


# --- compare names the unknown run ---------------------------------------------------------------
def test_compare_with_an_unknown_run_names_it(repo_with_history):
    repo = repo_with_history
    assert hermit(repo, "init").code == 0                 # run `ahe`, no scores at all
    r = hermit(repo, "compare", "ahe", "nope")
    assert r.code == 5, r.out + r.err
    error = r.err.strip().splitlines()[-2]
    assert "'nope'" in error and "ahe" in error, r.err   # the unknown run, and the runs there are
    assert "scores" not in error, r.err
    r = hermit(repo, "compare", "nope", "ahe")
    assert r.code == 5 and "'nope'" in r.err, r.err


# --- two runs: the root hermit.yaml's run needs no --run -----------------------------------------
def _second_run(repo: Path, name: str = "second") -> None:
    r = hermit(repo, "init", "--run", name)
    assert r.code == 0, r.err
    assert (repo / "hermit" / f"{name}.yaml").is_file()


def test_the_root_configs_run_is_the_default_beside_a_second_run(repo):
    control = make_run(repo, {"t1": "4"}, k=1)             # hermit.yaml: run `r`
    _second_run(repo)
    for args in (("log",), ("show", "step-0"), ("estimate",), ("rollout",)):
        r = hermit(repo, *args, env=env_for(control))
        assert r.code == 0, (args, r.out + r.err)
    assert "hermit/r/step-NNNN" in hermit(repo, "log").out
    second = hermit(repo, "log", "--run", "second")
    assert second.code == 0 and "hermit/second/step-NNNN" in second.out, second.err


def test_without_a_root_config_several_runs_still_need_run(repo):
    make_run(repo, {"t1": "4"}, k=1)
    _second_run(repo)
    (repo / "hermit" / "r.yaml").write_text((repo / "hermit.yaml").read_text())
    (repo / "hermit.yaml").unlink()
    r = hermit(repo, "log")
    assert r.code == 5 and "several runs (r, second)" in r.err and "--run" in r.err, r.err


# --- hermit/<run>.yaml: paths from the repository's root -----------------------------------------
def test_a_second_runs_paths_resolve_from_the_repository_root(repo):
    control = make_run(repo, {"t1": "4"}, k=1)             # tasks.jsonl and rows/ at the root
    _second_run(repo)
    second = _config(repo, "hermit/second.yaml")
    first = _config(repo)
    for key in ("tasks", "data", "agent", "judge"):
        second[key] = first[key]                           # the same relative paths, from hermit/second.yaml
    second["evolver"] = {**first["evolver"], "name": "ahe"}
    _write_config(repo, second, "hermit/second.yaml")
    r = hermit(repo, "rollout", "--run", "second", env=env_for(control))
    assert r.code == 0, r.out + r.err
    assert "t1#1" in (control / "agent.log").read_text()


def test_a_missing_file_of_a_second_run_says_where_it_was_looked_for(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    _second_run(repo)
    second = _config(repo, "hermit/second.yaml")
    second["agent"] = _config(repo)["agent"]
    second["tasks"] = {"path": "nowhere/tasks.jsonl", "id_field": "id"}
    second["data"] = {"train": "rows/train.txt"}
    _write_config(repo, second, "hermit/second.yaml")
    r = hermit(repo, "rollout", "--run", "second", env=env_for(control))
    assert r.code == 7, r.out + r.err
    assert str(repo / "nowhere" / "tasks.jsonl") in r.err, r.err       # the path it looked at
    assert "hermit/second.yaml" in r.err, r.err                        # and which config named it


# --- init on a detached HEAD ---------------------------------------------------------------------
def test_init_on_a_detached_head_commits_its_files_there_and_says_so(repo_with_history):
    repo = repo_with_history
    start = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach")
    r = hermit(repo, "init")
    assert r.code == 0, r.err
    assert "detached" in r.err and "git switch -c" in r.err, r.err
    seed = git(repo, "rev-parse", "hermit/ahe/step-0000").strip()
    assert git(repo, "rev-parse", "HEAD").strip() == seed                # HEAD holds the seed commit
    assert git(repo, "rev-parse", "HEAD^").strip() == start
    assert git(repo, "status", "--porcelain").strip() == ""              # nothing left untracked
    assert git(repo, "rev-parse", "main").strip() == start               # no branch moved


# --- an Evolve session that timed out --------------------------------------------------------------
SLEEPING_CODEX = """#!{python}
import time
time.sleep(30)
"""


def test_an_evolve_session_that_timed_out_is_reported_as_a_timeout(repo):
    control = make_run(repo, {"t1": "4"}, k=1, params={"evolve_timeout_s": 1, "debugger": {"enabled": False}})
    sleeper = control / "codex"
    sleeper.write_text(SLEEPING_CODEX.format(python=sys.executable))
    sleeper.chmod(0o755)
    config = _config(repo)
    config["evolver"]["base"] = "codex"
    config["evolver"]["model"] = {"name": "m", "bin": str(sleeper), "provider": {"base_url": "http://127.0.0.1:59999/v1"}}
    _write_config(repo, config)
    r = hermit(repo, "step", env=env_for(control), timeout=120)
    assert r.code == 8, r.out + r.err
    rejected = [line for line in r.err.splitlines() if line.startswith("error: ")]
    assert rejected and "the Evolve Agent session timed out" in rejected[0], r.err
    assert "evolve_timeout_s" in rejected[0], r.err
    assert not any("wrote no state/change_manifest.json" in line for line in rejected), r.err


# --- the AHE records: Time and tokens_per_trial -------------------------------------------------------
def test_iteration_scores_keep_every_rows_time_and_unknown_tokens_stay_unknown(repo):
    control = make_run(repo, {"t1": "4", "t2": "7"}, k=1, epochs=2)     # a command agent: no usage recorded
    r = hermit(repo, "train", env=env_for(control))
    assert r.code == 0, r.out + r.err
    table = (repo / ".hermit" / "runs" / RUN / "state" / "iteration_scores.md").read_text()
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and "Iter" not in line]
    assert len(rows) == 2, table
    assert all(cells[-1].strip() for cells in rows), table           # every row's Time, not only the last
    assert [cells[-2].strip() for cells in rows] == ["-", "-"], table  # Tok/trial unknown
    for n in (1, 2):
        tip = git(repo, "rev-parse", f"hermit/{RUN}/step-{n:04d}").strip()
        note = json.loads(git(repo, "notes", "--ref=hermit/analysis", "show", tip))
        assert note["tokens_per_trial"] is None, note.get("tokens_per_trial")   # as the stats say: unknown


# --- the context file's size rule counts what deploy adds ------------------------------------------
def _agents_md_of(repo: Path, size: int) -> None:
    """The seed's AGENTS.md (its rules kept) padded to ``size`` bytes, with ADAPTER.md equal."""
    agents = repo / "adapter" / "AGENTS.md"
    text = git(repo, "show", "hermit/ahe/step-0000:adapter/AGENTS.md").encode()
    padded = text + b"\n" + b"x" * (size - len(text) - 2) + b"\n"
    assert len(padded) == size
    agents.write_bytes(padded)
    (repo / "adapter" / "ADAPTER.md").write_bytes(padded)


def test_the_size_rule_counts_the_footer_deploy_adds_to_agents_md(repo_with_history):
    repo = repo_with_history
    assert hermit(repo, "init").code == 0
    _agents_md_of(repo, 32_768)                                   # Codex reads 32,768 bytes in all
    r = hermit(repo, "check", "--no-preflight", "--static")       # the rule alone, no deploy
    assert r.code == 1, r.out + r.err
    assert "context-size" in r.out and "deploy adds" in r.out, r.out
    added = int(r.out.split("deploy adds ")[1].split()[0])
    assert 0 < added < 400, r.out
    _agents_md_of(repo, 32_768 - added)                           # the largest the rule lets through
    r = hermit(repo, "check", "--no-preflight")                   # ... and it fits once deployed
    assert r.code == 0, r.out + r.err
    assert "context-size" not in r.out, r.out
    _agents_md_of(repo, 32_768 - added + 1)
    both = hermit(repo, "check", "--no-preflight")
    assert both.code == 1 and "host-context-size" in both.out and "context-size:" in both.out, both.out


# --- notes.displayRef: no warning before the notes exist ----------------------------------------------
def test_plain_git_show_gives_no_warning_right_after_init_and_shows_the_notes_once_written(repo):
    control = make_run(repo, {"t1": "4"}, k=1)
    shown = subprocess.run(["git", "show", "--stat", "HEAD"], cwd=repo, capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    # an earlier version's exact names are replaced by the globs on the next configure (fetch, init)
    git(repo, "config", "--add", "notes.displayRef", "refs/notes/hermit/manifest")
    assert hermit(repo, "init", "--run", "other").code == 0
    assert "refs/notes/hermit/manifest" not in git(repo, "config", "--get-all", "notes.displayRef").split()
    from support.step_support import change, memory_lines, plan
    plan(control, 1, append={"MEMORY.md": memory_lines({"t1": "4"})}, changes=[change("chg-1", ["MEMORY.md"])])
    assert hermit(repo, "step", "--run", RUN, env=env_for(control)).code == 0
    log = subprocess.run(["git", "log", "-1", f"hermit/{RUN}/step-0001"], cwd=repo, capture_output=True, text=True)
    assert "Notes (hermit/manifest):" in log.stdout and log.stderr == "", log


# --- bare repositories: the read-only commands ----------------------------------------------------
def test_a_bare_repository_answers_log_show_and_report_as_its_clone_does(demo_run, tmp_path):
    """A server-side reviewer's repository is bare: `log`, `show` and `report` read refs and notes
    only, and the run's config as committed, so they answer there as in the repository pushed from."""
    bare = tmp_path / "server.git"
    git(tmp_path, "clone", "-q", "--bare", str(demo_run), str(bare))
    git(bare, "fetch", "-q", str(demo_run), "refs/notes/*:refs/notes/*", "refs/heads/*:refs/heads/*",
        "refs/hermit/*:refs/hermit/*")                              # the run's records (docs/git-data-model.md)
    for args in (("log",), ("show", "step-2"), ("report", "2")):
        here, there = hermit(demo_run, *args), hermit(bare, *args)
        assert there.code == 0, (args, there.err)
        assert there.out == here.out, args
    assert hermit(bare, "log", "--json").code == 0
    step = hermit(bare, "step")                                    # what needs a work tree still says so
    assert step.code == 3 and "bare" in step.err, step.err


# --- hosts install: $HOME, and npm's own error ------------------------------------------------------
FAKE_NPM = """#!{python}
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
if {fail!r}:
    print("npm error code E404", file=sys.stderr)
    print("npm error 404 Not Found - GET the-registry/@openai%2fcodex - Not found", file=sys.stderr)
    print("npm notice", file=sys.stderr)
    print("npm notice New major version of npm available! 10.8.2 -> 11.6.0", file=sys.stderr)
    print("npm notice To update run: npm install -g npm@11.6.0", file=sys.stderr)
    sys.exit(1)
prefix = Path(args[args.index("--prefix") + 1])
package, version = args[-1].rsplit("@", 1)
where = prefix / "node_modules" / package
where.mkdir(parents=True, exist_ok=True)
(where / "package.json").write_text(json.dumps({{"name": package, "version": version}}))
binary = prefix / "node_modules" / ".bin" / "codex"
binary.parent.mkdir(parents=True, exist_ok=True)
binary.write_text("#!/bin/sh\\necho codex-cli " + version + "\\n")
binary.chmod(0o755)
"""


def _fake_npm(tmp_path: Path, *, fail: bool) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable, fail=fail))
    npm.chmod(0o755)
    import os
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home")}


def test_hosts_install_puts_the_clis_under_home(tmp_path):
    env = _fake_npm(tmp_path, fail=False)
    r = hermit(tmp_path, "hosts", "install", "codex", env=env)
    assert r.code == 0, r.out + r.err
    installed = tmp_path / "home" / ".cache" / "git-hermit" / "hosts" / "node" / "node_modules" / ".bin" / "codex"
    assert installed.is_file(), r.out
    assert str(installed) in r.out
    assert "already installed" in hermit(tmp_path, "hosts", "install", "codex", env=env).out


def test_a_failed_hosts_install_shows_npms_error_not_its_update_notice(tmp_path):
    r = hermit(tmp_path, "hosts", "install", "codex", env=_fake_npm(tmp_path, fail=True))
    assert r.code == 12, r.out + r.err
    error = r.err.strip().splitlines()[-2]
    assert "404 Not Found" in error, r.err
    assert "New major version" not in error and "npm install -g npm" not in error, r.err


# --- the README's log block and the `report 2` example of docs/review.md ------------------------------
ROOT = Path(__file__).resolve().parents[1]
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")


def _readme_blocks() -> tuple[list[str], str]:
    """The Quickstart's `git hermit log` lines (README) and the `report 2` example (docs/review.md),
    both from one demo run."""
    readme = (ROOT / "README.md").read_text()
    log = readme.split("$ git hermit log\n", 1)[1].split("```", 1)[0].splitlines()
    review = (ROOT / "docs" / "review.md").read_text()
    report = review.split("````markdown\n", 1)[1].split("````", 1)[0]
    return log, report


def _ledger(report: str) -> dict[str, tuple[int, int]]:
    rows = re.findall(r"^\| (\w+) \| ([\d,]+) \| ([\d,]+) \| [^|]+ \|$", report, re.M)
    return {role: (int(i.replace(",", "")), int(o.replace(",", ""))) for role, i, o in rows}


def test_the_readmes_report_2_example_is_one_demo_runs_and_agrees_with_its_log_block():
    log, report = _readme_blocks()
    rows = {int(m[1]): line for line in log if (m := re.match(r"step\s+(\d+)\s+", line))}
    # one run: the report's commits are the log block's
    for step, short in re.findall(r"^\| (\d) \| ([0-9a-f]{7}) \| train", report, re.M):
        assert rows[int(step)].split()[2].startswith(short), (step, short, rows[int(step)])
    ledger = _ledger(report)
    acting = sum(ledger["acting"])                # step 2's rollouts of H_1: the log's row 1
    assert f"tokens {acting / 1000:.1f}k" in rows[1], (acting, rows[1])
    learners = sum(sum(v) for role, v in ledger.items() if role not in ("acting", "judge"))
    assert f"(learners: {learners / 1000:.1f}k tokens" in rows[2], (learners, rows[2])


def test_the_readmes_report_2_example_is_what_report_writes_now(demo_run):
    """Against a fresh demo: the same text but for commit ids, the learners' and agents' input token
    counts (their prompts hold the demo's directory, whose length differs) and the name git gives
    the first branch (init.defaultBranch)."""
    _, example = _readme_blocks()
    r = hermit(demo_run, "report", "2")
    assert r.code == 0, r.err

    def shape(text: str) -> str:
        text = _HEX.sub("<sha>", text).replace("→ `master`", "→ `main`")
        return re.sub(r"^(\| \w+ \| )[\d,]+( \| [\d,]+ \|)", r"\1<n>\2", text, flags=re.M)
    assert shape(r.out) == shape(example)
