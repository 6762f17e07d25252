"""Replacing an applied tree so that a kill at any point loses neither the old tree nor the new.

The new tree is checked out in a private staging directory under the state directory
(`.git/patchctl/staging/.patchctl-stage-XXXX/tree`: inside the git directory, where no checkout
reaches and no link can be planted on the way), locked there (`git worktree lock`, so that no
`git worktree prune` of this run or another project sharing the cache drops its administrative
directory while git still knows it by a path it has left), given its marker, then moved beside
the target (`.NAME.patchctl-new`) by one rename between directory descriptors. Then two
renames swap them: the old tree to `.NAME.patchctl-old`, the new one into place; only then is
the old one deleted. The new path is written in the tree's administrative directory (its
`gitdir` file, as `git worktree repair` would write it, for this tree alone) and the lock is
lifted. No path under the work tree is ever handed to git to create, repair or delete: a directory on the way swapped
for a link while this runs redirects nothing (tests/patchctl/test_race_swaps.py). Where the
state directory is on another file system than the tree (a project in a plain directory, or
`apply --into` elsewhere), the tree is checked out at `.NAME.patchctl-new` directly.

`recover_tree` (run by `apply` on its target and, for `.patchctl/trees/`, before every
command) finishes a swap a kill interrupted: with the target gone it rolls the complete
new tree forward (or puts the old one back), then deletes every leftover beside it,
including the pid-named staging trees of earlier versions; `recover_staging` deletes what a
killed run left in the state directory's staging area.

Neither ever follows a link: what stands where a tree belongs is judged by lstat, a symlink
there is refused in one line (exit 3), every rename and delete goes through `confined.Root`
(directory descriptors, no link on the way), and git is asked about a tree (marker, repair,
unlock, prune) only when its `.git` is a regular file naming a worktree of one of the
cache's mirrors, which only patchctl creates. Anything else is a plain directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import git
from ..confined import Root, move
from ..confined.regular import kind_of
from ..errors import EnvironmentFailure
from ..output.escape import shell_word
from ..paths import cache_dir
from ..patterns import lazy
from . import statehome, worktree
from .worktree import Marker

if TYPE_CHECKING:  # (the store is the caller's: recovery's check at every start needs none of it)
    from ..upstream.store import Mirror, Store

NEW = "new"
OLD = "old"
LOCK_REASON = "patchctl apply: moving into place"
STAGING = "staging"  # in the state directory: where trees are checked out before they move in
STAGE_PREFIX = ".patchctl-stage-"
_LEFTOVER = lazy(r"^\.(?P<name>.+)\.patchctl-(?:new|old|\d+)$")


def sibling(tree: Path, kind: str) -> Path:
    """Where the new (or old) tree stands while TREE is being replaced."""
    return tree.with_name(f".{tree.name}.patchctl-{kind}")


def replace_tree(
    store: Store, mirror: Mirror, tree: Path, head: str, marker: Marker, project: Path | None = None
) -> None:
    """Check HEAD out as a worktree of MIRROR at TREE, replacing whatever is there. PROJECT: the
    repository TREE is patchctl's own tree in (staged in its state directory, every path on the
    way checked); None for a tree the user named (`apply --into`), handled below its parent."""
    where = _root(tree, project)
    recover_tree(tree, project)
    new, old = sibling(tree, NEW), sibling(tree, OLD)
    _release_missing(mirror.path, new)
    try:
        check_out(
            store,
            mirror,
            head,
            tree=new,
            project=project,
            prepare=lambda at: worktree.write_marker(at, marker),
            moving=True,
        )
        if where.lstat(tree) is not None:
            where.rename(tree, old)
            if _admin_dir(where, old) is not None:
                _repair(where, old)  # two worktrees must not claim one path
        where.rename(new, tree)
        _reattach(where, tree)
        _remove(where, old)
    except BaseException:
        # Ctrl-C, a signal or a failure on the way: what a later run's recovery would do, done now,
        # so that nothing is left beside the tree (the old tree back, or the complete new one).
        recover_tree(tree, project)
        raise


def check_out(
    store: Store,
    mirror: Mirror,
    rev: str,
    *,
    tree: Path,
    project: Path | None,
    prepare: Callable[[Path], None] | None = None,
    moving: bool = False,
) -> None:
    """A worktree of MIRROR at REV at TREE (which must not exist), ready before it is there: it
    is checked out in the state directory's staging area and moved in by one rename between
    directory descriptors (see the module's docstring), PREPARE(where it is) called first.
    Where that is not possible (no PROJECT, or the state directory on another file system) it
    is checked out at TREE itself. MOVING: TREE moves on (`replace_tree`), which reattaches it
    where it ends; it stays locked until then."""
    where = _root(tree, project)
    if tree.parent != where.path:
        where.mkdirs(tree.parent)
    area = None if project is None else _staging_area(project, where, tree.parent)
    if area is None:
        store.add_worktree(mirror, rev, where.check(tree))
        git.run(["worktree", "lock", "--reason", LOCK_REASON, str(tree)], mirror.path)
        if prepare is not None:
            prepare(tree)
    else:
        state, private = area
        staged = state.absolute(f"{private}/tree")
        try:
            store.add_worktree(mirror, rev, staged)
            git.run(["worktree", "lock", "--reason", LOCK_REASON, str(staged)], mirror.path)
            if prepare is not None:
                prepare(staged)
            move(state, staged, where, tree)
        finally:
            _remove(state, f"{private}/tree")  # what a failure left there: unlocked and pruned
            _remove(state, private)
    if not moving:
        _reattach(where, tree)


def _root(tree: Path, project: Path | None) -> Root:
    return Root(project if project is not None else tree.parent, "the repository" if project else "the directory")


def _staging_area(project: Path, where: Root, directory: Path) -> tuple[Root, str] | None:
    """(the state directory, a new private directory in its staging area) when that is on the
    file system of DIRECTORY (under WHERE: one rename moves a tree from one to the other), else None."""
    statehome.ensure(project)
    state = statehome.state_root(project)
    state.mkdirs(STAGING)
    target, staging = where.lstat(directory, "write"), state.lstat(STAGING)
    if target is None or staging is None or target.st_dev != staging.st_dev:
        return None
    return state, f"{STAGING}/{state.make_private_dir(STAGING, STAGE_PREFIX)}"


def recover_staging(project: Path) -> list[str]:
    """Remove what killed runs left in the state directory's staging area (under the project
    lock: no run of this project is staging now); the names removed."""
    state = statehome.state_root(project)
    names = [n for n in state.listdir(STAGING) or [] if n.startswith(STAGE_PREFIX)]
    for name in names:
        _remove(state, f"{STAGING}/{name}/tree")
        _remove(state, f"{STAGING}/{name}")
    return names


def recover_tree(tree: Path, project: Path | None = None) -> str | None:
    """Finish or undo an interrupted `replace_tree` of TREE and delete the leftovers beside
    it. Returns "rolled-forward", "restored", "reattached", "cleaned" or None (nothing to do)."""
    where = _root(tree, project)
    new, old = sibling(tree, NEW), sibling(tree, OLD)
    refuse_link(tree, where)
    outcome = None
    if where.lstat(tree) is None:
        if _admin_dir(where, new) is not None and worktree.read_marker(new) is not None:
            if _admin_dir(where, old) is not None:
                _repair(where, old)  # git learns where the old tree went: two worktrees must not claim one path
            where.rename(new, tree)  # the new tree was complete: the kill came between the two renames
            outcome = "rolled-forward"
        elif where.kind(old) == "directory":
            where.rename(old, tree)
            outcome = "restored"
    if outcome is not None or _moving(where, tree):
        # Moved by rename (or killed after the rename into place): git still knows it by another path.
        _reattach(where, tree)
        outcome = outcome or "reattached"
    for leftover in leftovers_of(tree, project):
        _remove(where, leftover)
        outcome = outcome or "cleaned"
    return outcome


def refuse_link(tree: Path, where: Root | None = None) -> None:
    """One line (exit 3) when anything but a directory stands where the tree TREE belongs."""
    kind = where.kind(tree) if where is not None else kind_of(tree)
    if kind not in (None, "directory"):
        raise EnvironmentFailure(
            f"{tree} is a {kind}, not a tree patchctl made; patchctl never follows or replaces one: remove it "
            f"(`rm {shell_word(tree)}`) and run again"
        )


def leftovers_of(tree: Path, project: Path | None = None) -> list[Path]:
    """Staging trees of TREE that a run left behind (any version of patchctl)."""
    where = _root(tree, project)
    if tree.parent != where.path and where.kind(tree.parent) != "directory":
        return []
    return [
        tree.parent / name
        for name in where.listdir(tree.parent) or []
        if (m := _LEFTOVER.match(name)) is not None and m["name"] == tree.name
    ]


def interrupted_in(directory: Path, project: Path) -> bool:
    """Whether a swap of some tree under DIRECTORY was interrupted (file reads only, no git)."""
    where = Root(project)
    if where.kind(directory) != "directory":
        return False
    return any(
        _LEFTOVER.match(name) is not None or _moving(where, directory / name) for name in where.listdir(directory) or []
    )


def recover_trees_in(directory: Path, project: Path) -> list[Path]:
    """`recover_tree` for every tree under DIRECTORY with something left beside it."""
    where = Root(project)
    if where.kind(directory) != "directory":
        return []
    names = sorted({m["name"] if (m := _LEFTOVER.match(n)) is not None else n for n in where.listdir(directory) or []})
    return [directory / name for name in names if recover_tree(directory / name, project) is not None]


def remove_worktree(where: Root, tree: Path) -> None:
    """Delete TREE (below WHERE), a worktree of one of the cache's mirrors or anything else, by
    descriptor and no link followed, and prune its mirror's record of it."""
    _remove(where, tree)


def _admin_dir(where: Root, tree: Path | str) -> Path | None:
    """The administrative directory (`MIRROR/worktrees/ID`) of TREE when TREE is a worktree
    of one of the cache's mirrors, by its `.git` file (a real directory, a regular file,
    naming a directory under the cache's mirrors); None for anything else."""
    if where.kind(tree) != "directory":
        return None
    try:
        text = (where.read_gitfile(tree, 4096) or b"").decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:") or "\0" in text:
        return None
    mirrors = Path(os.path.realpath(cache_dir())) / "mirrors"
    admin = Path(os.path.realpath(text[len("gitdir:") :].strip()))
    try:
        relative = admin.relative_to(mirrors)
    except ValueError:
        return None
    if len(relative.parts) != 3 or relative.parts[1] != "worktrees" or Root(mirrors).kind(relative) != "directory":
        return None
    return mirrors / relative


def _locked_by_us(admin: Path | None) -> bool:
    """Whether the worktree of ADMIN is locked by `replace_tree` (its `locked` file)."""
    if admin is None:
        return False
    try:
        return (Root(admin).read_bytes("locked", 4096) or b"").startswith(LOCK_REASON.encode())
    except OSError:
        return False


def _moving(where: Root, tree: Path) -> bool:
    """Whether TREE is a worktree still locked by `replace_tree` (file reads only: no git call)."""
    return _locked_by_us(_admin_dir(where, tree))


def _repair(where: Root, tree: Path) -> None:
    """Record TREE's path in its administrative directory (`MIRROR/worktrees/ID/gitdir`, the
    absolute path of its `.git` file: gitrepository-layout), as `git worktree repair` does from
    inside the tree, but written through `Root`, and for this tree alone: `git worktree repair`
    also rewrites the `.git` file of every other worktree of the mirror, by the path it has
    recorded for it, through whatever link stands on that path now."""
    admin = _admin_dir(where, tree)
    if admin is not None:
        Root(admin, "the worktree's administrative directory").write_bytes(
            "gitdir", f"{where.absolute(tree)}/.git\n".encode()
        )


def _reattach(where: Root, tree: Path) -> None:
    """Tell git the worktree's new path, then lift the lock taken for the move (by its file:
    `git worktree unlock PATH` matches by path, which a stale entry may claim too)."""
    admin = _admin_dir(where, tree)
    if admin is None:
        return  # not a worktree patchctl made: git is not pointed at it
    _repair(where, tree)
    if _locked_by_us(admin):
        Root(admin).unlink("locked")


def _release_missing(mirror: Path, path: Path) -> None:
    """Unlock the mirror's entries for a worktree at PATH that is gone (a killed run's staging
    tree, deleted since): git refuses to add a worktree where a locked missing one was."""
    if kind_of(path) is not None:
        return
    admin = Root(mirror, "the mirror")
    for entry in admin.listdir("worktrees") or []:
        try:
            claimed = (admin.read_bytes(f"worktrees/{entry}/gitdir", 4096) or b"").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if claimed == str(path / ".git") and _locked_by_us(mirror / "worktrees" / entry):
            admin.unlink(f"worktrees/{entry}/locked")


def _remove(where: Root, path: Path | str) -> None:
    """Delete a tree that is no longer wanted, and its administrative directory in its mirror."""
    kind = where.kind(path, "delete")
    if kind is None:
        return
    admin = _admin_dir(where, path) if kind == "directory" else None
    if _locked_by_us(admin):
        assert admin is not None
        Root(admin).unlink("locked")  # a locked worktree is never pruned
    where.remove_tree(path)
    if admin is not None:
        git.run(["worktree", "prune"], admin.parent.parent, check=False)
