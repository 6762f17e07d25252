"""The raw `diff --git` blocks of a patch, read the way `git apply` reads them.

unidiff merges blocks that name the same path and stops a hunk where its header's counts
say it ends, so two things a reviewer must see are invisible through it:

* a file replaced by a symlink is written by git as a delete block followed by a create
  block for the same path; checking only the first block misses the symlink;
* lines after a hunk's declared count are ignored by `git apply`, so a reviewer reads code
  that never lands.

This module reads every block on its own, with its modes, renames and hunks.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

SYMLINK_MODE = "120000"
_DIFF_GIT_RE = re.compile(r"^diff --git (?P<rest>.+)$")
_HUNK_RE = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
_MODE_RE = re.compile(r"^(?P<kind>old mode|new mode|new file mode|deleted file mode) (?P<mode>\d{6})$")
_INDEX_MODE_RE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ (?P<mode>\d{6})$")
_RENAME_RE = re.compile(r"^(?P<kind>rename|copy) (?P<side>from|to) (?P<path>.+)$")


@dataclass
class BlockHunk:
    index: int  # 1-based within its block, as git apply numbers them
    header: str
    line: int  # line of the @@ header in the patch
    added: list[str] = field(default_factory=list)  # '+' lines without their prefix
    overflow_line: int | None = None  # first line past the declared counts that still reads as a hunk line


@dataclass
class Block:
    line: int  # line of the `diff --git` header
    old_path: str
    new_path: str
    new_mode: str | None = None  # the mode after the patch, when the block says it
    renamed_from: str | None = None
    copied_from: str | None = None
    deleted: bool = False
    hunks: list[BlockHunk] = field(default_factory=list)

    @property
    def makes_symlink(self) -> bool:
        return self.new_mode == SYMLINK_MODE and not self.deleted


def _strip_prefix(path: str) -> str:
    return path[2:] if path[:2] in ("a/", "b/") else path


def _header_paths(rest: str) -> tuple[str, str]:
    """The two paths of `diff --git A B`; paths with spaces are split where both halves agree."""
    middle = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[middle] == " " and rest[:middle][2:] == rest[middle + 1 :][2:]:
        return _strip_prefix(rest[:middle]), _strip_prefix(rest[middle + 1 :])
    parts = rest.split(" ")
    return _strip_prefix(parts[0]), _strip_prefix(parts[-1])


def patch_lines(text: str) -> list[str]:
    """TEXT's lines as git reads a patch: split at newlines only (CRLF's CR dropped).

    `str.splitlines` also splits at form feeds, vertical tabs and Unicode separators, which
    occur inside real hunks (C sources carry ^L page breaks) and would miscount them."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_blocks(text: str) -> list[Block]:
    """Every file block of TEXT (`diff --git`, or a plain `---`/`+++` pair), in order."""
    blocks: list[Block] = []
    current: Block | None = None
    hunk: BlockHunk | None = None
    old_left = new_left = 0
    lines = patch_lines(text)
    for number, line in enumerate(lines, 1):
        hunk_done = hunk is None or (old_left <= 0 and new_left <= 0)
        if m := _DIFF_GIT_RE.match(line):
            current = Block(number, *_header_paths(m["rest"]))
            blocks.append(current)
            hunk = None
            continue
        next_line = lines[number] if number < len(lines) else ""
        if line.startswith("--- ") and next_line.startswith("+++ ") and hunk_done:
            if current is None or hunk is not None:  # a plain unified diff's next file
                current = Block(number, _strip_prefix(line[4:].split("\t")[0]), "")
                blocks.append(current)
                hunk = None
            continue
        if line.startswith("+++ ") and hunk is None and current is not None:
            path = line[4:].split("\t")[0]
            if path != "/dev/null":
                current.new_path = _strip_prefix(path)
            continue
        if current is None:
            continue
        if line == "-- " and hunk_done:
            current = hunk = None  # the mail signature: the patch ends here
            continue
        if m := _HUNK_RE.match(line):
            old_left = int(m["old"]) if m["old"] is not None else 1
            new_left = int(m["new"]) if m["new"] is not None else 1
            hunk = BlockHunk(len(current.hunks) + 1, line, number)
            current.hunks.append(hunk)
            continue
        if hunk is None:
            _read_header_line(current, line)
            continue
        if old_left <= 0 and new_left <= 0:
            if hunk.overflow_line is None and line[:1] in ("+", "-", " "):
                hunk.overflow_line = number
            continue
        tag = line[:1]
        if tag in (" ", ""):
            old_left, new_left = old_left - 1, new_left - 1
        elif tag == "-":
            old_left -= 1
        elif tag == "+":
            new_left -= 1
            hunk.added.append(line[1:])
    return blocks


def _read_header_line(block: Block, line: str) -> None:
    if m := _MODE_RE.match(line):
        if m["kind"] == "deleted file mode":
            block.deleted = True
        elif m["kind"] != "old mode":
            block.new_mode = m["mode"]
    elif m := _INDEX_MODE_RE.match(line):
        block.new_mode = block.new_mode or m["mode"]
    elif m := _RENAME_RE.match(line):
        if m["side"] == "to":
            block.new_path = m["path"]
        else:
            if m["kind"] == "rename":
                block.renamed_from = m["path"]
            else:
                block.copied_from = m["path"]


def symlink_target_escapes(link_path: str, target: str) -> bool:
    """Whether a symlink at LINK_PATH (relative to the tree) pointing at TARGET leaves the tree."""
    if target.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", target) or "\\" in target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))
    return resolved == ".." or resolved.startswith("../")


def unsafe_symlink_reason(text: str) -> str | None:
    """Why a block of TEXT could leave a symlink pointing outside the tree, or None.

    Every block is checked: a symlink created, a file turned into one (delete + create, or a
    mode change to 120000), an existing symlink retargeted (its index line says 120000), and
    a symlink renamed or copied (moving a relative link can change where it points). A
    symlink whose target the patch does not show (a bare mode change, a pure rename) is
    refused, since its target cannot be checked from the patch."""
    for block in read_blocks(text):
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
    return None


@dataclass(frozen=True)
class OverlongHunk:
    path: str
    hunk: int
    header: str
    hunk_line: int
    extra_line: int  # first line past the declared counts


def overlong_hunks(text: str) -> list[OverlongHunk]:
    """Hunks followed by lines that read as hunk lines but lie past the header's counts:
    `git apply` ignores them, so they never land."""
    return [
        OverlongHunk(block.new_path, hunk.index, hunk.header, hunk.line, hunk.overflow_line)
        for block in read_blocks(text)
        for hunk in block.hunks
        if hunk.overflow_line is not None
    ]
