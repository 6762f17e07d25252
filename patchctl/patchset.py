"""A patch series on disk: `NNNN-slug.patch` files in mail format (git format-patch).

This module reads patch files and parses what the other commands need from them: the
subject and description, the files each patch touches, and its hunks (through unidiff).
It never touches a tree.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from .config import Series

PATCH_NAME_RE = re.compile(r"^(?P<number>\d{4})-(?P<slug>[a-z0-9][a-z0-9._-]*)\.patch$")
_DIFF_GIT_RE = re.compile(r"^diff --git (?P<a>\S+) (?P<b>\S+)$")
_PATH_HEADER_RE = re.compile(r"^(?:---|\+\+\+) (?P<path>\S+)")
_RENAME_RE = re.compile(r"^(?:rename|copy) (?:from|to) (?P<path>.+)$")
_SYMLINK_MODE_RE = re.compile(r"^(?:new file mode|new mode) 120000$")


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
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def message(self) -> PatchMessage:
        return parse_message(self.text)

    @cached_property
    def files(self) -> tuple[FileDiff, ...]:
        """The patch's file diffs; raises MalformedPatch when it does not parse."""
        return parse_diff(self.text)

    def touched_paths(self) -> list[str]:
        """Every path the patch names, from raw headers (works on patches unidiff rejects)."""
        return sorted(set(raw_paths(self.text)))


@dataclass(frozen=True)
class PatchMessage:
    subject: str
    description: str
    author: str
    date: str
    body_line: int  # first line of the description in the file (1-based)


class MalformedPatch(ValueError):
    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


def read_series(series: Series) -> list[PatchFile]:
    """The series' patch files in application order (by file name). A missing dir is empty."""
    if not series.dir.is_dir():
        return []
    return [PatchFile(p, p.read_bytes()) for p in sorted(series.dir.glob("*.patch"))]


def series_digest(patches: list[PatchFile]) -> str:
    """One digest for the ordered series: names and contents, in order."""
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
    """Subject, description, author and date of a mail-format patch (empty when absent)."""
    lines = text.splitlines()
    headers: dict[str, str] = {}
    i = 1 if lines and lines[0].startswith("From ") else 0
    last = None
    while i < len(lines) and lines[i].strip():
        line = lines[i]
        if line[:1] in (" ", "\t") and last:
            headers[last] += " " + line.strip()
        elif ":" in line:
            last, _, value = line.partition(":")
            last = last.lower()
            headers[last] = value.strip()
        else:
            break  # not a mail header block: a bare diff
        i += 1
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers.get("subject", ""))
    body_start = i + 1
    body: list[str] = []
    for line in lines[body_start:]:
        if line == "---" or line.startswith("diff --git ") or line.startswith("Index: "):
            break
        body.append(line)
    description = "\n".join(body).strip()
    return PatchMessage(subject, description, headers.get("from", ""), headers.get("date", ""), body_start + 1)


def raw_paths(text: str) -> list[str]:
    """Paths named by diff headers, with their a/ b/ prefixes removed; /dev/null skipped."""
    paths: list[str] = []
    for line in text.splitlines():
        if m := _DIFF_GIT_RE.match(line):
            paths += [_strip_prefix(m["a"]), _strip_prefix(m["b"])]
        elif m := _PATH_HEADER_RE.match(line):
            if m["path"] != "/dev/null":
                paths.append(_strip_prefix(m["path"]))
        elif m := _RENAME_RE.match(line):
            paths.append(m["path"].strip())
    return paths


def creates_symlink(text: str) -> bool:
    return any(_SYMLINK_MODE_RE.match(line) for line in text.splitlines())


def _strip_prefix(path: str) -> str:
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_diff(text: str) -> tuple[FileDiff, ...]:
    if "diff --git " not in text and "\n--- " not in text and not text.startswith("--- "):
        raise MalformedPatch("no diff in the patch")
    try:
        patch_set = PatchSet(text)
    except UnidiffParseError as exc:
        line = None
        if m := re.search(r"line (\d+)", str(exc)):
            line = int(m.group(1))
        raise MalformedPatch(f"does not parse: {exc}", line) from None
    if not len(patch_set):
        raise MalformedPatch("no file diffs in the patch")
    header_lines = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("diff --git ")]
    hunk_lines = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("@@ ")]
    files: list[FileDiff] = []
    hunk_cursor = 0
    for file_index, patched in enumerate(patch_set):
        hunks = []
        path = _strip_prefix(patched.path)
        for hunk_index, hunk in enumerate(patched, 1):
            hunks.append(
                Hunk(
                    path=path,
                    index=hunk_index,
                    source_start=hunk.source_start,
                    source_length=hunk.source_length,
                    target_start=hunk.target_start,
                    target_length=hunk.target_length,
                    section=hunk.section_header.strip(),
                    line=hunk_lines[hunk_cursor] if hunk_cursor < len(hunk_lines) else 0,
                    body=tuple(str(line).rstrip("\n") for line in hunk),
                )
            )
            hunk_cursor += 1
        source = _strip_prefix(patched.source_file) if patched.source_file != "/dev/null" else None
        files.append(
            FileDiff(
                path=path,
                source_path=source,
                is_binary=bool(patched.is_binary_file),
                is_added=patched.is_added_file,
                is_removed=patched.is_removed_file,
                line=header_lines[file_index] if file_index < len(header_lines) else 1,
                hunks=tuple(hunks),
            )
        )
    return tuple(files)


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
        elif _glob_match(path, pattern.lstrip("/")):
            return True
    return False


def _glob_match(path: str, pattern: str) -> bool:
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, path) is not None or re.fullmatch(regex + "/.*", path) is not None


def hunk_fingerprint(patch: PatchFile) -> tuple:
    """What a patch changes, ignoring line numbers, index lines and mail metadata other than
    subject and description: two patches with the same fingerprint need no rewrite."""
    try:
        files = tuple(
            (f.source_path, f.path, f.is_binary, f.is_added, f.is_removed, tuple((h.section, h.body) for h in f.hunks))
            for f in patch.files
        )
    except MalformedPatch:
        return ("malformed", patch.digest)  # equal to no regenerated patch: it is rewritten
    binary_payload = tuple(line for line in patch.text.splitlines() if line.startswith(("literal ", "delta ")))
    return (patch.message.subject, patch.message.description, files, binary_payload)
