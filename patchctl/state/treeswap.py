"""Replacing an applied tree so that a kill at any point loses neither the old tree nor the new.

The new tree is checked out beside the target (`.NAME.patchctl-new`), complete with its
marker, before anything touches the old one. Then two renames swap them: the old tree
to `.NAME.patchctl-old`, the new one into place; only then is the old one deleted. The
new worktree is locked (`git worktree lock`) while it moves, so that no `git worktree
prune` (from this run or another project sharing the cache) drops its administrative
directory while git still knows it by its staging path; `git worktree repair` then
records the new path and the lock is lifted.

`recover_tree` (run by `apply` on its target and, for `.patchctl/trees/`, before every
command) finishes a swap a kill interrupted: with the target gone it rolls the complete
new tree forward (or puts the old one back), then deletes every leftover beside it,
including the pid-named staging trees of earlier versions.

Neither ever follows a link: what stands where a tree belongs is judged by lstat, a symlink
there is refused in one line (exit 3), and git is asked about a tree (marker, repair,
unlock, prune) only when its `.git` is a regular file naming a worktree of one of the
cache's mirrors, which only patchctl creates. Anything else is a plain directory.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from .. import git
from ..confined.regular import NotRegular, TooLarge, kind_of, read_regular
from ..errors import EnvironmentFailure
from ..output.escape import shell_word
from ..paths import cache_dir
from ..upstream.store import Mirror, Store
from . import worktree
from .worktree import Marker

NEW = "new"
OLD = "old"
LOCK_REASON = "patchctl apply: moving into place"
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.patchctl-(?:new|old|\d+)$")


def sibling(tree: Path, kind: str) -> Path:
    """Where the new (or old) tree stands while TREE is being replaced."""
    return tree.with_name(f".{tree.name}.patchctl-{kind}")


def replace_tree(store: Store, mirror: Mirror, tree: Path, head: str, marker: Marker) -> None:
    """Check HEAD out as a worktree of MIRROR at TREE, replacing whatever is there."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    recover_tree(tree)
    new, old = sibling(tree, NEW), sibling(tree, OLD)
    _release_missing(mirror.path, new)
    try:
        store.add_worktree(mirror, head, new)
        git.run(["worktree", "lock", "--reason", LOCK_REASON, str(new)], mirror.path)
        worktree.write_marker(new, marker)
        if os.path.lexists(tree):
            os.rename(tree, old)
            if _admin_dir(old) is not None:
                git.run(["worktree", "repair"], old, check=False)  # two worktrees must not claim one path
        os.rename(new, tree)
        _reattach(tree)
        _remove(old)
    except BaseException:
        # Ctrl-C, a signal or a failure on the way: what a later run's recovery would do, done now,
        # so that nothing is left beside the tree (the old tree back, or the complete new one).
        recover_tree(tree)
        raise


def recover_tree(tree: Path) -> str | None:
    """Finish or undo an interrupted `replace_tree` of TREE and delete the leftovers beside
    it. Returns "rolled-forward", "restored", "reattached", "cleaned" or None (nothing to do)."""
    new, old = sibling(tree, NEW), sibling(tree, OLD)
    refuse_link(tree)
    outcome = None
    if not os.path.lexists(tree):
        if _admin_dir(new) is not None and worktree.read_marker(new) is not None:
            os.rename(new, tree)  # the new tree was complete: the kill came between the two renames
            outcome = "rolled-forward"
        elif kind_of(old) == "directory":
            os.rename(old, tree)
            outcome = "restored"
    if outcome is not None or _moving(tree):
        # Moved by rename (or killed after the rename into place): git still knows it by another path.
        _reattach(tree)
        outcome = outcome or "reattached"
    for leftover in leftovers_of(tree):
        _remove(leftover)
        outcome = outcome or "cleaned"
    return outcome


def refuse_link(tree: Path) -> None:
    """One line (exit 3) when anything but a directory stands where the tree TREE belongs."""
    kind = kind_of(tree)
    if kind not in (None, "directory"):
        raise EnvironmentFailure(
            f"{tree} is a {kind}, not a tree patchctl made; patchctl never follows or replaces one: remove it "
            f"(`rm {shell_word(tree)}`) and run again"
        )


def leftovers_of(tree: Path) -> list[Path]:
    """Staging trees of TREE that a run left behind (any version of patchctl)."""
    if kind_of(tree.parent) != "directory":
        return []
    return sorted(
        p for p in tree.parent.iterdir() if (m := _LEFTOVER.match(p.name)) is not None and m["name"] == tree.name
    )


def interrupted_in(directory: Path) -> bool:
    """Whether a swap of some tree under DIRECTORY was interrupted (file reads only, no git)."""
    if kind_of(directory) != "directory":
        return False
    return any(_LEFTOVER.match(p.name) is not None or _moving(p) for p in directory.iterdir())


def recover_trees_in(directory: Path) -> list[Path]:
    """`recover_tree` for every tree under DIRECTORY with something left beside it."""
    if kind_of(directory) != "directory":
        return []
    names = sorted({m["name"] if (m := _LEFTOVER.match(p.name)) is not None else p.name for p in directory.iterdir()})
    recovered = []
    for name in names:
        if recover_tree(directory / name) is not None:
            recovered.append(directory / name)
    return recovered


def _admin_dir(tree: Path) -> Path | None:
    """The administrative directory (`MIRROR/worktrees/ID`) of TREE when TREE is a worktree
    of one of the cache's mirrors, by its `.git` file (a real directory, a regular file,
    naming a directory under the cache's mirrors); None for anything else."""
    if kind_of(tree) != "directory":
        return None
    try:
        text = (read_regular(tree / ".git", 4096) or b"").decode("utf-8")
    except (NotRegular, TooLarge, OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:") or "\0" in text:
        return None
    admin = Path(os.path.realpath(text[len("gitdir:") :].strip()))
    mirrors = Path(os.path.realpath(cache_dir() / "mirrors"))
    if admin.parent.name != "worktrees" or admin.parent.parent.parent != mirrors or kind_of(admin) != "directory":
        return None
    return admin


def _lock_file(tree: Path) -> Path | None:
    """The `locked` file of worktree TREE's administrative directory, when TREE is one of patchctl's."""
    admin = _admin_dir(tree)
    return None if admin is None else admin / "locked"


def _locked_by_us(lock_file: Path | None) -> bool:
    try:
        return lock_file is not None and (read_regular(lock_file, 4096) or b"").startswith(LOCK_REASON.encode())
    except OSError:
        return False


def _moving(tree: Path) -> bool:
    """Whether TREE is a worktree still locked by `replace_tree` (file reads only: no git call)."""
    return _locked_by_us(_lock_file(tree))


def _reattach(tree: Path) -> None:
    """Tell git the worktree's new path, then lift the lock taken for the move (by its file:
    `git worktree unlock PATH` matches by path, which a stale entry may claim too)."""
    if _admin_dir(tree) is None:
        return  # not a worktree patchctl made: git is not pointed at it
    git.run(["worktree", "repair"], tree, check=False)
    lock_file = _lock_file(tree)
    if _locked_by_us(lock_file):
        assert lock_file is not None
        lock_file.unlink(missing_ok=True)


def _release_missing(mirror: Path, path: Path) -> None:
    """Unlock the mirror's entries for a worktree at PATH that is gone (a killed run's staging
    tree, deleted since): git refuses to add a worktree where a locked missing one was."""
    if os.path.lexists(path):
        return
    for gitdir in sorted((mirror / "worktrees").glob("*/gitdir")):
        try:
            claimed = Path(gitdir.read_text().strip())
        except OSError:
            continue
        if claimed == path / ".git" and _locked_by_us(gitdir.parent / "locked"):
            (gitdir.parent / "locked").unlink(missing_ok=True)


def _remove(path: Path) -> None:
    """Delete a tree that is no longer wanted, and its administrative directory in its mirror."""
    kind = kind_of(path)
    if kind is None:
        return
    if kind != "directory":
        path.unlink()  # a link is removed itself, never what it points to
        return
    admin = _admin_dir(path)
    if admin is not None:
        _reattach(path)  # a locked worktree is never pruned
    shutil.rmtree(path, ignore_errors=True)
    if admin is not None:
        git.run(["worktree", "prune"], admin.parent.parent, check=False)
