"""What `patchctl init` detects, and the reading every layout kind shares.

A `Layout` is one upstream and one series on it, as a layout kind found them (`makefile_sync`,
`quilt`, `git_dir`); `plan` turns it into the files to write. The repository is untrusted input:
every file is read through `patchctl.confined.Root` (no link followed, bounded) and every
directory a layout names must be inside the repository (no `..`, no `.git`).
"""

from __future__ import annotations

import re
import stat
from dataclasses import field
from pathlib import Path

from ..confined import Refused, Root, is_dotgit
from ..errors import EnvironmentFailure, GitError, UsageError
from ..project.config import VendorCopy
from ..project.manifests import HEX40_RE, Manifest, Source, is_abbreviation
from ..project.manifests.formats import checksums
from ..records import dataclass
from . import CONFIG_NAME, LAYOUTS, PRE_COMMIT_NAME  # noqa: F401 - defined beside `init`'s options, named here too
from .patchorder import apply_order
from .patchorder import detect as detect_order
from .resolve import commit_of

TEMPLATES_DIR = "templates"
HEX_RE = re.compile(r"^[0-9a-f]{7,40}$")
FULL_RE = re.compile(r"^[0-9a-f]{40}$")
_PLAIN_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@+-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
MAX_LAYOUT_FILE_BYTES = 16 * 1024 * 1024  # a Makefile, a filter or series file, a patch: far below this


@dataclass(frozen=True)
class PinFileEntry:
    path: str
    pattern: str


@dataclass
class Layout:
    """What was detected: one upstream and one series on it."""

    upstream: str
    url: str
    pin: str
    series: str
    dir: str
    naming: str
    branch: str = "master"
    pin_files: list[PinFileEntry] = field(default_factory=list)
    vendor: list[VendorCopy] = field(default_factory=list)
    allow_empty: bool = False
    undescribed: int = 0  # patches without a subject or a description (lint PC007/PC008)
    upstream_statuses: int = 0  # patches with a well-formed `Upstream-Status:` header (lint PC014)
    patch_count: int = 0
    found: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    extra_files: dict[str, bytes] = field(default_factory=dict)
    list_kind: str | None = None  # where the order lives (`list:`); None: where `naming:` implies
    list_path: str | None = None
    form: str = "own"
    names: list[str] | None = None  # the patch names in order, when a list was read
    # the release the pin is, as the downstream names it; the upstream's tag for a version; the
    # downstream's manifests that state it (an OpenWrt Makefile, a conda-forge recipe, a DEPS file)
    version: str | None = None
    tag_pattern: str = "{version}"
    manifests: list[Manifest] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    files: dict[str, bytes]  # repository-relative path -> content
    found: tuple[str, ...]
    unmapped: tuple[str, ...]
    pre_commit: str  # the .pre-commit-config.yaml snippet
    pre_commit_written: bool  # False: it exists, the snippet is to be printed
    chosen: tuple[str, ...] = ()  # what init chose for the user (printed as `chose:` lines)


# ------------------------------------------------------------------ shared


def naming_of(root: Path, directory: str) -> tuple[str, list[str], dict[str, bytes]]:
    """The `naming:` the directory's files follow and notes (`patchorder.detect`); no file is
    ever added beside them (the last item, kept for the callers, is always empty)."""
    order = detect_order(root, directory)
    return order.naming, order.notes, {}


def has_patches(root: Path, directory: str) -> bool:
    return any(n.endswith((".patch", ".diff")) for n in regular_files(root, directory))


def inside_path(root: Path, path: str, what: str) -> str:
    """PATH (named by WHAT) as a path inside the repository ROOT, or UsageError: a layout
    never makes patchctl read or write outside it (`../victim`) or in `.git`."""
    if not path or path.startswith("/"):
        raise UsageError(f"{what}: {path!r} is not a path inside the repository")
    try:
        return "/".join(Root(root).parts(path, "use")) or "."
    except Refused as exc:
        raise UsageError(f"{what}: {exc}; a layout lives inside the repository") from None


def read_text(root: Path, path: str) -> str | None:
    """The text of the repository file PATH (read through `Root`: no link, bounded), or None."""
    if file_kind(root, path) == "directory":  # (Root.read_bytes does not refuse one in one line)
        raise UsageError(f"{path} is a directory, not the file init reads there")
    data = Root(root).read_bytes(path, MAX_LAYOUT_FILE_BYTES)
    return None if data is None else data.decode("utf-8", errors="replace")


def file_kind(root: Path, path: str) -> str | None:
    try:
        return Root(root).kind(path)
    except Refused:
        return None


def regular_files(root: Path, directory: str) -> list[str]:
    """The names of the regular files in the repository directory DIRECTORY, sorted ([] when absent)."""
    confined = Root(root)
    names = [n for n in confined.listdir(directory) or [] if not is_dotgit(n)]
    return [n for n in names if (info := confined.lstat(f"{directory}/{n}")) and stat.S_ISREG(info.st_mode)]


def expand_pin(value: str, url: str, root: Path, where: str) -> str:
    """VALUE (read at WHERE) as the full commit id it names in the upstream at URL: a tag, a
    branch or an abbreviated id is asked of the upstream (`patchctl.adopt.resolve`); one it
    cannot answer stops init in one line, before a pin that does not load is written."""
    return commit_of(url, value, root, where)


def local_repository(url: str) -> Path | None:
    """Where to run git to read the local repository URL names (a path or a `file://` URL): its
    mirror in the cache, fetched over `file://` alone. Never the repository itself: a repository
    committed as plain files (`file://evil.git`) may declare itself a partial clone whose lazy
    fetch runs a shell command, or carry hooks. None when URL names no local directory or it
    cannot be fetched (then init reads it as it reads a remote URL: not at all)."""
    if not (url.startswith("file://") or url.startswith("/")):
        return None
    from ..upstream.store import Store  # here: only a local upstream needs the cache

    try:
        return Store().local_mirror(url)
    except (GitError, EnvironmentFailure):
        return None


def checked_pin(pin: str, url: str, root: Path) -> str:
    return expand_pin(pin, url, root, "--pin")


def name_from_url(url: str) -> str:
    tail = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return safe_name(tail.removesuffix(".git") or "upstream")


def safe_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return name or "upstream"


def q(text: str) -> str:
    """TEXT as a YAML scalar: plain where that reads back as the same string, else single-quoted."""
    if _PLAIN_RE.match(text) and text.lower() not in _YAML_WORDS and not re.fullmatch(r"[0-9.eE+-]+", text):
        return text
    return "'" + text.replace("'", "''") + "'"


def flow(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(q(i) for i in items) + "]"


def pin_pattern(prefix: str, stated: str, pin: str) -> str | None:
    """The pin_files pattern of a line that holds STATED after PREFIX, when STATED is PIN or PIN
    abbreviated (then the pattern takes as many hex digits, and pin-sync keeps the length)."""
    if stated != pin and not is_abbreviation(stated, pin):
        return None
    tail = "" if stated == pin else "(?![0-9a-f])"
    return "^" + line_prefix(prefix) + "(?P<pin>[0-9a-f]{" + str(len(stated)) + "})" + tail


def line_prefix(prefix: str) -> str:
    """PREFIX (a line up to the pin) as a regex, any run of blanks as `\\s*`."""
    return re.sub(r"(?:\\[ \t])+", r"\\s*", re.escape(prefix))


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def release_layout(
    root: Path,
    *,
    found_source: Source,
    what: str,
    url: str | None,
    pin: str | None,
    name: str,
    manifest: Manifest,
    manifest_text: str,
    patch_dir: str,
    version_where: str,
) -> Layout:
    """The layout of a downstream that names its upstream in a manifest (an OpenWrt Makefile, a
    conda-forge recipe): upstream, pin and release from FOUND_SOURCE, the manifest to move."""
    found: list[str] = []
    notes: list[str] = []
    upstream_url = url or found_source.url
    if not upstream_url:
        raise UsageError(
            f"{found_source.where}: {found_source.problem or 'no upstream'}; patchctl cannot tell the upstream's git "
            f"repository from {what}: give --upstream-url URL and --pin SHA"
        )
    found.append(f"upstream: {upstream_url} ({'--upstream-url' if url else found_source.where})")
    if pin is not None:
        commit = checked_pin(pin, upstream_url, root)
        found.append(f"pin: {commit} (--pin)")
    elif not found_source.revision:
        raise UsageError(f"{found_source.where}: no revision to pin: give --pin SHA")
    else:
        commit = expand_pin(found_source.revision, upstream_url, root, found_source.where)
        shown = "" if found_source.revision == commit else f" = {found_source.revision}"
        found.append(f"pin: {commit}{shown} ({found_source.where})")
    version = None
    if found_source.tag_pattern is not None and found_source.version and not HEX40_RE.match(found_source.revision):
        version = found_source.version
        found.append(f"version: {version} ({version_where}), the upstream's tag {found_source.tag_pattern!r}")
    elif not found_source.revision:  # (the pin given): the manifest names no release patchctl can follow
        notes.append(
            f"{found_source.where}: {found_source.problem or 'no revision'}: no `version:`; add the upstream's "
            "`version:` and `tag:` to matrix.yaml, which pin-sync needs to move this manifest"
        )
    elif not HEX40_RE.match(found_source.revision):
        notes.append(
            f"{found_source.where}: the revision {found_source.revision!r} does not follow the version: no `version:`; "
            "pin-sync moves the manifest's commit only"
        )
    found.append(f"manifest: {manifest.path} ({manifest.format}): pin-sync moves it with the pin")
    for checksum in checksums(manifest, manifest_text):
        if checksum.archive is None:
            notes.append(
                f"{manifest.path}:{checksum.literal.line}: {checksum.literal.name}: {checksum.why}: pin-sync lists "
                "it to refresh after each bump"
            )
    order = detect_order(root, patch_dir)
    safe = safe_name(name)
    layout = Layout(safe, upstream_url, commit, safe, patch_dir, order.naming)
    layout.version, layout.tag_pattern = version, found_source.tag_pattern or "{version}"
    layout.manifests = [manifest]
    layout.found = [*found, f"patches: {patch_dir}", f"naming: {order.naming}", *order.found]
    layout.unmapped = notes + order.notes
    apply_order(layout, order)
    layout.allow_empty = not order.names
    return layout
