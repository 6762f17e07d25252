"""Putting a repository back into a consistent state after a killed run, before anything reads it.

Every command calls `recover_project` after finding matrix.yaml and before loading it: an
interrupted journal is finished or undone (`patchctl.state.journal`), an interrupted tree swap
under `.patchctl/trees/` (or a pin-sync's `.patchctl/sync/UPSTREAM/`) is finished
(`patchctl.state.treeswap`), and the temporary files of interrupted atomic writes in the state
directory are deleted. Recovery writes, so it runs under the project lock: a writing command
already holds it; any other command takes it only when there is something to recover, so
reading commands stay lock-free.

The journal and pin-sync states live in the git directory (`patchctl.state.statehome`). What an
earlier version left in `.patchctl/` (a pending journal, a stopped pin-sync's state.json) is
moved there once, after the same checks recovery makes; a damaged one is refused in one
line (exit 3) and nothing moves. Before anything is read or moved, `.patchctl`, its `trees`
and `sync` and each `sync/UPSTREAM` must be real directories (or absent): a symlink or a file
there is one line (exit 3), never followed.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..confined import Root
from ..confined.root import TEMP_INFIX
from ..errors import EnvironmentFailure
from ..output.escape import shell_word
from ..patterns import lazy
from ..records import dataclass
from . import journal, statehome, treeswap, worktree
from .lock import ProjectLock

_JOURNAL_NAMES = (journal.JOURNAL_NAME, *journal.LEGACY_JOURNAL_NAMES)
# The atomic writes in a state directory: `.NAME.XXXX.tmp` (earlier versions), `.NAME.patchctl-tmp-XXXX` (Root).
_TEMP_NAME = lazy(
    rf"^\.(?:{'|'.join(map(re.escape, (*_JOURNAL_NAMES, worktree.SYNC_STATE_NAME)))})"
    rf"(?:\..+\.tmp|{re.escape(TEMP_INFIX)}[0-9a-f]+)$"
)


def recover_project(config_file: Path, lock: ProjectLock) -> list[str]:
    """Recover the repository of CONFIG_FILE (matrix.yaml); LOCK is taken for the time of it
    unless already held. Returns what was done, one line each (nothing when there was nothing to do)."""
    if not needs_recovery(config_file.parent):
        return []
    if lock.held:
        return _recover(config_file)
    with lock:
        return _recover(config_file)


def needs_recovery(root: Path) -> bool:
    """Whether a killed run (or an earlier version) left something behind: a few lstat calls,
    no git, no lock. Refuses a damaged layout (one line, exit 3) before anything else."""
    tree_dirs = _checked_layout(root)
    if journal.pending(root) or _legacy_states(root) or _temporaries(root):
        return True
    if statehome.state_root(root).listdir(treeswap.STAGING):
        return True
    owner = worktree.state_owner(root)  # the directory .patchctl/ is in
    return any(treeswap.interrupted_in(directory, owner) for directory in tree_dirs)


def _recover(config_file: Path) -> list[str]:
    root = config_file.parent
    tree_dirs = _checked_layout(root)
    done = _migrate(config_file)
    outcome = journal.recover(config_file)
    if outcome is not None:
        verb = "completed" if outcome == "completed" else "rolled back"
        done.append(f"{verb} a write an earlier run did not finish")
    for where, stray in _temporaries(root):
        _remove_temporary(root, where, stray)
        done.append(f"removed {statehome.display(root, where.absolute(stray))}")
    for name in treeswap.recover_staging(root):
        done.append(f"removed {name}, a tree an earlier run was checking out")
    for directory in tree_dirs:
        for tree in treeswap.recover_trees_in(directory, worktree.state_owner(root)):
            done.append(f"finished replacing {worktree.display(root, tree)}, which an earlier run did not")
    return done


def _temporaries(root: Path) -> list[tuple[Root, str]]:
    """The temporary files of interrupted atomic writes in the state directory and in the
    `.patchctl/` of earlier versions (its journal, each `sync/UPSTREAM/state.json`)."""
    found = []
    for where, base in ((statehome.state_root(root), ()), (Root(root), (worktree.STATE_DIR,))):
        for directory in [base, *((*base, "sync", name) for name in _listed(where, (*base, "sync")))]:
            found += [(where, "/".join((*directory, n))) for n in _listed(where, directory) if _TEMP_NAME.match(n)]
    return found


def _listed(where: Root, parts: tuple[str, ...]) -> list[str]:
    """The names in the directory PARTS below WHERE ([] when it is not a directory)."""
    path = "/".join(parts)
    if parts and where.kind(path) != "directory":
        return []
    return where.listdir(path) or []


def _checked_layout(root: Path) -> list[Path]:
    """Where patchctl replaces trees (apply's trees, each pin-sync's trees), each checked by
    lstat to be a real directory or absent, like the state directories; one line (exit 3) otherwise."""
    home = statehome.home(root)
    statehome.check_directory(root, home, "state directory")
    statehome.check_directory(root, home / "sync", "directory of pin-sync states")
    state = worktree.state_dir(root)
    statehome.check_directory(root, state, "directory of trees and logs")
    repository = Root(worktree.state_owner(root))  # the directory .patchctl/ is in
    if repository.kind(state) is None:
        return []
    trees, sync = state / "trees", state / "sync"
    statehome.check_directory(root, trees, "directory of applied trees")
    statehome.check_directory(root, sync, "directory of pin-sync trees")
    dirs = [trees]
    if repository.kind(sync) == "directory":
        for name in repository.listdir(sync) or []:
            statehome.check_directory(root, sync / name, "directory of a pin-sync's trees")
            dirs.append(sync / name)
    return dirs


# ---------------------------------------------------------------- state of earlier versions, in .patchctl/


@dataclass(frozen=True)
class _Move:
    old: Path
    new: Path
    data: bytes


def _legacy_states(root: Path) -> list[Path]:
    """The journals and pin-sync states an earlier version left in `.patchctl/` (by lstat)."""
    repository = Root(worktree.state_owner(root))  # the directory .patchctl/ is in
    legacy = worktree.state_dir(root)
    if repository.kind(legacy) != "directory":
        return []
    found = [legacy / name for name in _JOURNAL_NAMES if repository.lstat(legacy / name) is not None]
    sync = legacy / "sync"
    if repository.kind(sync) == "directory":
        found += [
            sync / name / worktree.SYNC_STATE_NAME
            for name in repository.listdir(sync) or []
            if repository.kind(sync / name) == "directory"
            and repository.lstat(sync / name / worktree.SYNC_STATE_NAME) is not None
        ]
    return found


def _migrate(config_file: Path) -> list[str]:
    """Move what an earlier version left in `.patchctl/` to the git directory. Every piece is
    checked first (as recovery and `--continue` would read it); one damaged piece, or one
    whose new place is taken, refuses the whole move in one line (exit 3)."""
    root = config_file.parent
    moves = []
    for old in _legacy_states(root):
        if old.name == worktree.SYNC_STATE_NAME:
            from . import sync_state  # (only an earlier version's state is read here: not at every start)

            upstream = old.parent.name
            sync_state.parse_state(root, upstream, old)
            new = worktree.sync_state_file(root, upstream)
        else:
            journal.load(config_file, old)
            new = statehome.home(root) / old.name
        if statehome.state_root(root).lstat(new) is not None:
            raise EnvironmentFailure(
                f"{worktree.display(root, old)} (left by an earlier patchctl) and {statehome.display(root, new)} both "
                f"exist; nothing was changed: remove the one that is not current (`rm {shell_word(old)}`)"
            )
        moves.append(_Move(old, new, worktree.read_state(root, old, "state") or b""))
    if not moves:
        return []
    statehome.ensure(root)
    state, repository = statehome.state_root(root), Root(worktree.state_owner(root))
    done = []
    for move in moves:
        state.write_bytes(move.new, move.data)
        repository.unlink(move.old)
        done.append(f"moved {worktree.display(root, move.old)} to {statehome.display(root, move.new)}")
    return done


def _remove_temporary(root: Path, where: Root, path: str) -> None:
    kind = where.kind(path)
    if kind in ("regular file", "symlink"):
        where.unlink(path)
    elif kind is not None:
        raise EnvironmentFailure(worktree.unexpected_state(root, where.absolute(path), "temporary file", kind))
