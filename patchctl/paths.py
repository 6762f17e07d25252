"""Where patchctl keeps its cache (its files are read and written through `patchctl.confined`)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "PATCHCTL_CACHE"


def cache_location() -> Path:
    """$PATCHCTL_CACHE, else the user cache directory (~/.cache/patchctl on Linux), made or not."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    import platformdirs  # (it imports tempfile and shutil: only where the user cache is looked up)

    return Path(platformdirs.user_cache_dir("patchctl"))


def cache_dir(path: Path | None = None) -> Path:
    """PATH, else the cache directory (`cache_location`), made if it is not there: the directory
    every file of the cache is reached from (`confined.Root`)."""
    path = Path(path) if path is not None else cache_location()
    path.mkdir(parents=True, exist_ok=True)
    return path
