"""A stopped pin-sync's state file, and the journal of the pin update that ends a sync.

The state (`.patchctl/sync/UPSTREAM/state.json`) is what `pin-sync --continue` resumes
from: the target, the series being replayed, the next patch of each, and the records so far.
The pin update (patches/, `pin:` and every pin_files entry) is written through the project's
journal (`patchctl.journal`) so that an interrupted update is rolled forward or back before
the next command reads the repository.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import journal, worktree
from .errors import UsageError
from .jsonout import json_field
from .paths import atomic_write_text

STATE_VERSION = 1


@dataclass
class PatchRecord:
    series: str
    patch: str
    classification: str
    detail: str = ""
    conflicts: list[str] = field(default_factory=list)  # FILE:START-END of each marker block
    renames: list[str] = json_field(omit_empty=True, default_factory=list)  # "OLD → NEW": moved files followed


@dataclass
class SeriesProgress:
    name: str
    upstream: str
    tree: str
    digest: str  # of patches/ when the sync started: --continue refuses if it changed
    next: int = 0  # index of the next patch to replay
    head_before: str | None = None  # HEAD before the patch that stopped the replay


@dataclass
class SyncState:
    upstream: str
    old_pin: str
    target: str
    target_spec: str
    series: list[SeriesProgress]
    records: list[PatchRecord] = field(default_factory=list)
    phase: str = "replaying"  # replaying | conflict | gates-failed
    version: int = STATE_VERSION

    @classmethod
    def from_json(cls, data: dict) -> SyncState:
        return cls(
            upstream=data["upstream"],
            old_pin=data["old_pin"],
            target=data["target"],
            target_spec=data["target_spec"],
            series=[SeriesProgress(**s) for s in data["series"]],
            records=[PatchRecord(**r) for r in data["records"]],
            phase=data["phase"],
            version=data["version"],
        )


def save_state(root: Path, state: SyncState) -> None:
    text = json.dumps(asdict(state), indent=2, sort_keys=True) + "\n"
    atomic_write_text(worktree.sync_state_file(root, state.upstream), text)


def load_state(root: Path, upstream: str) -> SyncState:
    path = worktree.sync_state_file(root, upstream)
    raw = worktree.read_state(root, path, "pin-sync state")  # a FIFO or a directory there: one line
    try:
        state = SyncState.from_json(json.loads(raw if raw is not None else b""))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: unreadable sync state ({exc}); run `patchctl pin-sync --abort`") from None
    if state.version != STATE_VERSION:
        raise UsageError(f"{path}: sync state of another patchctl version; run `patchctl pin-sync --abort`")
    return state


def commit_pin_update(root: Path, changes: list[journal.FileChange]) -> None:
    """Write CHANGES all together or not at all, through the journal."""
    journal.commit(worktree.state_dir(root), changes)
