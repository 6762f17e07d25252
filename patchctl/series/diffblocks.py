"""A patch's diff, read once and the way `git apply` reads it.

`parse_diff_text` is the one place that decides where a file block starts, where a hunk
ends and what text after a hunk is: every reader (the file list, hunks and touched paths of
`patchset`, the path, symlink and link-change checks of `applier`, lint's PC013) reads its
result, read once per patch (`PatchFile.parsed`), so no two checks can disagree about a
hunk's extent and none reads the text again.

How git reads a hunk, and what patchctl accepts and refuses:

* a hunk ends when the line counts of its `@@ -a,b +c,d @@` header are used up (a
  `\\ No newline at end of file` line right after it still belongs to it); a line inside
  the counts that is not ` `, `-`, `+`, `\\` or empty, or the end of the file before the
  counts are used up, makes the patch corrupt (git: "corrupt patch at line N");
* after a complete hunk git reads on only at a `@@ -` header (the same file's next hunk),
  `diff --git`, or a `---`/`+++` pair (the next file); everything else is garbage that
  git ignores. patchctl accepts garbage git ignores harmlessly: the mail signature
  separator (`-- `, or `--` with its trailing space lost, when what follows does not read
  as hunk lines) and everything after it (git's version line), mail trailers, blank lines,
  the next mail of an mbox (`From <sha> Mon Sep 17 00:00:00 2001`), quilt `Index:` lines;
* git skips a `diff --git` line with no header line it recognizes after it, ends a header
  at the first line it does not recognize, and calls a header with neither hunk nor change
  of its own (mode, rename, copy, creation, deletion, binary) "patch with only garbage";
  the parser does the same, so what it calls corrupt git calls corrupt too;
* patchctl refuses (PC013, and `apply` reports the patch malformed) a line after a
  complete hunk that starts with `+`, `-` or ` `: that is hunk content a reviewer reads
  but the header does not count, so git would silently drop it (a miscounted or hand-edited
  hunk). This is the one deliberate disagreement with `git apply`.

A file replaced by a symlink is written by git as a delete block followed by a create
block for the same path; each block is kept on its own, with its modes and renames, so
that no symlink check misses the second one.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import field

from ..confined.links import bad_links
from ..records import dataclass

SYMLINK_MODE = "120000"
DEV_NULL = "/dev/null"
_DIFF_GIT_RE = re.compile(r"^diff --git (?P<rest>.+)$")
_HUNK_RE = re.compile(r"^@@ -(?P<os>\d+)(?:,(?P<ol>\d+))? \+(?P<ns>\d+)(?:,(?P<nl>\d+))? @@(?P<section>.*)$")
# git matches these headers by their prefix and reads the rest with `parse_mode_line` (apply.c).
_MODE_RE = re.compile(r"^(?P<kind>old mode|new mode|new file mode|deleted file mode) (?P<mode>.*)$")
_INDEX_MODE_RE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ (?P<mode>.*)$")
_OCTAL_RE = re.compile(r"^[ \t\n\v\f\r]*(?P<sign>[+-]?)(?P<digits>[0-7]+)(?:[ \t\n\v\f\r]|$)")
_RENAME_RE = re.compile(r"^(?P<kind>rename|copy) (?P<side>from|to) (?P<path>.+)$")
_PATH_HEADER_RE = re.compile(r"^(?:---|\+\+\+) \S")
_OTHER_HEADER_RE = re.compile(r"^(?:index [0-9a-f]+\.\.[0-9a-f]+$|(?:dis)?similarity index \d+%$)")
_BINARY_RE = re.compile(r"^(?:GIT binary patch|Binary files .* differ)$")
# The separator line of an mbox: the next mail (and its patch) starts here.
_MBOX_FROM_RE = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")


@dataclass
class BlockHunk:
    index: int  # 1-based within its block, as git apply numbers them
    header: str
    line: int  # line of the @@ header in the patch
    source_start: int = 0
    source_length: int = 0
    target_start: int = 0
    target_length: int = 0
    section: str = ""
    body: list[str] = field(default_factory=list)  # the hunk's lines with their prefix ("\ No newline" included)
    added: list[str] = field(default_factory=list)  # '+' lines without their prefix
    overflow_line: int | None = None  # first line past the declared counts that still reads as a hunk line


@dataclass
class Block:
    line: int  # line of the `diff --git` header (or of the `---` line of a plain unified diff)
    old_path: str
    new_path: str
    git: bool = True  # a `diff --git` block (else a plain `---`/`+++` unified diff)
    new_mode: str | None = None  # the mode after the patch, when the block says it
    old_mode: str | None = None  # the mode before, when the block changes it (`old mode`)
    renamed_from: str | None = None
    copied_from: str | None = None
    created: bool = False
    deleted: bool = False
    binary: bool = False
    hunks: list[BlockHunk] = field(default_factory=list)
    header_lines: int = 0  # extended header lines git recognizes (modes, index, renames, ---/+++)
    header_open: bool = True  # git's header ends at the first line it does not recognize

    @property
    def makes_symlink(self) -> bool:
        return self.new_mode == SYMLINK_MODE and not self.deleted


@dataclass(frozen=True)
class ParsedDiff:
    """Every file block of a patch, in order, and where git would call the patch corrupt."""

    blocks: tuple[Block, ...]
    corrupt_line: int | None = None  # the first line git stops at with "corrupt patch" (None: none)
    corrupt_reason: str = ""
    trailing_line: int | None = None  # where the text after the last hunk that git ignores starts (a signature)
    # Every path a header line names, wherever it stands (a/ b/ removed, C-quoted names unquoted, /dev/null
    # skipped): the path checks see more than git applies, never less, even in a patch that does not parse.
    named_paths: tuple[str, ...] = ()
    # Some line, wherever it stands, reads as a mode header naming a symlink (`new file mode 120000`,
    # `old mode 0120000`, `index a..b 120000`): the patch may add, remove or retarget a link.
    names_link_mode: bool = False


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(path: str) -> str:
    """A path as git writes it in a header, C-quoted (`"a/f\\303\\266.c"`) when it has special or
    non-ASCII characters, unquoted; a path without quotes is returned as it is."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    out = bytearray()
    body, i = path[1:-1], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            following = body[i + 1]
            if following in "01234567" and i + 3 < len(body) + 1 and all(c in "01234567" for c in body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            if following in _C_ESCAPES:
                out.append(_C_ESCAPES[following])
                i += 2
                continue
        out += char.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def strip_prefix(path: str) -> str:
    """The path git apply -p1 sees: the first component removed, whatever it is (`a/`, `b/`,
    quilt's `tar.git.orig/`); an absolute path is kept, so that the path checks see it. A
    C-quoted path is unquoted first."""
    path = unquote(path)
    if path.startswith("/"):
        return path
    return path.split("/", 1)[1] if "/" in path else path


def header_paths(rest: str) -> tuple[str, str]:
    """The two paths of `diff --git A B`; paths with spaces are split where both halves agree."""
    if m := re.fullmatch(r'("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)', rest):
        if m[1].startswith('"') or m[2].startswith('"'):
            return strip_prefix(m[1]), strip_prefix(m[2])
    middle = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[middle] == " " and rest[:middle][2:] == rest[middle + 1 :][2:]:
        return strip_prefix(rest[:middle]), strip_prefix(rest[middle + 1 :])
    parts = rest.split(" ")
    return strip_prefix(parts[0]), strip_prefix(parts[-1])


def patch_lines(text: str) -> list[str]:
    """TEXT's lines as git reads a patch: split at newlines only (CRLF's CR dropped).

    `str.splitlines` also splits at form feeds, vertical tabs and Unicode separators, which
    occur inside real hunks (C sources carry ^L page breaks) and would miscount them."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _is_signature(lines: list[str], index: int) -> bool:
    """Whether LINES[INDEX], after a complete hunk, is the mail signature separator: `-- `
    as git format-patch writes it, or `--` with its trailing space lost to a mailer or an
    editor, when the line after it does not read as a hunk line (else the `--` is more
    likely a removed `-` line the hunk header does not count)."""
    line = lines[index]
    if line == "-- ":
        return True
    if line != "--":
        return False
    following = lines[index + 1] if index + 1 < len(lines) else ""
    return following[:1] not in ("+", "-", " ") or following.startswith(("--- ", "diff --git "))


def parse_diff_text(text: str) -> ParsedDiff:
    """Read TEXT's diff the way `git apply` does (see the module's docstring)."""
    blocks: list[Block] = []
    current: Block | None = None
    hunk: BlockHunk | None = None
    old_left = new_left = 0
    open_hunk = False  # inside a hunk's counts
    after_hunk = 0  # lines read since the last hunk completed
    expect_new_path = False
    corrupt: tuple[int, str] | None = None
    trailing: int | None = None
    changes = 0
    lines = patch_lines(text)
    named: list[str] = []
    link_mode = False
    unterminated = bool(text) and not text.endswith("\n")

    def fail(number: int, reason: str) -> None:
        nonlocal corrupt
        if corrupt is None:
            corrupt = (number, reason)

    for number, line in enumerate(lines, 1):
        first = line[:1]
        if first in _HEADER_FIRST and (first not in "+-" or line[1:3] == first * 2):  # (most lines: not a header)
            named += _header_line_paths(line)
            link_mode = link_mode or _names_link_mode(line)
        if open_hunk and hunk is not None:
            tag = line[:1]
            if tag in (" ", "", "-", "+") or (tag == "\\" and line.startswith("\\ ") and len(line) >= 11):
                if tag in (" ", ""):
                    old_left, new_left = old_left - 1, new_left - 1
                elif tag == "-":
                    old_left, changes = old_left - 1, changes + 1
                elif tag == "+":
                    new_left, changes = new_left - 1, changes + 1
                    hunk.added.append(line[1:])
                hunk.body.append(line)
                if number == len(lines) and unterminated:
                    fail(number, "the patch ends inside a hunk line without its newline")
                if old_left < 0 or new_left < 0:
                    fail(number, f"{hunk.header} counts fewer lines than its body has")
                if old_left <= 0 and new_left <= 0:
                    open_hunk, after_hunk = False, 0
                    if not changes:
                        fail(hunk.line, f"{hunk.header} changes nothing")
                continue
            fail(number, f"{hunk.header} ends early: line {number} is not a hunk line")
            open_hunk, after_hunk = False, 0
        if m := _DIFF_GIT_RE.match(line):
            current = Block(number, *header_paths(m["rest"]))
            blocks.append(current)
            hunk, trailing = None, None
            continue
        in_git_header = current is not None and current.git and hunk is None and current.header_open
        if in_git_header and current is not None and line[:4] in ("--- ", "+++ "):
            path = line[4:].split("\t")[0]  # git's header takes every ---/+++ line, paired or not
            if line[0] == "-":
                current.created = current.created or path == DEV_NULL
            elif path == DEV_NULL:
                current.deleted = True
            else:
                current.new_path = strip_prefix(path)
            current.header_lines += 1
            continue
        next_line = lines[number] if number < len(lines) else ""
        if line.startswith("--- ") and next_line.startswith("+++ "):
            old = line[4:].split("\t")[0]
            if current is None or not current.git or hunk is not None or not current.header_open:  # a plain diff
                current = Block(number, strip_prefix(old) if old != DEV_NULL else "", "", git=False)
                blocks.append(current)
                hunk, trailing = None, None
            current.created = current.created or old == DEV_NULL
            current.header_lines += 1
            expect_new_path = True
            continue
        if expect_new_path and current is not None:
            expect_new_path = False
            current.header_lines += 1
            path = line[4:].split("\t")[0]
            if path == DEV_NULL:
                current.deleted = True
                current.new_path = current.new_path or current.old_path
            else:
                current.new_path = strip_prefix(path)
                current.old_path = current.old_path or current.new_path
            continue
        if current is None:
            if blocks and _HUNK_RE.match(line) and not (number == len(lines) and unterminated):
                fail(number, f"patch fragment without header: {line}")  # git stops at one, wherever it is
            continue  # the message, a signature, or text between mails
        if line.startswith("@@ -"):
            m = _HUNK_RE.match(line)
            if hunk is not None and after_hunk:  # git looks for a file header here, not for a hunk
                if m is not None and not (number == len(lines) and unterminated):
                    fail(number, f"patch fragment without header: {line}")
                continue  # an unreadable one is garbage to git
            if m is None:
                # git reads a hunk header where one must follow (after `+++`, or right after a hunk);
                # elsewhere in a file header it is a line git skips
                if hunk is not None or lines[number - 2].startswith("+++ "):
                    fail(number, f"bad hunk header {line!r}")
                continue
            old_left = int(m["ol"]) if m["ol"] is not None else 1
            new_left = int(m["nl"]) if m["nl"] is not None else 1
            hunk = BlockHunk(
                len(current.hunks) + 1,
                line,
                number,
                int(m["os"]),
                old_left,
                int(m["ns"]),
                new_left,
                m["section"].strip(),
            )
            current.hunks.append(hunk)
            open_hunk, changes, after_hunk = True, 0, 0
            if old_left == 0 and new_left == 0:
                fail(number, f"{line} counts no lines")
                open_hunk = False
            continue
        if hunk is None:
            complete = current.binary or current.renamed_from or current.copied_from or current.old_mode
            if complete and line in ("-- ", "--") and _is_signature(lines, number - 1):  # a binary or mode-only block
                trailing, current = number, None
                continue
            if current.header_open:
                current.header_open = _read_header_line(current, line)
                current.header_lines += current.header_open
            continue
        # After a complete hunk: text git ignores.
        if not after_hunk and line.startswith("\\ ") and len(line) >= 11:
            hunk.body.append(line)  # git takes a last line's "no newline" marker into its hunk
            continue
        after_hunk += 1
        if _is_signature(lines, number - 1):
            trailing = number
            current = hunk = None
            continue
        if _MBOX_FROM_RE.match(line):
            current = hunk = None
            continue
        if hunk.overflow_line is None and line[:1] in ("+", "-", " "):
            hunk.overflow_line = number
    if open_hunk and hunk is not None:
        fail(len(lines), f"{hunk.header}: the patch ends inside the hunk")
    # A `diff --git` line with no header git recognizes after it is not a patch to git: skipped.
    blocks = [b for b in blocks if b.header_lines or b.hunks or not b.git]
    for block in blocks:
        if not (block.hunks or block.binary or block.created or block.deleted or block.renamed_from):
            if not (block.copied_from or (block.old_mode and block.new_mode and block.old_mode != block.new_mode)):
                fail(block.line, "patch with only garbage: a file header without a hunk or a change of its own")
    return ParsedDiff(
        tuple(blocks),
        corrupt[0] if corrupt else None,
        corrupt[1] if corrupt else "",
        trailing,
        tuple(named),
        link_mode,
    )


# The first characters of the lines `_header_line_paths` and `_names_link_mode` read (`diff --git`,
# `---`/`+++`, rename/copy, old/new/new file/deleted file mode, index); `+`/`-` only doubled.
_HEADER_FIRST = frozenset("d-+rconi")


def _header_line_paths(line: str) -> list[str]:
    """The paths LINE names if it reads as a header line (`diff --git`, `---`/`+++`, rename or copy)."""
    if line.startswith("diff --git "):
        return list(header_paths(line[len("diff --git ") :]))
    if _PATH_HEADER_RE.match(line):
        path = line[4:].split("\t")[0].rstrip()
        return [] if path == DEV_NULL else [strip_prefix(path)]
    if m := _RENAME_RE.match(line):
        return [unquote(m["path"].strip())]
    return []


def _names_link_mode(line: str) -> bool:
    m = _MODE_RE.match(line) or _INDEX_MODE_RE.match(line)
    return m is not None and git_mode(m["mode"]) == SYMLINK_MODE


# A block's `index PRE..POST[ MODE]` line: the blob ids (maybe abbreviated) before and after.
INDEX_LINE_RE = re.compile(r"^index (?P<pre>[0-9a-f]+)\.\.(?P<post>[0-9a-f]+)(?P<mode> \d{6})?$")


def index_line_ids(text: str, parsed: ParsedDiff) -> dict[str, tuple[str, str]]:
    """File (each block's new path) -> (preimage id, postimage id) as its index line names them."""
    ids = {}
    lines = patch_lines(text)
    for position, block in enumerate(parsed.blocks):
        if found := index_line(lines, parsed.blocks, position):
            ids[block.new_path] = (found[1]["pre"], found[1]["post"])
    return ids


def index_line(lines: list[str], blocks: tuple[Block, ...], position: int) -> tuple[int, re.Match[str]] | None:
    """BLOCKS[POSITION]'s index line among LINES (the patch's lines): its 0-based index and its
    `INDEX_LINE_RE` match; None when its header has none."""
    for number in header_line_range(blocks, position, len(lines)):
        if m := INDEX_LINE_RE.match(lines[number]):
            return number, m
    return None


def header_line_range(blocks: tuple[Block, ...], position: int, total: int) -> range:
    """The 0-based indexes, in the patch's lines split at newlines, of the header of
    BLOCKS[POSITION]: from its `diff --git` (or `---`) line to its first hunk, else to the
    next block, else to TOTAL."""
    block = blocks[position]
    if block.hunks:
        end = block.hunks[0].line - 1
    else:
        end = blocks[position + 1].line - 1 if position + 1 < len(blocks) else total
    return range(block.line - 1, min(end, total))


def _read_header_line(block: Block, line: str) -> bool:
    """Take LINE of BLOCK's extended header; whether git recognizes it as one."""
    if m := _MODE_RE.match(line):
        mode = git_mode(m["mode"])
        if m["kind"] == "deleted file mode":
            block.deleted = True
        elif m["kind"] == "old mode":
            block.old_mode = mode
        else:
            block.new_mode = mode
            block.created = block.created or m["kind"] == "new file mode"
    elif m := _INDEX_MODE_RE.match(line):
        mode = git_mode(m["mode"])
        block.new_mode = block.new_mode or mode
        block.old_mode = block.old_mode or mode
    elif m := _RENAME_RE.match(line):
        path = unquote(m["path"])
        if m["side"] == "to":
            block.new_path = path
        else:
            if m["kind"] == "rename":
                block.renamed_from = path
            else:
                block.copied_from = path
    elif _BINARY_RE.match(line):
        block.binary = True
    else:
        return _OTHER_HEADER_RE.match(line) is not None
    return True


def git_mode(text: str) -> str | None:
    """The mode git reads from TEXT (the rest of a mode header line), canonical as git keeps it
    ("100644", "100755", "120000", "040000", "160000"), or None where git refuses the line.

    git's `parse_mode_line` takes `strtoul(text, &end, 8)` (leading blanks, a sign and any
    number of digits: `0120000`), wants a blank or the end of the line after it (` 120000 junk`
    is 120000), then `canon_mode` keeps only the file type and the executable bit."""
    m = _OCTAL_RE.match(text)
    if m is None:
        return None
    value = int(m["digits"], 8)
    value = (-value if m["sign"] == "-" else value) % (1 << 64) % (1 << 32)  # unsigned long, into an unsigned int
    kind = value & 0o170000
    if kind == 0o100000:
        return "100755" if value & 0o100 else "100644"
    if kind == 0o120000:
        return SYMLINK_MODE
    if kind == 0o040000:
        return "040000"
    return "160000"  # git's S_IFGITLINK for anything else


def symlink_target_escapes(link_path: str, target: str) -> bool:
    """Whether a symlink at LINK_PATH (relative to the tree) pointing at TARGET leaves the tree."""
    if target.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", target) or "\\" in target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))
    return resolved == ".." or resolved.startswith("../")


def unsafe_symlink_reason(parsed: ParsedDiff) -> str | None:
    """Why a block of PARSED could leave a symlink pointing outside the tree, or None.

    Every block is checked: a symlink created, a file turned into one (delete + create, or a
    mode change to 120000), an existing symlink retargeted (its index line says 120000), and
    a symlink renamed or copied (moving a relative link can change where it points). A
    symlink whose target the patch does not show (a bare mode change, a pure rename) is
    refused, since its target cannot be checked from the patch."""
    for block in parsed.blocks:
        if not block.makes_symlink:
            continue
        targets = [line for hunk in block.hunks for line in hunk.added]
        if not targets:
            moved = block.renamed_from or block.copied_from
            if moved:
                return f"moves a symlink without showing its target: {moved!r} -> {block.new_path!r}"
            return f"turns {block.new_path!r} into a symlink without showing its target"
        for target in targets:
            if symlink_target_escapes(block.new_path, target):
                return f"creates a symlink pointing outside the tree: {block.new_path!r} -> {target!r}"
    # Links that each stay inside can still lead out through one another (`s -> d/..`, `d -> ..`).
    created = {
        block.new_path: block.hunks[-1].added[-1]
        for block in parsed.blocks
        if block.makes_symlink and block.hunks and block.hunks[-1].added
    }
    if (bad := next(iter(bad_links(created)), None)) is not None:
        return f"creates {bad.describe()}"
    return None


def may_change_links(parsed: ParsedDiff, is_link: Callable[[str], bool], holds_links: Callable[[str], bool]) -> bool:
    """Whether applying PARSED can add, remove or retarget a symlink of a tree: IS_LINK says
    whether a path of the tree is a symlink, HOLDS_LINKS whether it is a directory that may
    hold one.

    git writes only the paths a patch's headers name (and, creating a file where a directory
    was, drops the directory's entries), so a patch that shows no mode 120000 and names no
    link, no path under a link and no directory holding one leaves the tree's links as they
    were: they need not be listed again to know that none of them became bad. A name is also
    tried cut at each space (git drops a timestamp after a `---` name and splits a `diff
    --git` line with spaces by its own rules): the answer errs on the side of looking."""
    if parsed.names_link_mode:
        return True
    names = set(parsed.named_paths)
    for block in parsed.blocks:
        names.update(p for p in (block.old_path, block.new_path, block.renamed_from, block.copied_from) if p)
    for name in names:
        for cut in {name.rstrip(), *(name[:at] for at, char in enumerate(name) if char == " ")}:
            parts = cut.split("/")
            if is_link(cut) or holds_links(cut) or any(is_link("/".join(parts[:n])) for n in range(1, len(parts))):
                return True
    return False


@dataclass(frozen=True)
class OverlongHunk:
    path: str
    hunk: int
    header: str
    hunk_line: int
    extra_line: int  # first line past the declared counts


def overlong_hunks(parsed: ParsedDiff) -> list[OverlongHunk]:
    """Hunks followed by lines that read as hunk lines but lie past the header's counts:
    `git apply` ignores them, so they never land."""
    return [
        OverlongHunk(block.new_path, hunk.index, hunk.header, hunk.line, hunk.overflow_line)
        for block in parsed.blocks
        for hunk in block.hunks
        if hunk.overflow_line is not None
    ]
