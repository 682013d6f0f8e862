"""Secret redaction for everything a learner, a note, a commit or a report may see.

Two layers, both replacing with ``[REDACTED]``: (1) the value of every environment variable
git-hermit can hand to an agent, learner or judge, whatever its name, except a short allow-list
of names that hold no secret (PATH, HOME, LANG…) and values that cannot be told from ordinary
text (shorter than 8 characters, numbers, booleans, file paths); (2) format detectors for
provider keys (OpenAI, Anthropic, AWS id and secret, GitHub, Slack, Google), PEM private key
blocks (header and body), JWTs, passwords in URLs, GCP service-account JSON, ``secret=value``
assignments and high-entropy tokens (mixed-case-and-digit, ≥ 32 characters, ≥ 4.2 bits/char,
not mostly words: so git SHAs, UUIDs, hex digests and long identifiers stay).

Why hand-written patterns and not detect-secrets (Yelp, 1.5.0, measured 2026-11-30 on this
machine): it scans 0.52 MB/s (a 100 MB trajectory would take over 3 minutes, and every stored
rollout artefact is redacted), reports a GitHub token as just ``ghp`` and a PEM key as its
header line (so its findings cannot be cut out of the text), finds keys and high-entropy
strings only in quoted or assigned positions (not in prose such as ``the key is sk-…``), and
flagged 2 hex strings in the 176 KB of sample trajectories. These detectors, compiled
regular expressions with literal prefixes, redacted 100 MB of trajectories in 6.5 s (16 MB/s;
3–4 MB/s with the machine at load 17) and flag nothing there (``bench/redaction.py``).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from functools import lru_cache, partial
from typing import Iterator, Mapping

MARK = "[REDACTED]"
_MIN_SECRET_LEN = 8

# Names whose values are handed to children but are not secrets. A name that looks secret
# (below) is never allowed, whatever its prefix.
ALLOWED_ENV = frozenset({
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "TEMP", "TMP", "PWD", "OLDPWD",
    "SHELL", "USER", "LOGNAME", "USERNAME", "HOSTNAME", "SHLVL", "_", "EDITOR", "VISUAL", "PAGER",
    "COLORTERM", "TERM_PROGRAM", "DISPLAY", "MAIL", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHASHSEED",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "DEBIAN_FRONTEND", "CI",
})
ALLOWED_ENV_PREFIXES = ("LC_", "XDG_", "PYTEST_", "GIT_AUTHOR_", "GIT_COMMITTER_")
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|DSN|_URL$|_URI$)",
                          re.I)
_NOT_SECRET_VALUE = re.compile(r"(?i)(\d+(\.\d+)*|true|false|yes|no|on|off|none|null)")
_PATH_LIKE = re.compile(r"[~/][\w.@%+,/=-]*(:[~/][\w.@%+,/=-]*)*")   # a path or a PATH-style list

_B64 = "A-Za-z0-9+/"
_WORD = re.compile(r"[A-Za-z0-9_]")


def _assignment_keywords() -> list[str]:
    """``password``, ``PASSWORD``, ``Password``, ``apiKey``…: one literal each, so each pattern
    is found by the regex engine's fast literal search (a case-insensitive alternation scans
    at 5 MB/s; these 40 at 17 MB/s, and those absent from a text are skipped outright)."""
    words = ("password", "passwd", "secret", "token", "apikey", "api_key", "api-key", "access_key",
             "private_key", "client_secret", "bearer")
    variants = set()
    for word in words:
        variants |= {word, word.upper(), word.capitalize()}
        if "_" in word:
            head, tail = word.split("_", 1)
            variants.add(head + tail.capitalize())
    return sorted(variants)


_ASSIGNED = (r"(?:\\?[\"']?\s*[:=]\s*\\?[\"']?|\s+)"
             r"(?P<s>(?=[^\s\"',;&|\\]*[0-9])[^\s\"',;&|\\]{8,})")

# (kind, pattern, literal that must occur for the pattern to match, needs a word boundary before).
# Each pattern starts with a literal where it can, so the engine skips ahead fast (a leading \b
# defeats that: the boundary is checked on the match instead). Where a pattern has a group
# ``s``, only that group is the secret (a URL's user, an assignment's name stay readable).
_DETECTORS: tuple[tuple[str, re.Pattern[str], str | tuple[str, ...] | None, bool], ...] = tuple(
    (kind, re.compile(pattern), literal, boundary) for kind, pattern, literal, boundary in (
        ("pem-private-key", r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----(?:[\s\S]{0,20000}?-----END"
                            r"[A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----|(?:(?:\\[nr]|[\s\"',])*[" + _B64 + r"=:-]{16,})*)",
         "PRIVATE KEY", False),
        ("anthropic", r"sk-ant-[A-Za-z0-9_-]{16,}", "sk-ant-", True),
        ("openai", r"sk-[A-Za-z0-9_-]{20,}", "sk-", True),
        ("aws-key-id", r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}(?![A-Za-z0-9])", None, True),
        ("aws-secret", r"(?i)aws[\w.-]{0,30}?(?:secret|key)[\w.-]{0,20}[\"']?\s*[:=]\s*[\"']?"
                       r"(?P<s>[" + _B64 + r"]{40})(?![" + _B64 + "])", ("aws", "AWS", "Aws"), False),
        ("github", r"gh[pousr]_[A-Za-z0-9]{30,255}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), True),
        ("github", r"github_pat_[A-Za-z0-9_]{22,255}", "github_pat_", True),
        ("slack", r"xox[abposre]-[A-Za-z0-9-]{10,}", "xox", True),
        ("slack", r"hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}", "hooks.slack", False),
        ("google-api", r"AIza[0-9A-Za-z_-]{35}", "AIza", True),
        ("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyJ", True),
        ("gcp-service-account", r"private_key_id\\?\"\s*:\s*\\?\"(?P<s>[0-9a-f]{16,})", "private_key_id", False),
        ("url-password", r"://[^\s:/@\"'<>]{0,128}:(?P<s>[^\s@/\"'<>]{1,256})@", "://", False),
        *(("assignment", re.escape(word) + _ASSIGNED, word, False) for word in _assignment_keywords()),
        ("high-entropy", r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_=-]{32,}", None, False),
    ))


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


_WORDS = re.compile(r"[A-Z]?[a-z]{2,}")


def _high_entropy(token: str) -> bool:
    """A random-looking token: ≥ 32 characters with upper, lower and digits, ≥ 4.2 bits per
    character, and not mostly made of words (``AbstractProxyFactoryBean2Impl``: in 20,000
    random 32-character tokens, 0.1% have 75% of their characters in such words)."""
    core = token.strip("=-_/+")
    if not (len(core) >= 32 and any(c.isupper() for c in core) and any(c.islower() for c in core)
            and any(c.isdigit() for c in core)):
        return False
    return entropy(core) >= 4.2 and sum(map(len, _WORDS.findall(core))) < 0.8 * len(core)


def _allowed_name(name: str) -> bool:
    if _SECRET_NAME.search(name):
        return False
    return name in ALLOWED_ENV or name.startswith(ALLOWED_ENV_PREFIXES)


def _is_redactable_value(value: str) -> bool:
    value = value.strip()
    if len(value) < _MIN_SECRET_LEN or _NOT_SECRET_VALUE.fullmatch(value):
        return False
    # A file path is not a secret, and masking it would wreck every trajectory that names it.
    return not (_PATH_LIKE.fullmatch(value) and not _high_entropy(value.replace("/", "")))


_registered: set[str] = set()


def register(env: Mapping[str, str]) -> None:
    """Remember the values of ``env`` (an environment built for a child) for redaction here too."""
    for name, value in env.items():
        if isinstance(value, str) and not _allowed_name(name) and _is_redactable_value(value):
            _registered.add(value.strip())
    _env_secrets.cache_clear()


@lru_cache(maxsize=4)
def _env_secrets(snapshot: tuple[tuple[str, str], ...], extra: frozenset[str]) -> tuple[str, ...]:
    values = {v.strip() for k, v in snapshot if not _allowed_name(k) and _is_redactable_value(v)} | extra
    return tuple(sorted(values, key=len, reverse=True))


def secret_values() -> tuple[str, ...]:
    """Every environment value (and registered child value) that redaction removes, longest first."""
    return _env_secrets(tuple(sorted(os.environ.items())), frozenset(_registered))


def _replace(kind: str, boundary: bool, match: re.Match[str]) -> str:
    found = match.group(0)
    if boundary and match.start() > 0 and _WORD.match(match.string, match.start() - 1):
        return found    # inside a longer word: e.g. the "sk-" of "task-…"
    if kind == "high-entropy" and not _high_entropy(found):
        return found
    if "s" in match.re.groupindex and match.group("s") is not None:
        base = match.start(0)
        return found[:match.start("s") - base] + MARK + found[match.end("s") - base:]
    return MARK


def _detectors(text: str) -> Iterator[tuple[str, re.Pattern[str], bool]]:
    for kind, pattern, literal, boundary in _DETECTORS:
        literals = (literal,) if isinstance(literal, str) else literal
        if literals is None or any(each in text for each in literals):
            yield kind, pattern, boundary


def findings(text: str) -> list[str]:
    """The kinds of secret found in ``text`` (``env`` for an environment value), one per finding."""
    kinds = ["env"] * sum(text.count(v) for v in secret_values() if v in text)
    for kind, pattern, boundary in _detectors(text):
        kinds += [kind for m in pattern.finditer(text) if _replace(kind, boundary, m) != m.group(0)]
    return kinds


def redact(text: str, values: tuple[str, ...] | None = None) -> str:
    """``text`` with environment secrets and secret-shaped strings replaced by ``[REDACTED]``
    (``values``: ``secret_values()`` computed once by a caller redacting many texts)."""
    if not text:
        return text
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, MARK)
    for kind, pattern, boundary in _detectors(text):
        text = pattern.sub(partial(_replace, kind, boundary), text)
    return text
