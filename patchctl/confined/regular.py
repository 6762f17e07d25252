"""Reading a file that must be a regular file: decided by `lstat` before it is opened, opened
without blocking and without following a last symlink, read up to a bound.

A FIFO opened for reading blocks until a writer comes; `/dev/zero` never ends; a directory
raises IsADirectoryError. The series directory (`patchctl.series.seriesdir`) and patchctl's own
state under `.patchctl/` (journal, lock, sync state, apply markers) are read through here,
so none of those ends in a hang or a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_CHUNK = 1024 * 1024


class NotRegular(OSError):
    """PATH exists but is not a regular file (KIND says what it is)."""

    def __init__(self, path: Path, kind: str):
        super().__init__(f"{path}: a {kind}, not a regular file")
        self.path = path
        self.kind = kind


class TooLarge(OSError):
    def __init__(self, path: Path, limit: int):
        super().__init__(f"{path}: larger than {limit} bytes")
        self.path = path
        self.limit = limit


def file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISREG, "regular file"),
    ):
        if test(mode):
            return name
    return "special file"


def kind_of(path: Path) -> str | None:
    """What PATH is, by lstat ("regular file", "directory", "FIFO", "symlink", ...), or None when absent."""
    try:
        return file_kind(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def read_regular(path: Path, limit: int) -> bytes | None:
    """PATH's bytes, or None when it does not exist. Raises NotRegular when it is anything
    but a regular file (a symlink included), TooLarge past LIMIT bytes."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular(Path(path), file_kind(info.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped between the lstat and the open
            raise NotRegular(Path(path), file_kind(mode))
        chunks, size = [], 0
        while chunk := os.read(fd, _CHUNK):
            size += len(chunk)
            if size > limit:
                raise TooLarge(Path(path), limit)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
