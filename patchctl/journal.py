"""Several files written all together or not at all: the one journal behind pin-sync,
export and matrix render.

`commit` is a small transaction. The journal (`.patchctl/journal.json`, always replaced
atomically) names every file involved before the first of them is created, and moves
through three states:

    staging    new contents are being written beside their targets (`.NAME.patchctl-new-I`)
               and the old ones linked to a second name (`.NAME.patchctl-old-I`);
    prepared   every staged file is complete and synced; the renames into place begin;
    committed  every rename is done: the point of no return.

A kill leaves the journal behind and `recover` (run before any command reads the
repository, see `patchctl.project`) makes the set consistent again: a staging journal is
dropped with its staged files (the targets were never touched), a prepared one is rolled
back from the backups, a committed one only loses its backups. Either way no temporary
file is left: every name the transaction could create is in the journal before it exists.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import worktree
from .errors import EnvironmentFailure
from .paths import atomic_write_text

JOURNAL_NAME = "journal.json"
LEGACY_JOURNAL_NAMES = ("pin-update.journal.json",)  # the pin-sync journal of earlier versions
STAGED_INFIX = ".patchctl-new-"
BACKUP_INFIX = ".patchctl-old-"


@dataclass(frozen=True)
class FileChange:
    path: Path
    new: bytes | None  # None: delete the file
    mode: int | None = None  # permission bits of the new file (default: the old file's, or the umask's)

    @property
    def deletes(self) -> bool:
        return self.new is None


def journal_path(journal_dir: Path) -> Path:
    return Path(journal_dir) / JOURNAL_NAME


def commit(journal_dir: Path, changes: list[FileChange]) -> None:
    """Apply CHANGES all together: after a crash at any point, `recover` leaves all of
    them or none. An error (not a crash) part-way rolls back at once and re-raises."""
    recover(journal_dir)
    changes = [c for c in changes if not (c.deletes and not c.path.exists())]
    if not changes:
        return
    journal = journal_path(journal_dir)
    journal.parent.mkdir(parents=True, exist_ok=True)
    entries = [_plan(index, change) for index, change in enumerate(changes)]
    _write_journal(journal, "staging", entries)
    try:
        for change, entry in zip(changes, entries, strict=True):
            _stage(change, entry)
        _write_journal(journal, "prepared", entries)
        for entry in entries:
            _rename_in(entry)
        _sync_dirs(entries)
        _write_journal(journal, "committed", entries)
    except BaseException:
        recover(journal_dir)  # an error (not a crash) part-way: what the journal says decides, now
        raise
    _discard(entries)
    journal.unlink()


def recover(journal_dir: Path) -> str | None:
    """Finish or undo an interrupted commit. Returns "rolled-back", "completed" or None
    (nothing to recover)."""
    outcome = None
    for name in (JOURNAL_NAME, *LEGACY_JOURNAL_NAMES):
        outcome = _recover_one(Path(journal_dir) / name) or outcome
    return outcome


def _recover_one(journal: Path) -> str | None:
    # A directory, a FIFO or a symlink where the journal belongs is refused in one line, unread.
    raw = worktree.read_state(journal.parent.parent, journal, "journal")
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        entries = data["entries"]
        state = data["state"]
    except (ValueError, KeyError, TypeError) as exc:
        raise EnvironmentFailure(
            f"{journal}: unreadable journal of an interrupted write ({exc}); restore the files from git and delete it"
        ) from None
    problem = _untrusted(journal, entries) if state in ("staging", "prepared", "committed") else f"state {state!r}"
    if problem is not None:
        raise EnvironmentFailure(
            f"{journal}: not a journal patchctl wrote ({problem}); nothing was changed: delete it by hand"
        )
    if state == "committed":
        _discard(entries)
        journal.unlink()
        return "completed"
    if state == "prepared":
        for entry in entries:
            _roll_back(entry)
    _discard(entries)
    journal.unlink()
    return "rolled-back"


def _untrusted(journal: Path, entries: object) -> str | None:
    """Why ENTRIES are not what `commit` writes, or None. Recovery renames and deletes the
    files a journal names, so a journal that came with the repository (or was damaged) must
    name only files inside the repository, each with its own staged and backup names."""
    root = os.path.realpath(journal.parent.parent)
    if not isinstance(entries, list):
        return "no list of entries"
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), str):
            return "an entry without a target"
        target = Path(entry["target"])
        parent = os.path.realpath(target.parent)
        if not target.is_absolute() or (parent != root and not parent.startswith(root + os.sep)):
            return f"{target} is outside the repository {root}"
        for key, infix in (("staged", STAGED_INFIX), ("backup", BACKUP_INFIX)):
            name = entry.get(key)
            if name is None:
                continue
            expected = re.escape(str(target.with_name(f".{target.name}{infix}"))) + r"\d+"
            if not isinstance(name, str) or re.fullmatch(expected, name) is None:
                return f"{key} file {name!r} is not beside {target}"
    return None


def _plan(index: int, change: FileChange) -> dict:
    target = change.path
    return {
        "target": str(target),
        "staged": None if change.new is None else str(target.with_name(f".{target.name}{STAGED_INFIX}{index}")),
        "backup": str(target.with_name(f".{target.name}{BACKUP_INFIX}{index}")) if target.exists() else None,
    }


def _stage(change: FileChange, entry: dict) -> None:
    target = change.path
    target.parent.mkdir(parents=True, exist_ok=True)
    if change.new is not None:
        _write_synced(Path(entry["staged"]), change.new, like=target, mode=change.mode)
    if entry["backup"] is not None:
        backup = Path(entry["backup"])
        backup.unlink(missing_ok=True)
        os.link(target, backup)  # a second name for the old bytes: free, and survives the rename


def _roll_back(entry: dict) -> None:
    target = Path(entry["target"])
    backup = entry["backup"]
    if backup is None:
        target.unlink(missing_ok=True)  # the file was new in this commit
    elif Path(backup).exists():  # (a backup already gone was put back by an earlier recovery)
        if target.exists() and os.path.samefile(backup, target):
            return  # never renamed over (rename() between two links to one file is a no-op)
        os.replace(backup, target)  # the old bytes back


def _write_journal(journal: Path, state: str, entries: list[dict]) -> None:
    atomic_write_text(journal, json.dumps({"state": state, "entries": entries}, indent=2) + "\n")


def _write_synced(path: Path, data: bytes, like: Path, mode: int | None = None) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if mode is not None:
        os.chmod(path, mode)
    elif like.exists():
        os.chmod(path, like.stat().st_mode & 0o7777)


def _rename_in(entry: dict) -> None:
    target = Path(entry["target"])
    if entry["staged"] is not None:
        os.replace(entry["staged"], target)
    else:
        target.unlink(missing_ok=True)


def _sync_dirs(entries: list[dict]) -> None:
    """The renames survive a power cut only once their directories are synced."""
    for directory in sorted({str(Path(e["target"]).parent) for e in entries}):
        try:
            fd = os.open(directory, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass  # some filesystems cannot sync a directory; the rename itself is still atomic
        finally:
            os.close(fd)


def _discard(entries: list[dict]) -> None:
    for entry in entries:
        for key in ("staged", "backup"):
            if entry.get(key):
                Path(entry[key]).unlink(missing_ok=True)
