"""Files a user or a CI runner names: `--report FILE`, `--json-file FILE`, `status --html FILE`,
`--issues-file FILE`, `$GITHUB_STEP_SUMMARY`.

Where the path lies in the repository (as written, before any link in it is followed), it is
written through `Root` from the repository: a committed link on the way, or at the name, is
refused in one line (exit 2) and nothing is written outside. Elsewhere the place is the user's
choice: a regular file (or a link, replaced, never followed) is replaced atomically in its
directory; a device, a FIFO or a `/dev/fd/N` (`--json-file /dev/null`, `--report >(cat)`) is
written into as it is, since replacing it would put a regular file where /dev/null was.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .root import Root

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def write_text(path: Path, text: str, repository: Path | None = None) -> None:
    """PATH holds TEXT (see the module's docstring); REPOSITORY: the project's root, when known."""
    path = Path(os.path.normpath(Path(path).absolute()))
    data = text.encode("utf-8")
    if repository is not None and _lexically_below(path, Path(repository)):
        Root(repository).write_bytes(path, data)
        return
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not (
        stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode)
    ):
        with open(path, "w", encoding="utf-8") as handle:  # a device or a FIFO the user named: into it
            handle.write(text)
        return
    where = Root(path.parent, "the directory")
    if info is not None and stat.S_ISLNK(info.st_mode):
        where.unlink(path.name)  # replaced, never followed
    where.write_bytes(path.name, data)


def write_json(path: Path, payload: dict, repository: Path | None = None) -> None:
    write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n", repository)


def write_json_list(path: Path, items: list, repository: Path | None = None) -> None:
    write_text(path, json.dumps(items, indent=2, sort_keys=True) + "\n", repository)


def append_step_summary(markdown: str, env: dict[str, str] | None = None) -> Path | None:
    """Append to the file GitHub Actions names in $GITHUB_STEP_SUMMARY (steps share it): the
    runner's own file, outside the repository, opened without following a last link."""
    target = (env if env is not None else os.environ).get(STEP_SUMMARY_ENV)
    if not target:
        return None
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(markdown)
    return Path(target)


def _lexically_below(path: Path, root: Path) -> bool:
    root = Path(os.path.normpath(root.absolute()))
    resolved = Path(os.path.realpath(root))
    return any(path == base or base in path.parents for base in (root, resolved))
