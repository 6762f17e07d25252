"""`patchctl pin-sync`: move an upstream's pin forward behind gates.

1. Resolve the target (`--to REV`, or `--latest`: the tip of the upstream's branch).
2. Replay: for every series on the upstream (and on every upstream that tracks it), a
   sync worktree at the target under `.patchctl/sync/<upstream>/<series>`, where each
   patch is applied with a 3-way merge and classified: clean, applied with offset, merged
   3-way, already upstream (dropped) or conflict. A conflict stops the sync with the
   markers left in the worktree and a state file for `--continue` / `--abort`. A patch
   that 3-way cannot even merge (git says why: a missing file, a missing preimage blob)
   stops it too, with nothing applied: the user applies it by hand, or drops it on purpose
   with `--continue --drop`. A patch is never dropped silently: `--continue` refuses while
   nothing was done, and every dropped patch is a warning in the report and on stderr.
   The blobs 3-way needs are created from the old pin first, every time, so the outcome
   never depends on what the cache holds (once per sync: a `--continue` goes on from the
   patch that stopped it, with the blobs and the trees the stop left, and redoes nothing).
   Where git gives up, a file upstream moved is followed and a foreign index line's
   preimage is rebuilt from the old pin; an identical edit upstream made for another
   reason stops the sync ("needs a look"). See `patchctl.loop.carry`.
3. Gates, per series, in order: the series is re-exported from the worktree and applied
   strictly at the target (in the index: it must give the worktree's files), then checked
   out clean when the series' build steps and gate commands need a tree to run in. A
   failing gate stops the sync; `--continue` re-runs the gates (after fixes committed in
   the worktree), `--abort` drops it.
   Then the range-diff of each series (old pin against new), once, for the report.
4. Only then are the re-exported patches, `pin:` in matrix.yaml and every pin_files entry
   written, all together or not at all (`patchctl.state.journal`).

matrix.yaml and patches/ are not touched before step 4; `--dry-run` never reaches it.
"""

from __future__ import annotations

import re
import stat
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from .. import git
from ..beside import Beside
from ..confined import Refused, Root, all_confined
from ..confined.regular import kind_of
from ..errors import CheckFailed, EnvironmentFailure, GitError, UsageError
from ..output.escape import shell_command, shell_word
from ..output.jsonout import json_field
from ..patterns import lazy
from ..project.config import Config, Series
from ..records import dataclass
from ..series.applier import PatchOutcome, Status, commit_worktree, is_clean, seed_three_way_objects
from ..series.patchset import PatchFile, read_series, series_digest
from ..state import treeswap, worktree
from ..state.sync_state import (
    MAX_RANGE_LOG,
    OtherVersionState,
    PatchRecord,
    SeriesProgress,
    SyncState,
    commit_pin_update,
    drop_state,
    load_state,
    save_state,
)
from ..upstream.store import Mirror, Store, settle_checkout
from . import carry, health, pinfile, stopcause
from .rangediff import old_series_head, range_diff

if TYPE_CHECKING:
    from ..series.exporter import ExportResult, GeneratedPatch

MAX_LISTED_COMMITS = 500
# What a stop's report says in place of the range-diff: it is computed once, when the sync ends.
RANGE_DIFF_AT_THE_END = "at the end: computed once, when every patch is carried and the gates pass"

Progress = Callable[[str], None]

# How a patch fared in the replay, in the words of the report.
CLASSIFICATION = {
    Status.APPLIED: "clean",
    Status.OFFSET: "applied with offset",
    Status.MERGED: "merged 3-way",
    Status.ALREADY_APPLIED: "already upstream (dropped)",
    Status.CONFLICT: "conflict",
}


@dataclass
class GateRecord:
    series: str
    kind: str  # "strict-apply" | "build" | "gate"
    name: str
    ok: bool
    duration_s: float = json_field(digits=3)
    detail: str = ""
    log: str | None = None


@dataclass
class SyncReport:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"ok": "ok"}

    state: str  # synced | dry-run | up-to-date | conflict | needs-hand | needs-look | gate-failed | aborted
    upstream: str
    old_pin: str
    new_pin: str
    target_spec: str
    moved_upstreams: list[str] = field(default_factory=list)
    commits: list[dict] | None = None  # upstream commits between the pins, oldest first
    commits_note: str = ""
    patches: list[PatchRecord] = field(default_factory=list)
    gates: list[GateRecord] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # patches dropped from the series, said loudly
    # series -> `git range-diff` of the series on the old pin against the series on the new pin
    range_diffs: dict[str, str] = json_field(omit_empty=True, default_factory=dict)
    health: list[health.HealthRow] = json_field(omit_empty=True, default_factory=list)  # the short table of `status`
    range_diff_note: str = json_field(omit_empty=True, default="")  # at a stop: RANGE_DIFF_AT_THE_END
    # checksums of the downstream's manifests pin-sync could not remake (patchctl.loop.versionpin)
    to_refresh: list[str] = json_field(omit_empty=True, default_factory=list)
    # at a stop: the upstream commits behind each failed hunk (patchctl.loop.stopcause)
    stop_cause: stopcause.StopCause | None = json_field(omit_empty=True, default=None)
    # series -> the git tree id its build steps and gates passed on (the series applied at the new
    # pin): the pin-sync workflow's push job applies what it is handed and compares.
    gated_trees: dict[str, str] = json_field(omit_empty=True, default_factory=dict)
    phase_seconds: dict[str, float] = json_field(digits=3, default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.state in ("synced", "dry-run", "up-to-date", "aborted")

    @property
    def failed_gate(self) -> GateRecord | None:
        return next((g for g in self.gates if not g.ok), None)


class SyncStopped(CheckFailed):
    """The sync stopped at a conflict or a failing gate; the report says where and what next."""

    def __init__(self, report: SyncReport, message: str):
        super().__init__(message)
        self.report = report


class _Timer:
    def __init__(self, seconds: dict[str, float]):
        self.seconds = seconds

    def phase(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self) -> None:
                self.start = time.monotonic()

            def __exit__(self, *exc: object) -> None:
                timer.seconds[name] = timer.seconds.get(name, 0.0) + time.monotonic() - self.start

        return _Phase()


# ---------------------------------------------------------------- entry points


def pin_sync(
    config: Config,
    store: Store,
    upstream: str | None = None,
    *,
    to: str | None = None,
    latest: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """Start a sync of UPSTREAM to TO (or its branch tip with LATEST). Returns the report
    of a finished sync; raises SyncStopped (exit 1) with the report on a conflict or a
    failing gate."""
    say = progress or (lambda _line: None)
    _confine_outputs(config, upstream)
    if (to is None) == (not latest):
        raise UsageError("give exactly one of --to REV or --latest")
    from . import versionpin  # (a --continue that stops reads no manifest: imported where it is used)

    name = _pick_upstream(config, upstream)
    up = config.get_upstream(name)
    if up.tracks is not None:
        raise UsageError(
            f"upstream {name} tracks {up.tracks}: its pin must equal {up.tracks}'s, so it moves only with it; "
            f"run `patchctl pin-sync {shell_word(up.tracks)}` (that moves {name} too)"
        )
    state_path = worktree.sync_state_file(config.root, name)
    if state_path.exists():
        raise UsageError(
            f"a pin-sync of {name} is in progress ({state_path.parent}); finish it with "
            f"`{_sync_command(name, '--continue')}` or drop it with `{_sync_command(name, '--abort')}`"
        )
    moved = [u.name for u in pinfile.moved_upstreams(config, name)]
    series_list = [s for u in moved for s in config.series_on(u)]
    if not series_list:
        raise UsageError(f"no series in {config.path.name} is on upstream {name}: pin-sync would gate nothing")
    read = {s.name: read_series(s) for s in series_list}  # fail closed, before anything is fetched
    seconds: dict[str, float] = {}
    timer = _Timer(seconds)
    with timer.phase("resolve"):
        mirror = store.mirror(up.url, base=config.root)
        # --latest of an upstream pinned by release is its newest tag, not its branch's tip
        release = versionpin.latest_release(store, mirror, up) if latest else None
        if release is not None:
            target, spec = release
        elif latest:
            target, spec = store.branch_tip(mirror, up.branch), f"--latest ({up.branch})"
        else:
            target, spec = store.resolve_requested(mirror, config, name, to, "--to"), str(to)
    commits, note = upstream_commits(mirror.path, up.pin, target)
    if target == up.pin:
        # Sync trees without a state file are what a killed run left: nothing to continue from.
        Root(worktree.state_owner(config.root)).remove_tree(worktree.sync_root(config.root, name))
        return SyncReport(
            "up-to-date",
            name,
            up.pin,
            target,
            spec,
            moved,
            [],
            "the pin is already at the target",
            phase_seconds=seconds,
        )

    pinfile.pin_changes(config, name, target)  # a broken pin_files entry fails now, not after the gates
    versionpin.check_manifests(config, store, name, target, spec)  # and a manifest it cannot move
    with timer.phase("vendor"):
        _refuse_vendored_edits(config, store, [s for s in series_list if s.vendor])
    state = SyncState(
        name,
        up.pin,
        target,
        spec,
        [
            SeriesProgress(
                s.name, s.upstream, str(worktree.sync_root(config.root, name) / s.name), series_digest(read[s.name])
            )
            for s in series_list
        ],
    )
    _this_run(state).patches = read  # see _patches
    sync_root = worktree.sync_root(config.root, name)
    _remove_sync_root(config, store, sync_root, state)
    Root(worktree.state_owner(config.root)).mkdirs(sync_root)
    with timer.phase("checkout"):
        _check_out_and_seed(config, store, state)
    report = SyncReport("synced", name, up.pin, target, spec, moved, commits, note, phase_seconds=seconds)
    try:
        result = _run(config, store, state, report, timer, say, dry_run=dry_run)
    except SyncStopped:
        if dry_run:
            _remove_sync_root(config, store, sync_root, state)
        raise
    except BaseException:
        # Git, Docker or Ctrl-C before a stop point: nothing to continue from, nothing written.
        _remove_sync_root(config, store, sync_root, state)
        raise
    if dry_run:
        _remove_sync_root(config, store, sync_root, state)
    return result


def continue_sync(
    config: Config, store: Store, upstream: str | None = None, *, drop: bool = False, progress: Progress | None = None
) -> SyncReport:
    """Resume a stopped sync after the user resolved the conflict (and committed) or fixed
    what made a gate fail. DROP drops the patch that stopped the replay, on purpose."""
    say = progress or (lambda _line: None)
    _confine_outputs(config, upstream)
    state = load_state(config.root, _pick_in_progress(config, upstream))
    for entry in state.series:
        _check_sync_tree(config, state, Path(entry.tree))
    for entry in state.series:
        if series_digest(_patches(config, state, entry.name)) != entry.digest:
            raise UsageError(
                f"patches of series {entry.name} changed since the sync started; drop the sync "
                f"(`{_sync_command(state.upstream, '--abort')}`) and start again"
            )
    up = config.get_upstream(state.upstream)
    if up.pin != state.old_pin:
        raise UsageError(
            f"the pin of {state.upstream} changed since the sync started; drop the sync "
            f"(`{_sync_command(state.upstream, '--abort')}`) and start again"
        )
    if state.phase == "replaying":
        _back_to_saved_progress(state)
    if state.phase == "conflict":
        _take_resolution(config, state, drop=drop)
    elif drop:
        raise UsageError(
            "--drop drops the patch that stopped the replay, and this sync stopped at a gate: fix the series and "
            f"`{_sync_command(state.upstream, '--continue')}`, or `{_sync_command(state.upstream, '--abort')}`"
        )
    elif state.phase == "gates-failed":
        for entry in state.series:
            _take_gate_fixes(config, state, entry)
    mirror = _mirror_of(config, store, state.upstream)
    # Upstream's commits and the health rows' log of the range are for the report alone: an
    # earlier round kept git's answers, else git reads them on the other core meanwhile.
    _take_range_logs(state, mirror.path)
    listing = Beside(_upstream_logs, mirror.path, state.old_pin, state.target)
    moved = [u.name for u in pinfile.moved_upstreams(config, state.upstream)]
    seconds: dict[str, float] = {}
    report = SyncReport(
        "synced", state.upstream, state.old_pin, state.target, state.target_spec, moved, phase_seconds=seconds
    )
    return _run(config, store, state, report, _Timer(seconds), say, dry_run=False, listing=listing)


def abort_sync(config: Config, store: Store, upstream: str | None = None) -> SyncReport:
    """Drop a stopped sync: remove its worktrees and state. Nothing else was written."""
    _confine_outputs(config, upstream)
    name = _pick_in_progress(config, upstream)
    try:
        state = load_state(config.root, name)
    except OtherVersionState:
        # Its trees are still the sync trees of the series on the moved upstreams: remove those.
        series = [s for u in pinfile.moved_upstreams(config, name) for s in config.series_on(u.name)]
        trees = [
            SeriesProgress(s.name, s.upstream, str(worktree.sync_tree(config.root, name, s.name)), "") for s in series
        ]
        pin = config.get_upstream(name).pin
        state = SyncState(name, pin, pin, "(state of another version)", trees)
    _remove_sync_root(config, store, worktree.sync_root(config.root, name), state)
    return SyncReport(
        "aborted",
        name,
        state.old_pin,
        state.target,
        state.target_spec,
        patches=state.records,
        next_steps=[
            f"removed {worktree.display(config.root, worktree.sync_root(config.root, name))}; matrix.yaml and "
            "patches/ were never changed"
        ],
    )


# ---------------------------------------------------------------- the run


def _run(
    config: Config,
    store: Store,
    state: SyncState,
    report: SyncReport,
    timer: _Timer,
    say: Progress,
    *,
    dry_run: bool,
    listing: Beside | None = None,
) -> SyncReport:
    """The replay, then the stop or the gates and the write. LISTING: the report's upstream
    commits, still being listed beside the replay (`upstream_commits`)."""
    with timer.phase("replay"):
        stopped = _replay(config, state, say)
    if listing is not None:
        report.commits, report.commits_note = listing.result()
    report.patches = list(state.records)
    report.warnings = _drop_warnings(state)
    explaining = _explaining(config, state) if stopped is not None else None  # on another core meanwhile
    with timer.phase("health"):
        report.health = _health_rows(config, store, state)
    if stopped is not None:
        report.range_diff_note = RANGE_DIFF_AT_THE_END
        report.patches += _blocked_records(config, state)
        markers = state.records[-1].classification == CLASSIFICATION[Status.CONFLICT]
        look = state.records[-1].classification in (carry.SAME_EDIT, carry.NOT_EXACT)
        report.state = "conflict" if markers else "needs-hand"
        what = "stops at a conflict" if markers else "stops at a patch that needs a hand (nothing applied)"
        if look:
            report.state, what = "needs-look", "stops at a patch that needs a look"
        with timer.phase("stop-cause"):  # what is left of it to wait for
            report.stop_cause = _explain_stop(state, explaining, dry_run=dry_run)
        if dry_run:
            report.next_steps = [f"dry run: {stopped}; a real pin-sync would stop here for you to resolve it"]
            raise SyncStopped(report, f"pin-sync of {state.upstream} (dry run) {what}: {stopped}")
        state.phase = "conflict"
        _keep_range_logs(state, _mirror_of(config, store, state.upstream).path)
        _save(config, state)
        report.next_steps = _conflict_steps(config, state) if markers else _by_hand_steps(config, state)
        if look:
            report.next_steps = _look_steps(config, state)
        # (A patch-id twin's own steps already say it: compare, then drop.)
        if report.stop_cause is not None and report.stop_cause.upstream_version and not _this_run(state).twin:
            patch_name = _this_run(state).stopped[0].name  # type: ignore[index]
            report.next_steps.insert(
                0, f"upstream may have its own version of {patch_name}: {report.stop_cause.advice}"
            )
        raise SyncStopped(report, f"pin-sync of {state.upstream} {what}: {stopped}; see the report for what to do")

    # series -> (its new patches, the export result, the changes to its vendored copies)
    planned: dict[str, tuple[list[GeneratedPatch], ExportResult, list[pinfile.FileChange]]] = {}
    # The range-diff is for the report alone, read from commits the gates never change: git
    # computes it on another core meanwhile (on a real bump, 0.3 to 0.5 s of the last command).
    range_diffs = Beside(_range_diffs, config, state)
    try:
        for entry in state.series:
            ok = _gate_series(config, store, state, entry, report, planned, timer, say)
            if not ok:
                report.state = "gate-failed"
                report.range_diff_note = RANGE_DIFF_AT_THE_END
                failed = report.failed_gate
                assert failed is not None
                if not dry_run:
                    state.phase = "gates-failed"
                    _keep_range_logs(state, _mirror_of(config, store, state.upstream).path)
                    _save(config, state)
                    report.next_steps = [
                        f"gate {failed.name} ({failed.kind}) of series {failed.series} failed: {failed.detail}",
                        "matrix.yaml and patches/ are unchanged",
                        *_gate_fix_steps(config, state, Path(entry.tree)),
                        f"then run `{_sync_command(state.upstream, '--continue')}`",
                        f"or drop the sync with `{_sync_command(state.upstream, '--abort')}`",
                    ]
                raise SyncStopped(
                    report,
                    f"pin-sync of {state.upstream}: gate {failed.name} of series {failed.series} failed: "
                    f"{failed.detail}; nothing written",
                )
        with timer.phase("range-diff"):  # what is left of it to wait for
            report.range_diffs = range_diffs.result()
    finally:
        range_diffs.exception()  # a failed gate waits for it too: nothing of this run goes on after it
    from ..series.apply_job import forget_dropped
    from . import versionpin

    with timer.phase("write"):
        changes = _changes(config, state, planned)
        changes, refresh = versionpin.with_manifests(
            config, store, state.upstream, state.target, state.target_spec, changes
        )
        report.to_refresh = [str(item) for item in refresh]
        report.files_changed = [worktree.display(config.root, c.path) for c in changes]
        if dry_run:
            report.state = "dry-run"
            report.next_steps = [
                "dry run: every gate passed; nothing was written (run without --dry-run to write the files listed)"
            ]
            return report
        commit_pin_update(config.path, changes)
        for entry in state.series:
            forget_dropped(config, entry.name, [r.patch for r in _dropped(state) if r.series == entry.name])
        from . import vendor  # see _gate_series

        vendor.prune_empty_dirs(config, [c.path for _, _, vendored in planned.values() for c in vendored if c.deletes])
        _remove_sync_root(config, store, worktree.sync_root(config.root, state.upstream), state)
    report.state = "synced"
    report.warnings = _drop_warnings(state, done=True)  # the files are gone now: say so in the past tense
    report.warnings += [versionpin.refresh_warning(refresh)] if refresh else []
    report.warnings += [
        w for u in pinfile.moved_upstreams(config, state.upstream) if (w := pinfile.ci_pin_left_behind(u))
    ]
    report.warnings += [
        f"series {name} has no patch left: every command now refuses it (fail closed); remove it from "
        f"{config.path.name} or set allow_empty: true on it"
        for name, (patches, _, _) in planned.items()
        if not patches and not config.get_series(name).allow_empty
    ]
    message = f"pin-sync: move {state.upstream} to {state.target[:12]}"
    add = shell_command(["git", "add", "--", *report.files_changed])
    trailers = sync_trailers(state.records)
    commit = ["git", "commit", "-m", message] + (["-m", "\n".join(trailers)] if trailers else [])
    report.next_steps = [f"review and commit: `{add} && {shell_command(commit)}`"] if changes else []
    return report


def sync_trailers(records: list[PatchRecord]) -> list[str]:
    """`KEY: SERIES/PATCH` for every patch the sync stopped at (the key names the stop: a
    conflict, needed a hand, needed a look) or dropped: the commit's trailers, from which
    `patchctl status` tells how each patch fared."""
    trailers = []
    for record in records:
        name = f"{record.series}/{record.patch}"
        if record.classification == "resolved by hand" or record.classification.startswith("dropped"):
            trailers.append(f"{_stop_trailer(record.detail)}: {name}")
        if record.classification.startswith(("dropped", "already upstream", "taken upstream")):
            taken = f" (taken upstream in {record.taken_upstream['commit']})" if record.taken_upstream else ""
            trailers.append(f"{health.DROPPED_TRAILER}: {name}{taken}")
    return trailers


def _stop_trailer(detail: str) -> str:
    """The trailer naming the stop a patch resolved by hand had: its record's detail says what it
    was (`was: conflict ...`, as `_take_resolution` writes it)."""
    was = detail.removeprefix("was: ")
    if was.startswith("conflict"):
        return health.CONFLICT_TRAILER
    if was.startswith("needs a look"):
        return health.NEEDED_LOOK_TRAILER
    return health.NEEDED_HAND_TRAILER


def _refuse_vendored_edits(config: Config, store: Store, series_list: list[Series]) -> None:
    """A vendored copy that is not the old pin + series holds edits pin-sync would overwrite:
    refuse before anything is replayed, saying how to keep or drop them."""
    from . import vendor  # see _gate_series

    for series in series_list:
        try:
            vendor.run(config, store, (series.name,), check=True)
        except vendor.VendorOutOfDate as stale:
            (copy,) = stale.result.copies
            differences = copy.differences
            raise UsageError(
                f"the vendored copy of series {series.name} differs from {copy.rev[:12]} + series "
                f"({differences[0].line()}{f' and {len(differences) - 1} more' if len(differences) > 1 else ''}): "
                f"turn the edits into a patch (`patchctl export {shell_word(series.name)} --from-vendor`) or drop them "
                "(`patchctl vendor`) before moving the pin"
            ) from None


def _replay(config: Config, state: SyncState, say: Progress) -> str | None:
    """Apply the remaining patches with 3-way; returns why it stopped, or None when done."""
    for entry in state.series:
        series = config.get_series(entry.name)
        patches = _patches(config, state, series.name)
        tree = Path(entry.tree)
        seeding = _seeding(state, entry)
        if entry.next < len(patches) and seeding is None:
            _seed(tree, state.old_pin, entry, patches)
        move = carry.PinMove(tree, state.old_pin, state.target, patches, state.upstream_facts, entry.old_head, seeding)
        try:
            stopped = _replay_series(series, entry, patches, tree, move, state, say)
        finally:
            move.seeded()  # the state saved at a stop names the seed
        if stopped is not None:
            return stopped
    return None


def _replay_series(
    series: Series,
    entry: SeriesProgress,
    patches: list[PatchFile],
    tree: Path,
    move: carry.PinMove,
    state: SyncState,
    say: Progress,
) -> str | None:
    """`_replay` of one series: its remaining patches carried in TREE; why it stopped, or None."""
    head = _head(state, entry) if entry.next < len(patches) else None
    while entry.next < len(patches):
        patch = patches[entry.next]
        say(f"replaying {series.name}: {patch.name}")
        entry.head_before = head
        carried = carry.carry_patch(tree, move, patch)
        outcome = carried.outcome
        head = outcome.commit or head  # a patch already upstream commits nothing
        _moved(state, entry, head)
        if outcome.commit:  # made on HEAD, where the patch itself was first applied strictly
            strict = outcome.status in (Status.APPLIED, Status.OFFSET) and carried.applied is patch
            entry.replayed[outcome.commit] = [patch.digest, strict]
        record = _carried_record(series.name, patch, carried, tree)
        twin = None if carried.needs_look else _note_taken(record, tree, move, patch, outcome)
        state.records.append(record)
        _this_run(state).stopped = (patch, carried)  # what `_explaining` reads, if this one stops
        if carried.needs_look or twin is not None:
            _this_run(state).twin = twin or ""
            return f"{series.name}/{patch.name}: {record.classification} ({record.detail})"
        if outcome.ok or outcome.status == Status.ALREADY_APPLIED:
            entry.next += 1
            entry.head_before = None
            continue
        _this_run(state).unmerged = outcome.conflict_files  # what `_conflict_steps` names
        return f"{series.name}/{patch.name}: {record.classification}" + (f" ({record.detail})" if record.detail else "")
    return None


def _note_taken(
    record: PatchRecord, tree: Path, move: carry.PinMove, patch: PatchFile, outcome: PatchOutcome
) -> str | None:
    """Name the upstream commit that took PATCH, a patch the target already holds: one that made
    every hunk of it, or one with its patch-id. A patch that does not apply whose patch-id an
    upstream commit has is no such patch (a patch-id ignores whitespace, and upstream may have
    changed those lines since): a stop that needs a look, naming the commit (returned), with
    the tree put back as it was before the patch; never dropped."""
    holds = outcome.status == Status.ALREADY_APPLIED
    if not holds and outcome.ok:
        return None  # it applies: upstream does not hold it
    taken = carry.taken_upstream(move, patch, tree if holds else None)
    if taken is None:
        return None
    url = patch.upstream_status.url if patch.upstream_status is not None else None
    if holds:
        record.taken_upstream = taken.record(url)
        record.detail = f"its change is already in the upstream tree, {taken.describe(url)}; the patch is dropped"
        return None
    git.run(["reset", "-q", "--hard", "HEAD"], tree)
    git.run(["clean", "-q", "-fd"], tree)
    was = f"{record.classification}" + (f": {record.detail}" if record.detail else "")
    record.classification = carry.NOT_EXACT
    record.detail = f"{carry.describe_not_exact(taken)}; nothing of the patch was applied (3-way alone: {was})"
    record.conflicts = []
    return taken.commit


@dataclass
class _ThisRun:
    """What one run (one round of `--wait`) learns beside its SyncState and keeps to itself: on
    the state object, outside the dataclass's fields, so never saved, and gone with the next
    round, which loads the state anew (the user may have moved the trees in between)."""

    patches: dict[str, list[PatchFile]] = field(default_factory=dict)  # series -> its patches, read once
    seeding: dict[str, Beside] = field(default_factory=dict)  # series -> the seed a start began beside it
    heads: dict[str, str] = field(default_factory=dict)  # series -> the commit its tree stands at
    unmerged: list[str] = field(default_factory=list)  # the files the stop's merge left unmerged
    twin: str = ""  # the upstream commit with the stopped patch's patch-id, not its exact change
    stopped: tuple[PatchFile, carry.Carried] | None = None  # the patch that stopped the replay, as carried


def _this_run(state: SyncState) -> _ThisRun:
    this_run = state.__dict__.get("_this_run")
    if this_run is None:  # (not setdefault: that makes a _ThisRun at every call, kept or not)
        this_run = state.__dict__["_this_run"] = _ThisRun()
    return this_run


def _patches(config: Config, state: SyncState, name: str) -> list[PatchFile]:
    """Series NAME's patches, read once per command: a pin-sync writes patches/ only as its very
    last step, so every step before reads the same files (and shares their parse)."""
    read = _this_run(state).patches
    if name not in read:
        # A file that reads as the last run in this process read it is that run's PatchFile, with
        # its parse: a `pin-sync --wait` parses each patch once for all its rounds.
        series = config.get_series(name)
        earlier = {(p.path, p.data): p for p in _LAST_READ.get(series.dir, [])}
        read[name] = [earlier.get((p.path, p.data), p) for p in read_series(series)]
        _LAST_READ[series.dir] = read[name]
    return read[name]


_LAST_READ: dict[Path, list[PatchFile]] = {}  # series directory -> what `_patches` last read there


def _check_out_and_seed(config: Config, store: Store, state: SyncState) -> None:
    """Each series' sync tree checked out at the target while its seed (`_seed`) is made in
    the mirror on another thread: the two share only the object store, to which each only
    adds. The replay starts on the checkout and waits for the seed at its first 3-way merge
    (`_seeding`); on a real bump the seed took 0.2 to 0.7 s of the first run, the checkout less."""
    mirrors = {entry.name: _mirror_of(config, store, entry.upstream) for entry in state.series}
    seeding = _this_run(state).seeding
    previous = None  # one seed at a time, in the series' order
    for entry in state.series:
        patches = _patches(config, state, entry.name)
        previous = Beside(_seed, mirrors[entry.name].path, state.old_pin, entry, patches, after=previous)
        seeding[entry.name] = previous
    try:
        for entry in state.series:
            mirror = mirrors[entry.name]
            commit = store.resolve(mirror, state.target)
            # Checked out in the state directory, settled there, then moved in by descriptor.
            treeswap.check_out(
                store,
                mirror,
                commit,
                tree=Path(entry.tree),
                project=worktree.state_owner(config.root),
                prepare=settle_checkout,
            )
            _moved(state, entry, commit)
    except BaseException:
        for seed in seeding.values():
            if not seed.cancel():
                seed.exception()  # waited for: nothing of this run writes on after it ends
        raise


def _seeding(state: SyncState, entry: SeriesProgress) -> Callable[[], str | None] | None:
    """How to wait for ENTRY's seed where `_check_out_and_seed` started it (once), else None."""
    seed = _this_run(state).seeding.pop(entry.name, None)
    return None if seed is None else seed.result


def _seed(repo: Path, old_pin: str, entry: SeriesProgress, patches: list[PatchFile]) -> str | None:
    """The blobs 3-way needs, from the old pin: made once per sync, with the series as commits
    there (the range-diff's old side). A --continue takes them as they are while every preimage
    the patches still to replay name is in the object store (or was never makeable); were some
    pruned since (a `git gc` in the cache), they are made again, as at the start. The seed's last
    commit (ENTRY's old_head)."""
    if entry.old_head is not None:
        missing = carry.missing_preimages(repo, patches[entry.next :])
        if set(missing) <= set(entry.unseeded):
            return entry.old_head
    entry.old_head = seed_three_way_objects(repo, old_pin, patches)
    entry.unseeded = carry.missing_preimages(repo, patches)
    return entry.old_head


def _save(config: Config, state: SyncState) -> None:
    """Save STATE with the commit each tree stands at: what a cut-off --continue goes back to."""
    for entry in state.series:
        entry.head = _head(state, entry)
    save_state(config.root, state)


def _head(state: SyncState, entry: SeriesProgress) -> str:
    """The commit ENTRY's tree stands at: asked of git once a round, then kept up by `_moved`."""
    heads = _this_run(state).heads
    if entry.name not in heads:
        heads[entry.name] = git.rev_parse(Path(entry.tree), "HEAD")
    return heads[entry.name]


def _moved(state: SyncState, entry: SeriesProgress, head: str | None) -> None:
    """ENTRY's tree now stands at HEAD, this run having moved it there (None: ask git again)."""
    heads = _this_run(state).heads
    if head is None:
        heads.pop(entry.name, None)
    else:
        heads[entry.name] = head


def _back_to_saved_progress(state: SyncState) -> None:
    """A --continue cut off while it replayed or gated (killed, Ctrl-C) left the state at the
    last patch it saved and the trees maybe further on, a patch half applied: each tree goes
    back to the commit the state names, and the replay goes on from there (what the cut-off
    run did past it is done again, the same way)."""
    for entry in state.series:
        tree = Path(entry.tree)
        if entry.head is not None and (_head(state, entry) != entry.head or not is_clean(tree)):
            git.run(["reset", "--quiet", "--hard", entry.head], tree)
            _moved(state, entry, entry.head)


def _carried_record(series: str, patch: PatchFile, carried: carry.Carried, tree: Path) -> PatchRecord:
    """The record of a replayed patch, saying what was mended to carry it (a rename followed,
    a preimage rebuilt) and stopping at an edit upstream made for another reason."""
    record = _record(series, patch, carried.outcome, tree)
    if carried.needs_look:
        record.classification = carry.SAME_EDIT
        record.detail = carry.describe_same_edits(carried.same_edits)
        if carried.outcome.status == Status.MERGED:
            record.detail += "; the rest merged 3-way, staged and not committed"
    notes = carried.notes()
    if notes:
        record.detail = "; ".join(notes + ([record.detail] if record.detail else []))
    record.renames = [f"{old} → {new}" for old, new in carried.renames]
    return record


def _look_steps(config: Config, state: SyncState) -> list[str]:
    entry = next(e for e in state.series if e.head_before is not None)
    tree = worktree.display(config.root, Path(entry.tree))
    patch = _patches(config, state, entry.name)[entry.next]
    if twin := _this_run(state).twin:
        return [
            f"{patch.name}: compare its change with upstream's (`{_git_command(tree, 'show', twin)}`), the same but "
            f"for whitespace or changed since; nothing of the patch is applied in {tree}",
            f"if upstream's version stands for the patch: `{_sync_command(state.upstream, '--continue', '--drop')}`",
            *_by_hand_steps(config, state)[1:4],
            f"or `{_sync_command(state.upstream, '--abort')}` to drop the sync; matrix.yaml and patches/ are "
            "unchanged until every gate has passed",
        ]
    return [
        f"{patch.name}: the upstream commit named above made the same edit as the patch along with other changes, so "
        f"upstream's edit may not stand for the patch's (e.g. a counter both sides increment); the rest of the patch "
        f"is staged, not committed, in {tree}",
        f"check the files named above there and make the patch's edit again on top of upstream's where both are "
        f"needed; `git -C {tree} add` them, then run `patchctl pin-sync --continue` (it commits with the patch's "
        "message)",
        "if upstream's edit does stand for the patch's: `patchctl pin-sync --continue` as it is (or `--continue "
        "--drop` when nothing is staged)",
        "or `patchctl pin-sync --abort` to drop the sync; matrix.yaml and patches/ are unchanged until every gate has "
        "passed",
    ]


def _explaining(config: Config, state: SyncState) -> Beside | None:
    """The cause of the stop (`patchctl.loop.stopcause`), asked of git on another thread while the
    report's health rows are: it reads the sync tree and the upstream's history, and writes nothing."""
    entry = next((e for e in state.series if e.head_before is not None), None)
    if entry is None or _this_run(state).stopped is None:
        return None
    patch, carried = _this_run(state).stopped
    urls = stopcause.upstream_urls(config, state.upstream)
    pins = stopcause.Pins(Path(entry.tree), state.old_pin, state.target, stopcause.commit_url_base(urls))
    return Beside(pins.explain_carried, patch, carried)


def _explain_stop(state: SyncState, explaining: Beside | None, *, dry_run: bool) -> stopcause.StopCause | None:
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
        drop = _sync_command(state.upstream, "--continue", "--drop")
        how = "drop the patch where a real pin-sync stops" if dry_run else f"`{drop}`"
        cause.advice = f"compare both sides (under why it stopped), then {how}"
    return cause


def _range_diffs(config: Config, state: SyncState) -> dict[str, str]:
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
                old_head = old_series_head(tree, state.old_pin, _patches(config, state, entry.name))
            diffs[entry.name] = range_diff(tree, state.old_pin, old_head, state.target, head)
        except GitError as exc:
            diffs[entry.name] = f"(range-diff not available: {exc})\n"
        diffs[entry.name] = _rename_notes(state, entry.name) + diffs[entry.name]
    return diffs


def _health_rows(config: Config, store: Store, state: SyncState) -> list[health.HealthRow]:
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
        patches = _patches(config, state, entry.name)
        repo = _mirror_of(config, store, entry.upstream).path
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


def _record(series: str, patch: PatchFile, outcome: PatchOutcome, tree: Path) -> PatchRecord:
    label = CLASSIFICATION.get(outcome.status, f"needs a hand: {outcome.status.value}")
    detail = ""
    if outcome.status == Status.MERGED and outcome.upstream_parts:
        label = "partially upstream (merged 3-way)"
        detail = f"already in the upstream tree: {', '.join(outcome.upstream_parts)}; the rest merged 3-way"
    elif outcome.status == Status.OFFSET:
        detail = ", ".join(f"{o.file} hunk #{o.hunk} {o.offset:+d}" for o in outcome.offsets)
    elif outcome.status == Status.ALREADY_APPLIED:
        detail = "its change is already in the upstream tree; the patch is dropped from the series"
    elif not outcome.ok:
        detail = outcome.describe().split(": ", 1)[-1]
        if outcome.status != Status.CONFLICT:
            detail += "; nothing was applied"
        if outcome.status == Status.CONFLICT and outcome.hunk:
            detail += "; the patch's " + ", ".join(
                f"{f.file} hunk #{f.hunk} {f.hunk_header or ''} (line {f.patch_line} of {patch.name})"
                for f in outcome.failures
                if f.hunk
            )
    conflicts = conflict_blocks(tree, outcome.conflict_files) if outcome.status == Status.CONFLICT else []
    return PatchRecord(series, patch.name, label, detail, conflicts)


def conflict_blocks(tree: Path, files: list[str]) -> list[str]:
    """FILE:START-END for every conflict-marker block git left in FILES."""
    blocks = []
    for name in files:
        data = _tree_file(tree, name)
        if data is None:
            blocks.append(f"{name} (deleted on one side)")
            continue
        start = None
        number, counted = 1, 0
        for marker in _MARKER_RE.finditer(data):  # lines as git counts them: after each \n
            number += data.count(b"\n", counted, marker.start())
            counted = marker.start()
            if marker[1] == b"<":
                start = number
            elif start is not None:
                blocks.append(f"{name}:{start}-{number}")
                start = None
    return blocks


_MARKER_RE = lazy(rb"^([<>])\1{6} ", re.MULTILINE)  # a line that opens or closes a conflict block
MAX_TREE_FILE_BYTES = 64 * 1024 * 1024


def _has_marker(data: bytes) -> bool:
    """Whether DATA has a line that opens or closes a conflict block. (The plain search first: the
    pattern alone tries every line start of what may be megabytes of source.)"""
    return (b"<<<<<<< " in data or b">>>>>>> " in data) and _MARKER_RE.search(data) is not None


def _tree_file(tree: Path, name: str) -> bytes | None:
    """The bytes of the regular file NAME in TREE (a sync tree), read without following a link on
    the way (from the repository), or None when it is absent or not a regular file."""
    try:
        where = worktree.reached_through(tree)
        info = where.lstat(tree / name)
        if info is None or not stat.S_ISREG(info.st_mode):
            return None
        return where.read_bytes(tree / name, MAX_TREE_FILE_BYTES)
    except Refused:
        return None


# The commands below are printed to be pasted as they are, from the repository root (where
# matrix.yaml is; every path in the report is relative to it): paths are shell-quoted, and a
# patch file is read by the shell (`< FILE`), never by a git that -C moved elsewhere.


def _sync_command(upstream: str, *options: str) -> str:
    return shell_command(["patchctl", "pin-sync", upstream, *options])


def _git_command(tree: str, *args: str) -> str:
    return shell_command(["git", "-C", tree, *args])


def _conflict_steps(config: Config, state: SyncState) -> list[str]:
    entry = next(e for e in state.series if e.head_before is not None)
    tree = worktree.display(config.root, Path(entry.tree))
    files = _this_run(state).unmerged or git.z_list(Path(entry.tree), "diff", "--name-only", "--diff-filter=U")
    return [
        f"resolve the conflict in {tree}: edit {', '.join(files)} and remove the markers",
        f"then `{_git_command(tree, 'add', '--', *files)}` and either commit yourself or let --continue commit with "
        "the patch's message",
        f"then run `{_sync_command(state.upstream, '--continue')}`; or `{_sync_command(state.upstream, '--abort')}` "
        "to drop the sync",
        f"to drop the patch instead: `{_sync_command(state.upstream, '--continue', '--drop')}` (it undoes the "
        "patch's merge; said in the report)",
        "matrix.yaml and patches/ are unchanged until every gate has passed",
    ]


def _by_hand_steps(config: Config, state: SyncState) -> list[str]:
    entry = next(e for e in state.series if e.head_before is not None)
    tree = worktree.display(config.root, Path(entry.tree))
    patch = _patches(config, state, entry.name)[entry.next]
    apply = f"{_git_command(tree, 'apply', '--reject')} < {shell_word(worktree.display(config.root, patch.path))}"
    # git writes a FILE.rej only beside a file it found: a file gone from the target gets none.
    target = worktree.tree_root(Path(entry.tree), "the sync tree")
    gone = [
        f.source_path or f.path for f in patch.files if not f.is_added and target.kind(f.source_path or f.path) is None
    ]
    rejects = "each rejected hunk lands in a FILE.rej beside its file"
    if gone:
        rejects += (
            f"; {', '.join(gone)} {'is' if len(gone) == 1 else 'are'} gone from the target, so git writes no .rej "
            "for it: make its changes from the patch itself"
        )
    return [
        f"{patch.name} does not apply to the target and git could not merge it 3-way (see its detail above); "
        f"nothing of it was applied in {tree}",
        f"apply what applies: `{apply}` (it exits 1 while hunks are rejected: {rejects})",
        "make the rejected hunks' changes by hand, then stage everything but the .rej files: "
        f"`{_git_command(tree, 'add', '-A', '--', '.', ':!*.rej')}`",
        f"then run `{_sync_command(state.upstream, '--continue')}` (it commits with the patch's message)",
        f"to drop the patch from the series on purpose: `{_sync_command(state.upstream, '--continue', '--drop')}`",
        f"or `{_sync_command(state.upstream, '--abort')}` to drop the sync; matrix.yaml and patches/ are unchanged "
        "until every gate has passed",
    ]


def _gate_fix_steps(config: Config, state: SyncState, tree_path: Path) -> list[str]:
    tree = worktree.display(config.root, tree_path)
    return [
        f"fix the series in {tree}, where each patch is a commit "
        f"(`{_git_command(tree, 'log', '--oneline', f'{state.target[:12]}..')}`): a commit whose subject is "
        "`fixup! <subject of the patch it fixes>` (what git commit's --fixup option writes) is folded into that "
        "patch; any other commit becomes a new patch, which needs a description (a blank line after its subject, "
        "then why) to pass lint",
    ]


def _blocked_records(config: Config, state: SyncState) -> list[PatchRecord]:
    """The patches after the one that stopped the replay that touch its files (or those of a
    patch it blocks): reported as blocked by it, so that a cascade never reads as an upstream break."""
    entry = next((e for e in state.series if e.head_before is not None), None)
    if entry is None:
        return []
    patches = _patches(config, state, entry.name)
    stopper = patches[entry.next]
    touched = set(stopper.touched_paths())
    records = []
    for later in patches[entry.next + 1 :]:
        shared = sorted(touched & set(later.touched_paths()))
        if shared:
            touched |= set(later.touched_paths())
            records.append(
                PatchRecord(
                    entry.name,
                    later.name,
                    f"blocked by {stopper.name}",
                    f"not replayed yet: it touches {', '.join(shared[:3])}, which {stopper.name} changes first",
                )
            )
    return records


def _dropped(state: SyncState) -> list[PatchRecord]:
    return [r for r in state.records if r.classification.startswith(("dropped", "already upstream", "taken upstream"))]


def _drop_warnings(state: SyncState, *, done: bool = False) -> list[str]:
    """One warning per dropped patch; DONE: the sync has written the series, the file is deleted already."""
    if done:
        return [
            f"{r.series}/{r.patch} was DROPPED from the series ({r.classification}): its file was deleted"
            for r in _dropped(state)
        ]
    return [
        f"{r.series}/{r.patch} is DROPPED from the series ({r.classification}): its file will be deleted"
        for r in _dropped(state)
    ]


def _check_sync_tree(config: Config, state: SyncState, tree: Path) -> None:
    """A stopped sync resumes only in the trees it left: a link there (to a directory elsewhere,
    where git would commit, or to a file), a file or a FIFO is one line (exit 3), never followed;
    a tree gone is one line that says to start again."""
    treeswap.refuse_link(tree)
    if kind_of(tree) is None:
        raise EnvironmentFailure(
            f"{worktree.display(config.root, tree)} is gone: the tree of the stopped sync; drop the sync "
            f"(`{_sync_command(state.upstream, '--abort')}`) and start again"
        )


def _take_resolution(config: Config, state: SyncState, *, drop: bool = False) -> None:
    """Accept the user's resolution of the patch that stopped the replay. A patch is dropped
    only on purpose: with DROP, or when the user resolved a conflict to nothing."""
    entry = next((e for e in state.series if e.head_before is not None), None)
    if entry is None:
        if drop:
            raise UsageError("--drop: no patch stopped the replay: there is none to drop")
        return
    tree = Path(entry.tree)
    shown = worktree.display(config.root, tree)
    patch = _patches(config, state, entry.name)[entry.next]
    record = next(r for r in reversed(state.records) if r.series == entry.name and r.patch == patch.name)
    head, changed, unmerged = _changes_in(tree)
    if drop and head == entry.head_before:
        # As `git am --skip` does: whatever the stop (a conflict, a patch that needs a hand or a
        # look), the patch's merge and any edit made for it are undone, and the patch is dropped.
        git.run(["reset", "-q", "--hard", entry.head_before], tree)
        head, changed, unmerged = entry.head_before, [], []
    if head is not None:
        _moved(state, entry, head)  # where the user left the tree: no rev-parse for `_head`
    if unmerged:
        raise UsageError(
            f"still unmerged in {shown}: {', '.join(unmerged)}; resolve them, "
            f"`{_git_command(shown, 'add', '--', *unmerged)}`, then `{_sync_command(state.upstream, '--continue')}`; "
            f"or drop the patch: `{_sync_command(state.upstream, '--continue', '--drop')}`"
        )
    marked = [name for name in changed if _has_marker(_tree_file(tree, name) or b"")]
    if marked:
        raise UsageError(
            f"conflict markers left in {', '.join(marked)} ({shown}); finish resolving, then "
            f"`{_sync_command(state.upstream, '--continue')}`; or drop the patch: "
            f"`{_sync_command(state.upstream, '--continue', '--drop')}`"
        )
    head = _head(state, entry)
    if drop and head != entry.head_before:
        raise UsageError(
            f"--drop: {shown} has commits made for {patch.name}, which --drop does not discard; to drop the patch, "
            f"discard them first (`{_git_command(shown, 'reset', '--hard', entry.head_before[:12])}`), then "
            f"`{_sync_command(state.upstream, '--continue', '--drop')}`; or keep them: "
            f"`{_sync_command(state.upstream, '--continue')}`"
        )
    if head == entry.head_before:
        if changed:
            # On the HEAD where the replay found that the patch does not apply strictly, with
            # what the user changed but did not `git add` (as `git add -u` would stage it).
            head = commit_worktree(tree, patch, stage_tracked=True)
            entry.replayed[head] = [patch.digest, False]
            _moved(state, entry, head)
            label = "resolved by hand"
        elif drop:
            label = "dropped by hand (--drop)"
        elif record.classification == CLASSIFICATION[Status.CONFLICT]:
            label = "dropped by hand (its conflict was resolved to nothing)"
        else:
            raise UsageError(
                f"nothing was done for {patch.name} in {shown} (git could not merge it: nothing was applied); apply "
                f"it by hand and stage the files there, then `{_sync_command(state.upstream, '--continue')}`; or drop "
                f"it on purpose: `{_sync_command(state.upstream, '--continue', '--drop')}`; or "
                f"`{_sync_command(state.upstream, '--abort')}`"
            )
    else:
        if not git.run(["merge-base", "--is-ancestor", entry.head_before, "HEAD"], tree, check=False).ok:
            raise UsageError(
                f"HEAD of {shown} no longer builds on the replayed patches; drop the sync "
                f"(`{_sync_command(state.upstream, '--abort')}`) and start again"
            )
        if not is_clean(tree):
            raise UsageError(
                f"uncommitted changes in {shown}: commit them (`{_git_command(shown, 'commit', '-a')}`) or discard "
                f"them (`{_git_command(shown, 'reset', '--hard')}`), then "
                f"`{_sync_command(state.upstream, '--continue')}`"
            )
        label = "resolved by hand"
    record.classification, record.detail = (
        label,
        f"was: {record.classification}" + (f" ({record.detail})" if record.detail else ""),
    )
    entry.next += 1
    entry.head_before = None
    state.phase = "replaying"
    _save(config, state)


def _changes_in(tree: Path) -> tuple[str | None, list[str], list[str]]:
    """The commit TREE stands at (None before its first), the paths it changes against it (staged
    or not, a rename as both of its paths), and those of them still unmerged: one `git status`."""
    head: str | None = None
    changed: list[str] = []
    unmerged: list[str] = []
    for entry in git.z_list(tree, "status", "--porcelain=v2", "--branch", "--untracked-files=no", "--no-renames"):
        if entry.startswith("# branch.oid ") and entry != "# branch.oid (initial)":
            head = entry.removeprefix("# branch.oid ")
        elif entry.startswith("1 "):  # `1 XY sub mH mI mW hH hI PATH`
            changed.append(entry.split(" ", 8)[8])
        elif entry.startswith("u "):  # `u XY sub m1 m2 m3 mW h1 h2 h3 PATH`
            changed.append(entry.split(" ", 10)[10])
            unmerged.append(changed[-1])
    return head, changed, unmerged


def _take_gate_fixes(config: Config, state: SyncState, entry: SeriesProgress) -> None:
    """The user's fixes after a failing gate, committed in the sync tree: `fixup!` commits are
    folded into the patches they name (git's autosquash); any other new commit must carry a
    description, since it becomes a new patch that lint would reject without one (PC008)."""
    series, tree = config.get_series(entry.name), Path(entry.tree)
    shown = worktree.display(config.root, tree)
    _moved(state, entry, None)  # the user's commits, maybe folded below
    if not is_clean(tree):
        return  # the strict-apply gate says so, with the way on
    subjects = git.run(["log", "--format=%s", f"{state.target}..HEAD"], tree).stdout.splitlines()
    if any(subject.startswith("fixup! ") for subject in subjects):
        folded = git.run(
            ["rebase", "--quiet", "--interactive", "--autosquash", "--empty=drop", state.target],
            tree,
            check=False,
            env={"GIT_SEQUENCE_EDITOR": ":", "GIT_EDITOR": ":"},
        )
        if not folded.ok:
            git.run(["rebase", "--abort"], tree, check=False)
            raise UsageError(
                f"the fixup! commits in {shown} do not fold into their patches ({git.explain(folded.stderr)}): "
                f"fold them by hand (`{_git_command(shown, 'rebase', '-i', '--autosquash', state.target[:12])}`), "
                f"then `{_sync_command(state.upstream, '--continue')}`"
            )
    if series.allow_undescribed:
        return
    titles = {patch.title for patch in _patches(config, state, series.name)}
    log = git.run(["log", "--format=%H%x00%s%x00%b%x1e", f"{state.target}..HEAD"], tree).stdout
    head = git.rev_parse(tree, "HEAD")
    listing = _git_command(shown, "log", "--oneline", f"{state.target[:12]}..")
    for entry in log.split("\x1e"):
        if not entry.strip():
            continue
        commit, subject, body = entry.strip("\n").split("\0", 2)
        if subject in titles or body.strip():
            continue
        if subject.startswith("fixup! "):
            raise UsageError(
                f"commit {commit[:12]} in {shown} is a fixup of {subject[7:]!r}, which is no patch of series "
                f"{series.name}: name the patch's subject (`{listing}` lists them), then "
                f"`{_sync_command(state.upstream, '--continue')}`"
            )
        reword = (
            f"`{_git_command(shown, 'commit', '--amend')}`"
            if commit == head
            else f"reword it: `{_git_command(shown, 'rebase', '-i', state.target[:12])}`"
        )
        raise UsageError(
            f"commit {commit[:12]} ({subject!r}) in {shown} would be a new patch of series {series.name} with no "
            f"description, which lint rejects (PC008): give it one, a blank line after the subject then why "
            f"({reword}), or make it a fixup of the patch it fixes (its subject `fixup! <that patch's subject>`); then "
            f"`{_sync_command(state.upstream, '--continue')}`"
        )


def _gate_series(
    config: Config,
    store: Store,
    state: SyncState,
    entry: SeriesProgress,
    report: SyncReport,
    planned: dict,
    timer: _Timer,
    say: Progress,
) -> bool:
    # Imported here, where the gates run: the commands that stop before them start faster without them.
    from ..series import exporter
    from . import vendor
    from .gates import GatesFailed, run_gates
    from .runners import run_build

    series, tree = config.get_series(entry.name), Path(entry.tree)

    if not is_clean(tree):
        report.gates.append(
            GateRecord(
                series.name,
                "strict-apply",
                "strict-apply",
                False,
                0.0,
                f"uncommitted changes in {worktree.display(config.root, tree)}: commit them first",
            )
        )
        return False
    mirror = _mirror_of(config, store, series.upstream)
    gate_tree = worktree.sync_gate_tree(config.root, state.upstream, series.name)
    logs = worktree.sync_logs(config.root, state.upstream, series.name)
    Root(worktree.state_owner(config.root)).mkdirs(logs)
    try:
        say(f"gate strict-apply: {series.name}")
        start = time.monotonic()
        with timer.phase("export"):
            replayed = {commit: (digest, strict) for commit, (digest, strict) in entry.replayed.items()}
            patches_plan, export_result = exporter.plan_export(series, tree, state.target, replayed=replayed)
            patches = [PatchFile(series.dir / p.name, p.data) for p in patches_plan]
        # A clean checkout only where something runs in it: the strict apply itself is done in the index.
        checkout = gate_tree if series.build or series.gates else None
        with timer.phase("strict-apply"):
            detail, head = _strict_apply(store, mirror, series, tree, state.target, patches, checkout, config.root)
        report.gates.append(
            GateRecord(
                series.name,
                "strict-apply",
                "strict-apply",
                detail is None,
                time.monotonic() - start,
                detail or f"{len(patches)} patch(es) applied strictly to {state.target[:12]}",
            )
        )
        if detail is not None:
            return False
        for index, step in enumerate(series.build):
            say(f"gate build {step.name}: {series.name}")
            with timer.phase("build"):
                result = run_build(
                    step, gate_tree, logs / f"build-{index + 1:02d}-{worktree.log_name(step.name)}.log", say
                )
            report.gates.append(
                GateRecord(
                    series.name,
                    "build",
                    step.name,
                    result.ok,
                    result.duration_s,
                    result.reason or f"{step.runner} build passed",
                    str(result.log_path),
                )
            )
            if not result.ok:
                return False
        if series.gates:
            say(f"gate commands: {series.name}")
            with timer.phase("gates"):
                try:
                    results = run_gates(config, series.name, gate_tree, log_dir=logs)
                except GatesFailed as failed:
                    results = failed.results
            for result in results:
                report.gates.append(
                    GateRecord(
                        series.name,
                        "gate",
                        result.name,
                        result.ok,
                        result.duration_s,
                        result.reason or "passed",
                        str(result.log),
                    )
                )
            if not all(r.ok for r in results):
                return False
        # The vendored copies move with the pin and the series: read from the tree the gates passed on.
        if checkout is not None:
            head = git.rev_parse(checkout, "HEAD")
            report.gated_trees[series.name] = git.run(["rev-parse", "HEAD^{tree}"], checkout).stdout.strip()
        # A series without vendored copies changes none (no commit to read them from: see _strict_apply).
        planned[series.name] = (
            patches_plan,
            export_result,
            vendor.changes_from_tree(config, series, mirror.path, head) if head is not None else [],
        )
        return True
    finally:
        # Only where one is (a series without build steps or gates gets none); a registration
        # a killed run left behind goes with the next `worktree prune` (every add_worktree).
        treeswap.remove_worktree(Root(worktree.state_owner(config.root)), gate_tree)


def _strict_apply(
    store: Store,
    mirror: Mirror,
    series: Series,
    tree: Path,
    target: str,
    patches: list[PatchFile],
    gate_tree: Path | None,
    project: Path,
) -> tuple[str | None, str | None]:
    """The re-exported series applied strictly at TARGET, in the index of TREE's object store
    (export's verify: it must give TREE's files), then checked out clean at GATE_TREE when
    given (for the build steps and gates). Why not, or None; and the series' last commit
    (None when neither a checkout nor the vendored copies need it: then no commit is made)."""
    from ..series import exporter  # see _gate_series
    from ..series.apply_job import ApplyJob, apply_job

    try:
        if gate_tree is None and not series.vendor:
            exporter.verify_tree(series, tree, target, patches)  # TREE is a worktree of MIRROR: one object store
            return None, None
        applied = exporter.verify(series, tree, target, patches)
    except CheckFailed as exc:
        return str(exc), target
    if gate_tree is not None:
        job = ApplyJob([series], series.upstream, gate_tree, project=project)
        result = apply_job(store, mirror, job, target, patches, force=True, applied=applied)
        if result.failure is not None:
            return result.failure.describe(), target
    return None, applied[1]


def _changes(config: Config, state: SyncState, planned: dict) -> list[pinfile.FileChange]:
    from ..series.exporter import with_list_updates

    changes: list[pinfile.FileChange] = []
    lists = []  # each series' own list: edited last, on what the pin edits leave of the same file
    for name, (patches_plan, export_result, vendored) in planned.items():
        directory = config.get_series(name).dir
        repository = Root(config.root)
        for patch in patches_plan:
            target = directory / patch.name
            if repository.read_bytes(target, MAX_TREE_FILE_BYTES) != patch.data:
                changes.append(pinfile.FileChange(target, patch.data))
        changes += [pinfile.FileChange(directory / gone, None) for gone in export_result.removed]
        if export_result.list_update is not None:
            lists.append((config.get_series(name), export_result.list_update))
        changes += vendored
    changes += pinfile.pin_changes(config, state.upstream, state.target)
    return with_list_updates(changes, lists)


# ---------------------------------------------------------------- history


def _upstream_logs(repo: Path, old: str, new: str) -> tuple[list[dict] | None, str]:
    """`upstream_commits`, and the log of the range the health rows read (kept for this process)."""
    listed = upstream_commits(repo, old, new)
    health.ask_drift(repo, old, new)
    return listed


def _listing_log(old: str, new: str) -> list[str]:
    """The one `git log` `upstream_commits` reads."""
    return ["log", "-z", "--reverse", "--topo-order", "--boundary", "--format=%m%H%x00%s", f"{old}..{new}"]


def _range_logs(state: SyncState) -> dict[str, list[str]]:
    """The logs of the range a sync reads at every round, for the report alone (the upstream's
    commits, the health rows' drift), by the name the state keeps their output under."""
    return {
        "commits": _listing_log(state.old_pin, state.target),
        "drift": health.drift_log(state.old_pin, state.target),
    }


def _keep_range_logs(state: SyncState, repo: Path) -> None:
    """Keep in STATE what git answered this process to `_range_logs` in REPO: a --continue takes
    them (`_take_range_logs`) instead of asking again (the range is fixed: both pins are commit
    ids). On a real bump, two git processes a round that git spends the longer on, the longer the range."""
    kept = state.upstream_facts.setdefault("range_logs", {})
    for name, args in _range_logs(state).items():
        if (answer := git.fixed_answer(args, repo)) is not None and len(answer) <= MAX_RANGE_LOG:
            kept[name] = answer


def _take_range_logs(state: SyncState, repo: Path) -> None:
    for name, args in _range_logs(state).items():
        if (answer := state.upstream_facts.get("range_logs", {}).get(name)) is not None:
            git.take_fixed_answer(args, repo, answer)


def upstream_commits(repo: Path, old: str, new: str) -> tuple[list[dict] | None, str]:
    """Commits in NEW that OLD lacks, oldest first (at most MAX_LISTED_COMMITS), with a note."""
    if old == new:
        return [], ""
    # One git log: NUL-separated (a subject may hold any other character: a \r must not make an
    # entry), each commit marked ('-' for the boundary, the commits OLD has that the listed ones
    # stand on: OLD is one of them exactly when NEW descends from it).
    log = _listing_log(old, new)
    listed = git.run_fixed(log, repo, commits=(old, new))
    if not listed.ok:
        if not git.run(["cat-file", "-e", f"{old}^{{commit}}"], repo, check=False).ok:
            return None, f"the old pin {old[:12]} is not in the upstream's history"
        git.run(log, repo)  # raises, with git's words
    fields = listed.stdout.split("\0")
    marked = list(zip(fields[0::2], fields[1::2]))
    ancestor = any(marked_sha == "-" + old for marked_sha, _ in marked)
    commits = [{"sha": sha[1:], "subject": subject} for sha, subject in marked if not sha.startswith("-")]
    note = (
        ""
        if ancestor
        else f"the new rev does not descend from {old[:12]} (history was rewritten); listing commits only in the "
        "new rev"
    )
    if len(commits) > MAX_LISTED_COMMITS:
        note = (note + "; " if note else "") + f"{len(commits)} commits, the newest {MAX_LISTED_COMMITS} listed"
        commits = commits[-MAX_LISTED_COMMITS:]
    return commits, note


# ---------------------------------------------------------------- state and helpers


def _pick_upstream(config: Config, name: str | None) -> str:
    if name is not None:
        config.get_upstream(name)
        return name
    roots = [u.name for u in config.upstreams.values() if u.tracks is None]
    if len(roots) != 1:
        raise UsageError(
            f"name the upstream to sync (matrix.yaml defines: {', '.join(sorted(config.upstreams)) or 'none'})"
        )
    return roots[0]


def in_progress(config: Config, upstream: str) -> bool:
    """Whether a pin-sync of UPSTREAM is stopped (or running) in CONFIG's project."""
    return upstream in worktree.syncs_in_progress(config.root)


def _pick_in_progress(config: Config, name: str | None) -> str:
    running = worktree.syncs_in_progress(config.root)
    if name is not None:
        if name not in running:
            raise UsageError(f"no pin-sync of {name} is in progress")
        return name
    if not running:
        raise UsageError("no pin-sync is in progress")
    if len(running) > 1:
        raise UsageError(f"pin-syncs of {', '.join(running)} are in progress; name the upstream")
    return running[0]


def _confine_outputs(config: Config, upstream: str | None) -> None:
    """Refuse before the first write when anything a sync of UPSTREAM (of every upstream when
    None) writes or removes leads out of the repository through a symlink."""
    names = [upstream] if upstream is not None else sorted(config.upstreams)
    paths, state = [], [worktree.state_dir(config.root)]
    for name in names:
        state.append(worktree.sync_root(config.root, name))
        for moved in pinfile.moved_upstreams(config, name):
            paths += [config.root / entry.path for entry in (*moved.pin_files, *moved.manifests)]
            for series in config.series_on(moved.name):
                paths.append(series.dir)
                paths += [series.patch_list.path] if series.patch_list.path is not None else []
                state.append(worktree.sync_logs(config.root, name, series.name))
    all_confined(config.root, paths)
    all_confined(worktree.state_owner(config.root), state)


def _mirror_of(config: Config, store: Store, upstream: str) -> Mirror:
    return store.mirror(config.get_upstream(upstream).url, base=config.root)


def _remove_sync_root(config: Config, store: Store, root: Path, state: SyncState) -> None:
    repository = Root(worktree.state_owner(config.root))  # the directory .patchctl/ is in
    if repository.kind(root) is None:
        drop_state(config.root, state.upstream)
        return
    for entry in state.series:
        for tree in (Path(entry.tree), worktree.sync_gate_tree(config.root, state.upstream, entry.name)):
            treeswap.remove_worktree(repository, tree)  # by descriptor, and pruned from its mirror
    repository.remove_tree(root)
    drop_state(config.root, state.upstream)  # last: trees without a state are what a start cleans up
