"""Untrusted text (a learner's, a remote's, an agent's) made safe for where it is shown.

``terminal``: control characters (C0, DEL, C1, ESC and so every escape sequence, bidi overrides
and isolates, line separators) made visible as ``\\xNN``/``\\uNNNN``; every view that prints a
record's text on a terminal passes it through here. GitHub Markdown: ``md_text`` (inline text:
Markdown and HTML syntax escaped, @mentions and #refs made inert), ``md_code`` (an inline code
span), ``md_cell`` (one table cell), ``md_fence`` (a fenced block), ``md_comment`` (inside an
HTML comment), ``mermaid_label`` (a quoted mermaid label), ``md_url_path`` (a path in a link).
HTML: ``sanitize_html`` cleans rendered HTML with nh3. JSON output needs none of this: the
encoder escapes every control character and stays exact.
"""

from __future__ import annotations

import re

# C0 but tab (newline too unless kept), DEL, C1; the bidi embeddings, overrides and isolates, the
# marks and the line/paragraph separators (which some terminals treat as newlines)
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
_UNSAFE = re.compile(f"[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f{_BIDI}]")
_UNSAFE_KEEP_NEWLINES = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object, *, newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``): nothing
    it holds can move the cursor, set a title or the clipboard, link, clear the screen or reorder
    what follows. ``newlines``: keep line breaks (text printed as several lines); else a newline
    shows as ``\\x0a``, so one field stays on its line."""
    text = str(text)
    if text.isprintable():       # the common case, in C: no control, format or separator character
        return text
    pattern = _UNSAFE_KEEP_NEWLINES if newlines else _UNSAFE
    return pattern.sub(_visible, text)


# ----------------------------------------------------------------------------------- Markdown
# Every ASCII punctuation character may be backslash-escaped in CommonMark and then means itself;
# these are the ones that start inline syntax (emphasis, code, links, images, raw HTML, entities,
# strikethrough, GitHub's math) or a heading's closing sequence.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&~#$!])")
# What GitHub links and notifies: @user, @org/team, #123, owner/repo#123, GH-123. Inside a code span
# GitHub does neither.
_REFERENCE = re.compile(r"(?<![\w`])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9_.-]+)?"
                        r"|(?<![\w&])(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#[0-9]+"
                        r"|\bGH-[0-9]+", re.IGNORECASE)


def _one_line(text: object) -> str:
    return terminal(" ".join(str(text).split()))


def md_text(text: object) -> str:
    """Inline Markdown showing ``text`` as it is: on one line, no syntax of its own (no emphasis,
    link, raw HTML, entity, heading or math), its @mentions and #refs as code (inert on GitHub)."""
    flat = _one_line(text)
    out, last = [], 0
    for match in _REFERENCE.finditer(flat):
        out.append(_MD_SPECIAL.sub(r"\\\1", flat[last:match.start()]))
        out.append(md_code(match.group()))
        last = match.end()
    out.append(_MD_SPECIAL.sub(r"\\\1", flat[last:]))
    return "".join(out)


def md_code(text: object) -> str:
    """An inline code span holding ``text`` on one line (its fence longer than any backtick run in it)."""
    flat = _one_line(text)
    if not flat:
        return "` `"
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith(("`", " ")) or flat.endswith(("`", " ")) else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_cell(markdown: str) -> str:
    """A Markdown fragment (made with md_text/md_code or by us) as one GFM table cell: on one line,
    its pipes escaped (GFM takes ``\\|`` as a pipe even inside a code span); "—" when empty."""
    flat = " ".join(markdown.split())
    return flat.replace("|", "\\|") if flat else "—"


def md_fence(text: object, info: str = "") -> list[str]:
    """``text`` as a fenced code block (its lines, fence included): nothing inside is Markdown or
    HTML, mentions are not linked; control characters are made visible, lines kept."""
    body = terminal(str(text).replace("\r\n", "\n"), newlines=True)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *body.split("\n"), fence]


def md_comment(text: object) -> str:
    """``text`` for the inside of ``<!-- … -->``: it can neither end the comment (``-->``, ``--!>``)
    nor start another."""
    flat = _one_line(text)
    flat = re.sub(r"-{2,}", lambda m: " ".join(m.group()), flat)
    return flat.replace("<!", "< !").lstrip(">-")


_MERMAID_SAFE = re.compile(r"[A-Za-z0-9 .,:()+_/-]")


def mermaid_label(text: object) -> str:
    """``text`` for a double-quoted mermaid label: anything but letters, digits, spaces and plain
    punctuation as mermaid's ``#NNN;`` entity codes (no quote, bracket, fence or directive survives)."""
    return "".join(ch if _MERMAID_SAFE.fullmatch(ch) else f"#{ord(ch)};" for ch in _one_line(text))


def md_url_path(path: str) -> str:
    """A repository path for the path part of a link: percent-encoded (a ``)``, space or ``|`` cannot
    end the link or the table cell)."""
    from urllib.parse import quote    # here: only a report with links needs it
    return quote(path, safe="/-_.~")


# --------------------------------------------------------------------------------------- HTML
# What a report's HTML may hold after rendering: structure, tables, code, links; no script, no
# event handler, no frame, no form control, no style (nh3/ammonia's defaults, with the table
# alignment and the code blocks' language kept).
HTML_ATTRIBUTES = {"td": {"align"}, "th": {"align"}, "pre": {"lang"}, "code": {"class"}, "a": {"href", "title"},
                   "details": {"open"}, "ol": {"start"}}


def sanitize_html(html: str) -> str:
    """Rendered HTML with everything that can run or load removed (nh3, a maintained sanitizer)."""
    import nh3
    tags = set(nh3.ALLOWED_TAGS) | {"details", "summary", "sub", "sup"}
    tags -= {"img"}     # a report embeds no remote image: none can call home when it is opened
    return nh3.clean(html, tags=tags, attributes=HTML_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                     link_rel="noopener noreferrer nofollow")
