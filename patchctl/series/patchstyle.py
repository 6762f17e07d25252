"""The conventions a series' `git format-patch` files follow, read from the files themselves,
so that the patches export writes (new ones, and ones whose change moved) look like the rest.

Per file: whether a diffstat follows the `---` line, how many hex digits the `index` lines
give (40: `--full-index`), the signature after `-- ` (git's version, or none), whether the
`From <id>` line holds the commit id or zeros, and the subject prefix (`[PATCH]`, another
one, `[PATCH 3/7]`, or none). A rewritten patch keeps its own file's conventions (its own
number in a numbered series too); a new patch, or a file
that shows a convention nowhere (no index line, no mail header), takes the series' most
common one (the first file's on a tie). A series without mails keeps patchctl's own
conventions: no diffstat, full index lines, no signature, zero commit, `[PATCH]`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import fields, replace

from ..records import dataclass
from .diffblocks import Block, index_line, parse_diff_text
from .patchset import PatchFile

_FROM_RE = re.compile(r"\AFrom (?P<id>[0-9a-f]{40}) Mon Sep 17 00:00:00 2001\n")
_SUBJECT_RE = re.compile(r"^Subject: (?:\[(?P<prefix>[^\]\n]*)\] )?", re.MULTILINE)
_NUMBERED_RE = re.compile(r" ?\d+/\d+$")
_STAT_SUMMARY_RE = re.compile(r"^ \d+ files? changed(?:, \d+ insertions?\(\+\))?(?:, \d+ deletions?\(-\))?$")
_SIGNATURE_RE = re.compile(r"\n-- \n(?P<signature>[^\n]*)\n\n?\Z")
FULL_INDEX = 40


@dataclass(frozen=True)
class PatchStyle:
    """A file's conventions; None: the file does not show this one."""

    diffstat: bool | None = None
    index_length: int | None = None
    signature: str | None = None  # "" : no signature
    zero_commit: bool | None = None
    subject_prefix: str | None = None  # "" : a bare subject

    def over(self, fallback: PatchStyle) -> PatchStyle:
        """This style, with what it does not show taken from FALLBACK."""
        return replace(
            fallback, **{f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        )


# What export wrote before it read a series' conventions, and still writes for a series without mails.
PATCHCTL_STYLE = PatchStyle(
    diffstat=False, index_length=FULL_INDEX, signature="", zero_commit=True, subject_prefix="PATCH"
)


@functools.lru_cache(maxsize=4096)  # a PatchFile is its path and bytes: asked again, the same answer
def detect(patch: PatchFile) -> PatchStyle:
    """The conventions PATCH's file shows (nothing but its index lines when it is not a mail)."""
    text = patch.text
    index_length = _index_length(text, patch.parsed.blocks)
    found = _FROM_RE.match(text)
    if found is None:
        return PatchStyle(index_length=index_length)
    head, _, _ = text.partition("\ndiff --git ")
    subject = _SUBJECT_RE.search(head)
    prefix = None
    if subject is not None:
        prefix = subject["prefix"] if subject["prefix"] is not None else ""
    signature = _SIGNATURE_RE.search(text)
    return PatchStyle(
        diffstat=any(_STAT_SUMMARY_RE.match(line) for line in head.split("\n")),
        index_length=index_length,
        signature=signature["signature"] if signature else "",
        zero_commit=found["id"] == "0" * 40,
        subject_prefix=prefix,
    )


def series_style(patches: list[PatchFile]) -> PatchStyle:
    """The series' most common value of every convention (the first file's on a tie);
    patchctl's own where no file shows one."""
    styles = [detect(patch) for patch in patches]
    chosen = {}
    for name in (f.name for f in fields(PatchStyle)):
        values = [getattr(style, name) for style in styles if getattr(style, name) is not None]
        if name == "subject_prefix":  # `[PATCH 3/7]` numbers one sending: a new patch takes `[PATCH]`
            values = [_NUMBERED_RE.sub("", value) for value in values]
        if values:
            chosen[name] = max(dict.fromkeys(values), key=values.count)  # first seen wins a tie
    return PatchStyle(**chosen).over(PATCHCTL_STYLE)


def format_patch_args(style: PatchStyle) -> list[str]:
    """The `git format-patch` options STYLE changes (index lines are shortened afterwards)."""
    return [
        *(["--zero-commit"] if style.zero_commit else []),
        f"--signature={style.signature}" if style.signature else "--no-signature",
        *([] if style.diffstat else ["--no-stat"]),
        f"--subject-prefix={style.subject_prefix}",
    ]


def abbreviate_index_lines(data: bytes, length: int) -> bytes:
    """DATA (a patch written with full index lines) with the ids of its text blocks' index
    lines cut to LENGTH hex digits; binary blocks keep theirs, `git apply` needs them whole."""
    if length >= FULL_INDEX:
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")
    for number, m in _text_index_lines(text, lines):
        lines[number] = f"index {m['pre'][:length]}..{m['post'][:length]}{m['mode'] or ''}"
    return "\n".join(lines).encode("utf-8", errors="surrogateescape")


def _index_length(text: str, blocks: tuple[Block, ...] | None = None) -> int | None:
    """The shortest id of TEXT's text blocks' index lines (git lengthens an ambiguous one)."""
    lengths = [len(m["pre"]) for _, m in _text_index_lines(text, text.split("\n"), blocks)]
    return min(lengths) if lengths else None


def _text_index_lines(
    text: str, lines: list[str], blocks: tuple[Block, ...] | None = None
) -> Iterator[tuple[int, re.Match[str]]]:
    """The index line of each text block of TEXT (LINES: its lines; BLOCKS: its diff's blocks,
    parsed here when not given), as (line number, match)."""
    blocks = parse_diff_text(text).blocks if blocks is None else blocks
    for position, block in enumerate(blocks):
        if block.binary:
            continue
        if found := index_line(lines, blocks, position):
            yield found
