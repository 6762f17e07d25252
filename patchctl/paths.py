"""Where patchctl keeps its cache (its files are read and written through `patchctl.confined`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_ENV = "PATCHCTL_CACHE"


def cache_location() -> Path:
    """$PATCHCTL_CACHE, else the user cache directory (~/.cache/patchctl on Linux), made or not."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if sys.platform.startswith("linux"):
        # platformdirs' rule there (the XDG base directories), without importing it: it imports
        # tempfile and shutil, a tenth of a command's start-up (every command reads matrix.yaml
        # through the cache, `patchctl.project.parsed_cache`).
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        return Path(xdg.strip() and xdg or os.path.expanduser("~/.cache")) / "patchctl"
    import platformdirs

    return Path(platformdirs.user_cache_dir("patchctl"))


def cache_dir(path: Path | None = None) -> Path:
    """PATH, else the cache directory (`cache_location`), made if it is not there: the directory
    every file of the cache is reached from (`confined.Root`)."""
    path = Path(path) if path is not None else cache_location()
    path.mkdir(parents=True, exist_ok=True)
    return path
