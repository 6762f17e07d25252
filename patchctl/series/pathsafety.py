"""Which paths a patch may write: nothing outside its tree, nothing git refuses, no name a file
system refuses, no symlink that leads out. Lint checks it of every patch (PC012) before anything
is applied; the applier checks it again against the tree it applies to."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ..confined.names import invalid_path_reason
from .diffblocks import symlink_target_escapes, unsafe_symlink_reason

if TYPE_CHECKING:
    from .diffblocks import ParsedDiff
    from .patchset import PatchFile

# File systems refuse longer names (ENAMETOOLONG); the limit on the whole path leaves room for
# the directory a tree is checked out in.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024


def unsafe_path_reason(tree: Path | None, patch: PatchFile) -> str | None:
    """Why PATCH could write outside TREE, or None when every path it names is safe."""
    for path in patch.touched_paths():
        parts = PurePosixPath(path).parts
        if len(path.encode(errors="surrogateescape")) > MAX_PATH_BYTES or any(
            len(part.encode(errors="surrogateescape")) > MAX_NAME_BYTES for part in parts
        ):
            return (
                f"path too long for a file system ({len(path)} characters, at most {MAX_NAME_BYTES} bytes a "
                f"component and {MAX_PATH_BYTES} in all): {path[:60]!r}..."
            )
        if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
            return f"absolute path {path!r}"
        if ".." in parts or "\\" in path:
            return f"path escapes the tree: {path!r}"
        if (invalid := invalid_path_reason(path)) is not None:  # git's verify_path: .git in any case, git~1, ...
            return invalid
        if tree is not None:
            current = Path(tree)
            for part in parts[:-1]:
                current = current / part
                if current.is_symlink():
                    return f"path goes through a symlink ({current.relative_to(tree).as_posix()!r}): {path!r}"
    if (reason := unsafe_symlink_reason(patch.parsed)) is not None:
        return reason
    if tree is not None:
        return _moved_symlink_reason(Path(tree), patch.parsed)
    return None


def _moved_symlink_reason(tree: Path, parsed: ParsedDiff) -> str | None:
    """A pure rename or copy of a symlink shows no target in the patch; in a checked-out tree
    the target is on disk, and a relative one may point elsewhere from the new place."""
    for block in parsed.blocks:
        source = block.renamed_from or block.copied_from
        if source is None or block.new_mode is not None or not (tree / source).is_symlink():
            continue
        target = os.readlink(tree / source)
        if symlink_target_escapes(block.new_path, target):
            return f"moves a symlink so that it points outside the tree: {block.new_path!r} -> {target!r}"
    return None
