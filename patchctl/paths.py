"""Where patchctl keeps its cache, and atomic file writes."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

import platformdirs

CACHE_ENV = "PATCHCTL_CACHE"


def cache_location() -> Path:
    """$PATCHCTL_CACHE, else the user cache directory (~/.cache/patchctl on Linux), made or not."""
    return Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("patchctl"))


def cache_dir() -> Path:
    """The cache directory (`cache_location`), made if it is not there."""
    path = cache_location()
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write DATA to PATH so that readers see the old content or the new, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file 0600: keep an existing file's mode, give a new one what open() would.
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # reading it means setting it: put it straight back
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_tree(path: Path) -> None:
    """Delete the directory PATH and everything below it, no link followed; anything else at
    PATH (a link, a file, a FIFO, a device) is unlinked itself. (shutil.rmtree opens PATH
    before it looks at what it is, and an open of a FIFO blocks until a writer comes.)"""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)
