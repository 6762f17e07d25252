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
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from . import git, worktree
from .store import Mirror, Store
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
    store.add_worktree(mirror, head, new)
    git.run(["worktree", "lock", "--reason", LOCK_REASON, str(new)], mirror.path)
    worktree.write_marker(new, marker)
    if os.path.lexists(tree):
        os.rename(tree, old)
    os.rename(new, tree)
    _reattach(tree)
    _remove(old)


def recover_tree(tree: Path) -> str | None:
    """Finish or undo an interrupted `replace_tree` of TREE and delete the leftovers beside
    it. Returns "rolled-forward", "restored", "reattached", "cleaned" or None (nothing to do)."""
    new, old = sibling(tree, NEW), sibling(tree, OLD)
    outcome = None
    if not os.path.lexists(tree):
        if new.is_dir() and worktree.read_marker(new) is not None:
            os.rename(new, tree)  # the new tree was complete: the kill came between the two renames
            outcome = "rolled-forward"
        elif old.is_dir():
            os.rename(old, tree)
            outcome = "restored"
    if _moving(tree):
        # A kill after the rename into place leaves the tree known to git by its staging path, and locked.
        _reattach(tree)
        outcome = outcome or "reattached"
    for leftover in leftovers_of(tree):
        _remove(leftover)
        outcome = outcome or "cleaned"
    return outcome


def leftovers_of(tree: Path) -> list[Path]:
    """Staging trees of TREE that a run left behind (any version of patchctl)."""
    if not tree.parent.is_dir():
        return []
    return sorted(
        p for p in tree.parent.iterdir() if (m := _LEFTOVER.match(p.name)) is not None and m["name"] == tree.name
    )


def interrupted_in(directory: Path) -> bool:
    """Whether a swap of some tree under DIRECTORY was interrupted (file reads only, no git)."""
    if not directory.is_dir():
        return False
    return any(_LEFTOVER.match(p.name) is not None or _moving(p) for p in directory.iterdir())


def recover_trees_in(directory: Path) -> list[Path]:
    """`recover_tree` for every tree under DIRECTORY with something left beside it."""
    if not directory.is_dir():
        return []
    names = sorted({m["name"] if (m := _LEFTOVER.match(p.name)) is not None else p.name for p in directory.iterdir()})
    recovered = []
    for name in names:
        if recover_tree(directory / name) is not None:
            recovered.append(directory / name)
    return recovered


def _moving(tree: Path) -> bool:
    """Whether TREE is a worktree still locked by `replace_tree` (read from its files: no git call)."""
    try:
        text = (tree / ".git").read_text() if (tree / ".git").is_file() else ""
    except OSError:
        return False
    if not text.startswith("gitdir:"):
        return False
    lock_file = Path(text[len("gitdir:") :].strip()) / "locked"
    try:
        return lock_file.read_text().startswith(LOCK_REASON)
    except OSError:
        return False


def _reattach(tree: Path) -> None:
    """Tell git the worktree's new path, then lift the lock taken for the move."""
    git.run(["worktree", "repair"], tree, check=False)
    git.run(["worktree", "unlock", "."], tree, check=False)


def _remove(path: Path) -> None:
    """Delete a tree that is no longer wanted, and its administrative directory in its mirror."""
    if not os.path.lexists(path):
        return
    common = None
    if (path / ".git").is_file():
        found = git.run(["rev-parse", "--path-format=absolute", "--git-common-dir"], path, check=False)
        common = Path(found.stdout.strip()) if found.ok else None
        _reattach(path)  # a locked worktree is never pruned
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)
    if common is not None and common.is_dir():
        git.run(["worktree", "prune"], common, check=False)
