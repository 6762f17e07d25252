"""What the manifest formats share: the pin as a manifest states it, literal values and their
place in the text, checksums and the archives they digest, and the GitHub URL forms."""

from __future__ import annotations

import re

from ...records import dataclass

FORMATS = ("openwrt", "conda-forge", "gclient")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,99}$")
HEX40_RE = re.compile(r"^[0-9a-f]{40}$")
_ABBREV_RE = re.compile(r"^[0-9a-f]{7,39}$")


class ManifestError(Exception):
    """A manifest patchctl cannot read or move as matrix.yaml says (one line, FILE:LINE first)."""


@dataclass(frozen=True)
class Manifest:
    """One `manifests:` entry of an upstream."""

    path: str  # relative to matrix.yaml's directory
    format: str
    var: str | None = None  # gclient: the `vars` entry holding the revision
    where: str = ""  # FILE:LINE: KEYPATH in matrix.yaml, for errors


@dataclass(frozen=True)
class PinState:
    """Where an upstream stands: its commit, and the release the downstream names it by."""

    commit: str
    version: str | None = None
    tag: str | None = None  # the upstream's tag for VERSION
    date: str = ""  # the commit's date, YYYY-MM-DD (UTC), for OpenWrt's PKG_SOURCE_DATE


@dataclass(frozen=True)
class Literal:
    """A value written literally in a manifest: where it is, so that it can be replaced alone."""

    name: str
    value: str
    line: int
    start: int  # character offsets of the value in the text
    end: int


@dataclass(frozen=True)
class Archive:
    """A source archive whose digest a manifest records, as patchctl can rebuild it from the
    upstream's git repository: `github` (GitHub's /archive/ and codeload tarballs: `git
    archive --prefix=PREFIX/` through `gzip -n`), `openwrt-git` (OpenWrt's tarball of a git
    checkout: its `dl_tar_pack` over the `git archive` tree)."""

    kind: str
    prefix: str
    compression: str  # gz, xz, zst, bz2
    url: str = ""


@dataclass(frozen=True)
class Checksum:
    literal: Literal
    archive: Archive | None  # None: not an archive patchctl can rebuild (`why` says so)
    refresh: str  # the downstream's own way to refresh it, to paste
    why: str = ""


@dataclass(frozen=True)
class Source:
    """Where a manifest says the sources come from, for `init`: a git URL and the revision."""

    url: str  # the upstream's git repository ('' when none can be told)
    revision: str  # a tag or a commit ('' when none)
    tag_pattern: str | None  # 'v{version}' when the revision follows PKG_VERSION
    version: str
    where: str  # FILE:LINE of the line that says so
    kind: str  # git | github-archive | github-release | unknown
    problem: str = ""


def tag_for(pattern: str, version: str) -> str:
    return pattern.replace("{version}", version)


def state_of(commit: str, version: str | None, tag_pattern: str) -> PinState:
    """An upstream's pin as matrix.yaml states it (the date is the loop's to read from git)."""
    return PinState(commit, version, tag_for(tag_pattern, version) if version is not None else None)


def version_of_tag(pattern: str, tag: str) -> str | None:
    """The version TAG names under PATTERN ('v{version}'), or None when it does not fit."""
    head, _, tail = pattern.partition("{version}")
    tag = tag.removeprefix("refs/tags/")
    if len(tag) <= len(head) + len(tail) or not tag.startswith(head) or not tag.endswith(tail):
        return None
    version = tag[len(head) : len(tag) - len(tail)]
    return version if VERSION_RE.match(version) else None


def is_abbreviation(value: str, commit: str) -> bool:
    """Whether VALUE is COMMIT abbreviated (at least 7 hex digits, as git abbreviates)."""
    return bool(_ABBREV_RE.match(value)) and commit.startswith(value)


def replace_literals(text: str, edits: dict[Literal, str]) -> str:
    """TEXT with each literal's value replaced, every other byte as it was."""
    out, last = [], 0
    for literal in sorted(edits, key=lambda item: item.start):
        out += [text[last : literal.start], edits[literal]]
        last = literal.end
    return "".join(out) + text[last:]


def line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def github_repo(url: str) -> tuple[str, str] | None:
    """(owner, repository) of a github.com or codeload.github.com URL, else None."""
    match = re.match(r"^(?:https?|git)://(?:www\.)?(?:codeload\.)?github\.com/([^/\s]+)/([^/\s?#]+)", url)
    if match is None:
        return None
    return match.group(1), match.group(2).removesuffix(".git")


def github_archive_ref(url: str) -> str | None:
    """The ref of a GitHub source tarball URL (`codeload.github.com/O/R/tar.gz/REF`,
    `github.com/O/R/archive/[refs/tags/]REF[.tar.gz]`), or None for anything else (a release
    asset is uploaded by hand: no git command remakes it)."""
    ref_re = r"(?:refs/tags/([^?#/\s]+)|(?!refs/)([^?#/\s]+))"
    match = re.match(r"^https?://codeload\.github\.com/[^/]+/[^/]+/tar\.gz/" + ref_re, url) or re.match(
        r"^https?://(?:www\.)?github\.com/[^/]+/[^/]+/archive/" + ref_re, url
    )
    if match is None:
        return None
    ref = (match.group(1) or match.group(2)).removesuffix(".tar.gz")
    return ref or None


def github_prefix(repository: str, ref: str) -> str:
    """The top directory of GitHub's tarball of REF: the repository's name, then the ref
    without the `v` of a `v1.2` tag."""
    shown = ref[1:] if re.match(r"^v\d", ref) else ref
    return f"{repository}-{shown}"
