"""`git hermit report --open`: a run's step pull requests as a stack, with their verdicts, through gh.

Step N's pull request is ``hermit/<run>/step-NNNN`` against step N−1's branch (the run's base
branch for step 1), so its diff is that step's changes alone. A step whose pull request was
merged or closed drops out of the stack: the pull requests above it are retargeted to the next
open one below (or the base branch), as stacked-PR tools do. Running it again edits the pull
request instead of opening another.

Step N's changes are judged by step N+1, after its pull request was opened; so publishing step
N+1 also rewrites step N's pull request (title prefixed with the outcome, body with the verdicts,
a ``hermit:<verdict>`` label each) and sets a commit status (context ``hermit/<run>``) on each
change's commit. Publishing a judged step again does the same for it alone.

Everything goes through ``gh`` (``gh pr list/create/edit``, ``gh label create``, ``gh api``);
with ``dry_run`` only the read-only ``gh pr list`` runs (when gh is there) and every other call
is returned, not made. Without gh the one ``gh pr create`` to run is returned.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from git_hermit.core.report import StepReport
from git_hermit.core.runs import run_dir
from git_hermit.errors import AgentError
from git_hermit.gitio import Repo
from git_hermit.supervise.process import run_process

GH_TIMEOUT_S = 120.0
STATUS_DESCRIPTION_LIMIT = 140          # GitHub refuses longer commit-status descriptions
LABEL_PREFIX = "hermit:"
# a commit status per verdict: a change that helped, one that hurt, one a reviewer has to weigh
STATUS_STATE = {"EFFECTIVE": "success", "PARTIALLY_EFFECTIVE": "success", "HARMFUL": "failure",
                "MIXED": "error", "INEFFECTIVE": "error"}
LABEL_COLOR = {"effective": "1a7f37", "partially-effective": "4ac26b", "mixed": "d4a72c",
               "ineffective": "8c959f", "harmful": "cf222e", "rolled-back": "6e7781"}
_STEP_HEAD = re.compile(r"^hermit/(?P<run>.+)/step-(?P<step>\d{4,})$")


@dataclass(frozen=True)
class CommitStatus:
    sha: str
    state: str              # success | failure | error
    description: str


@dataclass(frozen=True)
class StepPost:
    """What one step's pull request says: its title and body, and (once judged) labels and statuses."""

    step: int
    head: str
    title: str
    body: str
    judged: bool = False
    labels: tuple[str, ...] = ()
    statuses: tuple[CommitStatus, ...] = ()


@dataclass(frozen=True)
class PullRequest:
    number: int
    head: str
    base: str
    state: str              # OPEN | MERGED | CLOSED
    url: str | None = None
    labels: tuple[str, ...] = ()


@dataclass
class PullRequestOutcome:
    command: tuple[str, ...]        # the step's own create/edit: what was run, or what to run
    ran: bool                       # False: gh is missing, ``command`` is printed instead
    url: str | None = None
    updated: bool = False           # an existing pull request was edited
    calls: list[tuple[str, ...]] = field(default_factory=list)   # every gh call, in order
    judged: list[int] = field(default_factory=list)              # steps whose verdicts were posted
    retargeted: list[tuple[int, str]] = field(default_factory=list)
    warning: str | None = None      # a dry run whose listing failed


def body_file(repo: Repo, run: str, step: int) -> Path:
    path = run_dir(repo, run) / "reports" / f"step-{step:04d}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _label(verdict: str) -> str:
    return LABEL_PREFIX + verdict.lower().replace("_", "-")


def outcome(report: StepReport) -> str | None:
    """The title's prefix once the step's changes are judged: ``EFFECTIVE``, ``1 EFFECTIVE, 1 HARMFUL``,
    ``… rolled back``; None while nothing judged them."""
    verdicts = [c.verdict for c in report.changes if c.verdict]
    if not verdicts:
        return "evaluated" if report.evaluation is not None else None
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    text = verdicts[0] if len(counts) == 1 else ", ".join(f"{n} {v}" for v, n in counts.items())
    if any(c.rolled_back_by for c in report.changes):
        text += ", rolled back"
    return text


def _ci_text(report: StepReport) -> str:
    ev = report.evaluation
    if ev is None or ev.ci_delta is None:
        return ""
    return f"step {ev.ci_delta:+.1f} pts [{ev.ci_low:+.1f}, {ev.ci_high:+.1f}]"


def step_post(report: StepReport, body: str) -> StepPost:
    """The step's pull request as ``report`` (and its rendered ``body``) says it."""
    prefix = outcome(report)
    title = f"[{prefix}] {report.title}" if prefix else report.title
    by_commit: dict[str, list[tuple[str, str]]] = {}
    for c in report.changes:
        if c.verdict:
            by_commit.setdefault(c.commit, []).append((c.id, c.verdict))
    statuses = []
    order = ("failure", "error", "success")
    for sha, judged in by_commit.items():
        state = min((STATUS_STATE.get(v, "error") for _, v in judged), key=order.index)
        text = "; ".join(f"{cid} {v}" for cid, v in judged)
        if ci := _ci_text(report):
            text += f"; {ci}"
        # text from the notes (a change id is the learner's): one line, the API's length
        text = " ".join(text.split())
        if len(text) > STATUS_DESCRIPTION_LIMIT:
            text = text[: STATUS_DESCRIPTION_LIMIT - 1] + "…"
        statuses.append(CommitStatus(sha, state, text))
    labels = [_label(c.verdict) for c in report.changes if c.verdict]
    if any(c.rolled_back_by for c in report.changes):
        labels.append(LABEL_PREFIX + "rolled-back")
    return StepPost(step=report.step, head=report.head, title=title, body=body, judged=prefix is not None,
                    labels=tuple(dict.fromkeys(labels)), statuses=tuple(statuses))


def stack_base(step: int, prs: dict[int, PullRequest], run: str, run_base: str) -> str:
    """Step ``step``'s base: the nearest step below whose pull request is open or not opened yet;
    a merged or closed one is skipped; the run's base branch below step 1 (or an open step 0)."""
    for k in range(step - 1, -1, -1):
        pr = prs.get(k)
        if k == 0:
            return _branch(run, 0) if pr is not None and pr.state == "OPEN" else run_base
        if pr is None or pr.state == "OPEN":
            return _branch(run, k)
    return run_base


def _branch(run: str, step: int) -> str:
    return f"hermit/{run}/step-{step:04d}"


class _Gh:
    """Runs gh, or (dry run / no gh) records the calls it would make."""

    def __init__(self, repo: Repo, run: str, exe: str | None, dry_run: bool) -> None:
        self.repo, self.exe, self.dry_run = repo, exe, dry_run
        self.calls: list[tuple[str, ...]] = []
        self.scratch = run_dir(repo, run) / "reports"
        self.scratch.mkdir(parents=True, exist_ok=True)

    def __call__(self, *args: str, read: bool = False) -> str:
        command = ("gh", *args)
        self.calls.append(command)
        if self.exe is None or (self.dry_run and not read):
            return ""
        out, err = self.scratch / "gh.out", self.scratch / "gh.err"
        result = run_process([self.exe, *args], cwd=self.repo.work_tree, env=os.environ, timeout_s=GH_TIMEOUT_S,
                             stdout_path=out, stderr_path=err)
        if result.returncode != 0:
            problem = err.read_text(errors="replace")
            raise _GhFailed(command, next((l.strip() for l in problem.splitlines() if l.strip()), "no message"),
                            problem)
        return out.read_text(errors="replace")


class _GhFailed(Exception):
    def __init__(self, command: tuple[str, ...], line: str, text: str) -> None:
        super().__init__(line)
        self.command, self.line, self.text = command, line, text


def _run_prs(gh: _Gh, run: str) -> dict[int, PullRequest]:
    """The run's step pull requests by step: the open one, else the newest."""
    text = gh("pr", "list", "--state", "all", "--limit", "1000", "--json",
              "number,headRefName,baseRefName,state,url,labels", read=True)
    try:
        listed = json.loads(text) if text.strip() else []
    except ValueError:
        raise _GhFailed(gh.calls[-1], "`gh pr list --json` gave no JSON", text) from None
    found: dict[int, PullRequest] = {}
    for item in listed if isinstance(listed, list) else []:
        if not isinstance(item, dict):
            continue
        match = _STEP_HEAD.match(str(item.get("headRefName", "")))
        if not match or match["run"] != run:
            continue
        pr = PullRequest(int(item["number"]), item["headRefName"], str(item.get("baseRefName", "")),
                         str(item.get("state", "OPEN")).upper(), item.get("url"),
                         tuple(str(label.get("name")) for label in item.get("labels") or []))
        step = int(match["step"])
        held = found.get(step)
        if held is None or (pr.state == "OPEN") > (held.state == "OPEN") or \
                ((pr.state == "OPEN") == (held.state == "OPEN") and pr.number > held.number):
            found[step] = pr
    return found


def _labels_args(gh: _Gh, post: StepPost, pr: PullRequest | None, made: set[str]) -> list[str]:
    """``--add-label``/``--remove-label`` for the post's verdict labels (created first, once)."""
    for name in post.labels:
        if name not in made:
            key = name.removeprefix(LABEL_PREFIX)
            gh("label", "create", name, "--color", LABEL_COLOR.get(key, "8c959f"), "--description",
               f"git-hermit verdict: {key}", "--force")
            made.add(name)
    args: list[str] = []
    stale = [n for n in (pr.labels if pr else ()) if n.startswith(LABEL_PREFIX) and n not in post.labels]
    if post.labels:
        args += ["--add-label", ",".join(post.labels)]
    if stale:
        args += ["--remove-label", ",".join(stale)]
    return args


def _statuses(gh: _Gh, post: StepPost, run: str, slug: str | None) -> None:
    for status in post.statuses:
        gh("api", "--method", "POST", f"repos/{slug or '{owner}/{repo}'}/statuses/{status.sha}",
           "-f", f"state={status.state}", "-f", f"context=hermit/{run}", "-f", f"description={status.description}")


def _number(url: str) -> int | None:
    tail = url.strip().rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None


def publish(repo: Repo, run: str, run_base: str, target: StepPost, previous: StepPost | None = None, *,
            slug: str | None = None, dry_run: bool = False, gh: str = "gh") -> PullRequestOutcome:
    """Open or update ``target``'s pull request in the stack; post ``previous``'s verdicts (the step
    ``target`` judged) to its pull request when it has one; retarget the run's other open pull
    requests whose base left the stack."""
    exe = shutil.which(gh)
    runner = _Gh(repo, run, exe, dry_run)
    path = body_file(repo, run, target.step)
    path.write_text(target.body)
    try:
        warning = None
        try:
            prs = _run_prs(runner, run) if exe else {}
        except _GhFailed as exc:
            if not dry_run:
                raise
            # a dry run still shows what it would do: as if no pull request existed yet
            prs, warning = {}, f"`gh pr list` failed ({exc.line}): the calls assume no pull request exists yet"
        base = stack_base(target.step, prs, run, run_base)
        mine = prs.get(target.step)
        made: set[str] = set()
        labels = _labels_args(runner, target, mine, made) if target.judged else []
        own: tuple[str, ...]
        if mine is None:
            own = ("gh", "pr", "create", "--base", base, "--head", target.head, "--title", target.title,
                   "--body-file", str(path), *(["--label", ",".join(target.labels)] if target.labels else []))
            if exe is None and not dry_run:
                return PullRequestOutcome(own, ran=False)
            url = runner(*own[1:]).strip().splitlines()
            link = url[-1] if url else None
            number = _number(link) if link else None
            prs[target.step] = PullRequest(number or 0, target.head, base, "OPEN", link)
            updated = False
        else:
            retarget = ["--base", base] if mine.state == "OPEN" and mine.base != base else []
            own = ("gh", "pr", "edit", str(mine.number), "--title", target.title, "--body-file", str(path),
                   *retarget, *labels)
            if exe is None and not dry_run:
                return PullRequestOutcome(own, ran=False)
            runner(*own[1:])
            link, updated = mine.url, True
        result = PullRequestOutcome(own, ran=exe is not None and not dry_run, url=link, updated=updated,
                                    warning=warning)
        if target.judged:
            _statuses(runner, target, run, slug)
            result.judged.append(target.step)
        below = prs.get(previous.step) if previous is not None else None
        if previous is not None and previous.judged and below is not None:
            prev_path = body_file(repo, run, previous.step)
            prev_path.write_text(previous.body)
            runner("pr", "edit", str(below.number), "--title", previous.title, "--body-file", str(prev_path),
                   *_labels_args(runner, previous, below, made))
            _statuses(runner, previous, run, slug)
            result.judged.append(previous.step)
        for step, pr in sorted(prs.items()):
            if step == target.step or pr.state != "OPEN":
                continue
            want = stack_base(step, prs, run, run_base)
            if pr.base != want:
                runner("pr", "edit", str(pr.number), "--base", want)
                result.retargeted.append((step, want))
    except _GhFailed as exc:
        raise AgentError(f"gh failed: {exc.line}",
                         hint=f"push the step first (`git hermit push`), check `gh auth status`; the command was: "
                              f"{shlex.join(exc.command)}") from None
    result.calls = runner.calls
    return result
