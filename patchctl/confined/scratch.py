"""Private scratch directories: made by the system's `mkdtemp` (mode 0700, a name no one else
can take), outside every repository, and removed through `Root` (by descriptor, no link
followed), so that what a gate or a build left in one, links included, is deleted and nothing
it points to."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .root import Refused, Root


def make(prefix: str) -> Path:
    """A new private directory in the system's temporary directory."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def remove(path: Path) -> None:
    """Delete PATH, made by `make`, and everything in it; what cannot be deleted is left."""
    with contextlib.suppress(Refused, OSError):
        Root(path.parent, "the temporary directory").remove_tree(path.name)


@contextlib.contextmanager
def directory(prefix: str) -> Iterator[Path]:
    """`make`, removed when the block ends however it ends."""
    path = make(prefix)
    try:
        yield path
    finally:
        remove(path)
