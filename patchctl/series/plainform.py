"""A patch that is not a git format-patch mail, rewritten in its own form.

Many real series carry header-less diffs: a URL line then `--- a/x`/`+++ b/x` hunks (OpenWrt),
notes or an embedded mail before the diff, DEP-3 headers, quilt's `Index:` + `====` lines,
`diff -ur` command lines, timestamps after the file names. When such a patch's change moves
(an edit, a pin-sync), export rewrites it here, never as a mail: no author, date or subject
is made up, and the file changes only where the change did:

* the preamble (everything before the first file's header) is kept byte for byte while the
  commit's message is the one the file gave; an edited message is written as free text
  (`Subject:` first when the subject is not the one the file name gives);
* each file block keeps its own header lines (`Index:`, timestamps, prefixes, `diff --git`
  and `index` only where it had them: an `index` line gets the new ids, as long as before);
* each hunk git writes with the same lines as one of the block's old hunks is the old hunk's
  text (its function name, or none, included), renumbered when it moved; only the hunks
  whose lines changed are new, with the block's habit for function names;
* a new file is written like the file's other blocks; what the form cannot say without git's
  extended headers (a binary change, a rename, a mode change) falls back to git's block;
* text after the last hunk (a signature, blank lines) stays.

The result is checked: it must say what git's diff says (the same files, the same hunk
lines), else None and the caller writes git's own diff under the preamble.
"""

from __future__ import annotations

import re

from ..records import dataclass
from .diffblocks import Block, BlockHunk, index_line, parse_diff_text
from .patchset import PatchFile, title_from_name

_MAIL_RE = re.compile(r"\AFrom [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n")
# Lines before a plain block's `---` that belong to its header: quilt's, diff's own.
_PLAIN_HEADER_RE = re.compile(r"^(?:Index: |={20,}$|diff -|Only in |Common subdirectories)")
_HUNK_NUMBERS_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def is_mail(patch: PatchFile) -> bool:
    """Whether PATCH is a git format-patch mail (its first line `From <id> Mon Sep 17 ...`)."""
    return _MAIL_RE.match(patch.text) is not None


@dataclass
class _Span:
    """A file block of a patch as lines: its header and each hunk's text (the hunk header,
    its lines, and what git ignores after it up to the next hunk)."""

    block: Block
    header: list[str]
    hunks: list[tuple[BlockHunk, list[str]]]


def render(old: PatchFile, diff: str, message: str | None) -> bytes | None:
    """OLD (not a mail) rewritten to say DIFF (git's diff of its commit, full index lines): in
    OLD's form, MESSAGE the commit's message when it is not the one OLD gave (None: keep OLD's
    preamble). None when the form cannot say it (the caller writes git's diff instead)."""
    lines = old.text.split("\n")
    spans, preamble_end, tail = _spans(lines, old.parsed.blocks)
    fresh_lines = diff.split("\n")
    fresh_blocks = parse_diff_text(diff).blocks
    fresh_spans, _, _ = _spans(fresh_lines, fresh_blocks)
    by_path: dict[str, _Span] = {}
    for span in spans:
        key = _key(span.block)
        if key in by_path:
            return None  # a file in two blocks: no one block to keep the form of
        by_path[key] = span
    plain = [s for s in spans if not s.block.git]
    habit = _section_habit(spans)
    out: list[str] = []
    rendered: dict[str, list[str]] = {}
    for position, span in enumerate(fresh_spans):
        old_span = by_path.get(_key(span.block))
        block = _block(old_span, span, fresh_lines, fresh_blocks, position, plain[0] if plain else None, habit)
        if block is None:
            return None
        rendered[_key(span.block)] = block
    for span in spans:  # the old order, then new files in git's
        out += rendered.pop(_key(span.block), [])
    for block_lines in rendered.values():
        out += block_lines
    preamble = lines[:preamble_end] if message is None else _message_preamble(old, message)
    text = "\n".join(preamble + out + tail)
    if not _says_the_same(text, fresh_blocks):
        return None
    return text.encode("utf-8", errors="surrogateescape")


def with_preamble(old: PatchFile, diff: str, message: str | None) -> bytes:
    """DIFF (git's, as git writes it) under OLD's preamble (or MESSAGE, when it changed): the
    fallback when `render` cannot keep the form, still without a made-up mail header."""
    lines = old.text.split("\n")
    _, preamble_end, _ = _spans(lines, old.parsed.blocks)
    preamble = lines[:preamble_end] if message is None else _message_preamble(old, message)
    return ("\n".join(preamble) + ("\n" if preamble else "") + diff).encode("utf-8", errors="surrogateescape")


# ---------------------------------------------------------------- reading


def _spans(lines: list[str], blocks: tuple[Block, ...]) -> tuple[list[_Span], int, list[str]]:
    """LINES' file blocks as spans; the index where the first one starts (the preamble's end);
    the lines after the last hunk (a signature, the final newline's empty string)."""
    starts = [_block_start(lines, block) for block in blocks]
    spans: list[_Span] = []
    tail: list[str] = [""]
    for position, block in enumerate(blocks):
        end = starts[position + 1] if position + 1 < len(blocks) else None
        first_hunk = block.hunks[0].line - 1 if block.hunks else (end if end is not None else len(lines))
        header = lines[starts[position] : first_hunk]
        hunks = []
        for number, hunk in enumerate(block.hunks):
            begin = hunk.line - 1
            body_end = begin + 1 + len(hunk.body)
            if number + 1 < len(block.hunks):
                stop = block.hunks[number + 1].line - 1
            elif end is not None:
                stop = end
            else:
                stop = body_end
                tail = lines[body_end:]
            hunks.append((hunk, lines[begin:stop]))
        if not block.hunks and end is None:
            tail = lines[first_hunk:] or [""]
        spans.append(_Span(block, header, hunks))
    return spans, (starts[0] if starts else len(lines)), tail


def _block_start(lines: list[str], block: Block) -> int:
    start = block.line - 1
    if not block.git:
        while start > 0 and _PLAIN_HEADER_RE.match(lines[start - 1]):
            start -= 1
    return start


def _key(block: Block) -> str:
    return block.new_path or block.old_path


def _created(block: Block) -> bool:
    """Whether BLOCK creates its file (a plain diff may say so with `@@ -0,0` alone, as quilt writes it)."""
    return block.created or (
        not block.git and len(block.hunks) == 1 and block.hunks[0].source_length == 0 == block.hunks[0].source_start
    )


def _deleted(block: Block) -> bool:
    return block.deleted or (
        not block.git and len(block.hunks) == 1 and block.hunks[0].target_length == 0 == block.hunks[0].target_start
    )


def _section_habit(spans: list[_Span]) -> bool:
    """Whether the file's hunk headers carry function names (`diff -p`, git): then new hunks keep git's."""
    sections = [hunk.section for span in spans for hunk, _ in span.hunks]
    return not sections or any(sections)


# ---------------------------------------------------------------- writing


def _block(
    old: _Span | None,
    fresh: _Span,
    fresh_lines: list[str],
    fresh_blocks: tuple[Block, ...],
    position: int,
    plain_template: _Span | None,
    habit: bool,
) -> list[str] | None:
    """FRESH (a block of git's diff) in the form of OLD (its file's old block, or the file's
    plain blocks' form for a new file)."""
    block = fresh.block
    mode_change = block.old_mode is not None and block.new_mode is not None and block.old_mode != block.new_mode
    extended = (
        block.binary
        or block.renamed_from
        or block.copied_from
        or mode_change
        or (block.new_mode not in (None, "100644") and not block.deleted)
    )
    form_is_plain = (old is not None and not old.block.git) or (old is None and plain_template is not None)
    if form_is_plain and extended:
        return None
    if old is not None and old.block.git:
        header = _git_header(old, fresh, fresh_lines, fresh_blocks, position)
    elif old is not None and (_created(old.block), _deleted(old.block)) == (_created(block), _deleted(block)):
        header = list(old.header)
    elif form_is_plain:
        header = _plain_header(old or plain_template, block)  # type: ignore[arg-type]
    else:
        header = list(fresh.header)
    keep_sections = habit if old is None else any(h.section for h, _ in old.hunks) or not old.hunks
    old_hunks = {tuple(h.body): (h, text) for h, text in (old.hunks if old is not None else [])}
    out = list(header)
    for hunk, text in fresh.hunks:
        known = old_hunks.pop(tuple(hunk.body), None)
        if known is not None and _numbers(known[0].header) == _numbers(hunk.header):
            out += known[1]
            continue
        section = known[0].section if known is not None else (hunk.section if keep_sections else "")
        numbers, body = _numbers(hunk.header), text[1 : 1 + len(hunk.body)]
        overlapping = _overlapping(old, hunk) if known is None else None
        if overlapping is not None:  # as much context as the hunk it replaces had, not git's three lines
            numbers, body = _trimmed(hunk, body, *_context(overlapping.body))
        out += [numbers + (f" {section}" if section else ""), *body]
    return out


def _overlapping(old: _Span | None, hunk: BlockHunk) -> BlockHunk | None:
    """The old hunk whose lines HUNK's overlap, when exactly one does."""
    found = [
        h
        for h, _ in (old.hunks if old is not None else [])
        if h.source_start < hunk.source_start + max(hunk.source_length, 1)
        and hunk.source_start < h.source_start + max(h.source_length, 1)
    ]
    return found[0] if len(found) == 1 else None


def _context(body: list[str]) -> tuple[int, int]:
    """How many context lines BODY has before its first change and after its last."""
    lines = [line for line in body if not line.startswith("\\")]
    lead = next((i for i, line in enumerate(lines) if line[:1] in ("+", "-")), len(lines))
    trail = next((i for i, line in enumerate(reversed(lines)) if line[:1] in ("+", "-")), len(lines))
    return lead, trail


def _trimmed(hunk: BlockHunk, body: list[str], lead: int, trail: int) -> tuple[str, list[str]]:
    """HUNK (BODY its lines) with at most LEAD context lines before its first change and TRAIL
    after its last; its header's numbers to match."""
    have_lead, have_trail = _context(body)
    if body and body[-1].startswith("\\"):
        have_trail = 0  # the last line has no newline: it stays
    cut_lead, cut_trail = max(0, have_lead - lead), max(0, have_trail - trail)
    if not cut_lead and not cut_trail:
        return _numbers(hunk.header), body
    kept = body[cut_lead : len(body) - cut_trail]
    old_len = hunk.source_length - cut_lead - cut_trail
    new_len = hunk.target_length - cut_lead - cut_trail
    old_start = hunk.source_start + cut_lead if hunk.source_length else hunk.source_start
    new_start = hunk.target_start + cut_lead if hunk.target_length else hunk.target_start
    return f"@@ -{_range(old_start, old_len)} +{_range(new_start, new_len)} @@", kept


def _range(start: int, length: int) -> str:
    return str(start) if length == 1 else f"{start},{length}"


def _git_header(old: _Span, fresh: _Span, fresh_lines: list[str], fresh_blocks: tuple[Block, ...], position: int):
    """OLD's `diff --git` header with the new ids in its index line (as long as before), when
    the header says the same; else git's, its index line as OLD had it (or none)."""
    old_index = _index_of(old.header)
    fresh_index = index_line(fresh_lines, fresh_blocks, position)
    same = [line for line in old.header if not line.startswith("index ")] == [
        line for line in fresh.header if not line.startswith("index ")
    ]
    header = list(old.header if same else fresh.header)
    at = _index_of(header)
    if at is not None:
        if old_index is None or fresh_index is None:
            del header[at]
        else:
            width = len(old.header[old_index].split(" ")[1].split("..")[0])
            match = fresh_index[1]
            header[at] = f"index {match['pre'][:width]}..{match['post'][:width]}{match['mode'] or ''}"
    return header


def _index_of(header: list[str]) -> int | None:
    return next((i for i, line in enumerate(header) if line.startswith("index ")), None)


def _plain_header(template: _Span, block: Block) -> list[str]:
    """A plain header for BLOCK written like TEMPLATE's (its prefixes, its `Index:` lines)."""
    old_path = template.block.old_path or template.block.new_path
    header = []
    for line in template.header:
        if line.startswith("--- "):
            prefix = _prefix(line[4:].split("\t")[0], template.block.old_path)
            header.append("--- " + ("/dev/null" if _created(block) else prefix + block.old_path))
        elif line.startswith("+++ "):
            prefix = _prefix(line[4:].split("\t")[0], template.block.new_path)
            header.append("+++ " + ("/dev/null" if _deleted(block) else prefix + block.new_path))
        elif line.startswith("Index: "):
            header.append("Index: " + _prefix(line[7:], old_path) + block.new_path)
        elif line.startswith("="):
            header.append(line)
    return header


def _prefix(written: str, path: str) -> str:
    """What stands before PATH in WRITTEN (`a/`, `tar.orig/`); `a/` when it is /dev/null or unknown."""
    if written.endswith(path) and written != "/dev/null":
        return written[: len(written) - len(path)]
    return "a/" if not written.startswith("b/") else "b/"


def _numbers(header: str) -> str:
    match = _HUNK_NUMBERS_RE.match(header)
    return match.group(0) if match else header


def _message_preamble(old: PatchFile, message: str) -> list[str]:
    """The lines before the diff for an edited MESSAGE: its description, after a `Subject:`
    line when its subject is not the one OLD's file name gives; a blank line after."""
    subject, _, description = message.strip("\n").partition("\n")
    description = description.strip("\n")
    lines = [] if subject == title_from_name(old.name) else [f"Subject: {subject}", ""]
    lines += description.split("\n") if description else []
    if lines and lines[-1] == "":
        lines.pop()
    return lines + [""] if lines else []


def _says_the_same(text: str, fresh_blocks: tuple[Block, ...]) -> bool:
    """Whether TEXT's diff makes the same edits as FRESH_BLOCKS: the same files, the same lines
    removed and added at the same line numbers (context may differ: it changes nothing)."""
    parsed = parse_diff_text(text)
    if parsed.corrupt_line is not None:
        return False

    def edits(block: Block) -> tuple:
        found = []
        for hunk in block.hunks:
            old_line, new_line = hunk.source_start, hunk.target_start
            for line in hunk.body:
                tag = line[:1]
                if tag == "-":
                    found.append(("-", old_line, line))
                    old_line += 1
                elif tag == "+":
                    found.append(("+", new_line, line))
                    new_line += 1
                elif tag == "\\":
                    found.append(("\\", old_line, new_line))
                else:
                    old_line, new_line = old_line + 1, new_line + 1
        return tuple(found)

    def shape(blocks: tuple[Block, ...]) -> list[tuple]:
        return sorted((_key(b), _created(b), _deleted(b), edits(b)) for b in blocks)

    return shape(parsed.blocks) == shape(fresh_blocks)
