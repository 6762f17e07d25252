"""What `patchctl init` detects, and the reading every layout kind shares.

A `Layout` is one upstream and one series on it, as a layout kind found them (`makefile_sync`,
`quilt`, `git_dir`); `plan` turns it into the files to write. The repository is untrusted input:
every file is read through `patchctl.confined.Root` (no link followed, bounded) and every
directory a layout names must be inside the repository (no `..`, no `.git`).
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import git
from ..confined import Refused, Root, is_dotgit
from ..errors import EnvironmentFailure, GitError, UsageError
from ..project.config import VendorCopy
from .patchorder import detect as detect_order

LAYOUTS = ("makefile-sync", "quilt", "git-dir", "electron")
CONFIG_NAME = "matrix.yaml"
PRE_COMMIT_NAME = ".pre-commit-config.yaml"
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
    list_kind: str = "none"  # where the order lives (`list:`), when naming does not imply it
    list_path: str | None = None
    form: str = "own"
    names: list[str] | None = None  # the patch names in order, when a list was read


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


def expand_pin(value: str, url: str) -> tuple[str, str | None]:
    """VALUE as a full commit id when it is one or the upstream (a local repository) can
    expand it; else VALUE unchanged and a note saying it must be expanded."""
    if FULL_RE.match(value):
        return value, None
    local = local_repository(url)
    if local is not None:
        result = git.run(["rev-parse", "--verify", "--quiet", f"{value}^{{commit}}"], local, check=False)
        if result.ok and FULL_RE.match(result.stdout.strip()):
            return result.stdout.strip(), None
    return value, (
        f"pin {value!r} is not a full 40-hex commit id and the upstream is not a local repository to expand it: "
        "replace it in matrix.yaml (git rev-parse it in a clone) or rerun with --pin"
    )


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


def default_branch(url: str) -> str | None:
    """The branch the HEAD of the local repository URL names points at, asked of its upload-pack
    from the mirror (`local_repository`); None when that is not known."""
    mirror = local_repository(url)
    if mirror is None:
        return None
    listed = git.run(["ls-remote", "--symref", "origin", "HEAD"], mirror, check=False, protocols=git.LOCAL_PROTOCOLS)
    found = re.match(r"ref: refs/heads/(\S+)\tHEAD$", listed.stdout, re.M) if listed.ok else None
    return found.group(1) if found else None


def checked_pin(pin: str, url: str) -> str:
    resolved, note = expand_pin(pin, url)
    if note is not None:
        raise UsageError(f"--pin {pin!r}: {note.split(': ', 1)[0]} must be a full 40-hex commit id")
    return resolved


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


def line_prefix(prefix: str) -> str:
    """PREFIX (a line up to the pin) as a regex, any run of blanks as `\\s*`."""
    return re.sub(r"(?:\\[ \t])+", r"\\s*", re.escape(prefix))


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
