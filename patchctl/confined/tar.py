"""Extracting untrusted tar archives without letting them write outside the destination.

The rules are those of tarfile's `data` filter (PEP 706), made stricter and implemented here so
they hold on every Python patchctl supports: no absolute names, no `..`, no `.git`, no devices,
FIFOs or hard links, no special mode bits. Every symlink of the archive is judged before the
first byte is written, by where it resolves through the archive's other links (`links`): one
that leaves the destination, leads into `.git` or loops refuses the archive. Files, links and
directories are then made through `Root`, which never creates or writes anything through a link.
"""

from __future__ import annotations

import posixpath
import tarfile
from pathlib import Path

from ..records import dataclass
from .links import bad_links
from .names import component_reason
from .root import Refused, Root


class UnsafeMember(ValueError):
    """An archive member that would write outside the destination or is not a plain file or link."""


@dataclass(frozen=True)
class Entry:
    """One member to extract, under the name it gets inside the destination."""

    member: tarfile.TarInfo
    name: str


def check_name(name: str) -> str:
    """NAME normalised as a relative POSIX path, or UnsafeMember."""
    if not name or "\0" in name:
        raise UnsafeMember(f"bad member name {name!r}")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeMember(f"absolute member name {name!r}")
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        raise UnsafeMember(f"member name escapes the destination: {name!r}")
    clean = posixpath.normpath("/".join(p for p in parts if p not in ("", ".")))
    if clean in ("", "."):
        raise UnsafeMember(f"bad member name {name!r}")
    for part in clean.split("/"):
        if (reason := component_reason(part)) is not None:
            raise UnsafeMember(f"bad member name {name!r}: {reason}")
    return clean


def extract(tar: tarfile.TarFile, entries: list[Entry], dest: Path) -> None:
    """Extract ENTRIES of TAR into DEST (regular files and symlinks only), refusing anything
    unsafe with UnsafeMember; links are judged before anything is written."""
    names = [check_name(entry.name) for entry in entries]
    links: dict[str, str] = {}
    for entry, name in zip(entries, names, strict=True):
        member = entry.member
        if not (member.isreg() or member.issym()):
            raise UnsafeMember(f"{name}: not a regular file or symlink")
        if member.issym():
            if not member.linkname or "\0" in member.linkname:
                raise UnsafeMember(f"{name}: a symlink without a target")
            links[name] = member.linkname
        else:
            links.pop(name, None)  # a later member of the same name replaces the earlier one, as tar does
    for bad in bad_links(links):
        raise UnsafeMember(bad.describe().replace("the tree", "the destination"))
    root = Root(dest, "the destination")
    for entry, name in zip(entries, names, strict=True):
        member = entry.member
        try:
            if member.issym():
                root.symlink(name, member.linkname)
                continue
            source = tar.extractfile(member)
            if source is None:
                raise UnsafeMember(f"{name}: no data")
            with source:
                root.write_bytes(name, source.read(), 0o755 if member.mode & 0o111 else 0o644)
        except Refused as exc:
            raise UnsafeMember(f"{name}: {exc}") from None
