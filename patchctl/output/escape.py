"""Text from outside (commit subjects, file and patch names, git's and builds' output) made
inert for the place it is written to. One function per destination; every writer uses these
and nothing else:

* Markdown (issue, pull-request and job-summary bodies): `md_code` (a code span: names,
  paths, subjects), `md_text` (inline prose), `md_prose` (prose whose `backticked` parts
  become code spans), `md_fence` (a fenced block), `html_text` (inside an HTML block such
  as `<summary>`). Whatever the input, the result holds no line break, no live HTML, no
  link or image, no table-cell break and no @mention or #N reference GitHub would link.
* GitHub Actions logs: `workflow_data` and `workflow_property` (the toolkit's escaping of
  a workflow command's message and its `key=value` properties), `log_line` (a line of
  plain output that must not be read as a workflow command) and `log_block` (multi-line
  output shown verbatim with workflow commands off).
* Shell: `shell_word` and `shell_command` for the commands patchctl suggests.

`visible` underlies them all: control and line-breaking characters become escapes one
can read (`\\n`, `\\x1b`), so no value ever spans two lines or drives a terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..patterns import lazy

# html, hashlib, shlex and urllib.parse are imported where used: every command's output lines
# pass through `log_line`, and start-up must not pay for what only reports need (test_startup).

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, kept by the surrogateescape decoding
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


# Control characters (C0, DEL, C1), line and paragraph separators, lone surrogates (bytes that
# were not UTF-8), the bidirectional controls that reorder what a reader sees ("Trojan Source"),
# and the zero-width characters that hide inside a name (`.g\u200cit`) and that Markdown output
# inserts itself (ZWJ, to unlink): one coming from outside is shown, never passed on unseen.
_ESCAPED = lazy(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff\ud800-\udfff]"
)


def visible(text: object, keep: str = "") -> str:
    """TEXT on one line: control, line-breaking and bidirectional characters as escapes
    (but those in KEEP)."""
    return _ESCAPED.sub(lambda m: m.group() if m.group() in keep else _escape_char(m.group()), str(text))


# ---------------------------------------------------------------- Markdown

ZWJ = "\u200d"  # a zero-width joiner: invisible, and it keeps GitHub from linking what it splits
# What GitHub links in rendered text even when it is backslash-escaped: @mentions (and
# emails), #N / owner/repo#N and GH-N references, and bare URLs (scheme:// and www.).
_LINKED = lazy(r"(?<=[@#])(?=\w)|(?<=GH)(?=-\d)|(?<=:)(?=//)|(?<=\bwww)(?=\.)", re.IGNORECASE)
# Punctuation that starts Markdown markup anywhere in a line (emphasis, links, images, code,
# strikethrough, math, table cells); the backslash itself first.
_MD_PUNCTUATION = lazy(r"([\\`*_{}\[\]()!|~$])")
# Markers that count only at the start of a line: headings, lists, quotes, breaks.
_MD_LINE_START = lazy(r"^(\s*)([#+\-=])|^(\s*\d+)([.)])")


def _unlinked(text: str) -> str:
    return _LINKED.sub(ZWJ, text)


def md_text(value: object) -> str:
    """VALUE as inline Markdown that renders as exactly its text (table cells included)."""
    return _unindented(_md_inline(value))


def _md_inline(value: object) -> str:
    import html

    text = html.escape(_unlinked(visible(value)), quote=False)
    text = _MD_PUNCTUATION.sub(r"\\\1", text)
    return _MD_LINE_START.sub(_escape_line_start, text)


def _unindented(text: str) -> str:
    """TEXT with its leading spaces as entities: four of them after a list marker (or at a
    line's start) would open an indented code block; an entity is a space that indents nothing."""
    spaces = len(text) - len(text.lstrip(" "))
    return "&#32;" * spaces + text[spaces:]


def _escape_line_start(match: re.Match[str]) -> str:
    lead, marker = (match.group(1), match.group(2)) if match.group(2) else (match.group(3), match.group(4))
    return f"{lead}\\{marker}"


def md_code(value: object, *, table: bool = False) -> str:
    """VALUE as a Markdown code span: fenced by more backticks than any run in it, padded
    where it starts or ends with a backtick or a space. TABLE: inside a table cell, where
    GitHub splits on `|` before it sees the span (`\\|` is its escape there)."""
    text = visible(value)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if not text.strip(" "):  # only spaces (or nothing): a span keeps them as they are
        return f"`{text or ' '}`"
    if text[0] in "` " or text[-1] in "` ":
        text = f" {text} "
    if table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


_LINE_BREAKS = lazy(r"[ \t]*[\r\n\u2028\u2029]+[ \t]*")


def md_prose(value: object, *, table: bool = False) -> str:
    """VALUE, a sentence whose `backticked` parts are commands or names, as inline Markdown:
    those parts as code spans, the rest as text. A stray backtick stays text. Line breaks
    fold into spaces: a message's lines read on as one."""
    parts = _LINE_BREAKS.sub(" ", str(value)).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one opens nothing
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return _unindented(
        "".join(
            (md_code(part, table=table) if part else "") if index % 2 else _md_inline(part)
            for index, part in enumerate(parts)
        )
    )


def md_fence(value: str, info: str = "") -> list[str]:
    """VALUE as the lines of a fenced code block whose fence is longer than any backtick run
    in it (nothing inside can close it); control characters other than tabs and line
    ends shown as escapes."""
    lines = [visible(line, keep="\t") for line in value.rstrip("\n").split("\n")]
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *lines, fence]


def html_text(value: object) -> str:
    """VALUE as text inside an HTML block (`<summary>...</summary>`), where Markdown is not
    read: entities for `<`, `>`, `&` and quotes, on one line, nothing that GitHub links."""
    import html

    return html.escape(_unlinked(visible(value)), quote=True)


# A URL a report may link: http(s), a host, and only characters that need no escaping in an
# autolink (no space, no `<>`, no backtick or quote, no backslash, no control character).
_LINKABLE_URL = lazy(r"^https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~!$&()*+,;=:@%/?#-]*)?$")


def linkable_url(value: object) -> bool:
    """Whether VALUE is a plain http(s) URL a report may link (in Markdown or HTML)."""
    text = str(value)
    return len(text) <= 2000 and _LINKABLE_URL.match(text) is not None


def md_link(value: object, *, table: bool = False) -> str:
    """VALUE, a URL a patch names (`Upstream-Status: Submitted [URL]`), as a Markdown autolink
    when it is a plain http(s) URL, else as a code span (nothing links). An autolink shows the
    URL itself, so the text a reader sees is where it leads."""
    text = str(value)
    if linkable_url(text) and not (table and "|" in text):
        return f"<{text}>"
    return md_code(value, table=table)


def md_cell(value: object) -> str:
    """VALUE as a table cell's prose; an empty value as a dash (a cell must not look missing)."""
    text = md_prose(value, table=True) if value not in (None, "") else ""
    return text.strip() or "–"


def marker_token(value: object) -> str:
    """VALUE as a word of a hidden marker (`<!-- key: WORD -->`) that a workflow reads back with
    `jq` and `read`: percent-encoded but for letters, digits and `._-+@=,~/`, so it holds no
    `-->`, no space and no line break, and an ordinary name stays as it is."""
    import urllib.parse

    return urllib.parse.quote(str(value).encode("utf-8", "surrogateescape"), safe="._-+@=,~/")


# ---------------------------------------------------------------- GitHub Actions logs


def workflow_data(value: object) -> str:
    """VALUE as the message of a workflow command (`::error ...::MESSAGE`), escaped as
    @actions/core does: the runner turns it back into the text, line breaks included."""
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(value: object) -> str:
    """VALUE as a workflow command's property (`file=VALUE`): also `:` and `,`."""
    return workflow_data(value).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: object, **properties: object) -> str:
    """`::COMMAND key=value,...::MESSAGE`, every property and the message escaped."""
    props = ",".join(f"{key}={workflow_property(value)}" for key, value in properties.items())
    return f"::{command}{' ' + props if props else ''}::{workflow_data(message)}"


_WORKFLOW_COMMAND = lazy(r"^(\s*):(?=:)|(?<=#)(?=#\[)")


def log_line(value: object) -> str:
    """VALUE as one line of plain output in a log the Actions runner reads: on one line
    (`visible`), and never a workflow command (`::cmd::` leading a line, or `##[cmd]`
    anywhere): a zero-width space splits the marker."""
    return _WORKFLOW_COMMAND.sub(_split_marker, visible(value))


def _split_marker(match: re.Match[str]) -> str:
    return "\u200b" if match.group(1) is None else match.group(1) + ":\u200b"


def log_block(text: str) -> str:
    """TEXT (several lines) for an Actions log, verbatim, with workflow commands off while it
    prints. The token that turns them on again is TEXT's own hash: TEXT cannot contain it."""
    import hashlib

    token = "patchctl-" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"::stop-commands::{token}\n{body}::{token}::\n"


# ---------------------------------------------------------------- a report on a terminal

# What only a Markdown renderer reads: a backslash before ASCII punctuation, the tags of a fold.
_MD_ESCAPE = lazy(r"\\([!-/:-@\[-`{-~])")
_FOLD = lazy(r"<details><summary>(.*)</summary>")
_TABLE_DELIMITER = lazy(r"\|(?:\s*:?-+:?\s*\|)+")
_BACKTICKS = lazy(r"`+")


def terminal_text(markdown: str) -> str:
    """A Markdown report (made with the md_* functions above) as plain text for a terminal or a
    log: the same lines, less what only a renderer reads: backslash escapes and HTML entities
    outside code (`\\(` reads `(`), the zero-width joiners that keep GitHub from linking, the
    tags of folds, the delimiter row of tables and the fences of code blocks. Code spans are
    kept whole, backticks included, so that a command in them pastes as printed; code blocks
    line for line. Nothing comes back that `visible` took out: no control character, no line
    break inside a value."""
    out: list[str] = []
    fence = ""
    for line in markdown.split("\n"):
        if fence:
            if line == fence:
                fence = ""
            else:
                out.append(line)
            continue
        if line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
            continue
        if _TABLE_DELIMITER.fullmatch(line.strip()) or line == "</details>":
            continue
        if (fold := _FOLD.fullmatch(line)) is not None:  # HTML, where Markdown is not read (`html_text`)
            import html

            out.append(html.unescape(fold.group(1)).replace(ZWJ, ""))
            continue
        out.append(_plain_line(line, table=line.startswith("|")))
    return "\n".join(out)


def _plain_line(line: str, *, table: bool) -> str:
    import html

    parts: list[str] = []
    prose_start = position = 0

    def prose(end: int) -> None:
        text = _MD_ESCAPE.sub(r"\1", line[prose_start:end])
        parts.append(html.unescape(text).replace(ZWJ, ""))

    while (opening := _BACKTICKS.search(line, position)) is not None:
        if opening.start() > 0 and line[opening.start() - 1] == "\\":
            position = opening.end()  # an escaped backtick: prose
            continue
        closing = next((m for m in _BACKTICKS.finditer(line, opening.end()) if m.group() == opening.group()), None)
        if closing is None:
            break
        prose(opening.start())
        span = line[opening.start() : closing.end()]
        parts.append(span.replace("\\|", "|") if table else span)  # `\|` is a table's escape, even in code
        prose_start = position = closing.end()
    prose(len(line))
    return "".join(parts)


# ---------------------------------------------------------------- shell


def shell_word(value: object) -> str:
    """VALUE as one shell word: POSIX-quoted (`shlex.quote`); with control characters, as a
    bash `$'...'` word, so that the suggestion stays on one line and pastes as it reads."""
    import shlex

    text = str(value)
    if not _ESCAPED.search(text):
        return shlex.quote(text)
    escaped = "".join(_escape_char(c) if _ESCAPED.match(c) else ("\\" + c if c in "\\'" else c) for c in text)
    return f"$'{escaped}'"


def shell_command(words: Iterable[object]) -> str:
    """WORDS as one command line, each word quoted as `shell_word` does."""
    return " ".join(shell_word(word) for word in words)
