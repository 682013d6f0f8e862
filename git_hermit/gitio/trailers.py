"""Commit messages with ``Hermit-*`` trailers: writing them and reading them back (pure Python).

Parsing follows git's rule: the trailer block is the last paragraph (never the subject), and
every line in it is ``Token: value`` or a continuation line starting with whitespace.
Multi-line values are folded into continuation lines so they round-trip exactly, provided
they have no blank lines and no trailing spaces (``normalise_trailer_value`` shows the form kept).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

HERMIT_RUN = "Hermit-Run"
HERMIT_STEP = "Hermit-Step"
HERMIT_EVOLVER = "Hermit-Evolver"
HERMIT_CHANGE = "Hermit-Change"
HERMIT_PREDICTS_FIX = "Hermit-Predicts-Fix"
HERMIT_RISK = "Hermit-Risk"
HERMIT_MANIFEST = "Hermit-Manifest"
HERMIT_REVERTS = "Hermit-Reverts"
HERMIT_VERDICT = "Hermit-Verdict"
# on a forced (file-wise) rollback: a later commit whose edits to the restored files it removes
HERMIT_REMOVES_LINES_OF = "Hermit-Removes-Lines-Of"
TRAILER_KEYS = (
    HERMIT_RUN, HERMIT_STEP, HERMIT_EVOLVER, HERMIT_CHANGE, HERMIT_PREDICTS_FIX,
    HERMIT_RISK, HERMIT_MANIFEST, HERMIT_REVERTS, HERMIT_VERDICT, HERMIT_REMOVES_LINES_OF,
)

_TOKEN = re.compile(r"[A-Za-z0-9-]+")
_TRAILER_LINE = re.compile(r"^([A-Za-z0-9-]+)[ \t]*:[ \t]?(.*)$")


def normalise_trailer_value(value: str) -> str:
    """The form a value takes in a message: lines right-stripped, blank lines dropped, outer whitespace stripped.

    Blank lines would end git's trailer paragraph, and git trims trailing spaces, so these are
    the only changes needed for ``parse_trailers(format_message(...))`` to give the value back.
    """
    lines = [line.rstrip() for line in value.strip().splitlines()]
    return "\n".join(line for line in lines if line.strip())


def format_message(subject: str, body: str = "", trailers: Sequence[tuple[str, str]] = ()) -> str:
    """``subject\\n\\nbody\\n\\nKey: value\\n…`` — ending in a newline, like git stores messages."""
    subject = " ".join(subject.split())
    if not subject:
        raise ValueError("a commit message needs a non-empty subject")
    parts = [subject]
    body = body.strip("\n")
    if body.strip():
        parts.append(body.rstrip())
    if trailers:
        lines = []
        for key, value in trailers:
            if not _TOKEN.fullmatch(key):
                raise ValueError(f"invalid trailer key {key!r} (letters, digits and '-' only)")
            first, *rest = normalise_trailer_value(value).split("\n")
            lines.append(f"{key}: {first}".rstrip())
            lines.extend(f" {line}" for line in rest)
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _paragraphs(message: str) -> list[list[str]]:
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in message.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def parse_trailers(message: str) -> list[tuple[str, str]]:
    """The (key, value) pairs of the message's trailer block, in order; [] if it has none."""
    paragraphs = _paragraphs(message)
    if len(paragraphs) < 2:  # the first paragraph is the subject, never trailers
        return []
    trailers: list[tuple[str, str]] = []
    for line in paragraphs[-1]:
        if line[0] in " \t" and trailers:
            key, value = trailers[-1]
            # Folded by format_message with one leading space: strip exactly that.
            continuation = line[1:].rstrip()
            trailers[-1] = (key, f"{value}\n{continuation}" if value else continuation)
            continue
        match = _TRAILER_LINE.match(line)
        if not match:
            return []
        trailers.append((match.group(1), match.group(2).strip()))
    return trailers


def trailer_values(message: str, key: str) -> list[str]:
    """All values of one trailer key (case-insensitive, as git compares tokens)."""
    return [value for name, value in parse_trailers(message) if name.lower() == key.lower()]
