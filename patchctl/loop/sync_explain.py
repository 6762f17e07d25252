"""What a pin-sync's report says beyond the replay: why the replay stopped (worked out on
another thread meanwhile), the range-diff of each series, and the series' health rows."""

from __future__ import annotations

from pathlib import Path

from .. import git
from ..beside import Beside
from ..errors import GitError
from ..project.config import Config
from ..state.sync_state import SyncState
from ..upstream.store import Store
from . import health, stopcause
from .rangediff import old_series_head, range_diff
from .sync_round import mirror_of, series_patches, sync_command, this_run


def explain_beside(config: Config, state: SyncState) -> Beside | None:
    """The cause of the stop (`patchctl.loop.stopcause`), asked of git on another thread while the
    report's health rows are: it reads the sync tree and the upstream's history, and writes nothing."""
    entry = next((e for e in state.series if e.head_before is not None), None)
    if entry is None or this_run(state).stopped is None:
        return None
    patch, carried = this_run(state).stopped
    urls = stopcause.upstream_urls(config, state.upstream)
    pins = stopcause.Pins(Path(entry.tree), state.old_pin, state.target, stopcause.commit_url_base(urls))
    return Beside(pins.explain_carried, patch, carried)


def explain_stop(state: SyncState, explaining: Beside | None, *, dry_run: bool) -> stopcause.StopCause | None:
    """The upstream commits behind the patch that stopped the replay (EXPLAINING), and the way to
    drop it where upstream may have its own version."""
    if explaining is None:
        return None
    try:
        cause = explaining.result()
    except GitError:
        return None  # what git cannot tell leaves the stop as it is, without its cause
    if cause.upstream_version:
        # --drop undoes the patch's merge itself, whatever the stop (as `git am --skip` does).
        drop = sync_command(state.upstream, "--continue", "--drop")
        how = "drop the patch where a real pin-sync stops" if dry_run else f"`{drop}`"
        cause.advice = f"compare both sides (under why it stopped), then {how}"
    return cause


def series_range_diffs(config: Config, state: SyncState) -> dict[str, str]:
    """Per series: the range-diff of its patches on the old pin (the commits made when the
    replay seeded its blobs, made again if they are gone) against what the replay and the
    fixes made of them on the new pin. Computed once, at the end. A review aid: when git
    cannot compute it, the report says so in its place and the sync goes on."""
    diffs = {}
    for entry in state.series:
        tree = Path(entry.tree)
        try:
            head = git.rev_parse(tree, "HEAD")
            old_head = entry.old_head
            if old_head is None or not git.run(["cat-file", "-e", f"{old_head}^{{commit}}"], tree, check=False).ok:
                old_head = old_series_head(tree, state.old_pin, series_patches(config, state, entry.name))
            diffs[entry.name] = range_diff(tree, state.old_pin, old_head, state.target, head)
        except GitError as exc:
            diffs[entry.name] = f"(range-diff not available: {exc})\n"
        diffs[entry.name] = _rename_notes(state, entry.name) + diffs[entry.name]
    return diffs


def health_rows(config: Config, store: Store, state: SyncState) -> list[health.HealthRow]:
    """The series' health for the report: each patch's upstream status, its drift between the
    pins and how the replay (so far) classified it, with the commit that took it upstream."""
    rows: list[health.HealthRow] = []
    for entry in state.series:
        outcomes = {
            r.patch: {
                "verdict": r.classification,
                "taken_upstream": r.taken_upstream,
                "upstream_holds": r.classification.startswith(("already upstream", "taken upstream")),
            }
            for r in state.records
            if r.series == entry.name
        }
        patches = series_patches(config, state, entry.name)
        repo = mirror_of(config, store, entry.upstream).path
        rows += health.health_rows(repo, state.old_pin, state.target, entry.name, patches, outcomes)
    return rows


def _rename_notes(state: SyncState, series: str) -> str:
    """A line per rename the replay followed, above the range-diff that shows the patch at its new path."""
    return "".join(
        f"{record.patch}: followed the rename {rename}\n"
        for record in state.records
        if record.series == series
        for rename in record.renames
    )
