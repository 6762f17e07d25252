"""Putting a repository back into a consistent state after a killed run, before anything reads it.

Every command calls `recover_project` after finding matrix.yaml and before loading it: an
interrupted journal is finished or undone (`patchctl.journal`), an interrupted tree swap
under `.patchctl/trees/` is finished (`patchctl.treeswap`), and the temporary files of
interrupted atomic writes in `.patchctl/` are deleted. Recovery writes, so it runs under
the project lock: a writing command already holds it; any other command takes it only
when there is something to recover, so reading commands stay lock-free.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import journal, treeswap, worktree
from .lock import ProjectLock

# The atomic writes under .patchctl/ (paths.atomic_write_bytes names its temporary files .NAME.*.tmp).
_TEMP_GLOBS = (
    f".{journal.JOURNAL_NAME}.*.tmp",
    *(f".{name}.*.tmp" for name in journal.LEGACY_JOURNAL_NAMES),
    f"sync/*/.{worktree.SYNC_STATE_NAME}.*.tmp",
)


def recover_project(root: Path, lock: ProjectLock) -> list[str]:
    """Recover the repository at ROOT; LOCK is taken for the time of it unless already held.
    Returns what was done, one line each (nothing when there was nothing to do)."""
    if not needs_recovery(root):
        return []
    if lock.held:
        return _recover(root)
    with lock:
        return _recover(root)


def needs_recovery(root: Path) -> bool:
    """Whether a killed run left something behind (a few stat calls; no git, no lock)."""
    state = worktree.state_dir(root)
    worktree.check_state_path(root, state, "state directory", expected="directory", follow=True)
    if not state.is_dir():
        return False
    if any(os.path.lexists(state / name) for name in (journal.JOURNAL_NAME, *journal.LEGACY_JOURNAL_NAMES)):
        return True
    if any(next(state.glob(pattern), None) is not None for pattern in _TEMP_GLOBS):
        return True
    return any(treeswap.interrupted_in(directory) for directory in _tree_dirs(state))


def _recover(root: Path) -> list[str]:
    state = worktree.state_dir(root)
    done = []
    outcome = journal.recover(state)
    if outcome is not None:
        verb = "completed" if outcome == "completed" else "rolled back"
        done.append(f"{verb} a write an earlier run did not finish")
    for pattern in _TEMP_GLOBS:
        for stray in sorted(state.glob(pattern)):
            stray.unlink(missing_ok=True)
            done.append(f"removed {worktree.display(root, stray)}")
    for directory in _tree_dirs(state):
        for tree in treeswap.recover_trees_in(directory):
            done.append(f"finished replacing {worktree.display(root, tree)}, which an earlier run did not")
    return done


def _tree_dirs(state: Path) -> list[Path]:
    """Where patchctl replaces trees: apply's trees and each pin-sync's gate trees."""
    sync = state / "sync"
    return [state / "trees", *(sorted(p for p in sync.iterdir() if p.is_dir()) if sync.is_dir() else [])]
