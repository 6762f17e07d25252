"""Walking and removing a directory tree by descriptor, iteratively, to a bounded depth.

A recursive walk dies with RecursionError on an upstream 1,100 directories deep, and one that
keeps a descriptor per level runs out of descriptors first. This one keeps one: it goes down
by opening a child from its parent's descriptor (O_NOFOLLOW|O_DIRECTORY: a link is never
entered) and back up through `..` of the child, checking that `..` is the directory it came
from (device and inode): a directory moved elsewhere while it is walked stops the walk with
`Refused` rather than letting `..` lead somewhere else. Names are listed once per directory,
sorted, so the order is the same on every machine.

`MAX_DEPTH` is git's own bound on tree depth (`core.maxTreeDepth`, 2048): a tree git checks
out is walked whole; a deeper one is refused in one line (exit 2). Removal has no bound (what
patchctl made it must be able to delete) and never follows a link: a link is unlinked, a
directory is emptied and removed through its parent's descriptor.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator

from .names import is_dotgit

MAX_DEPTH = 2048  # git's core.maxTreeDepth default (512 only where git is built with MSVC)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


class Moved(OSError):
    """A directory was moved while it was walked: `..` no longer leads to where the walk came from."""


class TooDeep(OSError):
    """The tree is deeper than MAX_DEPTH directories."""


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _up(fd: int, expected: tuple[int, int]) -> int:
    """A descriptor of the parent of directory FD (which is closed), checked to be EXPECTED."""
    try:
        parent = os.open("..", DIR_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    if _identity(parent) != expected:
        os.close(parent)
        raise Moved("a directory was moved while patchctl walked it")
    return parent


def entries(
    fd: int, *, skip_dotgit: bool = True, max_depth: int | None = None
) -> Iterator[tuple[int, str, tuple[str, ...], os.stat_result]]:
    """(directory descriptor, name, path from the top as parts, lstat) of everything below the
    directory FD that is not a directory, in sorted order, depth first. FD is the walk's own:
    it is closed when the walk ends. The descriptor yielded is open only while its entry is
    being handled. SKIP_DOTGIT: `.git` in any spelling is not entered (nor yielded). A child
    that cannot be opened as a directory (swapped for a link or a file since its lstat) raises
    OSError with the path in `filename`; deeper than MAX_DEPTH (default: the module's) raises
    TooDeep."""
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    # One frame per level: (names of the directory, index of the next one, its identity).
    frames: list[tuple[list[str], int, tuple[int, int]]] = [(sorted(os.listdir(fd)), 0, _identity(fd))]
    path: list[str] = []
    try:
        while frames:
            names, index, identity = frames[-1]
            if index == len(names):
                frames.pop()
                if frames:
                    fd = _up(fd, frames[-1][2])
                    path.pop()
                continue
            frames[-1] = (names, index + 1, identity)
            name = names[index]
            if skip_dotgit and is_dotgit(name):
                continue
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone since the listing
            if not stat.S_ISDIR(info.st_mode):
                yield fd, name, (*path, name), info
                continue
            if len(path) + 1 > max_depth:
                raise TooDeep(f"deeper than {max_depth:,} directories")
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                exc.filename = "/".join((*path, name))
                raise
            os.close(fd)
            fd = child
            path.append(name)
            frames.append((sorted(os.listdir(fd)), 0, _identity(fd)))
    finally:
        os.close(fd)


def remove_below(fd: int, on_error: Callable[[OSError], None]) -> None:
    """Remove everything inside the directory FD (closed when done), no link followed: links,
    files and special files are unlinked, directories emptied and removed. An entry that cannot
    be removed is left (ON_ERROR is told) and the rest goes on."""
    frames: list[tuple[list[str], tuple[int, int]]] = [(sorted(os.listdir(fd), reverse=True), _identity(fd))]
    path: list[str] = []
    try:
        while frames:
            names, _ = frames[-1]
            if not names:
                frames.pop()
                if frames:
                    fd = _up(fd, frames[-1][1])
                    _remove(fd, path.pop(), directory=True, on_error=on_error)
                continue
            name = names.pop()
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                _remove(fd, name, directory=False, on_error=on_error)
                continue
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:  # swapped for a link or a file since the lstat: unlinked as what it is now
                _remove(fd, name, directory=False, on_error=on_error)
                continue
            os.close(fd)
            fd = child
            path.append(name)
            frames.append((sorted(os.listdir(fd), reverse=True), _identity(fd)))
    finally:
        os.close(fd)


def _remove(fd: int, name: str, *, directory: bool, on_error: Callable[[OSError], None]) -> None:
    try:
        if directory:
            os.rmdir(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        on_error(exc)
