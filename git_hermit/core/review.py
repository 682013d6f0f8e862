"""`git hermit review --event FILE`: apply a reviewer's /hermit commands from a GitHub webhook payload.

Reads the payload Actions hands over (``$GITHUB_EVENT_PATH``) of an ``issue_comment`` on a pull
request, a ``pull_request_review`` or a ``pull_request_review_comment``; only a newly written comment
or review of a reviewer with write access (OWNER, MEMBER, COLLABORATOR; no bot) on a pull request whose
head is a step branch acts, anything else is ignored with the reason. Commands:
``/hermit rollback <change> [reason]``, ``/hermit keep <change> [reason]`` (the automatic rollback
leaves it), ``/hermit note <text>`` (evidence for the next learner session). Every applied command
is an entry of the review note (``refs/notes/hermit/reviews``) on the change's commit, or for a note
on the step's tip; a rollback's commit also carries ``Hermit-Reviewed-By:``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from git_hermit.core.rollback import find_change_commit, rollback
from git_hermit.core.runs import _STEP_REF, list_runs, open_run, step_ref
from git_hermit.errors import AgentError, HermitError, InputError
from git_hermit.gitio import NOTES_REFS, NotesStore, Repo
from git_hermit.model.records import ReviewEntry, ReviewNote, dumps, loads
from git_hermit.redact import redact

EVENTS = ("issue_comment", "pull_request_review", "pull_request_review_comment")
WRITE_ACCESS = ("OWNER", "MEMBER", "COLLABORATOR")
VERBS = ("rollback", "keep", "note")
MAX_PAYLOAD_BYTES = 25 * 1024 * 1024     # GitHub caps webhook payloads at 25 MB
MAX_TEXT = 2000                          # a reason or a note kept of a reviewer's text
MAX_COMMANDS = 20
GH_TIMEOUT_S = 60.0
_COMMAND = re.compile(r"^\s*/hermit(?:\s+(\S+))?(.*)$")
_CHANGE = re.compile(r"^chg-\w[\w.-]*$")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")   # GitHub's logins (and apps')
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$")
_URL = re.compile(r"^https://[^\s<>\"'`]+$")


@dataclass(frozen=True)
class ReviewEvent:
    """What a payload says, reduced to what review needs."""

    name: str                        # the event name
    action: str
    body: str
    login: str
    user_type: str
    association: str
    url: str
    at: str
    pr: int | None                   # None: an issue comment on an issue, not a pull request
    head_ref: str | None             # None for issue_comment (gh names it)
    key: str                         # the comment's or review's id: entries' keys


@dataclass(frozen=True)
class Command:
    verb: str
    target: str = ""
    text: str = ""


@dataclass
class ReviewOutcome:
    event: str
    ignored: str | None = None       # why nothing was done
    run: str | None = None
    applied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # already applied (a re-delivered event)


def read_event(path: Path, name: str | None = None) -> ReviewEvent:
    """The payload file as a ReviewEvent; ``name``: the event name (GITHUB_EVENT_NAME), else its shape."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the event payload {path}: {exc.strerror}",
                         hint="pass the file Actions names in $GITHUB_EVENT_PATH") from None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise InputError(f"{path} is larger than a webhook payload can be ({len(raw):,} bytes)")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise InputError(f"{path} is not a JSON webhook payload",
                         hint="pass the file Actions names in $GITHUB_EVENT_PATH") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON webhook payload (not an object)")
    return parse_event(data, name)


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_event(data: dict[str, Any], name: str | None = None) -> ReviewEvent:
    if not name:
        name = ("pull_request_review" if "review" in data else
                "pull_request_review_comment" if "comment" in data and "pull_request" in data else
                "issue_comment" if "comment" in data and "issue" in data else "")
    if name not in EVENTS:
        raise InputError(f"event {name or '(unknown)'!r} is not one review reads",
                         hint=f"run it on {', '.join(EVENTS)} (the workflow's review job does)")
    item = data.get("review") if name == "pull_request_review" else data.get("comment")
    if not isinstance(item, dict):
        raise InputError(f"the {name} payload has no {'review' if name == 'pull_request_review' else 'comment'}")
    pr: int | None
    if name == "issue_comment":
        issue: dict[str, Any] = data["issue"] if isinstance(data.get("issue"), dict) else {}
        number = issue.get("number")
        pr = number if isinstance(number, int) and issue.get("pull_request") else None
        head = None
    else:
        number = _get(data, "pull_request", "number")
        pr = number if isinstance(number, int) else None
        head = _text(_get(data, "pull_request", "head", "ref")) or None
    at = _text(item.get("submitted_at") or item.get("created_at"))
    if not _TIME.match(at):     # it reaches a commit body and a prompt: a timestamp or none of it
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return ReviewEvent(name=name, action=_text(data.get("action")), body=_text(item.get("body")),
                       login=_text(_get(item, "user", "login")), user_type=_text(_get(item, "user", "type")),
                       association=_text(item.get("author_association")), url=_url(item.get("html_url")),
                       at=at, pr=pr, head_ref=head, key=f"{name}:{item.get('id', '')}")


def _url(value: Any) -> str:
    """The comment's URL when it is one (it goes into a commit trailer and a note), else empty."""
    text = _text(value)
    return text if len(text) <= 500 and _URL.match(text) else ""


def parse_commands(body: str) -> list[Command]:
    """The /hermit commands of a comment, one a line; a quoted line (``>``, a reply quoting an earlier
    command) or one inside a fenced code block is no command. A note runs to the next command."""
    commands: list[Command] = []
    fence: str | None = None
    note: list[str] | None = None
    for line in body.replace("\r\n", "\n").split("\n"):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        marker = re.match(r"^(`{3,}|~{3,})", stripped)
        if marker:
            fence = marker.group(1)
            continue
        match = _COMMAND.match(line) if not stripped.startswith(">") else None
        if match is None:
            if note is not None:
                note.append(line)
            continue
        if note is not None:
            commands[-1] = replace(commands[-1], text="\n".join(note).strip())
            note = None
        verb, rest = (match.group(1) or ""), match.group(2).strip()
        if verb == "note":
            commands.append(Command("note", text=rest))
            note = [rest]
        else:
            target, _, reason = rest.partition(" ")
            commands.append(Command(verb, target, " ".join(reason.split())))
    if note is not None:
        commands[-1] = replace(commands[-1], text="\n".join(note).strip())
    return commands


def _bounded(text: str) -> str:
    """A reviewer's text as kept: redacted (a pasted secret never reaches a note or a prompt), bounded."""
    text = redact(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def _why_ignored(event: ReviewEvent, commands: list[Command]) -> str | None:
    what = "review" if event.name == "pull_request_review" else "comment"
    if not commands:
        return f"the {what} holds no /hermit command"
    if event.action not in ("created", "submitted"):
        article = "an" if event.action[:1] in ("a", "e", "i", "o", "u") else "a"
        return (f"{article} {event.action} {what} does nothing: only a newly written one acts "
                "(write the command in a new comment)") if event.action else f"the payload names no action"
    if not _LOGIN.match(event.login):
        return "the payload names no GitHub login: nothing acts"
    if event.user_type == "Bot" or event.login.endswith("[bot]"):
        return f"{event.login} is a bot: a bot's /hermit commands do nothing"
    if event.association not in WRITE_ACCESS:
        return (f"@{event.login} is {event.association or 'of no stated association'}: only a reviewer with "
                f"write access ({', '.join(WRITE_ACCESS)}) may use /hermit commands")
    if event.pr is None:
        return "the comment is on an issue, not a pull request"
    return None


def _head_ref(repo: Repo, pr: int, gh: str) -> str:
    """The head branch of pull request ``pr``, asked of gh (an issue_comment payload does not name it)."""
    from git_hermit.supervise.process import run_process
    found = shutil.which(gh)
    if found is None:
        raise AgentError(f"gh is not on PATH: it names the head branch of pull request #{pr}",
                         hint="install the GitHub CLI (the workflow's runner has it)")
    with tempfile.TemporaryDirectory(prefix="hermit-gh-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        result = run_process([found, "pr", "view", str(pr), "--json", "headRefName"], cwd=repo.work_tree,
                             env=os.environ, timeout_s=GH_TIMEOUT_S, stdout_path=out, stderr_path=err)
        if result.returncode != 0:
            line = next((l for l in err.read_text(errors="replace").splitlines() if l.strip()), "no message")
            raise AgentError(f"gh pr view {pr} failed: {line.strip()[:200]}", hint="check `gh auth status`")
        try:
            head = json.loads(out.read_text()).get("headRefName")
        except (ValueError, AttributeError):
            head = None
    if not isinstance(head, str) or not head:
        raise AgentError(f"gh pr view {pr} named no head branch")
    return head


def review(repo: Repo, event: ReviewEvent, *, gh: str = "gh") -> ReviewOutcome:
    """Apply the event's commands, or say why none acts. All are checked first (a command naming no
    change, or no known command, applies none); a rollback that cannot be made (a conflict, a broken
    check_spec) stops there, the commands before it staying applied and recorded."""
    commands = parse_commands(event.body)
    outcome = ReviewOutcome(event=event.name)
    outcome.ignored = _why_ignored(event, commands)
    if outcome.ignored is not None:
        return outcome
    assert event.pr is not None
    head = event.head_ref or _head_ref(repo, event.pr, gh)
    match = _STEP_REF.match(f"refs/heads/{head}")
    if match is None or match["run"] not in list_runs(repo):
        outcome.ignored = (f"pull request #{event.pr}'s head {head!r} is no step branch of a run here "
                           "(hermit/<run>/step-NNNN): /hermit commands act on step pull requests only")
        return outcome
    run, step = match["run"], int(match["n"])
    outcome.run = run
    if len(commands) > MAX_COMMANDS:
        raise InputError(f"the comment holds {len(commands)} /hermit commands; at most {MAX_COMMANDS} act",
                         hint="split them over several comments")
    ctx = open_run(repo, run)
    planned: list[tuple[Command, str, tuple[str, ...]]] = []
    for command in commands:
        if command.verb not in VERBS:
            raise InputError(f"unknown command /hermit {command.verb or ''}".rstrip(),
                             hint="use /hermit rollback CHANGE [reason], /hermit keep CHANGE [reason], "
                                  "or /hermit note TEXT")
        if command.verb == "note":
            if not command.text:
                raise InputError("/hermit note needs a text", hint="/hermit note TEXT (what the learner should know)")
            tip = repo.read_ref(step_ref(run, step))
            assert tip is not None
            planned.append((command, tip, ()))
            continue
        if not command.target:
            raise InputError(f"/hermit {command.verb} needs a change",
                             hint=f"/hermit {command.verb} chg-1 (this step's), step-2:chg-1, or a commit")
        target = f"step-{step}:{command.target}" if _CHANGE.match(command.target) else command.target
        commit, ids = find_change_commit(ctx, target)
        planned.append((replace(command, target=target), commit, ids))

    store = NotesStore(repo)
    for index, (command, commit, ids) in enumerate(planned):
        key = f"{event.key}:{index}"
        held = _note(store, commit)
        label = command.target or f"step-{step:04d}"
        if key in held.entries:
            outcome.skipped.append(f"{command.verb} {label}: already applied ({event.url or key})")
            continue
        text = _bounded(command.text) if command.text else None
        entry = ReviewEntry(command=command.verb, run=run, step=step, reviewer=event.login,  # type: ignore[arg-type]
                            association=event.association, pr=event.pr, url=event.url, at=event.at,
                            event=event.name, target=command.target or None, change_ids=ids, commit=commit,
                            text=text)
        if command.verb == "rollback":
            reason = text or f"requested by @{event.login} on pull request #{event.pr}"
            result = rollback(repo, run, commit, reason, reviewed=(
                ("Hermit-Reviewed-By", event.login), ("Hermit-Review-URL", event.url or key)),
                footer=f"Requested by @{event.login} ({event.association}) on pull request #{event.pr}"
                       + (f": {event.url}" if event.url else "") + f" ({event.at}).")
            entry = replace(entry, rollback_commit=result.plan.commit,
                            change_ids=result.change_ids or ids)
            outcome.applied.append(f"rolled back {', '.join(result.change_ids) or label} in "
                                   f"{result.plan.commit[:12]} on step-{result.step:04d}")
        elif command.verb == "keep":
            outcome.applied.append(f"kept {', '.join(ids) or label} ({commit[:12]}): the automatic rollback "
                                   "leaves it")
        else:
            outcome.applied.append(f"noted for the next learner session (on step-{step:04d}, {commit[:12]})")
        held = _note(store, commit)     # re-read: a rollback wrote a verdict note, not this ref, but be exact
        store.write(NOTES_REFS["reviews"], commit,
                    dumps("reviews", ReviewNote(entries={**held.entries, key: entry})),
                    f"git hermit review: {command.verb} by {event.login} on #{event.pr}")
    return outcome


def _note(store: NotesStore, commit: str) -> ReviewNote:
    text = store.read(NOTES_REFS["reviews"], commit)
    return loads("reviews", text, where=commit[:12]) if text else ReviewNote()


def run_reviews(repo: Repo, run: str) -> tuple[ReviewEntry, ...]:
    """Every review entry of ``run``, oldest first (what a step hands its evolver)."""
    entries: list[ReviewEntry] = []
    for commit, text in NotesStore(repo).read_all(NOTES_REFS["reviews"]).items():
        try:
            note = loads("reviews", text, where=commit[:12])
        except HermitError:
            continue        # a damaged review note: `git hermit check` names it; a step does not stop for it
        entries += [e for e in note.entries.values() if e.run == run]
    return tuple(sorted(entries, key=lambda e: (e.at, e.url)))

