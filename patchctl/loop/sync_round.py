"""What one pin-sync run keeps beside its saved state: the series' patches read once, the
commit each sync tree stands at, and the commands it prints."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from .. import git
from ..beside import Beside
from ..output.escape import shell_command
from ..project.config import Config
from ..records import dataclass
from ..series.applier import is_clean
from ..series.patchset import PatchFile, read_series
from ..state.sync_state import SeriesProgress, SyncState, save_state
from ..upstream.store import Mirror, Store
from . import carry


@dataclass
class ThisRun:
    """What one run (one round of `--wait`) learns beside its SyncState and keeps to itself: on
    the state object, outside the dataclass's fields, so never saved, and gone with the next
    round, which loads the state anew (the user may have moved the trees in between)."""

    patches: dict[str, list[PatchFile]] = field(default_factory=dict)  # series -> its patches, read once
    seeding: dict[str, Beside] = field(default_factory=dict)  # series -> the seed a start began beside it
    heads: dict[str, str] = field(default_factory=dict)  # series -> the commit its tree stands at
    unmerged: list[str] = field(default_factory=list)  # the files the stop's merge left unmerged
    twin: str = ""  # the upstream commit with the stopped patch's patch-id, not its exact change
    stopped: tuple[PatchFile, carry.Carried] | None = None  # the patch that stopped the replay, as carried


def this_run(state: SyncState) -> ThisRun:
    """What this run keeps beside STATE (made at the first call)."""
    kept = state.__dict__.get("_this_run")
    if kept is None:  # (not setdefault: that makes a ThisRun at every call, kept or not)
        kept = state.__dict__["_this_run"] = ThisRun()
    return kept


def series_patches(config: Config, state: SyncState, name: str) -> list[PatchFile]:
    """Series NAME's patches, read once per command: a pin-sync writes patches/ only as its very
    last step, so every step before reads the same files (and shares their parse)."""
    read = this_run(state).patches
    if name not in read:
        # A file that reads as the last run in this process read it is that run's PatchFile, with
        # its parse: a `pin-sync --wait` parses each patch once for all its rounds.
        series = config.get_series(name)
        earlier = {(p.path, p.data): p for p in _LAST_READ.get(series.dir, [])}
        read[name] = [earlier.get((p.path, p.data), p) for p in read_series(series)]
        _LAST_READ[series.dir] = read[name]
    return read[name]


_LAST_READ: dict[Path, list[PatchFile]] = {}  # series directory -> what `series_patches` last read there


def save_progress(config: Config, state: SyncState) -> None:
    """Save STATE with the commit each tree stands at: what a cut-off --continue goes back to."""
    for entry in state.series:
        entry.head = tree_head(state, entry)
    save_state(config.root, state)


def tree_head(state: SyncState, entry: SeriesProgress) -> str:
    """The commit ENTRY's tree stands at: asked of git once a round, then kept up by `tree_moved`."""
    heads = this_run(state).heads
    if entry.name not in heads:
        heads[entry.name] = git.rev_parse(Path(entry.tree), "HEAD")
    return heads[entry.name]


def tree_moved(state: SyncState, entry: SeriesProgress, head: str | None) -> None:
    """ENTRY's tree now stands at HEAD, this run having moved it there (None: ask git again)."""
    heads = this_run(state).heads
    if head is None:
        heads.pop(entry.name, None)
    else:
        heads[entry.name] = head


def back_to_saved_progress(state: SyncState) -> None:
    """A --continue cut off while it replayed or gated (killed, Ctrl-C) left the state at the
    last patch it saved and the trees maybe further on, a patch half applied: each tree goes
    back to the commit the state names, and the replay goes on from there (what the cut-off
    run did past it is done again, the same way)."""
    for entry in state.series:
        tree = Path(entry.tree)
        if entry.head is not None and (tree_head(state, entry) != entry.head or not is_clean(tree)):
            git.run(["reset", "--quiet", "--hard", entry.head], tree)
            tree_moved(state, entry, entry.head)


def sync_command(upstream: str, *options: str) -> str:
    return shell_command(["patchctl", "pin-sync", upstream, *options])


def git_command(tree: str, *args: str) -> str:
    return shell_command(["git", "-C", tree, *args])


def mirror_of(config: Config, store: Store, upstream: str) -> Mirror:
    return store.mirror(config.get_upstream(upstream).url, base=config.root)
