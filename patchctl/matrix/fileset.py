"""Write several files so that either all of them change or none does."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_all(contents: dict[Path, str]) -> None:
    """Stage every file next to its target, then rename them into place; if anything fails
    part-way, put back what was there before (and remove files that did not exist)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            staged.append((path, Path(tmp)))
    except BaseException:
        for _, tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    previous = {path: path.read_bytes() if path.exists() else None for path, _ in staged}
    done: list[Path] = []
    try:
        for path, tmp in staged:
            os.replace(tmp, path)
            done.append(path)
    except BaseException:
        for path in done:
            _restore(path, previous[path])
        for _path, tmp in staged:
            tmp.unlink(missing_ok=True)
        raise


def _restore(path: Path, old: bytes | None) -> None:
    if old is None:
        path.unlink(missing_ok=True)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".restore", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(old)
    os.replace(tmp, path)
