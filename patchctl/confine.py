"""Every path patchctl writes in a repository stays inside it, symlinks or not.

The repository root is the directory of matrix.yaml. A symlink inside it (`patches/SERIES`,
`.patchctl`, `.patchctl/trees`, `.github/workflows`, a pin file, ...) that points outside
would make an ordinary write land elsewhere on the machine. Writers pass each output path
through `inside_repository` before their first write: symlinks are followed component by
component, and the first one that leads out is named in the refusal (exit 2).

Paths the user names explicitly on the command line (`apply --into`, `canary --work-dir`,
`--report FILE`) are the user's choice and are not confined.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError


class OutsideRepository(ConfigError):
    """An output path leads outside the repository (through a symlink)."""


def inside_repository(root: Path, path: Path) -> Path:
    """PATH (absolute under ROOT, or relative to it) with every symlink resolved; raises
    OutsideRepository, naming the symlink and where it points, when that leaves ROOT."""
    root = Path(root).resolve()
    path = Path(path)
    try:
        relative = (path if path.is_absolute() else root / path).relative_to(root)
    except ValueError:
        raise OutsideRepository(f"refusing to write {path}: it is outside the repository {root}") from None
    current = root
    for part in relative.parts:
        step = current / part
        if not step.is_symlink():
            current = step
            continue
        try:
            target = step.resolve(strict=False)
        except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
            raise OutsideRepository(
                f"refusing to write {root / relative}: {_shown(root, step)} is a symlink loop"
            ) from None
        if target != root and root not in target.parents:
            written = os.readlink(step)
            where = written if written == str(target) else f"{written} ({target})"
            raise OutsideRepository(
                f"refusing to write {_shown(root, root / relative)}: {_shown(root, step)} is a symlink to {where}, "
                f"outside the repository {root}"
            )
        current = target
    return current


def all_inside_repository(root: Path, paths: list[Path]) -> None:
    """`inside_repository` for each of PATHS, before any of them is written."""
    for path in paths:
        inside_repository(root, path)


def _shown(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
