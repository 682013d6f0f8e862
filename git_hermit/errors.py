"""Errors a user can act on, and the exit code each maps to.

Every user mistake raises a HermitError subclass carrying a one-line message and a hint;
cli.py prints them as ``error: …`` / ``hint: …`` and exits with ``exit_code``. Anything
else is a bug and shows a traceback only with ``--debug``.
"""

from __future__ import annotations

import errno


class HermitError(Exception):
    """A failure the user can fix. ``message`` says what is wrong (one line), ``hint`` what to do;
    ``details``: the items a message counts (convert's dropped components), one line each."""

    exit_code = 10

    def __init__(self, message: str, hint: str | None = None, details: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details


class CheckFailed(HermitError):
    """check_spec found broken rules (the report is printed separately)."""

    exit_code = 1


class NotARepository(HermitError):
    """Outside a git repository, or in a bare one."""

    exit_code = 3


class GitStateError(HermitError):
    """The repository is not in a state the command can work from (missing ref, unknown rev)."""

    exit_code = 4


class ConfigError(HermitError):
    """hermit.yaml is missing, malformed or fails its schema."""

    exit_code = 5


class ConfigMissing(ConfigError):
    """No config file configures the run here (the work tree holds none, or not this run's)."""


class LockHeld(HermitError):
    """Another live git-hermit process holds the run's lock."""

    exit_code = 6


class InputError(HermitError):
    """Bad user data: tasks, rows, payloads, arguments that parse but make no sense."""

    exit_code = 7


class ManifestError(HermitError):
    """A learner's change manifest is malformed or breaks its rules."""

    exit_code = 8


class RefConflict(HermitError):
    """A ref or notes ref moved under us and retries did not settle it."""

    exit_code = 9


class RevertConflict(HermitError):
    """A three-way rollback would conflict with later commits that touched the same lines."""

    exit_code = 14


class SchemaError(HermitError):
    """A record (note, manifest, deploy record) does not match its JSON Schema."""

    exit_code = 11


class GitLockFile(HermitError):
    """A git lock file (``<ref>.lock``, ``packed-refs.lock``) blocks a ref the command must update:
    a git process is running, or one crashed and left it behind."""

    exit_code = 13


class AgentError(HermitError):
    """An acting agent or learner binary is missing or cannot start."""

    exit_code = 12


class NotesConflict(HermitError):
    """Two clones changed one field of one git-hermit note differently (push/fetch stop)."""

    exit_code = 15


class BudgetReached(HermitError):
    """The run's ``budget:`` is spent, or the next step's estimate would cross it. Finished
    rollouts and learner sessions are kept: raising the budget and re-running resumes the step."""

    exit_code = 16
    partial: object = None    # the rollouts a stopped batch finished (core/evaluate.run_split sets it)


class RolloutsFailed(HermitError):
    """No rollout of the command gave a result (every row ended in an exception: a timeout, a
    crash, a judge error, a refused key), or more of a step's than ``trainer.max_exception_rate``
    did: nothing was measured, so nothing is scored or learned. Finished rows are kept; the
    exception rows run again on the next command."""

    exit_code = 17


class DamagedRecord(HermitError):
    """The repository's records are damaged: a step ref that is no commit of the run or out of its
    order, a missing step, a notes ref or object git cannot read. The message names the ref or
    object; a damaged note alone is a warning (the rest of the run still shows)."""

    exit_code = 18


class DiskFull(HermitError):
    """No space (or no inode) left on a filesystem git-hermit writes to. Nothing half-written is
    kept as a result: freeing space and re-running resumes."""

    exit_code = 19


NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
NO_SPACE_TEXT = ("No space left on device", "Disk quota exceeded", "Out of diskspace")   # what git and the kernel say


def disk_full(path: object | None, what: str = "") -> DiskFull:
    """The one error for a full disk (or quota) under ``path`` (None: unknown, e.g. a write to an
    open file)."""
    where = (f"the device holding {path}" if path is not None
             else "a device git-hermit writes to (the repository, its .hermit/ or $TMPDIR)")
    look = f"`df -h {path}`" if path is not None else "`df -h . $TMPDIR`"
    return DiskFull(f"no space left on {where}" + (f" ({what})" if what else ""),
                    hint=f"free space there ({look}) and run the same command again: finished rollouts are kept, "
                         "and a rollout that failed for lack of space runs again")


class RecordsMissing(HermitError):
    """This repository lacks part of a run's records (notes, its records ref): a step refuses to
    continue a run whose history it cannot read."""

    exit_code = 20


class RemoteRefused(HermitError):
    """A remote's change that would rewrite what this repository holds was refused: a record's
    field (verdict, score, outcomes), an invalid note, a measured step's commit, a foreign step."""

    exit_code = 21


class LossyConversion(HermitError):
    """`convert`: the target's plugin format cannot carry some of the adapter's components (the
    message names each); --allow-lossy writes the plugin without them."""

    exit_code = 22


USAGE_EXIT = 2            # click's own code for a bad command line
INTERNAL_ERROR_EXIT = 70  # a bug: the one-line report asks for --debug
INTERRUPTED_EXIT = 130    # Ctrl-C; the same command resumes

# What each exit code means to a user: the exit-code table of docs/commands.md, the man page and `help` read this.
EXIT_CODES: dict[int, str] = {
    0: "success",
    CheckFailed.exit_code: "check found broken rules",
    HermitError.exit_code: "git-hermit's installation is incomplete (a shipped file is missing: reinstall)",
    USAGE_EXIT: "bad command-line usage (unknown option, missing argument, bad value)",
    NotARepository.exit_code: "not in a (non-bare) git repository",
    GitStateError.exit_code: "the repository lacks what the command needs (unknown revision, missing step)",
    ConfigError.exit_code: "hermit.yaml missing or invalid (the message names the key)",
    LockHeld.exit_code: "the run is locked by another live git hermit process",
    InputError.exit_code: "bad input (tasks, rows, names, arguments)",
    ManifestError.exit_code: "a learner's change manifest or edit was rejected; the step kept the adapter",
    RefConflict.exit_code: "a ref moved underneath us and retries did not settle it",
    SchemaError.exit_code: "a git-hermit note fails its schema",
    AgentError.exit_code: "an agent or learner binary is missing (or gh failed)",
    NotesConflict.exit_code: "a note was changed differently on both sides of a push or fetch (the message names it)",
    GitLockFile.exit_code: "a git lock file (<ref>.lock, packed-refs.lock) blocks a ref the command must update",
    RevertConflict.exit_code: "rollback: later commits changed the same lines (named; roll them back too, or --force)",
    BudgetReached.exit_code: "budget reached: the run's budget is spent or the next step would cross it (raise it in hermit.yaml and re-run)",
    RolloutsFailed.exit_code: "the rollouts failed without a result: all of the command's rows (a step: more than "
                              "trainer.max_exception_rate of its rows) ended in an exception; fix the cause and re-run",
    DamagedRecord.exit_code: "the repository's records are damaged: a step ref, notes ref or object git cannot read (the message names it)",
    DiskFull.exit_code: "no space left on a disk git-hermit writes to (the message names it; free space and re-run to resume)",
    RecordsMissing.exit_code: "the repository lacks part of the run's records (named, with the command that brings them)",
    RemoteRefused.exit_code: "fetch/push refused a remote's change to a record or a measured step (named; --accept-remote)",
    LossyConversion.exit_code: "convert: the target's plugin format would drop components of the adapter (named; --allow-lossy)",
    INTERNAL_ERROR_EXIT: "internal error (a bug: rerun with --debug)",
    INTERRUPTED_EXIT: "interrupted (rerun the same command to resume)",
}
