"""A patch series on disk, and what the other commands need from each patch file.

A series is patch files applied in the order of the downstream's own list (a quilt `series`
file, Electron's `.patches`, a recipe's `patches:`: `patchctl.series.patchlist`) or, without
one, in name order. Patch files come in every form real series use: git format-patch mails, DEP-3
headers (`Description:`, `Author:`, `Origin:` ...), quilt `Index:` + `====` preambles,
and bare `git diff` or `--- a/x` / `+++ b/x` unified diffs without any header. A patch
without a subject of its own gets one derived from its file name (`title`), so that it
applies as a commit with a sensible message and exports back to the same file.

This module parses subjects and descriptions; the diff itself is read once per patch by
`diffblocks.parse_diff_text` (`PatchFile.parsed`), and the file diffs and hunks here are
views of that one parse. It never touches a tree.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import field
from functools import cached_property
from pathlib import Path, PurePosixPath

from ..project.config import Series
from ..project.globs import glob_match
from ..records import dataclass
from . import seriesdir
from .diffblocks import DEV_NULL, ParsedDiff, parse_diff_text, patch_lines, strip_prefix

PATCH_NAME_RE = re.compile(r"^(?P<number>\d{4})-(?P<slug>[A-Za-z0-9][A-Za-z0-9._-]*)\.patch$")
STRICT_NAME_RE = re.compile(r"^(?P<number>\d{4})-(?P<slug>[a-z0-9][a-z0-9._-]*)\.patch$")
# git format-patch cuts its file-name slug at 52 characters (format.filenameMaxLength's default is 64 with the
# number and the extension); a longer slug is not something git made.
FORMAT_PATCH_SLUG_MAX = 52
# Where the diff starts in a patch file: everything before is the message.
_DIFF_START_RE = re.compile(r"^(?:diff --git |Index: |diff -|={20,}$)")
_HEADER_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9-]*):(?:\s|$)")
# Yocto's `Upstream-Status:` vocabulary (OpenEmbedded's patch QA): the value, and whether its bracketed
# detail is required (where it was sent, where it came from, why it is not for upstream).
UPSTREAM_STATUSES = {
    "Pending": False,
    "Submitted": True,
    "Accepted": False,
    "Backport": True,
    "Denied": False,
    "Inappropriate": True,
}
UPSTREAM_STATUS_KEY = "Upstream-Status"
# Any line that means to be the header, however it is spelled (Yocto's QA reads it as loosely, to refuse
# a misspelling rather than miss it); only `Upstream-Status: VALUE [DETAIL]` is well formed.
_UPSTREAM_STATUS_LOOSE_RE = re.compile(r"^\s*upstream[-_ ]?status\s*:", re.IGNORECASE)
_UPSTREAM_STATUS_RE = re.compile(r"^Upstream-Status: (?P<value>\S+)(?: \[(?P<detail>[^\[\]]*)\])?\s*$")
_URL_RE = re.compile(r"https?://[^\s<>\[\]]+")


@dataclass(frozen=True)
class Hunk:
    path: str
    index: int  # 1-based within its file, as git apply numbers them
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    section: str
    line: int  # line of the @@ header inside the patch file
    body: tuple[str, ...]  # the hunk's lines without the header, with their +/-/space prefix

    @property
    def header(self) -> str:
        return f"@@ -{self.source_start},{self.source_length} +{self.target_start},{self.target_length} @@"


@dataclass(frozen=True)
class FileDiff:
    path: str  # the path after the patch (the source path for deletions)
    source_path: str | None
    is_binary: bool
    is_added: bool
    is_removed: bool
    line: int  # line of its `diff --git` header
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class PatchFile:
    path: Path
    data: bytes = field(repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def number(self) -> int | None:
        match = PATCH_NAME_RE.match(self.name)
        return int(match["number"]) if match else None

    @property
    def slug(self) -> str | None:
        match = PATCH_NAME_RE.match(self.name)
        return match["slug"] if match else None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="surrogateescape")

    @cached_property
    def digest(self) -> str:
        import hashlib  # (OpenSSL's: where a digest is taken, not at every start)

        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def message(self) -> PatchMessage:
        return parse_message(self.text)

    @property
    def title(self) -> str:
        """The patch's subject, or one derived from its file name when it has none."""
        return self.message.subject or title_from_name(self.name)

    @cached_property
    def upstream_status(self) -> UpstreamStatus | None:
        """The patch's `Upstream-Status:` header (Yocto's), or None when it has none."""
        return parse_upstream_status(self.text)

    @cached_property
    def parsed(self) -> ParsedDiff:
        """The patch's diff, read once the way git apply reads it; every check reads this."""
        return parse_diff_text(self.text)

    @cached_property
    def files(self) -> tuple[FileDiff, ...]:
        """The patch's file diffs; raises MalformedPatch when it does not parse."""
        return files_of(self.text, self.parsed)

    def touched_paths(self) -> list[str]:
        """Every path the patch names, from raw headers (works on patches that do not parse)."""
        return list(self._touched_paths)

    @cached_property
    def _touched_paths(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.parsed.named_paths)))


@dataclass(frozen=True)
class PatchMessage:
    subject: str
    description: str
    author: str
    date: str
    body_line: int  # first line of the description in the file (1-based)


@dataclass(frozen=True)
class UpstreamStatus:
    """A patch's `Upstream-Status: VALUE [DETAIL]` line, as Yocto writes it: VALUE one of
    UPSTREAM_STATUSES, DETAIL where it was submitted or backported from (a URL, usually) or why
    it is inappropriate. PROBLEM says why a header is malformed; VALUE is then the text read."""

    value: str
    detail: str
    line: int  # 1-based line of the header in the patch file
    text: str  # the line as written
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    @property
    def url(self) -> str | None:
        """The first http(s) URL of the detail: where a Submitted patch was sent, a Backport came from."""
        found = _URL_RE.search(self.detail)
        return found.group(0).rstrip(".,;:)") if found else None


class MalformedPatch(ValueError):
    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


def read_series(series: Series, *, allow_empty_dir: bool = False) -> list[PatchFile]:
    """The series' patch files in application order: its list's (`list:`), or by file name.
    The directory is untrusted and fails closed (`patchctl.series.seriesdir`): a missing or
    empty series is an error unless `allow_empty: true`."""
    paths = seriesdir.series_entries(series, allow_empty_dir=allow_empty_dir)
    return [PatchFile(p, data) for p, data in zip(paths, seriesdir.read_entries(series, paths), strict=True)]


def series_digest(patches: list[PatchFile]) -> str:
    """One digest for the ordered series: names and contents, in order."""
    import hashlib

    h = hashlib.sha256()
    for patch in patches:
        h.update(patch.name.encode() + b"\0" + patch.digest.encode() + b"\n")
    return h.hexdigest()


def slugify(subject: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
    if len(slug) > 40:
        slug = slug[:41].rsplit("-", 1)[0]  # cut at a word boundary
    return slug or "patch"


def parse_message(text: str) -> PatchMessage:
    """Subject, description, author and date of a patch file (empty when absent).

    Reads git format-patch mails (the description ends at the `---` line), DEP-3 headers
    (`Description:` or `Subject:` gives the subject, its continuation lines the description,
    a lone ` .` a blank line; the other fields are kept as trailers so nothing is lost) and
    free text before a quilt `Index:` preamble or a bare diff."""
    lines = patch_lines(text)
    end = next((n for n, line in enumerate(lines) if _starts_diff(lines, n)), len(lines))
    i = 1 if lines and lines[0].startswith("From ") else 0
    fields: list[tuple[str, list[str]]] = []  # every header in order, repeated ones (Bug-Debian:) included
    while i < end and lines[i].strip():
        line = lines[i]
        if line[:1] in (" ", "\t") and fields:
            fields[-1][1].append(line)
        elif (m := _HEADER_RE.match(line)) and m["key"].lower() != "index":
            fields.append((m["key"], [line.partition(":")[2].strip()]))
        else:
            break  # not a header block: free text
        i += 1
    header_end = i
    headers: dict[str, list[str]] = {}
    for key, values in fields:
        headers.setdefault(key.lower(), values)
    body: list[str] = []
    for line in lines[header_end:end]:
        if line == "---":
            break
        body.append(line)
    description_lines: list[str] = []
    subject = ""
    if "subject" in headers:  # a mail: the subject folds, the body is the description
        subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", " ".join(v.strip() for v in headers["subject"]).strip())
    elif "description" in headers:  # DEP-3: the first line is the summary, the rest the long description
        first, *rest = headers["description"]
        subject = first
        description_lines = ["" if r.strip() == "." else r[1:] if r.startswith(" ") else r.strip() for r in rest]
        trailers = [
            f"{key}: {' '.join(v.strip() for v in values)}"
            for key, values in fields
            if key.lower() not in ("description", "subject", "from", "date", "author")
        ]
        if trailers:
            description_lines += ["", *trailers]
    description = "\n".join([*description_lines, *body]).strip("\n").strip()
    author = _decoded(" ".join(headers.get("from") or headers.get("author") or [""]).strip())
    subject = _decoded(subject)
    date = " ".join(headers.get("date") or [""]).strip()
    body_line = (header_end + 2) if header_end else 1
    return PatchMessage(subject, description, author, date, min(body_line, max(len(lines), 1)))


def parse_upstream_status(text: str) -> UpstreamStatus | None:
    """The `Upstream-Status:` header of a patch's description (the lines before its diff, and
    before a mail's `---`), or None when there is none. A header that is misspelled, has a
    value outside Yocto's vocabulary, lacks the bracketed detail its value needs, or is
    repeated comes back with its PROBLEM said."""
    lines = patch_lines(text)
    end = next((n for n, line in enumerate(lines) if _starts_diff(lines, n) or line == "---"), len(lines))
    found = [(n + 1, lines[n]) for n in range(end) if _UPSTREAM_STATUS_LOOSE_RE.match(lines[n])]
    if not found:
        return None
    number, line = found[0]
    match = _UPSTREAM_STATUS_RE.match(line.rstrip("\r"))
    value = line.partition(":")[2].strip().split(" ")[0] if match is None else match["value"]
    detail = (match["detail"] or "").strip() if match else ""
    vocabulary = ", ".join(f"{v} [...]" if needs else v for v, needs in UPSTREAM_STATUSES.items())
    problem = ""
    if len(found) > 1:
        problem = f"more than one {UPSTREAM_STATUS_KEY}: header (lines {', '.join(str(n) for n, _ in found)})"
    elif match is None:
        problem = f"malformed: write it `{UPSTREAM_STATUS_KEY}: VALUE [DETAIL]` ({vocabulary})"
    elif value not in UPSTREAM_STATUSES:
        problem = f"unknown value {value!r} (Yocto's vocabulary: {vocabulary})"
    elif UPSTREAM_STATUSES[value] and not detail:
        what = "why it is not for upstream" if value == "Inappropriate" else "where (a URL)"
        problem = f"{value} needs its detail in brackets: `{UPSTREAM_STATUS_KEY}: {value} [{what}]`"
    return UpstreamStatus(value, detail, number, line, problem)


def _decoded(value: str) -> str:
    """A header value with its RFC 2047 encoded words (`=?UTF-8?q?...?=`) decoded."""
    if "=?" not in value:
        return value
    import email.errors  # here, where a subject is encoded: most are not, and start-up is shorter without it
    import email.header

    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (ValueError, LookupError, email.errors.HeaderParseError):
        return value


def _starts_diff(lines: list[str], n: int) -> bool:
    line = lines[n]
    if _DIFF_START_RE.match(line):
        return True
    return line.startswith("--- ") and n + 1 < len(lines) and lines[n + 1].startswith("+++ ")


def title_from_name(name: str) -> str:
    """A subject for a patch that has none: its file name without number and extension,
    words separated by spaces (`0003-fix-the-foo.patch` -> `fix the foo`, OpenWrt's
    `100_fix-foo.patch` -> `fix foo`)."""
    stem = re.sub(r"\.(?:patch|diff)$", "", name)
    stem = re.sub(r"^\d+[-_]", "", stem)
    return re.sub(r"[-_]+", " ", stem).strip() or name


def raw_paths(text: str) -> list[str]:
    """Paths named by diff headers, with their a/ b/ prefixes removed and C-quoted names
    unquoted; /dev/null skipped. Every header line counts, wherever it stands, so that a path
    check sees more than git applies, never less (`ParsedDiff.named_paths`)."""
    return list(parse_diff_text(text).named_paths)


_strip_prefix = strip_prefix


def parse_diff(text: str) -> tuple[FileDiff, ...]:
    """TEXT's file diffs; raises MalformedPatch where git apply would call it corrupt."""
    return files_of(text, parse_diff_text(text))


def files_of(text: str, parsed: ParsedDiff) -> tuple[FileDiff, ...]:
    """The file diffs of PARSED (TEXT's parse), or MalformedPatch."""
    if "diff --git " not in text and "\n--- " not in text and not text.startswith("--- "):
        raise MalformedPatch("no diff in the patch")
    if parsed.corrupt_line is not None:
        raise MalformedPatch(
            f"does not parse: corrupt patch at line {parsed.corrupt_line}: {parsed.corrupt_reason}", parsed.corrupt_line
        )
    if not parsed.blocks:
        raise MalformedPatch("no file diffs in the patch")
    files: list[FileDiff] = []
    for block in parsed.blocks:
        created = block.created or (not block.git and _only_hunk_is(block, source=True))
        deleted = block.deleted or (not block.git and _only_hunk_is(block, source=False))
        path = block.new_path or block.old_path
        source = None if created or (not block.git and block.old_path in ("", DEV_NULL)) else block.old_path
        if block.renamed_from or block.copied_from:
            source = block.renamed_from or block.copied_from
        hunks = tuple(
            Hunk(
                path=path,
                index=h.index,
                source_start=h.source_start,
                source_length=h.source_length,
                target_start=h.target_start,
                target_length=h.target_length,
                section=h.section,
                line=h.line,
                body=tuple(h.body),
            )
            for h in block.hunks
        )
        files.append(FileDiff(path, source, block.binary, created, deleted, block.line, hunks))
    return tuple(files)


def _only_hunk_is(block, *, source: bool) -> bool:
    """A plain diff's single hunk that starts at line 0 with no lines on one side creates
    (SOURCE) or deletes the file, as quilt writes it without /dev/null."""
    if len(block.hunks) != 1:
        return False
    hunk = block.hunks[0]
    return (
        (hunk.source_start, hunk.source_length) == (0, 0)
        if source
        else (hunk.target_start, hunk.target_length) == (0, 0)
    )


def is_excluded(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """gitignore-like matching: a pattern without '/' matches the base name at any depth;
    one with '/' matches the whole path, where '**' spans directories."""
    posix = PurePosixPath(path)
    for pattern in patterns:
        if "/" not in pattern.rstrip("/"):
            if fnmatch.fnmatchcase(posix.name, pattern) or any(
                fnmatch.fnmatchcase(p, pattern) for p in posix.parts[:-1]
            ):
                return True
        elif glob_match(path, body := pattern.strip("/")) or glob_match(path, body + "/"):  # or under it
            return True
    return False


def hunk_fingerprint(patch: PatchFile) -> tuple:
    """What a patch changes, ignoring line numbers, index lines, the order of its files and
    mail metadata other than subject (or title) and description: two patches with the same
    fingerprint need no rewrite."""
    try:
        files = tuple(
            sorted(
                (
                    f.source_path or "",
                    f.path,
                    f.is_binary,
                    f.is_added,
                    f.is_removed,
                    tuple((h.section, h.body) for h in f.hunks),
                )
                for f in patch.files
            )
        )
    except MalformedPatch:
        return ("malformed", patch.digest)  # equal to no regenerated patch: it is rewritten
    binary_payload = tuple(line for line in patch.text.splitlines() if line.startswith(("literal ", "delta ")))
    return (patch.title, patch.message.description, files, binary_payload)
