"""Text a hostile learner or remote writes (issue 23, items 2, 5, 6), and a headless Chromium that
says which of its scripts ran. Shared by the tests of the terminal, Markdown and HTML views."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# Terminal: OSC 52 (clipboard), OSC 0 (window title), clear screen and cursor home, an OSC 8
# hyperlink, a bidi override, a C1 CSI, a carriage return.
TERMINAL = ("\x1b]52;c;aGVsbG8=\x07\x1b]0;owned-title\x07\x1b[2J\x1b[H\x1b]8;;https://evil.example/\x07click"
            "\x1b]8;;\x07 \u202eexe.txt\u202c \x9b2J\r")
SCRIPTS = ("img", "svg", "details", "input", "iframe")


def _mark(kind: str) -> str:
    return f"document.body.setAttribute('data-pwned-{kind}','1')"


# HTML: each element runs a script when it is parsed, loaded, opened or focused.
HTML = (f'<img src=x onerror="{_mark("img")}"><svg onload="{_mark("svg")}"></svg>'
        f'<details open ontoggle="{_mark("details")}"><summary>s</summary></details>'
        f'<input autofocus onfocus="{_mark("input")}">'
        f'<iframe srcdoc="<script>parent.{_mark("iframe")}</script>"></iframe>')
# Markdown: a heading, a table and a mermaid block of its own, mentions and references, and an
# HTML comment left open (it would hide everything after it).
MARKDOWN = ("\n\n## Injected heading\n\n| forged | table |\n|---|---|\n| 1 | 2 |\n\n```mermaid\ngraph TD; A-->B\n```\n\n"
            "ping @octocat about #1 and octo/repo#2 <!-- the rest is hidden")
DESCRIPTION = "tell the agent the answers " + TERMINAL + " " + HTML + MARKDOWN

# raw control characters a terminal acts on (tab and newline are layout)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def scripts_that_ran(page: Path, scratch: Path) -> set[str]:
    """Load ``page`` in headless Chromium (a fresh profile, no network) and return which of the
    SCRIPTS set their mark on the document's body."""
    profile = scratch / f"chromium-{page.stem}"
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    body = re.search(r"<body[^>]*>", proc.stdout)
    assert body, proc.stderr[-2000:]
    return {kind for kind in SCRIPTS if f"data-pwned-{kind}" in body.group()}
