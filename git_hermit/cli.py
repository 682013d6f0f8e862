"""Command-line interface: click commands only — parse, call core, render, map errors.

Text for a person goes through ``_echo`` (control characters made visible), JSON through
``_echo_json`` (exact).

Every user mistake surfaces as ``error: …`` / ``hint: …`` with the HermitError's exit code;
any other exception is a bug: one line without ``--debug``, the traceback with it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, ContextManager

import click

from git_hermit import __version__
from git_hermit.completer import COMPLETE_VAR
from git_hermit.errors import INTERNAL_ERROR_EXIT, INTERRUPTED_EXIT, USAGE_EXIT, HermitError
from git_hermit.hosts import registry

if TYPE_CHECKING:     # imported where used: `git hermit --version` and completion stay fast
    from collections.abc import Sequence

    from git_hermit.accounting.budget import Spread
    from git_hermit.core.evaluate import EvalRun
    from git_hermit.core.scores_notes import RowDisagreement
    from git_hermit.core.step import StepOutcome
    from git_hermit.gitio import Repo
    from git_hermit.render.manpage import CommandDoc
    from git_hermit.render.progress import LiveProgress

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _repo(*, bare_ok: bool = False) -> Repo:
    """The repository here; a bare one only for the commands that read refs and notes alone."""
    from git_hermit.gitio import Repo
    return Repo.discover(bare_ok=bare_ok)


# Commands that take the run's lock refuse (exit 6) while another process holds it, or wait.
_WAIT = click.option("--wait", is_flag=True,
                     help="If another git-hermit process holds the run's lock, wait for it instead of exiting 6.")
# Commands that run rollouts run a stored exception row (no reward: a timeout, a crash) again.
_KEEP_EXCEPTIONS = click.option("--keep-exceptions", is_flag=True,
                                help="Reuse stored exception rows (timeouts, crashes, judge errors) as results "
                                     "instead of running them again.")


def _echo(message: Any = "", err: bool = False, nl: bool = True) -> None:
    """``click.echo`` for what a person reads: records hold text from learners and remotes, so every
    control character is made visible (render.escape.terminal) and nothing printed can drive the
    terminal. JSON output is written by ``_echo_json`` as it is (its encoder escapes them itself)."""
    from git_hermit.render.escape import terminal
    click.echo(terminal(message, newlines=True), err=err, nl=nl)


def _say_on_stderr(line: str) -> None:
    _echo(line, err=True)


def _reading_only() -> None:
    """For commands that read a run's history and exit: turn the cyclic garbage collector off.

    A history is thousands of notes parsed into acyclic records (a 10,000-step run: millions of
    objects); each collector pass walks all of them again and finds nothing (measured: a third of a
    10,000-step `log`). Reference counting still frees memory; the process ends right after.
    """
    import gc
    gc.disable()


def _warn_missing(ctx: Any) -> None:
    """On stderr: the part of the run's records this repository lacks, and the command that brings them."""
    from git_hermit.core.records import missing_records
    missing = missing_records(ctx.repo, ctx.run, [n for n, _ in ctx.steps], ctx.refs)
    if missing:
        _echo(f"warning: this repository lacks {missing.what()} of run {ctx.run!r}, so what follows is "
              f"incomplete; bring them with `{missing.command()}`", err=True)


def _echo_json(data: Any) -> None:
    """Indented for a person at a terminal; one line for a program reading a pipe, which json's C
    encoder writes ~10x faster than the indenting one (a 10,000-step `log --json`: 0.5 s saved)."""
    indent = 2 if sys.stdout.isatty() else None
    # check_circular=False: the data is a tree built for this output, never cyclic; the check
    # costs a dict insert and delete per container (a 1,000-step `log --json`: ~8% of the encoding)
    click.echo(json.dumps(data, indent=indent, sort_keys=True, default=str, check_circular=False))


def _echo_json_streamed(data: Any) -> None:
    """``_echo_json(data)``, byte for byte, written as it is encoded: ``data`` may hold
    ``model.jsonstream`` lazy lists and dicts, whose items are made one at a time."""
    from git_hermit.model.jsonstream import json_chunks
    out = sys.stdout
    for chunk in json_chunks(data, indent=2 if out.isatty() else None, sort_keys=True, default=str):
        out.write(chunk)
    out.write("\n")
    out.flush()


def _complete_run(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Run names from the repository's step branches (one git process); nothing outside a repo."""
    try:
        from git_hermit.core.runs import list_runs
        return [r for r in list_runs(_repo()) if r.startswith(incomplete)]
    except Exception:  # completion must never print an error into the user's prompt
        return []


def _complete_template(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The installed templates' ids."""
    try:
        from git_hermit.adapter.templates import list_templates
        return [t for t in list_templates() if t.startswith(incomplete)]
    except Exception:  # completion must never print an error into the user's prompt
        return []


def _complete_step(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """``step-N`` names of the run given with --run (or the only run)."""
    try:
        from git_hermit.core.runs import list_runs, list_steps
        repo = _repo()
        run = ctx.params.get("run") or next(iter(list_runs(repo)), None)
        names = [f"step-{n}" for n, _ in list_steps(repo, run)] if run else []
        return [n for n in names if n.startswith(incomplete)]
    except Exception:
        return []


@click.group(context_settings=CONTEXT)
@click.option("--debug", is_flag=True, help="Print each git command with its duration, and tracebacks.")
@click.option("-C", "chdir", type=click.Path(file_okay=False), help="Run as if started in this directory.")
@click.version_option(__version__, "-V", "--version", prog_name="git-hermit")
def cli(debug: bool, chdir: str | None) -> None:
    """git hermit — evolve a coding agent's adapter in a closed, git-native loop.

    Every adapter version is a commit, every step a branch hermit/<run>/step-NNNN; manifests,
    verdicts and scores are git notes under refs/notes/hermit/*.
    """
    if chdir:
        try:
            os.chdir(chdir)
        except OSError as exc:
            raise click.BadParameter(f"cannot change to {chdir}: {exc.strerror}", param_hint="-C") from None
    if debug:
        from git_hermit.gitio import set_debug
        set_debug(True)


# ------------------------------------------------------------------------------------------
@cli.command(context_settings=CONTEXT)
@click.option("--template", "template_id", shell_complete=_complete_template,
              help="Seed adapter template: an installed template's id (default: the default evolver's, ahe@1.0).")
@click.option("--run", shell_complete=_complete_run, help="Run name (default: the template's name).")
@click.option("--adapter-dir", help="Adapter directory in the repo (default: adapter/).")
@click.option("--example", is_flag=True,
              help="Also write a small starter benchmark: tasks.jsonl, data/, rows/train.txt and rows/test.txt.")
@click.option("--github", is_flag=True,
              help="Also add .github/workflows/hermit-step.yml: a step on dispatch/schedule, pushed, with its PR.")
def init(template_id: str | None, run: str | None, adapter_dir: str | None, example: bool, github: bool) -> None:
    """Create a run: hermit.yaml, the seed adapter, and branch hermit/<run>/step-0000."""
    from git_hermit.core.init import init_run
    result = init_run(_repo(), template_id=template_id, run=run, adapter_dir=adapter_dir, example=example,
                      github=github)
    _echo(f"initialised run {result.run!r} from {result.template}: {len(result.files)} adapter files "
               f"in {result.adapter_dir}/, config {result.config_path}")
    where = f"on {result.branch} and " if result.branch else ("on the detached HEAD and " if result.detached else "")
    _echo(f"seed commit {result.commit[:12]} {where}hermit/{result.run}/step-0000")
    if result.detached:
        _echo("note: HEAD was detached, so no branch holds the seed commit: HEAD now points at it (its files "
                   "are committed there); `git switch -c NAME` keeps working on a branch", err=True)
    if result.workflow:
        _echo(f"GitHub Actions workflow {result.workflow}: see its header for the secrets and settings it needs")
        if result.install_variable:
            _echo(f"note: git-hermit runs from a local checkout here, which a runner cannot install: set the repository "
                  f"variable {result.install_variable} to a pip requirement (see docs/review.md#the-workflow)",
                  err=True)
    if example:
        _echo("starter benchmark: tasks.jsonl, data/expenses.csv, rows/train.txt (4 tasks x k=2), rows/test.txt")
        _echo("next: `git hermit check`, then `git hermit rollout` (set agent.login: chatgpt, or a provider with env_key, "
                   "for the agent and evolver.model; see docs/first-run.md)")
    else:
        _echo("next: edit the tasks/judge/agent blocks of the config (or rerun with --example for a starter "
                   "benchmark), then `git hermit check` and `git hermit step`")


@cli.command(context_settings=CONTEXT)
@click.argument("rev", required=False)
@click.option("--dir", "directory", type=click.Path(path_type=Path), help="Check this directory instead.")
@click.option("--run", shell_complete=_complete_run, help="Run whose template and adapter to use.")
@click.option("--template", shell_complete=_complete_template,
              help="Template to check against (default: the run's, or detected).")
@click.option("--static", "static_only", is_flag=True, help="Skip the host part (deploy + synthetic sessions).")
@click.option("--manifest", type=click.Path(path_type=Path),
              help="Also check a change manifest (evolvers that write one): no two changes may declare the same file.")
@click.option("--no-preflight", "no_preflight", is_flag=True,
              help="Check the adapter only, not the run's files, programs, keys and logins.")
@click.option("--host", "run_host", type=click.Choice(registry.names()),
              help="The host the adapter is deployed for (default: the run's host:); what other hosts lack "
                   "by design is not reported.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check(rev: str | None, directory: Path | None, run: str | None, template: str | None,
          static_only: bool, manifest: Path | None, no_preflight: bool, run_host: str | None, as_json: bool) -> int:
    """Run check_spec on the adapter (work tree, REV, or --dir), then the run's preflight.

    Exit 1 when a rule is broken; the preflight's error (12, 7 or 5) names every missing file,
    program, key or login the run's `step` would need.
    """
    from git_hermit.core.check import run_check
    from git_hermit.errors import NotARepository
    try:
        repo = _repo()
    except NotARepository:
        if directory is None:
            raise
        repo = None
    report = run_check(repo=repo, rev=rev, directory=directory, run=run, template=template,
                       hosts=not static_only, manifest=manifest, run_host=run_host)
    flight = None
    if repo is not None and directory is None and not no_preflight:
        from git_hermit.core.preflight import run_preflight
        flight = run_preflight(repo, run)
    error = flight.error() if flight is not None else None
    if as_json:
        _echo_json({"target": report.target, "template": report.template, "ok": not report.errors and error is None,
                    "violations": [{"path": v.path, "line": v.line, "rule": v.rule, "message": v.message,
                                    "severity": v.severity} for v in report.violations],
                    "preflight": [{"what": p.what, "where": p.where, "hint": p.hint, "kind": p.kind}
                                  for p in (flight.problems if flight else ())],
                    "runtime": None if report.runtime is None else {
                        "version": report.runtime.version, "current": report.runtime.current,
                        "outdated": report.runtime.outdated}})
        return 1 if report.errors else (error.exit_code if error else 0)
    for v in report.violations:
        _echo(f"{v}" + ("" if v.severity == "error" else f" ({v.severity})"))
    if report.runtime is not None:
        _echo(report.runtime.describe())
    status = "ok" if not report.errors else f"{len(report.errors)} rule(s) broken"
    _echo(f"check {report.target} against {report.template}: {status}", err=bool(report.errors))
    if error is not None and not report.errors:
        raise error
    if error is not None:    # broken rules keep exit 1; the preflight's findings still show
        _echo(f"preflight: {error.message}", err=True)
    return 1 if report.errors else 0


@cli.command(context_settings=CONTEXT)
@click.option("--run", shell_complete=_complete_run, help="Run to show (default: the only one).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def log(run: str | None, as_json: bool) -> None:
    """One line per step: commit, pass@1, changes and their verdicts, rollbacks."""
    _reading_only()
    from git_hermit.core.history import json_fragments, load_history
    from git_hermit.core.runs import open_run
    from git_hermit.render.views import FRAGMENTS_ENCODING, log_json, log_json_parts, log_lines
    repo = _repo(bare_ok=True)
    ctx = open_run(repo, run, with_refs=True)    # reads only: refs listed with the steps
    _warn_missing(ctx)
    history = load_history(ctx)
    if as_json and sys.stdout.isatty():
        _echo_json(log_json(history))
    elif as_json:   # what _echo_json writes to a pipe, each note's part encoded once (kept by its blob id)
        fragments = json_fragments(repo, FRAGMENTS_ENCODING)
        sys.stdout.flush()
        sys.stdout.buffer.write(b"".join(log_json_parts(history, fragments)))   # the kept bytes, as they are
        sys.stdout.buffer.flush()
        fragments.save()
    else:
        _echo("\n".join(log_lines(history)))   # one write (a 10,000-step log: 33 ms less)


@cli.command(context_settings=CONTEXT)
@click.argument("target", shell_complete=_complete_step)
@click.option("--run", shell_complete=_complete_run, help="Run for step-N, final and best targets.")
@click.option("--card", "as_card", is_flag=True,
              help="Print the adapter card (CARD.md) of TARGET instead, made from the run's notes.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show(target: str, run: str | None, as_card: bool, as_json: bool) -> None:
    """A step's or commit's manifest, verdicts and scores (TARGET: step-N, final, best or any revision)."""
    _reading_only()
    from git_hermit.core.history import RUN_TAGS, records_for, resolve_target, step_commits
    from git_hermit.core.runs import open_run
    from git_hermit.render.views import show_json, show_lines
    from git_hermit.core.records import RunRecords, records_location
    repo = _repo(bare_ok=True)
    by_run = target.startswith("step-") or target.isdigit() or target in RUN_TAGS or as_card
    ctx = open_run(repo, run, with_refs=True) if by_run else None
    step, commit = resolve_target(ctx, repo, target)
    if as_card and ctx is not None:
        from git_hermit.core.card import build_card
        from git_hermit.render.card import markdown
        _echo(markdown(build_card(ctx, commit)), nl=False)
        return
    commits = [commit]
    where = None
    if ctx is not None and step is not None:
        _warn_missing(ctx)
        commits = [c for c in step_commits(ctx, step) if c != commit] + [commit]
        if step in RunRecords(repo, ctx.run).step_trees:
            where = records_location(ctx.run, step)
    records = [records_for(repo, sha, ctx) for sha in commits]
    from git_hermit.core.card import card_link
    card = card_link(repo, commit, run)
    if as_json:
        _echo_json({"target": target, "step": step, "commits": [show_json(r) for r in records], "records": where,
                    **({"card": card.to_dict()} if card else {})})
        return
    for i, rec in enumerate(records):
        if i:
            _echo("")
        for line in show_lines(rec):
            _echo(line)
    if where:
        _echo("")
        _echo(f"records: `git show {where}` (step.json, ledger.json, every rollout's result and hook audit, "
              "the learners' own records); trajectories: `git hermit fetch --traces`")
    if card:        # last: what the final adapter ships with
        _echo(f"card: {card.text()}")


@cli.command(context_settings=CONTEXT)
@click.argument("target", required=False)
@click.option("--run", help="Run (default: the only one).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "html"]), default="markdown",
              show_default=True, help="Markdown (a PR body), JSON, or a self-contained HTML page.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (as --format json).")
@click.option("-o", "output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE instead of stdout.")
@click.option("--chart", type=click.Path(dir_okay=False, path_type=Path),
              help="Also draw the pass@1 chart as a PNG (needs the `plot` extra: matplotlib).")
@click.option("--open", "open_pr", is_flag=True,
              help="Open (or update) the step's pull request with `gh`, stacked on the previous step's, and post "
                   "the verdicts of the step it judged; prints the command when gh is missing.")
@click.option("--dry-run", is_flag=True, help="With --open: print every gh call instead of making it "
                                                "(only the read-only `gh pr list` runs).")
def report(target: str | None, run: str | None, fmt: str, as_json: bool, output: Path | None, chart: Path | None,
           open_pr: bool, dry_run: bool) -> None:
    """A step's pull-request description (TARGET: STEP, step-N or the step's branch; default: the tip).

    Step N's pull request is hermit/<run>/step-NNNN against step N-1's branch (the branch the run
    was initialised on for step 1), so it shows that step's changes alone.
    """
    _reading_only()
    from git_hermit.core.report import build_report
    from git_hermit.core.runs import open_run
    from git_hermit.render.report import html_page, markdown, report_json
    repo = _repo(bare_ok=True)
    ctx = open_run(repo, run, with_refs=True)   # reads only: refs listed with the steps
    _warn_missing(ctx)
    if dry_run and not open_pr:
        raise click.UsageError("--dry-run needs --open (git hermit report STEP --open --dry-run)")
    if as_json:
        fmt = "json"
    data = build_report(ctx, target)
    if fmt == "json":
        text = json.dumps(report_json(data), indent=2, sort_keys=True, default=str) + "\n"
    elif fmt == "html":
        text = html_page(data)
    else:
        text = markdown(data)
    if chart is not None:
        from git_hermit.render.chart import write_png
        write_png(data, chart)
        _echo(f"wrote the pass@1 chart to {chart}", err=True)
    if open_pr:
        import shlex
        from git_hermit.core.pullrequest import publish, step_post
        # the step this one judged: its pull request gets the verdicts
        judged = build_report(ctx, str(data.step - 1)) if data.step > 0 else None
        result = publish(repo, data.run, data.base, step_post(data, markdown(data)),
                         step_post(judged, markdown(judged)) if judged is not None else None,
                         slug=data.repo_slug, dry_run=dry_run)
        if dry_run:
            from git_hermit.render.escape import terminal
            if result.warning:
                _echo(f"warning: {terminal(result.warning)}", err=True)
            for call in result.calls:      # a title or a change id is a learner's text: shown, not acted on
                _echo(terminal(shlex.join(call)))
        elif not result.ran:
            _echo("gh (the GitHub CLI) is not installed; after `git hermit push`, run:", err=True)
            _echo(shlex.join(result.command))
        else:
            _echo(f"{'updated' if result.updated else 'opened'} pull request {result.url or ''}".rstrip())
            for step in result.judged:
                _echo(f"posted the verdicts of step {step} (title, labels, commit statuses)", err=True)
            for step, base in result.retargeted:
                _echo(f"retargeted step {step}'s pull request to {base}", err=True)
        return
    if output is not None:
        output.write_text(text)
        _echo(f"wrote {output} ({len(text):,} characters)", err=True)
    elif fmt == "json":
        _echo_json(report_json(data))     # exact (the encoder escapes what a terminal would act on)
    else:
        _echo(text, nl=False)


@cli.command(context_settings=CONTEXT)
@click.argument("run_a")
@click.argument("run_b")
@click.option("--split", default="test", show_default=True, help="The split both runs' final commits were scored on.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def compare(run_a: str, run_b: str, split: str, as_json: bool) -> None:
    """Two runs side by side: final pass@1 on a common split with a paired CI, steps, changes, ledger."""
    _reading_only()
    from dataclasses import asdict
    from git_hermit.core.compare import compare_runs
    from git_hermit.render.views import partial_text
    result = compare_runs(_repo(bare_ok=True), run_a, run_b, split)
    for summary in (result.a, result.b):      # a damaged note is left out of the comparison: said so
        for warning in summary.warnings:
            _echo(f"warning: run {summary.run}: {warning}", err=True)
    comp = result.comparison
    if as_json:
        _echo_json({"split": result.split, "a": asdict(result.a), "b": asdict(result.b),
                    "difference": {"delta_points": comp.delta * 100, "low": comp.low * 100, "high": comp.high * 100,
                                   "n_tasks": comp.n_tasks}})
        return
    rows = [("run", lambda r: r.run), ("evolver", lambda r: r.evolver),
            ("final commit", lambda r: f"{r.commit[:10]} ({r.chosen_by})"),
            (f"pass@1 ({result.split})", lambda r: f"{r.pass_at_1:.3f}{partial_text(r.partial)} (k={r.k}, {r.tasks} tasks)"),
            ("steps", lambda r: str(r.steps)),
            ("changes kept", lambda r: str(r.changes - r.rolled_back)), ("rolled back", lambda r: str(r.rolled_back)),
            ("tokens", lambda r: f"{r.tokens:,}"),
            ("cost", lambda r: "unknown" if r.cost_usd is None else f"${r.cost_usd:.2f}")]
    width = max(len(label) for label, _ in rows)
    for label, get in rows:
        _echo(f"{label:<{width}}  {get(result.a):<32}  {get(result.b)}")
    _echo(f"{result.b.run} minus {result.a.run}: {comp}  (paired bootstrap 95% CI over {comp.n_tasks} "
               f"{result.split} tasks)")


@cli.command(context_settings=CONTEXT)
@click.argument("target")
@click.option("--reason", required=True, help="Why (goes into the rollback commit's body).")
@click.option("--force", is_flag=True,
              help="On a conflict with later work: restore the change's files as they were before it.")
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@_WAIT
def rollback(target: str, reason: str, force: bool, run: str | None, wait: bool) -> None:
    """Revert one change (three-way, keeping later work) as a new commit on the run's tip.

    TARGET: a change id (chg-2, step-3:chg-2) or a revision. A change group is reverted whole."""
    from git_hermit.core.rollback import rollback as do_rollback
    result = do_rollback(_repo(), run, target, reason, force=force, wait=wait, on_wait=_say_on_stderr)
    ids = ", ".join(result.change_ids) or result.plan.change_commit[:12]
    _echo(f"rolled back {ids}: {len(result.plan.files)} file(s) changed in {result.plan.commit[:12]} "
               f"on step-{result.step:04d}")
    for path in result.plan.files:
        _echo(f"    {path}")
    for sha in result.removed_lines_of:
        _echo(f"  also removed the edits of {sha[:12]} to these files (--force)")


@cli.command(name="upgrade-runtime", context_settings=CONTEXT)
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@_WAIT
def upgrade_runtime(run: str | None, wait: bool) -> None:
    """Commit the hook runtime this git-hermit ships on the run's tip (one reviewable commit).

    An adapter committed with an older runtime keeps working (`check` says which it has); this
    replaces its fixed hook files with the newest, checked before the step branch moves."""
    from git_hermit.core.upgrade import upgrade_runtime as do_upgrade
    result = do_upgrade(_repo(), run, wait=wait, on_wait=_say_on_stderr)
    if result.commit is None:
        _echo(f"hook runtime {result.old} on step-{result.step:04d} is the newest: nothing to do")
        return
    _echo(f"hook runtime {result.old} -> {result.new}: {len(result.files)} file(s) changed in "
          f"{result.commit[:12]} on step-{result.step:04d}")
    for path in result.files:
        _echo(f"    {path}")


@cli.command(context_settings=CONTEXT)
@click.option("--event", "event_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The webhook payload (in Actions: $GITHUB_EVENT_PATH).")
@click.option("--event-name", envvar="GITHUB_EVENT_NAME", show_envvar=True,
              help="issue_comment, pull_request_review or pull_request_review_comment "
                   "(default: $GITHUB_EVENT_NAME, else the payload's shape).")
def review(event_path: Path, event_name: str | None) -> None:
    """Apply a reviewer's /hermit commands from a GitHub comment or review on a step's pull request:
    `/hermit rollback CHANGE [reason]`, `/hermit keep CHANGE [reason]` (the automatic rollback leaves
    it), `/hermit note TEXT` (the next learner session reads it). Only OWNER, MEMBER or COLLABORATOR
    act; anyone else, a bot, an edited comment or a pull request of no step branch does nothing
    (exit 0, saying why). CHANGE: chg-1 (the pull request's step's), step-2:chg-1, or a commit."""
    from git_hermit.core.review import read_event, review as do_review
    outcome = do_review(_repo(), read_event(event_path, event_name or None))
    if outcome.ignored is not None:
        _echo(f"ignored {outcome.event}: {outcome.ignored}")
        return
    for line in outcome.applied:
        _echo(line)
    for line in outcome.skipped:
        _echo(f"skipped {line}")


def _echo_disagreements(found: Sequence[RowDisagreement], remote: str) -> None:
    from git_hermit.render.views import disagreement_line
    for row in found:
        _echo(disagreement_line(row, remote))


@cli.command(context_settings=CONTEXT)
@click.argument("remote", required=False, default="origin")
@click.option("--run", help="Push only this run's refs (default: every run).")
@click.option("--traces", is_flag=True, help="Also push the rollouts' trajectories (refs/hermit/<run>/traces).")
def push(remote: str, run: str | None, traces: bool) -> None:
    """Push the runs whole: step branches, tags, refs/notes/hermit/*, the records (refs/hermit/<run>/…),
    and the branch that holds the run's config, in one `git push --atomic`, after merging what moved
    on REMOTE (field-wise; a conflict or a rewrite of this repository's records stops the push).
    Safe to run while a step runs: its finished rollouts travel, and a restart elsewhere reuses them."""
    from git_hermit.core.share import push_run
    outcome = push_run(_repo(), remote, run, traces=traces)
    for move in outcome.merged:
        _echo(f"merged {outcome.remote}'s {move.ref} ({move.how})")
    _echo_disagreements(outcome.disagreements, outcome.remote)
    moved = [p for p in outcome.pushed if p.moved]
    for item in moved:
        _echo(f"pushed {item.ref}  {item.summary}")
    if not moved:
        _echo(f"{outcome.remote} is up to date")
    if outcome.traces is not None:
        pushed, size = outcome.traces
        _echo(f"traces: {size:,} bytes added to {outcome.remote}" if pushed else
              "traces: not pushed (`git hermit push --traces` sends the rollouts' trajectories)")
    for warning in outcome.warnings:
        _echo(f"warning: {warning}", err=True)
    if outcome.attempts > 1:
        _echo(f"(the remote moved meanwhile; pushed on attempt {outcome.attempts})")


@cli.command(context_settings=CONTEXT)
@click.argument("remote", required=False, default="origin")
@click.option("--traces", is_flag=True, help="Also fetch the rollouts' trajectories (refs/hermit/<run>/traces).")
@click.option("--accept-remote", is_flag=True,
              help="Take the remote's version of records it changed (never an invalid note, nor a step's commit).")
@click.option("--keep-local", is_flag=True,
              help="Keep this repository's records the remote changed (the next push restores them there).")
def fetch(remote: str, traces: bool, accept_remote: bool, keep_local: bool) -> None:
    """Bring every run from REMOTE: branches, tags, notes and records, reviewed as untrusted input.

    Your own branches are never touched. Notes and records merge field-wise and may only grow: a
    remote change to a record this repository holds (a verdict, a score, outcomes), an invalid
    note, a step that does not descend from the previous step, or a commit on an older step's
    branch is refused and named (exit 21); everything else is fetched."""
    from git_hermit.core.runs import list_runs, list_steps
    from git_hermit.core.share import fetch_runs, reapply_hint
    from git_hermit.errors import InputError, RemoteRefused
    if accept_remote and keep_local:
        raise InputError("--accept-remote and --keep-local contradict each other", hint="choose one")
    repo = _repo()
    outcome = fetch_runs(repo, remote, accept_remote=accept_remote, keep_local=keep_local, traces=traces)
    for move in outcome.moves:
        _echo(f"{move.ref}: {move.how}" + (f" {move.new[:10]}" if move.new else ""))
    _echo_disagreements(outcome.disagreements, outcome.remote)
    for change in outcome.accepted:
        _echo(f"accepted the remote's change: {change.what}")
    for warning in outcome.warnings:
        _echo(f"warning: {warning}", err=True)
    if not outcome.moves and not outcome.warnings and not outcome.refused and not outcome.accepted:
        _echo(f"up to date with {outcome.remote}")
    from git_hermit.core.records import missing_records
    for name in list_runs(repo):     # what neither this repository nor the remote holds of a run
        missing = missing_records(repo, name, [n for n, _ in list_steps(repo, name)])
        if missing:
            _echo(f"warning: {outcome.remote} does not hold {missing.what()} of run {name!r} either; whoever "
                  "ran those steps can send them with `git hermit push`", err=True)
    if not outcome.refused:
        return
    for change in outcome.refused[1:]:
        _echo(f"refused: {change.what}", err=True)
    first = outcome.refused[0]
    latest = {name: max((n for n, _ in list_steps(repo, name)), default=0) for name in list_runs(repo)}
    records = [r for r in outcome.refused if r.kind == "record"]
    hint = reapply_hint(outcome.refused, latest) or (
        f"nothing of it was taken; `git hermit fetch {remote} --accept-remote` takes the remote's records, "
        "`--keep-local` keeps this repository's" if records else
        "nothing of it was taken; the remote holds it as it is (everything else was fetched)")
    raise RemoteRefused(first.what + (f" (and {len(outcome.refused) - 1} more, above)"
                                                     if len(outcome.refused) > 1 else ""), hint=hint)


@cli.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--host", required=True, type=click.Choice(registry.names()), help="The host to deploy for.")
@click.option("--rev", help="Deploy the adapter at this revision (default: the run's adapter in the work tree).")
@click.option("--run", shell_complete=_complete_run, help="Run whose adapter to deploy.")
@click.option("--force", is_flag=True, help="Overwrite files this deployment did not write.")
def deploy(directory: Path, host: str, rev: str | None, run: str | None, force: bool) -> None:
    """Write what HOST reads into DIRECTORY: context file, hooks, skills, sub-agents."""
    from git_hermit.core.deploying import deploy_adapter
    record = deploy_adapter(_repo(), directory, host, rev=rev, run=run, force=force)
    _echo(f"deployed for {record.host} into {record.dest}: {len(record.files)} files"
               + (f"; hooks run `{record.interpreter} -S …hook_runner.py`" if record.hooks else "; no hooks"))
    if record.host_args:
        _echo(f"start the host with: {' '.join(record.host_args)}")


@cli.command(context_settings=CONTEXT)
@click.option("--hosts", "run_hosts", is_flag=True, help="Also run one real session of each installed host CLI.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(run_hosts: bool, as_json: bool) -> int:
    """Check git, its notes config, the host CLIs, and (--hosts) which host-table rows hold.

    Exit 12 when a run's configured agent or learner program is missing.
    """
    from git_hermit.errors import NotARepository
    from git_hermit.hostkit.doctor import doctor_report, render_text
    try:
        repo = _repo()
    except NotARepository:
        repo = None
    from git_hermit.core.preflight import configured_binaries
    missing = configured_binaries(repo) if repo is not None else []
    report = doctor_report(repo, run_hosts, extra_problems=tuple(missing))
    if as_json:
        _echo_json(report.to_json())
    else:
        _echo(render_text(report))
    from git_hermit.errors import AgentError
    return AgentError.exit_code if missing else 0




@cli.group(context_settings=CONTEXT)
def hosts() -> None:
    """The host CLIs git-hermit runs (Codex, Claude Code, Pi)."""


@hosts.command(name="install", context_settings=CONTEXT)
@click.argument("names", nargs=-1, type=click.Choice(registry.names()))
def hosts_install(names: tuple[str, ...]) -> None:
    """Install the pinned host CLIs (default: all of them) with npm where git-hermit finds them."""
    from git_hermit.hostkit.install import install_hosts
    for item in install_hosts(list(names), say=lambda msg: _echo(msg, err=True)):
        state = "installed" if item.changed else "already installed"
        _echo(f"{item.host}: {item.package} {item.version} {state} at {item.path}")


def _progress(label: str) -> ContextManager[LiveProgress]:
    from git_hermit.render.progress import rollout_progress
    return rollout_progress(label)


@cli.command(context_settings=CONTEXT)
@click.argument("rev", required=False)
@click.option("--split", default="train", show_default=True, help="Split of hermit.yaml data: to run.")
@click.option("-k", "k", type=click.IntRange(min=1), help="Rollouts per task (default: inferred from the rows).")
@click.option("--tasks", "only_tasks", help="Comma-separated task ids to run (default: all of the split).")
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_KEEP_EXCEPTIONS
@_WAIT
def rollout(rev: str | None, split: str, k: int | None, only_tasks: str | None, run: str | None, as_json: bool,
            keep_exceptions: bool, wait: bool) -> None:
    """Run the split's rollouts on REV (default: the run's tip) and write its scores note.

    Rows already run are reused, but an exception row (no reward) runs again; when every row
    is an exception nothing is scored and the command exits 17.
    """
    from git_hermit.core.evaluate import rollout_commit
    from git_hermit.core.runs import open_run
    ctx = open_run(_repo(), run)
    tasks = [t.strip() for t in only_tasks.split(",") if t.strip()] if only_tasks else None
    with _progress(f"rollouts {split}") as update:
        ev, scores = rollout_commit(ctx, rev, split, k=k, only_tasks=tasks, on_progress=update, wait=wait,
                                    say=update.say, keep_exceptions=keep_exceptions)
    if as_json:
        # a row's ledger entry and score are made as they are written: memory flat in the rows
        from git_hermit.model.jsonstream import LazyMap
        data = scores.to_dict(tasks=False)
        data["tasks"] = LazyMap(scores.tasks, scores.task_dict)
        _echo_json_streamed({"scores": data, "ledger": ev.ledger.lazy_dict(), "reused": ev.reused,
                             "pass_at_1_ci": list(_ci(ev))})
        return
    counts = {o: sum(1 for t in scores.tasks.values() if t.outcome == o) for o in ("pass", "fail", "exception")}
    interval = ev.pass_at_1_interval()
    _echo(f"{ev.commit[:12]} on {split} (k={ev.k}): pass@1 {interval} (bootstrap 95% CI over "
               f"{interval.n_tasks} tasks)  " + "  ".join(f"pass@{i} {v:.3f}" for i, v in ev.pass_at().items() if i > 1))
    _echo(f"tasks: {counts['pass']} pass, {counts['fail']} fail, {counts['exception']} exception"
               f"  ({ev.reused} rollouts reused)")
    _echo_failures(ev)
    for line in ev.ledger.render():
        _echo("  " + line)


@cli.command(name="eval", context_settings=CONTEXT)
@click.argument("rev")
@click.option("--baseline", help="Compare against this revision (paired bootstrap 95% CI over tasks).")
@click.option("--split", default="test", show_default=True, help="Held-out split of hermit.yaml data:.")
@click.option("-k", "k", type=click.IntRange(min=1), help="Rollouts per task (default: inferred from the rows).")
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_KEEP_EXCEPTIONS
@_WAIT
def eval_command(rev: str, baseline: str | None, split: str, k: int | None, run: str | None, as_json: bool,
                 keep_exceptions: bool, wait: bool) -> None:
    """pass@1 and pass@k of REV on a held-out split, with a CI against --baseline."""
    from git_hermit.core.evaluate import eval_commits
    from git_hermit.core.runs import open_run
    ctx = open_run(_repo(), run)
    with _progress(f"eval {split}") as update:
        report = eval_commits(ctx, rev, baseline, split, k=k, on_progress=lambda label: update, wait=wait,
                              say=update.say, keep_exceptions=keep_exceptions)
    cand, base, comp = report.candidate, report.baseline, report.comparison
    if as_json:     # the ledgers' entries made as they are written, as `rollout --json`'s
        _echo_json_streamed({
            "split": split, "candidate": {"commit": cand.commit, "pass_at_1": cand.pass_at_1, "pass_at": cand.pass_at(),
                                          "pass_at_1_ci": list(_ci(cand)),
                                          "ledger": cand.ledger.lazy_dict()},
            "baseline": ({"commit": base.commit, "pass_at_1": base.pass_at_1, "pass_at": base.pass_at(),
                          "pass_at_1_ci": list(_ci(base)),
                          "ledger": base.ledger.lazy_dict()} if base else None),
            "comparison": ({"delta_points": comp.delta * 100, "low": comp.low * 100, "high": comp.high * 100,
                            "n_tasks": comp.n_tasks, "flips_up": list(comp.flips_up),
                            "flips_down": list(comp.flips_down)} if comp else None)})
        return
    _echo(f"{split} split, k={cand.k}, {len(cand.results)} tasks")
    for label, ev in (("candidate", cand), ("baseline", base)):
        if ev is None:
            continue
        extra = "  ".join(f"pass@{i} {v:.3f}" for i, v in ev.pass_at().items() if i > 1)
        _echo(f"  {label:<9} {ev.commit[:12]}  pass@1 {ev.pass_at_1_interval()} (95% CI)  {extra}")
        _echo_failures(ev, "    ")
    if comp is not None:
        _echo(f"  difference: {comp}  (paired bootstrap 95% CI over {comp.n_tasks} tasks)")
        _echo(f"  flips: +{len(comp.flips_up)} {', '.join(comp.flips_up[:8])}  "
                   f"-{len(comp.flips_down)} {', '.join(comp.flips_down[:8])}")
    _echo("  ledger (candidate):")
    for line in cand.ledger.render():
        _echo("    " + line)
    per_mtok = cand.ledger.successes_per_mtok(cand.pass_at_1)
    if per_mtok is not None:
        _echo(f"  tokens/trial {cand.ledger.tokens_per_trial():,.0f}, successes per million tokens {per_mtok:.2f}")


def _echo_failures(ev: EvalRun, indent: str = "") -> None:
    """``rollouts: 2 exception(s): AgentTimeout 2; first: …`` when some rows ended without a result."""
    from git_hermit.core.failures import failures_of
    line = failures_of(ev.results).line()
    if line:
        _echo(f"{indent}rollouts: {line} (the next command runs them again, unless --keep-exceptions)")


def _ci(ev: EvalRun) -> tuple[float, float]:
    interval = ev.pass_at_1_interval()
    return interval.low, interval.high


def _print_step(outcome: StepOutcome) -> None:
    # One numbering everywhere (docs/concepts.md "Step numbering"): step N runs the rollouts of H_{N-1}
    # (branch step-{N-1}, the row `log` calls step N-1) and makes H_N (branch step-N).
    n, branch = outcome.step, f"hermit/{outcome.run}/step-{{:04d}}"
    line = (f"step {n}: rollouts of H_{n - 1} ({branch.format(n - 1)} {outcome.evaluated[:12]}): "
            f"pass@1 {outcome.pass_at_1:.3f}")
    if outcome.comparison is not None:
        line += f" ({outcome.comparison} vs H_{outcome.compared_to})"
    _echo(line)
    if outcome.verdicts:
        _echo(f"  verdicts on step {n - 1}'s changes: "
                   + ", ".join(f"{cid} {v}" for cid, v in outcome.verdicts.items()))
    if outcome.rollbacks:
        _echo(f"  rolled back automatically: {outcome.rollbacks} change(s)")
    if outcome.best:
        _echo(f"  new best-ever: H_{n - 1} is now the best tag")
    if outcome.stop:
        _echo(f"  stop: {outcome.stop} (no H_{n})")
    elif outcome.tip:
        made = "1 commit, no adapter changes" if outcome.empty else f"{outcome.commits} commit(s)"
        _echo(f"  step {n} made H_{n}: {branch.format(n)} -> {outcome.tip[:12]} ({made})")
    for problem in outcome.rejected:
        _echo(f"error: the learners' output was rejected: {problem}", err=True)
    if outcome.rejected:
        kept = ("the step kept the adapter as it was" if not outcome.commits
                else f"nothing refused was committed ({outcome.commits} commit(s) passed)")
        _echo(f"hint: {kept}; see `git hermit show step-{outcome.step}` and "
                   f".hermit/runs/…/step-{outcome.step:04d}/", err=True)


def _warn_worktree(run: str | None) -> None:
    """Hand edits in the work tree the step will not use (the adapter) or not record (the config)."""
    from git_hermit.core.preflight import worktree_warnings
    for line in worktree_warnings(_repo(), run):
        _echo(f"warning: {line}", err=True)


@cli.command(context_settings=CONTEXT)
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@_KEEP_EXCEPTIONS
@_WAIT
def step(run: str | None, keep_exceptions: bool, wait: bool) -> int:
    """One step: rollouts of the tip, verdicts, rollback, Debugger, Evolve Agent, commits.

    Killed at any point, the same command resumes: finished rollouts and learner sessions
    are reused and nothing is published until the step's single ref transaction.
    """
    from git_hermit.core.step import RunFinished, run_step
    from git_hermit.errors import ManifestError
    _warn_worktree(run)
    try:
        with _progress("rollouts") as update:
            outcome = run_step(_repo(), run, say=update.say, on_progress=update, wait=wait,
                               keep_exceptions=keep_exceptions)
    except RunFinished as finished:
        _echo(f"the run is finished: {finished.reason}; nothing to do (no ref or note was written)")
        _echo("next: `git hermit finalize`, or start a new run to train further")
        return 0
    _print_step(outcome)
    return ManifestError.exit_code if outcome.rejected else 0


@cli.command(context_settings=CONTEXT)
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@click.option("--epochs", type=click.IntRange(min=1), help="Total steps of the run (default: trainer.epochs).")
@_KEEP_EXCEPTIONS
@_WAIT
def train(run: str | None, epochs: int | None, keep_exceptions: bool, wait: bool) -> int:
    """Run steps until --epochs, the early stop (target_pass_rate), or Ctrl-C (resumable).

    Each step's verdicts, rollbacks, best-ever move and commits are printed as that step ends.
    """
    from git_hermit.core.step import train as do_train
    from git_hermit.errors import ManifestError
    _warn_worktree(run)
    with _progress("rollouts") as update:
        outcome = do_train(_repo(), run, epochs=epochs, say=update.say, on_progress=update, wait=wait,
                           keep_exceptions=keep_exceptions, on_step=_print_step)
    _echo(f"training stopped: {outcome.reason}")
    # the independent test of the final snapshot against the seed, when the run has a test split
    from git_hermit.core.heldout import evaluate_final
    from git_hermit.core.runs import open_run
    with _progress("held-out test") as update:
        held = evaluate_final(open_run(_repo(), run), on_progress=lambda label: update,
                              keep_exceptions=keep_exceptions)
    if held is not None:
        _echo(held.line() + (f"  ({held.reused} rollouts reused)" if held.reused else ""))
    return ManifestError.exit_code if any(s.rejected for s in outcome.steps) else 0


@cli.command(context_settings=CONTEXT)
@click.option("--steps", "steps", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many next steps to forecast.")
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def estimate(steps: int, run: str | None, as_json: bool) -> None:
    """Expected tokens and cost of the next steps, from the ledger of the finished ones.

    Per role (acting, judge, the learners): a step's mean ± sd and its range over the run's
    finished steps; then the next STEPS steps, what the run spent and what its budget leaves.
    """
    from git_hermit.accounting.budget import usd
    from git_hermit.core.budget import estimate as do_estimate
    from git_hermit.core.runs import open_run
    ctx = open_run(_repo(), run, with_refs=True)
    _warn_missing(ctx)
    result = do_estimate(ctx, steps)
    for warning in result.warnings:           # a damaged note is left out of the estimate: said so
        _echo(f"warning: {warning}", err=True)
    if as_json:
        _echo_json(result.to_dict())
        return
    running = (f" (with {result.unfinished[1]} finished rollout(s) of the unfinished step {result.unfinished[0]})"
               if result.unfinished else "")
    spent = "cost unknown" if result.spent.cost_usd is None else usd(result.spent.cost_usd)
    roles = ", ".join(f"{role} {'cost unknown' if u.cost_usd is None else usd(u.cost_usd)}"
                      for role, u in result.spent_by_role.items())
    spent = f"spent {result.spent.total_tokens:,} tokens, {spent}" + (f" ({roles})" if roles else "") + running
    if not result.steps_seen or result.next_tokens is None:     # the one is None exactly when the other is 0
        _echo(f"run {result.run}: no finished step in the ledger yet, so no estimate"
                   + (f"; {spent}" if result.spent.total_tokens else ""))
        _echo("next: `git hermit step` once; its ledger gives the first estimate")
        return

    def cost(spread: Spread | None) -> str:
        if spread is None:
            return "cost unknown"
        return f"{usd(spread.mean)} ± {usd(spread.sd)} ({usd(spread.min)}–{usd(spread.max)})"

    _echo(f"run {result.run}: {result.steps_seen} finished step(s) in the ledger; {spent}")
    _echo("per step, by role (mean ± sd, min–max):")
    width = max(len(role) for role in result.per_step)
    for role, forecast in result.per_step.items():
        t = forecast.tokens
        _echo(f"  {role:<{width}}  {t.mean:,.0f} ± {t.sd:,.0f} tokens ({t.min:,.0f}–{t.max:,.0f})  "
                   f"{cost(forecast.cost_usd)}")
    tokens = result.next_tokens
    money = "cost unknown" if result.next_cost is None else f"{usd(result.next_cost[0])} ± {usd(result.next_cost[1])}"
    _echo(f"next {result.steps} step(s): {tokens[0]:,.0f} ± {tokens[1]:,.0f} tokens, {money}")
    if result.max_usd is None and result.max_tokens is None:
        _echo("budget: none set (hermit.yaml budget: {max_usd, max_tokens})")
        return
    parts = []
    if result.max_usd is not None:
        left = "unknown" if result.left_usd is None else usd(result.left_usd)
        parts.append(f"max_usd {usd(result.max_usd)}, {left} left")
    if result.max_tokens is not None:
        parts.append(f"max_tokens {result.max_tokens:,}, {result.left_tokens:,} left")
    more = result.steps_left()
    _echo("budget: " + "; ".join(parts) + (f" (about {more} more step(s))" if more is not None else ""))


@cli.command(context_settings=CONTEXT)
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@click.option("--archive", type=click.Path(path_type=Path), help="Also write the adapter as .tar, .tar.gz or .zip.")
@_WAIT
def finalize(run: str | None, archive: Path | None, wait: bool) -> None:
    """Tag hermit/<run>/final: the best-ever commit (final: best_ever) or the tip (final: last).

    Also writes the adapter's card, CARD.md, beside the adapter directory (and into the archive):
    what it is, how it was trained and scored, from the run's notes (`show final --card` again).
    """
    from git_hermit.core.step import finalize as do_finalize
    from git_hermit.render.card import markdown
    outcome = do_finalize(_repo(), run, archive=archive, wait=wait, on_wait=_say_on_stderr, card_text=markdown)
    from git_hermit.render.views import partial_text
    score = (f", training pass@1 {outcome.pass_at_1:.3f}{partial_text(outcome.partial)}"
             if outcome.pass_at_1 is not None else "")
    _echo(f"final ({outcome.mode}): {outcome.commit[:12]}{score}")
    if outcome.card:
        _echo(f"card written to {outcome.card}")
    if outcome.archive:
        _echo(f"adapter archived to {outcome.archive}")
    _echo(f"warning: {outcome.warning}", err=True)


@cli.command(context_settings=CONTEXT)
@click.argument("rev", required=False)
@click.option("--target", required=True, type=click.Choice(registry.names()),
              help="The host whose plugin (or package) format to write.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="A new or empty directory to write it into (default: ./<run>-<target>-plugin).")
@click.option("--allow-lossy", is_flag=True,
              help="Write the plugin even when the format cannot carry every component; list what it left out.")
@click.option("--run", shell_complete=_complete_run, help="Run (default: the only one).")
@click.option("--name", help="The plugin's name (default: the run's name).")
@click.option("--python", "python", default="python3", show_default=True,
              help="The interpreter the plugin's hooks run where it is installed (on PATH, or an absolute path).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def convert(rev: str | None, target: str, output: Path | None, allow_lossy: bool, run: str | None,
            name: str | None, python: str, as_json: bool) -> None:
    """The adapter at REV (default: the run's final tag) as TARGET's own plugin, with its CARD.md.

    claude-code: a plugin in a local marketplace (skills, sub-agents, hooks, the context as an
    output style, the memory at session start); codex: a plugin in a local marketplace (skills,
    hooks); pi: a package (skills, the context and the session-start hook through an extension).
    A conversion that would drop a component is refused (exit 22, one line per component) unless
    --allow-lossy. The plugin needs python3 where it runs, not git-hermit.
    """
    from git_hermit.core.converting import convert as do_convert
    from git_hermit.core.runs import open_run
    from git_hermit.render.card import markdown
    done = do_convert(open_run(_repo(), run), rev, target, output, markdown, allow_lossy=allow_lossy,
                      python=python, name=name)
    if as_json:
        _echo_json({"target": done.target, "run": done.run, "commit": done.commit, "output": str(done.output),
                    "plugin": str(done.plugin_dir), "name": done.name, "version": done.version,
                    "carried": {c.component: c.where for c in done.carried},
                    "dropped": [{"component": d.component, "detail": d.detail, "reason": d.reason}
                                for d in done.dropped],
                    "card": str(done.card), "install": list(done.install)})
        return
    _echo(f"wrote a {done.title} of run {done.run}'s adapter at {done.commit[:12]} to {done.output}")
    for item in done.carried:
        _echo(f"  {item.component:<11} {item.where}")
    _echo(f"  {'card':<11} {done.card.relative_to(done.output)}")
    if done.dropped:
        _echo(f"left out ({len(done.dropped)}, --allow-lossy):")
        for lost in done.dropped:
            _echo(f"  {lost.line()}")
    _echo("install it with:")
    for line in done.install:
        _echo(f"  {line}")


@cli.command(context_settings=CONTEXT)
@click.argument("directory", required=False, default="hermit-demo", type=click.Path(path_type=Path))
def demo(directory: Path) -> None:
    """Run the AHE loop offline on a bundled benchmark, in a new repository DIRECTORY.

    The acting agent and the learners are SIMULATED (scripted programs, no model, no network,
    no keys); the adapter, hooks, commits, notes, verdicts and rollbacks are all real.
    """
    from git_hermit.core.demo import run_demo
    from git_hermit.core.history import load_history
    from git_hermit.core.runs import open_run
    from git_hermit.demo import DEMO_NOTICE
    from git_hermit.gitio import Repo
    from git_hermit.render.views import log_lines
    from git_hermit.render.card import markdown
    with _progress("rollouts") as update:
        outcome = run_demo(directory, say=update.say, on_progress=update, on_step=_print_step, card_text=markdown)
    _echo(f"training stopped: {outcome.training.reason}")
    _echo(f"final (best_ever): {outcome.final.commit[:12]}  ({outcome.seconds:.1f} s in all)")
    _echo("")
    _echo("$ git hermit log")
    for line in log_lines(load_history(open_run(Repo.discover(outcome.directory), "demo"))):
        _echo(line)
    _echo("")
    _echo(f"Look at it:  cd {outcome.directory}")
    _echo("  git hermit log                      # steps, pass@1, changes and verdicts")
    _echo("  git hermit show step-2              # a step's manifest, verdicts and scores")
    _echo("  git hermit report 2                 # step 2's pull-request description (Markdown)")
    _echo("  git log --notes=hermit/verdicts --stat hermit/demo/step-0002")
    _echo("  git hermit eval hermit/demo/final --baseline hermit/demo/step-0000 --split test")
    _echo("  git hermit show final --card        # the final adapter's card (also CARD.md)")
    _echo("  git hermit convert --target claude-code -o ../demo-plugin   # it as a Claude Code plugin")
    _echo("")
    _echo(DEMO_NOTICE)


def _complete_command(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [name for name in cli.list_commands(ctx) if name.startswith(incomplete)]


@cli.command(name="help", context_settings=CONTEXT)
@click.argument("command", required=False, shell_complete=_complete_command)
@click.option("--man", "as_roff", is_flag=True, help="Print the whole manual page as roff (what `man git-hermit` shows).")
@click.option("--completion-table", "as_table", is_flag=True, hidden=True,
              help="Print the table shell completion reads (git_hermit/_completion_table.py).")
@click.pass_context
def help_command(ctx: click.Context, command: str | None, as_roff: bool, as_table: bool) -> None:
    """Help for COMMAND (or the overview); `git help hermit` opens the manual page."""
    if as_roff:
        _echo(manpage_text(), nl=False)
        return
    if as_table:
        import pprint
        _echo('"""Generated by `git hermit help --completion-table`: what shell completion offers."""\n\n'
                   f"TABLE = {pprint.pformat(completion_table(), width=110)}")
        return
    parent = ctx.find_root()       # the `git hermit` group's context: `help` is its subcommand
    if command is None:
        _echo(cli.get_help(parent))
        return
    sub = cli.get_command(parent, command)
    if sub is None:
        raise click.BadParameter(f"no such command {command!r} (commands: {', '.join(cli.list_commands(parent))})",
                                 param_hint="COMMAND")
    with click.Context(sub, info_name=command, parent=parent, **sub.context_settings) as sub_ctx:
        _echo(sub.get_help(sub_ctx))


def _command_docs() -> list[CommandDoc]:
    """The CLI as plain records for the manual page (click stays in this module)."""
    from git_hermit.render.manpage import CommandDoc, OptionDoc
    docs = []

    def walk(command: click.Command, ctx: click.Context, name: str) -> None:
        options = [OptionDoc(flags=record[0], help=record[1]) for param in command.get_params(ctx)
                   if isinstance(param, click.Option) and param.name != "help"
                   and (record := param.get_help_record(ctx)) is not None]
        usage = " ".join(command.collect_usage_pieces(ctx))
        if not isinstance(command, click.Group) or not name:
            docs.append(CommandDoc(name=name, usage=f"git hermit {name} {usage}".replace("  ", " ").strip(),
                                   help=command.help or "", options=tuple(options)))
        if isinstance(command, click.Group):
            for sub_name in command.list_commands(ctx):
                sub = command.get_command(ctx, sub_name)
                if sub is None:
                    continue
                full = f"{name} {sub_name}".strip()
                walk(sub, click.Context(sub, info_name=sub_name, parent=ctx, **sub.context_settings), full)

    walk(cli, click.Context(cli, info_name="git hermit", **cli.context_settings), "")
    return docs


def _param_kind(param: click.Parameter) -> dict[str, Any]:
    """How completion offers a value of ``param``: its choices, a path kind, or a named source."""
    kind: dict[str, Any] = {}
    if isinstance(param.type, click.Choice) and list(param.type.choices) == list(registry.names()):
        kind["source"] = "host"   # read from the host registry (a plugin's host too), not kept here
    elif isinstance(param.type, click.Choice):
        kind["choices"] = [str(c) for c in param.type.choices]
    elif isinstance(param.type, click.Path):
        kind["path"] = "dir" if not param.type.file_okay else "file"
    callback = getattr(param, "_custom_shell_complete", None)
    sources = {_complete_run: "run", _complete_step: "step", _complete_command: "command",
               _complete_template: "template"}
    if callback in sources:
        kind["source"] = sources[callback]
    return kind


def _scope(command: click.Command, ctx: click.Context) -> dict[str, Any]:
    """A command's (or group's, with its sub-commands) options and arguments for completion."""
    options: dict[str, Any] = {}
    arguments = []
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            if param.hidden:
                continue
            for name in [*param.opts, *param.secondary_opts]:
                options[name] = {"help": param.help or "", "takes_value": not (param.is_flag or param.count),
                                 **_param_kind(param)}
        elif isinstance(param, click.Argument):
            arguments.append({"many": param.nargs == -1, **_param_kind(param)})
    scope: dict[str, Any] = {"help": (command.short_help or command.help or "").split("\n")[0],
                             "options": options, "arguments": arguments}
    if isinstance(command, click.Group):
        scope["commands"] = {}
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                scope["commands"][name] = _scope(sub, click.Context(sub, info_name=name, parent=ctx, **sub.context_settings))
    return scope


def completion_table() -> dict[str, Any]:
    """The commands, options and argument kinds that completer.py answers from."""
    return _scope(cli, click.Context(cli, info_name="git hermit", **cli.context_settings))


def manpage_text() -> str:
    """git-hermit(1) as roff: shipped in the wheel as share/man/man1/git-hermit.1."""
    from git_hermit.evolvers import registry as evolvers
    from git_hermit.render.manpage import render_manpage
    hosts = [(h.name, f"{h.binary} ({h.package}); hooks: "
                      + ("yes" if h.wire is not None else "run by hand" if h.hook_wire is not None else "none")
                      + ("; runs learner sessions" if h.learner else "")) for h in registry.hosts()]
    rows = [(s.name, f"{s.summary} (template {s.template})".strip()) for s in evolvers.specs()]
    return render_manpage(_command_docs(), version=__version__, date="", hosts=hosts, evolvers=rows)


@cli.command(context_settings=CONTEXT)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL; it completes `git hermit <TAB>` and `git-hermit <TAB>`.

    bash: eval "$(git hermit completion bash)" in ~/.bashrc (after git's own completion);
    zsh: eval "$(git hermit completion zsh)" in ~/.zshrc (after compinit);
    fish: git hermit completion fish > ~/.config/fish/completions/git-hermit.fish
    """
    from git_hermit.render.completion import completion_script
    _echo(completion_script(shell, complete_var=COMPLETE_VAR), nl=False)


# ------------------------------------------------------------------------------------------
# trace: session files read by the trajectory readers (works outside a repository too)
@cli.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "family", type=click.Choice([h.family for h in registry.hosts()]),
              help="The host that wrote the files (default: detected from each file).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file, one per line.")
def trace(files: tuple[Path, ...], family: str | None, as_json: bool) -> None:
    """What each session file holds: format and version, steps, user turns, tool calls by kind,
    failed calls, tokens (input, cached, output, reasoning), cost when hermit.yaml has prices,
    model, truncated, warnings and errors.

    FILES are Codex rollouts or `codex exec --json` streams, Claude Code sessions or stream-json
    output, Pi sessions or `pi --mode json` streams, or Harbor ATIF trajectories. A Claude
    session's sub-agent transcripts beside it (<session>/subagents/agent-*.jsonl) are listed
    with their tokens. Files are streamed: memory stays bounded by the longest line.
    """
    from git_hermit.core.trace import trace_files, trace_prices
    from git_hermit.render.trace import trace_json, trace_lines
    reports = trace_files(list(files), family, trace_prices())
    for number, report in enumerate(reports):
        if as_json:
            click.echo(json.dumps(trace_json(report), sort_keys=True))
            continue
        if number:
            _echo("")
        for line in trace_lines(report):
            _echo(line)
    failed = next((r.error for r in reports if r.error is not None), None)
    if failed is not None:
        if as_json:      # the per-file objects already carry the errors
            sys.exit(failed.exit_code)
        raise failed


# ------------------------------------------------------------------------------------------
def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C: end every agent and learner process now (they run in their own sessions, out
    of the terminal's reach), then unwind; nothing half-done is published and a rerun resumes."""
    from git_hermit.supervise.process import kill_all
    kill_all()
    raise KeyboardInterrupt


def _fail(message: str, hint: str | None, code: int, *, as_json: bool, details: tuple[str, ...] = ()) -> None:
    """Report a failure as ``error:``/``hint:`` lines on stderr, or (--json) one JSON object on stdout."""
    if as_json:
        click.echo(json.dumps({"error": message, "hint": hint, "code": code, **({"details": list(details)} if details else {})},
                              sort_keys=True))
    else:
        from git_hermit.render.escape import terminal    # no line a message quotes can drive the terminal
        click.echo(f"error: {terminal(message)}", err=True)
        for line in details:      # each on its own line, none able to start one of its own
            click.echo(f"  {terminal(line)}", err=True)
        if hint:
            click.echo(f"hint: {terminal(hint)}", err=True)
    sys.exit(code)


def _usage_hint(exc: click.ClickException) -> str:
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "git hermit"
    return f"see `{path} -h` for its arguments and options"


RESUME_HINT = "run the same command again to resume: finished rollouts and learner sessions are reused"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``git-hermit`` executable."""
    args = list(sys.argv[1:] if argv is None else argv)
    import signal
    signal.signal(signal.SIGINT, _on_interrupt)
    debug, as_json = "--debug" in args, "--json" in args
    try:
        try:
            code = cli.main(args=args, prog_name="git hermit", standalone_mode=False)
        finally:   # objects this command wrote but never published go with it (gitio/quarantine.py)
            from git_hermit.gitio import discard_unpublished
            discard_unpublished()
    except (click.exceptions.Abort, KeyboardInterrupt):
        _fail("interrupted", RESUME_HINT, INTERRUPTED_EXIT, as_json=as_json)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        # click's own usage errors (unknown option, missing argument, bad value): exit 2
        _fail(exc.format_message(), _usage_hint(exc), USAGE_EXIT if exc.exit_code == 2 else exc.exit_code,
              as_json=as_json)
    except HermitError as exc:
        if debug:
            import traceback
            traceback.print_exc()
        _fail(exc.message, exc.hint, exc.exit_code, as_json=as_json, details=exc.details)
    except OSError as exc:
        from git_hermit.errors import NO_SPACE_ERRNOS, disk_full
        if exc.errno not in NO_SPACE_ERRNOS:
            _internal_error(exc, debug, as_json)
        if debug:
            import traceback
            traceback.print_exc()
        full = disk_full(exc.filename)      # its own exit code, not a bug
        _fail(full.message, full.hint, full.exit_code, as_json=as_json)
    except Exception as exc:  # a bug: keep it to one line unless --debug
        _internal_error(exc, debug, as_json)
    sys.exit(code if isinstance(code, int) else 0)


def _internal_error(exc: Exception, debug: bool, as_json: bool) -> None:
    if debug:
        raise exc
    _fail(f"internal error: {type(exc).__name__}: {exc}", "rerun with --debug for the traceback, and report it",
          INTERNAL_ERROR_EXIT, as_json=as_json)
