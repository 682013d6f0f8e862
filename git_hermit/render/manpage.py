"""The git-hermit(1) manual page as roff, rendered from a plain description of the CLI.

cli.py walks its click commands into ``CommandDoc`` records (click stays in cli.py); this
module only formats them, with the exit codes of ``errors.EXIT_CODES``, the files a run
uses and a few examples. ``git help hermit`` and ``git hermit --help`` show the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from git_hermit.errors import EXIT_CODES


@dataclass(frozen=True)
class OptionDoc:
    flags: str          # e.g. "--run RUN" or "-k, -k K"
    help: str


@dataclass(frozen=True)
class CommandDoc:
    name: str           # "" for the top-level group
    usage: str          # "git hermit step [OPTIONS]"
    help: str           # the command's docstring, paragraphs split by blank lines
    options: tuple[OptionDoc, ...]


FILES = (
    ("hermit.yaml, hermit/<run>.yaml", "a run's configuration (JSON Schema: git hermit's config.schema.json)"),
    ("refs/heads/hermit/<run>/step-NNNN", "adapter version H_N (step 0 is the seed)"),
    ("refs/tags/hermit/<run>/best, .../final", "the best evaluated commit; what finalize handed back"),
    ("refs/notes/hermit/{scores,manifest,verdicts,analysis,provenance}", "the run's records, canonical JSON"),
    (".hermit/runs/<run>/", "working files: rollouts, learner sessions (ignored through .git/info/exclude)"),
)

EXAMPLES = (
    ("git hermit demo /tmp/hermit-demo", "the offline demo: a whole AHE run with simulated agents"),
    ("git hermit init && git hermit check", "start a run in this repository and check the seed adapter"),
    ("git hermit step", "one step: rollouts, verdicts, rollbacks, learners, commits (resumable)"),
    ("git hermit log", "the run's history: pass@1 per step, changes and their verdicts"),
    ("git hermit eval hermit/ahe/final --baseline hermit/ahe/step-0000 --split test",
     "the held-out claim, with a paired bootstrap confidence interval"),
)


def _escape(text: str) -> str:
    """Roff-safe text: backslashes doubled, a leading dot or quote neutralised, dashes kept literal."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line[:1] in (".", "'") else line for line in text.split("\n"))


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in text.strip().split("\n\n") if p.strip()]


def _options(options: tuple[OptionDoc, ...]) -> list[str]:
    out = []
    for opt in options:
        out += [".TP", f"\\fB{_escape(opt.flags)}\\fR", _escape(opt.help or "")]
    return out


def render_manpage(commands: list[CommandDoc], *, version: str, date: str,
                   hosts: Sequence[tuple[str, str]] = (), evolvers: Sequence[tuple[str, str]] = ()) -> str:
    """The whole page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, HOSTS, EVOLVERS, EXIT
    STATUS, FILES, EXAMPLES. ``hosts`` and ``evolvers`` are (name, description) rows read from the
    registries, so an installed plugin's host or evolver is on the page too."""
    top = next(c for c in commands if not c.name)
    subs = sorted((c for c in commands if c.name), key=lambda c: c.name)
    lines = [f'.TH GIT\\-HERMIT 1 "{date}" "git-hermit {version}" "Git Manual"', ".SH NAME",
             "git\\-hermit \\- evolve a coding agent's adapter in a closed, git\\-native loop",
             ".SH SYNOPSIS", f"\\fBgit hermit\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
             ".SH DESCRIPTION"]
    for para in _paragraphs(top.help):
        lines += [".PP", _escape(para)]
    lines += [".SH OPTIONS", *_options(top.options), ".SH COMMANDS"]
    for cmd in subs:
        lines += [".SS " + _escape(cmd.name), f"\\fB{_escape(cmd.usage)}\\fR"]
        for para in _paragraphs(cmd.help):
            lines += [".PP", _escape(para)]
        if cmd.options:
            lines += [".RS", *_options(cmd.options), ".RE"]
    for title, rows in (("HOSTS", hosts), ("EVOLVERS", evolvers)):
        if rows:
            lines.append(".SH " + title)
            for name, meaning in rows:
                lines += [".TP", f"\\fB{_escape(name)}\\fR", _escape(meaning)]
    lines.append(".SH EXIT STATUS")
    for code, meaning in sorted(EXIT_CODES.items()):
        lines += [".TP", f"\\fB{code}\\fR", _escape(meaning)]
    lines.append(".SH FILES")
    for path, meaning in FILES:
        lines += [".TP", f"\\fI{_escape(path)}\\fR", _escape(meaning)]
    lines.append(".SH EXAMPLES")
    for command, meaning in EXAMPLES:
        lines += [".TP", f"\\fB{_escape(command)}\\fR", _escape(meaning)]
    lines += [".SH SEE ALSO", "\\fBgit\\fR(1), \\fBgit\\-notes\\fR(1)"]
    return "\n".join(lines) + "\n"
