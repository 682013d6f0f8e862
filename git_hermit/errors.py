"""Errors a user can act on, and the exit code each maps to.

Every user mistake raises a HermitError subclass carrying a one-line message and a hint;
cli.py prints them as ``error: …`` / ``hint: …`` and exits with ``exit_code``. Anything
else is a bug and shows a traceback only with ``--debug``.
"""

from __future__ import annotations


class HermitError(Exception):
    """A failure the user can fix. ``message`` says what is wrong, ``hint`` what to do."""

    exit_code = 10

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


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


class SchemaError(HermitError):
    """A record (note, manifest, deploy record) does not match its JSON Schema."""

    exit_code = 11


class AgentError(HermitError):
    """An acting agent or learner binary is missing or cannot start."""

    exit_code = 12
