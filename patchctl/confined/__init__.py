"""One door for every file patchctl reads or writes inside a repository (or a tree it made).

A checkout is untrusted input: anyone who can open a pull request can commit a link, a FIFO or
a `.GIT` directory anywhere in it. The contract, for every path under a `Root`:

* a path is relative to the root (or absolute below it); `..` and every component git
  refuses as `.git` (any case, trailing dots or spaces, `git~1`, NTFS streams, HFS+ ignorables:
  `names`) are refused before anything is opened;
* the root and each directory below it are opened from their parent's descriptor with
  O_NOFOLLOW|O_DIRECTORY: a symlink anywhere on the way, the last component included, is
  refused and named with where it points (inside or not: patchctl goes through no link);
  so is a file where a directory is needed, and a FIFO, device or socket where a file is;
* reads are bounded (the caller's limit, `TooLarge` past it) and never block on a FIFO;
* writes are atomic (a temporary file beside the target, synced, renamed over it through the
  same directory descriptor); deletes and directory removals go through the parent's
  descriptor and never follow a link;
* every refusal is `Refused`, a ConfigError: one line, exit 2.

The journal (`patchctl.state.journal`) writes, links, renames and deletes through `Root` itself, after
`Root.check_replaceable` on every target: a writer that commits through it needs no check of
its own. Writers that hand a path to someone else (git, a report) call `Root.check`
(`confined_path`) first. Paths the user names on the command line (`apply --into`, `--report FILE`) are the
user's choice and are not confined.

Symlinks inside trees that patchctl publishes (applied trees, pin-sync and canary worktrees,
extracted sdists) are judged by where they resolve through each other (`links`); archives are
extracted through `Root` (`tar`).

This layer is the only way to the file system: no other module of patchctl opens, creates,
renames, deletes or walks a path itself (tests/patchctl/test_confined_only.py reads their
source). Beside `Root`: `walk` (iterative walks and removals by descriptor, to git's depth
bound), `scratch` (private temporary directories), `named` (files a user or CI names on the
command line), `move` (one rename between two roots' descriptors: a tree checked out in the
state directory moved into the work tree), `Root.open_log` (a log: created, never followed or
waited on), `Root.directory` (a directory held by descriptor, a child's working directory).
"""

from __future__ import annotations

from pathlib import Path

# `scratch` (tempfile, shutil) is imported by `from patchctl.confined import scratch` where a
# command makes a temporary directory, not here: every command imports this package.
from .names import component_reason, invalid_path_reason, is_dotgit
from .regular import file_kind
from .root import OpenDirectory, Refused, Root, TooLarge, move

__all__ = [
    "OpenDirectory",
    "Refused",
    "Root",
    "TooLarge",
    "all_confined",
    "component_reason",
    "confined_path",
    "file_kind",
    "invalid_path_reason",
    "is_dotgit",
    "move",
    "scratch",
]


def confined_path(root: Path, path: Path, verb: str = "write") -> Path:
    """PATH (below ROOT) as an absolute path, once `Root.check` found nothing on its way that
    patchctl refuses: for writers that hand the path on."""
    return Root(root).check(path, verb)


def all_confined(root: Path, paths: list[Path], verb: str = "write") -> None:
    """`confined_path` for each of PATHS, before any of them is written."""
    checker = Root(root)
    for path in paths:
        checker.check(path, verb)
