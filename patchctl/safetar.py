"""Extracting untrusted tar archives without letting them write outside the destination.

The rules are those of tarfile's `data` filter (PEP 706), implemented here so they hold on
every Python patchctl supports (the filter only exists from 3.10.12 / 3.11.4 on): no
absolute names, no `..`, nothing written through a symlink or to a place a symlink makes
outside the destination, links only when their target stays inside, no devices, FIFOs or
hard links, and no special mode bits (set-uid, set-gid, sticky) or group/other write.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path


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
    return clean


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def extract(tar: tarfile.TarFile, entries: list[Entry], dest: Path) -> None:
    """Extract ENTRIES of TAR into DEST (regular files and symlinks only), refusing anything
    unsafe with UnsafeMember before it is written."""
    root = os.path.realpath(dest)
    for entry in entries:
        member, name = entry.member, check_name(entry.name)
        if not (member.isreg() or member.issym()):
            raise UnsafeMember(f"{name}: not a regular file or symlink")
        target = Path(root, name)
        parent = target.parent
        parent.mkdir(parents=True, exist_ok=True)
        real_parent = os.path.realpath(parent)
        if not _inside(root, real_parent):
            raise UnsafeMember(f"{name}: would be written through a symlink outside the destination")
        if os.path.lexists(target):
            if target.is_dir() and not target.is_symlink():
                raise UnsafeMember(f"{name}: a directory of the archive has this name")
            target.unlink()  # a later member of the same name replaces the earlier one, as tar does
        if member.issym():
            link = member.linkname
            if not link or "\0" in link or os.path.isabs(link):
                raise UnsafeMember(f"{name}: symlink to an absolute path {link!r}")
            if not _inside(root, os.path.realpath(os.path.join(real_parent, link))):
                raise UnsafeMember(f"{name}: symlink pointing outside the destination ({link!r})")
            os.symlink(link, target)
            continue
        source = tar.extractfile(member)
        if source is None:
            raise UnsafeMember(f"{name}: no data")
        # O_EXCL with O_NOFOLLOW: never write through a link planted under this name.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with source, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source, out)
        os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
