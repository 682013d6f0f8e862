"""Secret redaction for everything a learner, a note or a report may see.

Values of environment variables whose names look secret (KEY, TOKEN, SECRET, PASSWORD,
CREDENTIAL…) and strings shaped like well-known API keys are replaced by ``[REDACTED]``.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)
_SHAPES = re.compile(
    r"(sk-ant-[A-Za-z0-9_-]{16,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{30,}|gho_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}|AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")
MARK = "[REDACTED]"
_MIN_SECRET_LEN = 8


@lru_cache(maxsize=1)
def _env_secrets(snapshot: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    values = {v for k, v in snapshot if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN}
    return tuple(sorted(values, key=len, reverse=True))


def secret_values() -> tuple[str, ...]:
    return _env_secrets(tuple(sorted(os.environ.items())))


def redact(text: str) -> str:
    """``text`` with secret-looking env values and key-shaped strings replaced."""
    if not text:
        return text
    for value in secret_values():
        if value in text:
            text = text.replace(value, MARK)
    return _SHAPES.sub(MARK, text)


def redact_file(path: Path) -> None:
    """Redact a text file in place (binary-safe: undecodable bytes are kept)."""
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="surrogateescape")
    cleaned = redact(text)
    if cleaned != text:
        path.write_bytes(cleaned.encode("utf-8", errors="surrogateescape"))
