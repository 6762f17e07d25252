"""Several files written all together or not at all: the one journal behind pin-sync,
export, vendor, init and matrix render.

`commit` is a small transaction. The journal (`journal.json` in the repository's state
directory, `.git/patchctl/`: see `patchctl.statehome`; always replaced atomically) names every
file involved before the first of them is created, and moves through three states:

    staging    new contents are being written beside their targets (`.NAME.patchctl-new-I`)
               and the old ones linked to a second name (`.NAME.patchctl-old-I`);
    prepared   every staged file is complete and synced; the renames into place begin;
    committed  every rename is done: the point of no return.

A kill leaves the journal behind and `recover` (run before any command reads the
repository, see `patchctl.recovery`) makes the set consistent again: a staging journal is
dropped with its staged files (the targets were never touched), a prepared one is rolled
back from the backups, a committed one only loses its backups. Either way no temporary
file is left: every name the transaction could create is in the journal before it exists.

Recovery trusts a journal only when it is one `commit` could have written: every target a
file patchctl manages (`patchctl.managed`: matrix.yaml, a series, a pin file, a vendored
copy, a rendered workflow), named without `..` or `.git`, reached through directories (or
links to directories that stay inside the repository and out of `.git` and `.patchctl`), a
regular file, a symlink (replaced, never followed) or absent, with its staged and backup names
beside it. Anything
else refuses the whole journal in one line (exit 3) before a file is touched. The only
file-system calls on the repository's files are in `_create_synced`, `_link`, `_replace`,
`_unlink` and `_sync_directory`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import managed, statehome, worktree
from .confined.regular import kind_of
from .errors import ConfigError, EnvironmentFailure
from .escape import shell_word
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


def journal_path(root: Path) -> Path:
    """Where the journal of the repository at ROOT is (in its git directory)."""
    return statehome.home(root) / JOURNAL_NAME


def commit(config_file: Path, changes: list[FileChange]) -> None:
    """Apply CHANGES to files of the repository whose matrix.yaml is CONFIG_FILE all together:
    after a crash at any point, `recover` leaves all of them or none. An error (not a crash)
    part-way rolls back at once and re-raises."""
    if os.path.isdir(config_file):
        raise ValueError(f"journal.commit takes the path of matrix.yaml, not a directory: {config_file}")
    config_file = _real(config_file)
    root = config_file.parent
    recover(config_file)
    changes = [c for c in changes if not (c.deletes and not os.path.lexists(c.path))]
    if not changes:
        return
    entries = [_plan(index, change) for index, change in enumerate(changes)]
    # What recovery would refuse is never written: the same checks, before the first byte.
    new_config = [c.new for c in changes if c.new is not None and str(c.path) == str(config_file)]
    problem = _untrusted(config_file, "staging", entries, new_config)
    if problem is not None:
        raise ConfigError(f"refusing to write through the journal: {problem}")
    journal = statehome.ensure(root) / JOURNAL_NAME
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
        recover(config_file)  # an error (not a crash) part-way: what the journal says decides, now
        raise
    _discard(entries)
    journal.unlink()


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
    if journal.state == "committed":
        _discard(journal.entries)
        _unlink(journal.path)
        return "completed"
    if journal.state == "prepared":
        for entry in journal.entries:
            _roll_back(entry)
    _discard(journal.entries)
    _unlink(journal.path)
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
    `commit` leaves there: each directory on the way a real one (or a link to a directory inside
    the repository, outside `.git` and `.patchctl`), the target
    a regular file or a symlink (replaced, never followed) or absent, and so the siblings."""
    reason = managed.unsafe(relative)
    if reason is not None:
        return reason
    current = root
    for part in relative.split("/")[:-1]:
        current = current / part
        kind = kind_of(current)
        if kind is None:
            break
        if kind == "symlink":
            problem = _link_on_the_way(root, current)
            if problem is not None:
                return f"{problem}, on the way to {relative}"
        elif kind != "directory":
            return f"{current.relative_to(root).as_posix()} is a {kind} on the way to {relative}"
    kind = kind_of(root / relative)
    if kind not in (None, "regular file", "symlink"):
        return f"target {relative} is a {kind}"
    for sibling in siblings:
        kind = kind_of(Path(sibling))
        if kind not in (None, "regular file", "symlink"):  # (the backup of a link is a link)
            return f"{Path(sibling).name} beside {relative} is a {kind}"
    return None


def _link_on_the_way(root: Path, link: Path) -> str | None:
    """Why the directory link LINK (a series directory linked to another place in the
    repository, say) may not be written through, or None: it must lead to a directory inside
    the repository, never into `.git` or `.patchctl`."""
    shown = link.relative_to(root).as_posix()
    real_root = os.path.realpath(root)
    target = os.path.realpath(link)
    if target == real_root or not target.startswith(real_root + os.sep):
        return f"{shown} is a symlink to {target}, outside the repository"
    reason = managed.unsafe(Path(target).relative_to(real_root).as_posix())
    if reason is not None:
        return f"{shown} is a symlink into a place patchctl never writes ({reason})"
    if not os.path.isdir(target):
        return f"{shown} is a symlink to {target}, not a directory"
    return None


def _plan(index: int, change: FileChange) -> dict:
    target = change.path
    return {
        "target": str(target),
        "staged": None if change.new is None else str(target.with_name(f".{target.name}{STAGED_INFIX}{index}")),
        "backup": str(target.with_name(f".{target.name}{BACKUP_INFIX}{index}")) if os.path.lexists(target) else None,
    }


def _stage(change: FileChange, entry: dict) -> None:
    target = change.path
    target.parent.mkdir(parents=True, exist_ok=True)
    if change.new is not None:
        _create_synced(Path(entry["staged"]), change.new, like=target, mode=change.mode)
    if entry["backup"] is not None:
        backup = Path(entry["backup"])
        _unlink(backup)
        _link(target, backup)  # a second name for the old bytes: free, and survives the rename


def _roll_back(entry: dict) -> None:
    target = Path(entry["target"])
    backup = entry["backup"]
    if backup is None:
        # New in this commit: the target exists only once its staged file was renamed onto it.
        if entry["staged"] is None or not os.path.lexists(entry["staged"]):
            _unlink(target)
    elif os.path.lexists(backup):  # (a backup already gone was put back by an earlier recovery)
        if os.path.lexists(target) and os.path.samefile(backup, target):
            return  # never renamed over (rename() between two links to one file is a no-op)
        _replace(Path(backup), target)  # the old bytes back


def _write_journal(journal: Path, state: str, entries: list[dict]) -> None:
    atomic_write_text(journal, json.dumps({"state": state, "entries": entries}, indent=2) + "\n")


def _rename_in(entry: dict) -> None:
    target = Path(entry["target"])
    if entry["staged"] is not None:
        _replace(Path(entry["staged"]), target)
    else:
        _unlink(target)


def _sync_dirs(entries: list[dict]) -> None:
    """The renames survive a power cut only once their directories are synced."""
    for directory in sorted({str(Path(e["target"]).parent) for e in entries}):
        _sync_directory(Path(directory))


def _discard(entries: list[dict]) -> None:
    for entry in entries:
        for key in ("staged", "backup"):
            if entry.get(key):
                _unlink(Path(entry[key]))


# ---------------------------------------------------------------- the file operations on the repository's files


def _create_synced(path: Path, data: bytes, like: Path, mode: int | None = None) -> None:
    """A new file PATH (never through a symlink) holding DATA, synced, with MODE or LIKE's permissions."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
        if mode is not None:
            os.fchmod(handle.fileno(), mode)
        elif kind_of(like) == "regular file":
            os.fchmod(handle.fileno(), like.stat().st_mode & 0o7777)


def _link(existing: Path, new: Path) -> None:
    os.link(existing, new, follow_symlinks=False)


def _replace(source: Path, target: Path) -> None:
    os.replace(source, target)  # rename(2) replaces a symlink at TARGET, never what it points to


def _unlink(path: Path) -> None:
    Path(path).unlink(missing_ok=True)


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory; the rename itself is still atomic
    finally:
        os.close(fd)
