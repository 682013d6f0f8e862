"""Help, the manual page, shell completion and the shape of every command-line error.

The manual page is generated from the CLI and shipped in the wheel (test_packaging opens it
through `git help hermit`); here the committed page must equal a fresh rendering, completion
answers through click's protocol and through git's own bash completion, and every usage
error is `error:` + `hint:` with exit 2 (or one JSON object with --json).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_helpers import hermit
from conftest import git

ROOT = Path(__file__).resolve().parent.parent
GIT_BASH_COMPLETION = Path("/usr/share/bash-completion/completions/git")


def test_shipped_manual_page_is_the_cli_rendered_now(tmp_path):
    # A fresh process, as the file is generated: click caches each command's help option from
    # the first context that asks, so the listing differs after other commands ran in-process.
    done = hermit(tmp_path, "help", "--man", subprocess=True)
    assert done.code == 0, done.err
    shipped = (ROOT / "man" / "git-hermit.1").read_text()
    assert done.out == shipped, "man/git-hermit.1 is stale: run `git hermit help --man > man/git-hermit.1`"
    for section in (".SH SYNOPSIS", ".SH COMMANDS", ".SH EXIT STATUS", ".SH FILES", ".SH EXAMPLES"):
        assert section in shipped
    for command in ("step", "rollback", "log", "completion", "help"):
        assert f".SS {command}" in shipped
    assert ".TP\n\\fB130\\fR" in shipped and ".TP\n\\fB5\\fR" in shipped


def test_man_renders_without_warnings(tmp_path):
    if shutil.which("man") is None:
        pytest.skip("man is not installed")
    done = subprocess.run(["man", "--warnings", "-l", str(ROOT / "man" / "git-hermit.1")], capture_output=True,
                          text=True, env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "100"})
    assert done.returncode == 0 and "EXIT STATUS" in done.stdout
    assert done.stderr.strip() == "", done.stderr


def test_help_command(tmp_path):
    overview = hermit(tmp_path, "help")
    assert overview.code == 0 and "Commands:" in overview.out and "step" in overview.out
    step = hermit(tmp_path, "help", "step")
    assert step.code == 0 and "git hermit step" in step.out and "--run" in step.out
    missing = hermit(tmp_path, "help", "nosuch")
    assert missing.code == 2 and missing.err.startswith("error: ") and "hint: " in missing.err


@pytest.mark.parametrize("args, fragment", [
    (["stpe"], "No such command 'stpe'"),
    (["log", "--bogus"], "No such option"),
    (["rollout", "-k", "x"], "-k"),
    (["-C", "/nonexistent/dir", "log"], "cannot change to /nonexistent/dir"),
])
def test_usage_errors_are_one_error_and_one_hint(tmp_path, args, fragment):
    done = hermit(tmp_path, *args)
    assert done.code == 2, done
    lines = done.err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), done.err
    assert fragment in lines[0] and "Usage:" not in done.err and "Traceback" not in done.err


def test_json_errors_are_one_object_on_stdout(tmp_path):
    outside = hermit(tmp_path, "log", "--json")          # not a repository: exit 3
    assert outside.code == 3
    record = json.loads(outside.out)
    assert set(record) == {"error", "hint", "code"} and record["code"] == 3 and record["error"]
    usage = hermit(tmp_path, "log", "--json", "--bogus")
    assert usage.code == 2 and json.loads(usage.out)["code"] == 2


def _complete(cwd: Path, words: str, cword: int, shell: str = "bash") -> list[str]:
    env = {**os.environ, "_GIT_HERMIT_COMPLETE": f"{shell}_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    done = subprocess.run([sys.executable, "-m", "git_hermit"], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.fixture
def initialised(repo_with_history):
    assert hermit(repo_with_history, "init").code == 0
    return repo_with_history


def test_completion_protocol_commands_options_runs_and_steps(initialised):
    assert {"plain,step", "plain,show"} <= set(_complete(initialised, "git-hermit s", 1))
    assert "plain,--run" in _complete(initialised, "git-hermit log --r", 2)
    assert _complete(initialised, "git-hermit log --run ", 3) == ["plain,ahe"]
    assert "plain,step-0" in _complete(initialised, "git-hermit show ", 2)
    zsh = _complete(initialised, "git-hermit st", 1, shell="zsh")
    assert "step" in zsh and "plain" in zsh


@pytest.fixture
def hermit_on_path(tmp_path):
    """A ``git-hermit`` executable on PATH that runs this checkout (as the installed script would)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "git-hermit"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -m git_hermit \"$@\"\n")
    exe.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _bash_complete(cwd: Path, env: dict, line: str, *, through_git: bool) -> list[str]:
    script = hermit(cwd, "completion", "bash").out
    setup = f"source {GIT_BASH_COMPLETION}\n" if through_git else ""
    call = "__git_wrap__git_main" if through_git else "_git_hermit_standalone"
    program = (f"{setup}{script}\n"
               f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; read -ra COMP_WORDS <<< \"$COMP_LINE\"\n"
               f"[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')\n"
               f"COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n{call}\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    done = subprocess.run(["bash", "-c", program], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [w.strip() for w in done.stdout.splitlines() if w.strip()]


def test_bash_completion_through_gits_own_completion(initialised, hermit_on_path):
    if not GIT_BASH_COMPLETION.is_file():
        pytest.skip("git's bash completion is not installed (package bash-completion / git)")
    assert "step" in _bash_complete(initialised, hermit_on_path, "git hermit st", through_git=True)
    assert _bash_complete(initialised, hermit_on_path, "git hermit log --run ", through_git=True) == ["ahe"]
    assert "step-0" in _bash_complete(initialised, hermit_on_path, "git hermit show ", through_git=True)
    assert "rollback" in _bash_complete(initialised, hermit_on_path, "git-hermit roll", through_git=False)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(tmp_path, shell):
    script = tmp_path / f"completion.{shell}"
    script.write_text(hermit(tmp_path, "completion", shell).out)
    assert "_GIT_HERMIT_COMPLETE" in script.read_text()
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed: only the script's text is checked")
    done = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_demo_onto_an_existing_file_is_bad_input(tmp_path):
    (tmp_path / "afile").write_text("x")
    done = hermit(tmp_path, "demo", "afile")
    assert done.code == 7 and done.err.startswith("error: ") and "not a directory" in done.err


def test_rollout_k_zero_is_a_usage_error(initialised):
    done = hermit(initialised, "rollout", "-k", "0")
    assert done.code == 2 and "-k" in done.err.splitlines()[0] and "hint: " in done.err


def test_unknown_rollback_target_is_an_unknown_revision(initialised):
    done = hermit(initialised, "rollback", "deadbeef", "--reason", "x")
    assert done.code == 4 and "deadbeef" in done.err and "hint: " in done.err


def test_tasks_and_rows_that_are_not_utf8_name_the_line(initialised):
    # an agent and rows the preflight accepts, so the files' contents are what is checked
    config = initialised / "hermit.yaml"
    config.write_text(config.read_text().replace("  backend: codex ", "  backend: command\n  command: [\"true\"]\n  # "))
    (initialised / "rows").mkdir(exist_ok=True)
    (initialised / "rows" / "train.txt").write_text("a#1\n")
    (initialised / "tasks.jsonl").write_bytes(b'{"id": "a", "prompt": "p"}\n{"id": "b\xff", "prompt": "q"}\n')
    done = hermit(initialised, "rollout")
    assert done.code == 7 and "tasks.jsonl:2: not UTF-8" in done.err and "hint: " in done.err
    (initialised / "tasks.jsonl").write_text('{"id": "a", "prompt": "p", "answer": "1"}\n')
    rows = initialised / "rows" / "train.txt"
    rows.parent.mkdir(exist_ok=True)
    rows.write_bytes(b"a#1\n\xfe#2\n")
    done = hermit(initialised, "rollout")
    assert done.code == 7 and "not UTF-8" in done.err, done.err


def test_the_exit_code_table_lists_every_code():
    from git_hermit.errors import EXIT_CODES
    page = (ROOT / "docs" / "commands.md").read_text()      # the one exit-code table
    table = {int(line.split("|")[1]) for line in page.splitlines() if line.startswith("| ") and
             line.split("|")[1].strip().isdigit()}
    assert set(EXIT_CODES) - {0} <= table, set(EXIT_CODES) - table


def test_completion_table_is_the_cli_now(tmp_path):
    done = hermit(tmp_path, "help", "--completion-table", subprocess=True)   # fresh, as generated
    assert done.code == 0
    shipped = (ROOT / "git_hermit" / "_completion_table.py").read_text()
    assert done.out == shipped, \
        "the table is stale: run `git hermit help --completion-table > git_hermit/_completion_table.py`"


def test_every_command_documents_and_completes_its_short_help_option():
    """Every command accepts -h (CONTEXT's help_option_names): its help, the manual page and the
    completion table say so, not --help alone."""
    from git_hermit._completion_table import TABLE
    from git_hermit.cli import cli, manpage_text

    def scopes(scope, path):
        yield path, scope
        for name, sub in scope.get("commands", {}).items():
            yield from scopes(sub, f"{path} {name}")

    for path, scope in scopes(TABLE, "git hermit"):
        assert "-h" in scope["options"], f"{path}: completion offers no -h"
    assert manpage_text().count(r"\fB\-h, \-\-help\fR") == manpage_text().count(r"\-\-help\fR")
    for name in cli.list_commands(None):
        done = hermit(ROOT, "help", name)
        assert done.code == 0 and "-h, --help" in done.out, name


COMMAND_LINES = [
    ([], ""), ([], "s"), ([], "--"), (["--debug"], "lo"), (["-C", "."], "sh"),
    (["log"], "--"), (["log"], "--r"), (["log", "--run"], ""), (["show"], ""), (["show", "--run", "ahe"], "step-"),
    (["deploy", "--host"], ""), (["init", "--template"], "c"), (["completion"], ""), (["help"], "ro"),
    (["rollout", "-k"], ""), (["step"], "--run"), (["hosts"], ""), (["hosts", "install"], "c"),
]


def test_fast_completer_answers_as_clicks_own_completion(initialised, monkeypatch):
    """completer.py (no click import) offers the same values as click's completion of the CLI."""
    from click.shell_completion import ShellComplete

    from git_hermit import completer
    from git_hermit.cli import cli
    monkeypatch.chdir(initialised)
    for args, incomplete in COMMAND_LINES:
        ours = [(c.value, c.type) for c in completer.complete(list(args), incomplete)]
        theirs = [(c.value, c.type) for c in ShellComplete(cli, {}, "git-hermit", "X").get_completions(
            list(args), incomplete)]
        assert sorted(ours) == sorted(theirs), (args, incomplete)


def test_tab_and_version_do_not_import_click(initialised):
    probe = ("import atexit, os, sys\n"
             "atexit.register(lambda: sys.stderr.write('click-imported=%s' % ('click' in sys.modules)))\n"
             "from git_hermit.launcher import main\nmain()\n")
    env = {**os.environ, "_GIT_HERMIT_COMPLETE": "bash_complete", "COMP_WORDS": "git-hermit st", "COMP_CWORD": "1"}
    tab = subprocess.run([sys.executable, "-c", probe], cwd=initialised, env=env, capture_output=True, text=True)
    assert "plain,step" in tab.stdout.split() and "click-imported=False" in tab.stderr
    version = subprocess.run([sys.executable, "-c", probe, "--version"], cwd=initialised, capture_output=True,
                             text=True)
    assert "click-imported=False" in version.stderr
    from click.testing import CliRunner

    from git_hermit.cli import cli
    assert version.stdout == CliRunner().invoke(cli, ["--version"], prog_name="git-hermit").output


def _fake_installed(hosts_dir: Path, package: str, version: str, binary: str) -> None:
    node = hosts_dir / "node" / "node_modules"
    (node / package).mkdir(parents=True)
    (node / package / "package.json").write_text(json.dumps({"name": package, "version": version}))
    (node / ".bin").mkdir(exist_ok=True)
    exe = node / ".bin" / binary
    exe.write_text(f"#!/bin/sh\necho '{version}'\n")
    exe.chmod(0o755)


def test_hosts_install_keeps_a_pinned_cli_and_needs_npm_for_the_rest(tmp_path):
    from git_hermit.hosts import registry
    package, version = registry.get("pi").package.rsplit("@", 1)
    hosts_dir = tmp_path / "hosts"
    _fake_installed(hosts_dir, package, version, "pi")
    no_npm = {"GIT_HERMIT_HOSTS_DIR": str(hosts_dir), "PATH": "/usr/bin/nonexistent"}
    kept = hermit(tmp_path, "hosts", "install", "pi", env=no_npm)
    assert kept.code == 0, kept.err
    assert f"pi: {package} {version} already installed" in kept.out
    missing = hermit(tmp_path, "hosts", "install", "codex", env=no_npm)
    assert missing.code == 12 and "npm is not installed" in missing.err and "hint: " in missing.err
    unknown = hermit(tmp_path, "hosts", "install", "emacs")
    assert unknown.code == 2 and unknown.err.startswith("error: ")


def test_fish_completes_git_hermit_and_git_hermit_under_git(initialised, hermit_on_path, tmp_path):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    script = tmp_path / "git-hermit.fish"
    script.write_text(hermit(initialised, "completion", "fish").out)

    def complete(line: str) -> list[str]:
        done = subprocess.run(["fish", "-c", f"source {script}; complete -C '{line}'"], cwd=initialised,
                              env=hermit_on_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [row.split("\t")[0] for row in done.stdout.splitlines()]
    assert "step" in complete("git-hermit st") and "step" in complete("git hermit st")
    assert complete("git hermit log --run ") == ["ahe"]
    assert "step-0" in complete("git hermit show ")
    assert "status" in complete("git sta")          # git's own completions are left alone


ZSH_DRIVER = r'''
zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z 'PS1="> "; autoload -U compinit; compinit -u -D; source {script}; print READY'
local all="" chunk
for i in {{1..400}}; do zpty -r -t z chunk 2>/dev/null && all+="$chunk"; [[ $all == *READY*'> '* ]] && break; sleep 0.05; done
zpty -w -n z $'{line}\t'
all=""
for i in {{1..400}}; do
  zpty -r -t z chunk 2>/dev/null && all+="$chunk"
  [[ ${{all//$'\e'\[[0-9;?]#[a-zA-Z]/}} == *'{expect}'* ]] && break
  sleep 0.05
done
print -r -- "${{all//$'\e'\[[0-9;?]#[a-zA-Z]/}}"
zpty -d z
'''


@pytest.mark.parametrize("line, expect", [("git hermit st", "git hermit step"),
                                          ("git hermit log --run ", "git hermit log --run ahe")])
def test_zsh_completes_git_hermit_through_zshs_git_completion(initialised, hermit_on_path, tmp_path, line, expect):
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    script = tmp_path / "git-hermit.zsh"
    script.write_text(hermit(initialised, "completion", "zsh").out)
    driver = tmp_path / "driver.zsh"
    driver.write_text(ZSH_DRIVER.format(script=script, line=line, expect=expect))
    done = subprocess.run(["zsh", "-f", str(driver)], cwd=initialised, env=hermit_on_path, capture_output=True,
                          text=True, timeout=90)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout).replace("\r", "")
    assert expect in screen, screen[-800:]
