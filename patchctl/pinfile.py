"""Moving a pin: the edits to matrix.yaml and the pin_files, and writing a set of files
all together or not at all.

Edits are made on the raw text, never by re-dumping YAML: only the 40-hex value on the
`pin:` line changes, so comments, quoting, order and every other byte stay as they were.

`FileSet.commit` is a small transaction with a journal. New contents go to temporary
files next to their targets and the old contents to backups; the journal (written
atomically) lists all of them before the first rename. A crash between renames leaves
the journal behind, and `recover` (run before every write and by pin-sync on start) puts
the old set back. Once every rename is done the journal is marked committed, which is
the point of no return; recovering a committed journal only deletes the backups.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .config import Config, Upstream
from .errors import ConfigError, EnvironmentFailure
from .paths import atomic_write_text

JOURNAL_NAME = "pin-update.journal.json"
_PIN_VALUE_RE = re.compile(r"(?P<quote>[\"']?)(?P<pin>[0-9a-f]{40})(?P=quote)")


@dataclass(frozen=True)
class FileChange:
    path: Path
    new: bytes | None  # None: delete the file

    @property
    def deletes(self) -> bool:
        return self.new is None


def moved_upstreams(config: Config, upstream: str) -> list[Upstream]:
    """UPSTREAM and every upstream that tracks it, directly or through another tracker."""
    moved = [config.get_upstream(upstream)]
    frontier = [upstream]
    while frontier:
        current = frontier.pop()
        for tracker in config.trackers_of(current):
            if tracker not in moved:
                moved.append(tracker)
                frontier.append(tracker.name)
    return moved


def pin_changes(config: Config, upstream: str, new_pin: str) -> list[FileChange]:
    """The edits that move UPSTREAM (and its trackers) to NEW_PIN: matrix.yaml's `pin:`
    values and every pin_files match. Files that would not change are left out."""
    texts: dict[Path, str] = {}

    def text_of(path: Path) -> str:
        if path not in texts:
            if not path.is_file():
                raise ConfigError(f"{path}: pin file does not exist")
            texts[path] = path.read_bytes().decode("utf-8", errors="surrogateescape")
        return texts[path]

    for moved in moved_upstreams(config, upstream):
        keypath = ("upstreams", moved.name, "pin")
        line_no = config.doc.line_of(keypath)
        lines = text_of(config.path).splitlines(keepends=True)
        line = lines[line_no - 1]
        colon = line.find("pin:")
        found = _PIN_VALUE_RE.search(line, colon + 4 if colon >= 0 else 0)
        if found is None or found["pin"] != moved.pin:
            raise config.error(keypath, "cannot find the pin value on its line to update it")
        lines[line_no - 1] = line[: found.start("pin")] + new_pin + line[found.end("pin") :]
        texts[config.path] = "".join(lines)
        for entry in moved.pin_files:
            path = config.root / entry.path
            text = text_of(path)
            matches = list(entry.pattern.finditer(text))
            if not matches:
                raise ConfigError(
                    f"{entry.path}: pin_files pattern of upstream {moved.name} matches nothing: {entry.pattern.pattern}"
                )
            pieces, last = [], 0
            for match in matches:
                pieces += [text[last : match.start("pin")], new_pin]
                last = match.end("pin")
            texts[path] = "".join(pieces) + text[last:]
    changes = []
    for path, text in texts.items():
        data = text.encode("utf-8", errors="surrogateescape")
        if data != path.read_bytes():
            changes.append(FileChange(path, data))
    return changes


@dataclass
class FileSet:
    """Files that change together: commit writes all of CHANGES or, after a crash, none."""

    journal_dir: Path
    changes: list[FileChange] = field(default_factory=list)

    @property
    def journal(self) -> Path:
        return self.journal_dir / JOURNAL_NAME

    def commit(self) -> None:
        recover(self.journal_dir)
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        entries = []
        try:
            for index, change in enumerate(self.changes):
                entries.append(self._stage(index, change))
        except BaseException:
            _discard(entries)
            raise
        atomic_write_text(self.journal, json.dumps({"state": "prepared", "entries": entries}, indent=2) + "\n")
        try:
            for entry in entries:
                _rename_in(entry)
        except BaseException:
            recover(self.journal_dir)  # an error (not a crash) half-way: put the old set back now
            raise
        atomic_write_text(self.journal, json.dumps({"state": "committed", "entries": entries}, indent=2) + "\n")
        _discard(entries)
        self.journal.unlink()

    @staticmethod
    def _stage(index: int, change: FileChange) -> dict:
        target = change.path
        target.parent.mkdir(parents=True, exist_ok=True)
        entry: dict = {"target": str(target), "staged": None, "backup": None}
        if change.new is not None:
            staged = target.with_name(f".{target.name}.patchctl-new-{index}")
            _write_synced(staged, change.new, like=target)
            entry["staged"] = str(staged)
        if target.exists():
            backup = target.with_name(f".{target.name}.patchctl-old-{index}")
            backup.unlink(missing_ok=True)
            os.link(target, backup)  # a second name for the old bytes: free, and survives the rename
            entry["backup"] = str(backup)
        return entry


def _write_synced(path: Path, data: bytes, like: Path) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if like.exists():
        os.chmod(path, like.stat().st_mode & 0o7777)


def _rename_in(entry: dict) -> None:
    target = Path(entry["target"])
    if entry["staged"] is not None:
        os.replace(entry["staged"], target)
    else:
        target.unlink(missing_ok=True)


def _discard(entries: list[dict]) -> None:
    for entry in entries:
        for key in ("staged", "backup"):
            if entry.get(key):
                Path(entry[key]).unlink(missing_ok=True)


def recover(journal_dir: Path) -> str | None:
    """Finish or undo an interrupted commit. Returns "rolled-back", "completed" or None."""
    journal = Path(journal_dir) / JOURNAL_NAME
    if not journal.exists():
        return None
    try:
        data = json.loads(journal.read_text())
        entries = data["entries"]
        state = data["state"]
    except (ValueError, KeyError, TypeError) as exc:
        raise EnvironmentFailure(
            f"{journal}: unreadable journal of an interrupted pin update ({exc}); restore the files from git and "
            "delete it"
        ) from None
    if state == "committed":
        _discard(entries)
        journal.unlink()
        return "completed"
    for entry in entries:
        target = Path(entry["target"])
        backup = entry["backup"]
        if backup is None:
            target.unlink(missing_ok=True)  # the file was new in this commit
        elif Path(backup).exists():  # (a backup already gone was put back by an earlier recovery)
            if target.exists() and os.path.samefile(backup, target):
                Path(backup).unlink()  # never renamed over; rename() between two links to one file is a no-op
            else:
                os.replace(backup, target)  # the old bytes back
        if entry["staged"] is not None:
            Path(entry["staged"]).unlink(missing_ok=True)
    journal.unlink()
    return "rolled-back"
