"""Several files written all together or not at all: the one journal behind pin-sync,
export, vendor, init and matrix render.

`commit` is a small transaction. The journal (`journal.json` in the repository's state
directory, `.git/patchctl/`: see `patchctl.state.statehome`; always replaced atomically) names every
file involved before the first of them is created, and moves through three states:

    staging    new contents are being written beside their targets (`.NAME.patchctl-new-I`)
               and the old ones linked to a second name (`.NAME.patchctl-old-I`);
    prepared   every staged file is complete and synced; the renames into place begin;
    committed  every rename is done: the point of no return.

A kill leaves the journal behind and `recover` (run before any command reads the
repository, see `patchctl.state.recovery`) makes the set consistent again: a staging journal is
dropped with its staged files (the targets were never touched), a prepared one is rolled
back from the backups, a committed one only loses its backups. Either way no temporary
file is left: every name the transaction could create is in the journal before it exists.

Recovery trusts a journal only when it is one `commit` could have written: every target a
file patchctl manages (`patchctl.state.managed`: matrix.yaml, a series, a pin file, a vendored
copy, a rendered workflow), named without `..` or `.git`, reached through real directories
(no link on the way, inside the repository or not), a regular file, a symlink (replaced, never
followed) or absent, with its staged and backup names beside it. Anything else refuses the
whole journal in one line (exit 3) before a file is touched; `commit` refuses the same
targets (one line, exit 2) before its first byte, so a writer needs no check of its own.

Every file-system call on the repository's files goes through `patchctl.confined.Root` (a
walk from the repository's descriptor, no link followed, `.git` refused) in `_create_synced`,
`_link`, `_replace`, `_unlink` and `_sync_directory`. The journal file itself is written and
removed through its directory's descriptor, opened without following a link (`_JournalFile`).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..confined import Refused, Root
from ..confined.regular import kind_of
from ..errors import ConfigError, EnvironmentFailure
from ..output.escape import shell_word
from ..records import dataclass
from . import managed, statehome, worktree

JOURNAL_NAME = "journal.json"
LEGACY_JOURNAL_NAMES = ("pin-update.journal.json",)  # the pin-sync journal of earlier versions
STAGED_INFIX = ".patchctl-new-"
BACKUP_INFIX = ".patchctl-old-"
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class FileChange:
    path: Path
    new: bytes | None  # None: delete the file
    mode: int | None = None  # permission bits of the new file (default: the old file's, or the umask's)

    @property
    def deletes(self) -> bool:
        return self.new is None


def journal_path(root: Path) -> Path:
    """Where the journal of the repository at ROOT is (in its git directory)."""
    return statehome.home(root) / JOURNAL_NAME


def commit(config_file: Path, changes: list[FileChange]) -> None:
    """Apply CHANGES to files of the repository whose matrix.yaml is CONFIG_FILE all together:
    after a crash at any point, `recover` leaves all of them or none. An error (not a crash)
    part-way rolls back at once and re-raises. A target reached through a link, inside `.git`,
    or that is a directory, FIFO or device is refused (`Refused`, one line) before the first byte."""
    if kind_of(config_file) == "directory":  # (by lstat: a link there is replaced, never followed)
        raise Refused(f"refusing to write {config_file}: it is a directory, where matrix.yaml belongs")
    config_file = _real(config_file)
    root = config_file.parent
    repository = Root(root)
    recover(config_file)
    present = {}
    for change in changes:
        present[change.path] = repository.check_replaceable(change.path, "delete" if change.deletes else "write")
    changes = [c for c in changes if not (c.deletes and present[c.path] is None)]
    if not changes:
        return
    entries = [_plan(index, change, present[change.path] is not None) for index, change in enumerate(changes)]
    # What recovery would refuse is never written: the same checks, before the first byte.
    new_config = [c.new for c in changes if c.new is not None and str(c.path) == str(config_file)]
    problem = _untrusted(config_file, "staging", entries, new_config)
    if problem is not None:
        raise ConfigError(f"refusing to write through the journal: {problem}")
    journal = _JournalFile(root, statehome.ensure(root) / JOURNAL_NAME)
    journal.write("staging", entries)
    try:
        for change, entry in zip(changes, entries, strict=True):
            _stage(repository, change, entry)
        journal.write("prepared", entries)
        for entry in entries:
            _rename_in(repository, entry)
        _sync_dirs(repository, entries)
        journal.write("committed", entries)
    except BaseException:
        recover(config_file)  # an error (not a crash) part-way: what the journal says decides, now
        raise
    _discard(repository, entries)
    journal.remove()


def recover(config_file: Path) -> str | None:
    """Finish or undo an interrupted commit in the repository of CONFIG_FILE. Returns
    "rolled-back", "completed" or None (nothing to recover)."""
    config_file = _real(config_file)
    state = statehome.home(config_file.parent)
    outcome = None
    for name in (JOURNAL_NAME, *LEGACY_JOURNAL_NAMES):
        outcome = _recover_one(config_file, state / name) or outcome
    return outcome


def pending(root: Path) -> bool:
    """Whether an interrupted commit waits for recovery (a few lstat calls)."""
    state = statehome.home(root)
    return any(os.path.lexists(state / name) for name in (JOURNAL_NAME, *LEGACY_JOURNAL_NAMES))


def _real(config_file: Path) -> Path:
    """CONFIG_FILE in its real directory (targets are written so), its own name kept even when it is a link."""
    return Path(os.path.realpath(Path(config_file).absolute().parent)) / Path(config_file).name


@dataclass(frozen=True)
class Journal:
    path: Path
    state: str
    entries: list[dict]


def load(config_file: Path, path: Path) -> Journal | None:
    """The journal at PATH, checked against the repository of CONFIG_FILE; None when there is
    none. One that `commit` could not have written is refused whole (EnvironmentFailure)."""
    config_file = _real(config_file)
    root = config_file.parent
    # A directory, a FIFO or a symlink where the journal belongs is refused in one line, unread.
    raw = worktree.read_state(root, path, "journal")
    if raw is None:
        return None
    shown = statehome.display(root, path)
    import json  # (here: only a pending journal is read; start-up)

    try:
        data = json.loads(raw)
        entries, state = data["entries"], data["state"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc) or type(exc).__name__
        raise EnvironmentFailure(
            f"{shown}: unreadable journal of an interrupted write ({reason}); nothing was changed: restore the "
            f"files from git and delete it (`rm {shell_word(path)}`)"
        ) from None
    problem = _untrusted(config_file, state, entries)
    if problem is not None:
        raise EnvironmentFailure(
            f"{shown}: not a journal patchctl wrote ({problem}); nothing was changed: delete it by hand "
            f"(`rm {shell_word(path)}`)"
        )
    return Journal(path, state, entries)


def _recover_one(config_file: Path, path: Path) -> str | None:
    journal = load(config_file, path)
    if journal is None:
        return None
    repository = Root(config_file.parent)
    if journal.state == "committed":
        _discard(repository, journal.entries)
        _JournalFile(config_file.parent, journal.path).remove()
        return "completed"
    if journal.state == "prepared":
        for entry in journal.entries:
            _roll_back(repository, entry)
    _discard(repository, journal.entries)
    _JournalFile(config_file.parent, journal.path).remove()
    return "rolled-back"


def _untrusted(config_file: Path, state: object, entries: object, new_config: list[bytes] | None = None) -> str | None:
    """Why STATE and ENTRIES are not what `commit` writes for this repository, or None.
    Recovery renames and deletes the files a journal names, so each target must be a file
    patchctl manages, reached through real directories, with its own staged and backup names.
    NEW_CONFIG: the text of matrix.yaml being committed (what it will manage once written)."""
    root = config_file.parent
    if state not in ("staging", "prepared", "committed"):
        return f"state {str(state)[:40]!r}"
    if not isinstance(entries, list) or not entries:
        return "no list of entries"
    targets: set[str] = set()
    versions: list[Path] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), str):
            return "an entry without a target"
        target = entry["target"]
        if "\0" in target:
            return f"target {target!r} holds a NUL byte"
        if not os.path.isabs(target) or os.path.normpath(target) != target:
            return f"target {target!r} is not an absolute, normalized path"
        try:
            relative = Path(target).relative_to(root).as_posix()
        except ValueError:
            return f"{target} is outside the repository {root}"
        if relative in targets:
            return f"{relative} is named twice"
        targets.add(relative)
        names = [entry.get(key) for key in ("staged", "backup")]
        for key, infix, name in (("staged", STAGED_INFIX, names[0]), ("backup", BACKUP_INFIX, names[1])):
            if name is None:
                continue
            expected = re.escape(str(Path(target).with_name(f".{Path(target).name}{infix}"))) + r"\d+"
            if not isinstance(name, str) or re.fullmatch(expected, name) is None:
                return f"{key} file {str(name)[:200]!r} is not beside {relative}"
        if names == [None, None]:
            return f"the entry of {relative} neither writes nor keeps a file"
        problem = _not_a_plain_file(root, relative, [n for n in names if n is not None])
        if problem is not None:
            return problem
        if target == str(config_file):
            versions += [Path(n) for n in names if n is not None]
    rules = managed.managed_paths(config_file, [*versions, *(new_config or [])])
    for relative in sorted(targets):
        problem = rules.why_not(relative)
        if problem is not None:
            return problem
    return None


def _not_a_plain_file(root: Path, relative: str, siblings: list[str]) -> str | None:
    """Why the target RELATIVE (under ROOT) or its SIBLINGS (staged, backup) are not what
    `commit` leaves there: each directory on the way a real one (no link, wherever it leads),
    the target a regular file or a symlink (replaced, never followed) or absent, and so the siblings."""
    reason = managed.unsafe(relative)
    if reason is not None:
        return reason
    repository = Root(root)
    try:
        repository.check_replaceable(relative)
        for sibling in siblings:
            kind = repository.kind(sibling, "write")
            if kind not in (None, "regular file", "symlink"):  # (the backup of a link is a link)
                return f"{Path(sibling).name} beside {relative} is a {kind}"
    except Refused as exc:
        return str(exc)
    return None


def _plan(index: int, change: FileChange, exists: bool) -> dict:
    target = change.path
    return {
        "target": str(target),
        "staged": None if change.new is None else str(target.with_name(f".{target.name}{STAGED_INFIX}{index}")),
        "backup": str(target.with_name(f".{target.name}{BACKUP_INFIX}{index}")) if exists else None,
    }


def _stage(repository: Root, change: FileChange, entry: dict) -> None:
    target = change.path
    repository.mkdirs(target.parent)
    if change.new is not None:
        _create_synced(repository, Path(entry["staged"]), change.new, like=target, mode=change.mode)
    if entry["backup"] is not None:
        backup = Path(entry["backup"])
        _unlink(repository, backup)
        _link(repository, target, backup)  # a second name for the old bytes: free, and survives the rename


def _roll_back(repository: Root, entry: dict) -> None:
    target = Path(entry["target"])
    backup = entry["backup"]
    if backup is None:
        # New in this commit: the target exists only once its staged file was renamed onto it.
        if entry["staged"] is None or repository.lstat(entry["staged"], "write") is None:
            _unlink(repository, target)
        return
    kept = repository.lstat(backup, "write")
    if kept is None:
        return  # a backup already gone was put back by an earlier recovery
    current = repository.lstat(target, "write")
    if current is not None and (current.st_dev, current.st_ino) == (kept.st_dev, kept.st_ino):
        return  # never renamed over (rename() between two links to one file is a no-op)
    _replace(repository, Path(backup), target)  # the old bytes back


def _rename_in(repository: Root, entry: dict) -> None:
    target = Path(entry["target"])
    if entry["staged"] is not None:
        _replace(repository, Path(entry["staged"]), target)
    else:
        _unlink(repository, target)


def _sync_dirs(repository: Root, entries: list[dict]) -> None:
    """The renames survive a power cut only once their directories are synced."""
    for directory in sorted({str(Path(e["target"]).parent) for e in entries}):
        _sync_directory(repository, Path(directory))


def _discard(repository: Root, entries: list[dict]) -> None:
    for entry in entries:
        for key in ("staged", "backup"):
            if entry.get(key):
                _unlink(repository, Path(entry[key]))


class _JournalFile:
    """The journal file PATH, in the state directory (`patchctl.state.statehome`) of the repository
    at ROOT: replaced atomically and removed through `confined.Root`, reached from the git
    directory at every call, no link followed (`statehome.ensure` refused one already; this
    holds if one is swapped in since)."""

    def __init__(self, root: Path, path: Path):
        self.path = path
        self.where = statehome.root_for(root, path)

    def write(self, state: str, entries: list[dict]) -> None:
        import json

        data = (json.dumps({"state": state, "entries": entries}, indent=2) + "\n").encode("utf-8")
        self.where.write_bytes(self.path, data, 0o600)

    def remove(self) -> None:
        self.where.unlink(self.path)


# ---------------------------------------------------------------- the file operations on the repository's files


def _create_synced(repository: Root, path: Path, data: bytes, like: Path, mode: int | None = None) -> None:
    """A new file PATH (never through a symlink) holding DATA, synced, with MODE or LIKE's permissions."""
    if mode is None:
        old = repository.lstat(like, "write")
        mode = stat.S_IMODE(old.st_mode) if old is not None and stat.S_ISREG(old.st_mode) else None
    repository.unlink(path)  # a leftover of that name (the journal names it before it exists)
    repository.create_synced(path, data, mode)


def _link(repository: Root, existing: Path, new: Path) -> None:
    repository.link(existing, new)


def _replace(repository: Root, source: Path, target: Path) -> None:
    repository.replace(source, target)  # rename(2) replaces a symlink at TARGET, never what it points to


def _unlink(repository: Root, path: Path) -> None:
    repository.unlink(path)


def _sync_directory(repository: Root, directory: Path) -> None:
    repository.sync_directory(directory)
