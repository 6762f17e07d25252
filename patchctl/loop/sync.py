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

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import git
from ..beside import Beside
from ..confined import Root, all_confined
from ..confined.regular import kind_of
from ..errors import EnvironmentFailure, UsageError
from ..output.escape import shell_command, shell_word
from ..project.config import Config, Series
from ..series.applier import PatchOutcome, Status, is_clean, seed_three_way_objects
from ..series.commits import commit_worktree
from ..series.patchset import PatchFile, read_series, series_digest
from ..state import treeswap, worktree
from ..state.sync_state import (
    OtherVersionState,
    PatchRecord,
    SeriesProgress,
    SyncState,
    commit_pin_update,
    drop_state,
    load_state,
)
from ..upstream.store import Store, settle_checkout
from . import carry, pinfile
from .sync_explain import explain_beside, explain_stop, health_rows, series_range_diffs
from .sync_gates import changes_in, gate_series, take_gate_fixes
from .sync_history import keep_range_logs, take_range_logs, upstream_commits, upstream_logs
from .sync_records import MAX_TREE_FILE_BYTES, carried_record, has_marker, tree_file
from .sync_report import CLASSIFICATION, RANGE_DIFF_AT_THE_END, Progress, SyncReport, SyncStopped, Timer
from .sync_round import (
    back_to_saved_progress,
    git_command,
    mirror_of,
    save_progress,
    series_patches,
    sync_command,
    this_run,
    tree_head,
    tree_moved,
)
from .sync_steps import (
    blocked_records,
    by_hand_steps,
    conflict_steps,
    drop_warnings,
    dropped_records,
    gate_fix_steps,
    look_steps,
    sync_trailers,
)

if TYPE_CHECKING:
    from ..series.exporter import ExportResult, GeneratedPatch


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
            f"`{sync_command(name, '--continue')}` or drop it with `{sync_command(name, '--abort')}`"
        )
    moved = [u.name for u in pinfile.moved_upstreams(config, name)]
    series_list = [s for u in moved for s in config.series_on(u)]
    if not series_list:
        raise UsageError(f"no series in {config.path.name} is on upstream {name}: pin-sync would gate nothing")
    read = {s.name: read_series(s) for s in series_list}  # fail closed, before anything is fetched
    seconds: dict[str, float] = {}
    timer = Timer(seconds)
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
    this_run(state).patches = read  # see series_patches
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
        if series_digest(series_patches(config, state, entry.name)) != entry.digest:
            raise UsageError(
                f"patches of series {entry.name} changed since the sync started; drop the sync "
                f"(`{sync_command(state.upstream, '--abort')}`) and start again"
            )
    up = config.get_upstream(state.upstream)
    if up.pin != state.old_pin:
        raise UsageError(
            f"the pin of {state.upstream} changed since the sync started; drop the sync "
            f"(`{sync_command(state.upstream, '--abort')}`) and start again"
        )
    if state.phase == "replaying":
        back_to_saved_progress(state)
    if state.phase == "conflict":
        _take_resolution(config, state, drop=drop)
    elif drop:
        raise UsageError(
            "--drop drops the patch that stopped the replay, and this sync stopped at a gate: fix the series and "
            f"`{sync_command(state.upstream, '--continue')}`, or `{sync_command(state.upstream, '--abort')}`"
        )
    elif state.phase == "gates-failed":
        for entry in state.series:
            take_gate_fixes(config, state, entry)
    mirror = mirror_of(config, store, state.upstream)
    # Upstream's commits and the health rows' log of the range are for the report alone: an
    # earlier round kept git's answers, else git reads them on the other core meanwhile.
    take_range_logs(state, mirror.path)
    listing = Beside(upstream_logs, mirror.path, state.old_pin, state.target)
    moved = [u.name for u in pinfile.moved_upstreams(config, state.upstream)]
    seconds: dict[str, float] = {}
    report = SyncReport(
        "synced", state.upstream, state.old_pin, state.target, state.target_spec, moved, phase_seconds=seconds
    )
    return _run(config, store, state, report, Timer(seconds), say, dry_run=False, listing=listing)


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
    timer: Timer,
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
    report.warnings = drop_warnings(state)
    explaining = explain_beside(config, state) if stopped is not None else None  # on another core meanwhile
    with timer.phase("health"):
        report.health = health_rows(config, store, state)
    if stopped is not None:
        report.range_diff_note = RANGE_DIFF_AT_THE_END
        report.patches += blocked_records(config, state)
        markers = state.records[-1].classification == CLASSIFICATION[Status.CONFLICT]
        look = state.records[-1].classification in (carry.SAME_EDIT, carry.NOT_EXACT)
        report.state = "conflict" if markers else "needs-hand"
        what = "stops at a conflict" if markers else "stops at a patch that needs a hand (nothing applied)"
        if look:
            report.state, what = "needs-look", "stops at a patch that needs a look"
        with timer.phase("stop-cause"):  # what is left of it to wait for
            report.stop_cause = explain_stop(state, explaining, dry_run=dry_run)
        if dry_run:
            report.next_steps = [f"dry run: {stopped}; a real pin-sync would stop here for you to resolve it"]
            raise SyncStopped(report, f"pin-sync of {state.upstream} (dry run) {what}: {stopped}")
        state.phase = "conflict"
        keep_range_logs(state, mirror_of(config, store, state.upstream).path)
        save_progress(config, state)
        report.next_steps = conflict_steps(config, state) if markers else by_hand_steps(config, state)
        if look:
            report.next_steps = look_steps(config, state)
        # (A patch-id twin's own steps already say it: compare, then drop.)
        if report.stop_cause is not None and report.stop_cause.upstream_version and not this_run(state).twin:
            patch_name = this_run(state).stopped[0].name  # type: ignore[index]
            report.next_steps.insert(
                0, f"upstream may have its own version of {patch_name}: {report.stop_cause.advice}"
            )
        raise SyncStopped(report, f"pin-sync of {state.upstream} {what}: {stopped}; see the report for what to do")

    # series -> (its new patches, the export result, the changes to its vendored copies)
    planned: dict[str, tuple[list[GeneratedPatch], ExportResult, list[pinfile.FileChange]]] = {}
    # The range-diff is for the report alone, read from commits the gates never change: git
    # computes it on another core meanwhile (on a real bump, 0.3 to 0.5 s of the last command).
    range_diffs = Beside(series_range_diffs, config, state)
    try:
        for entry in state.series:
            ok = gate_series(config, store, state, entry, report, planned, timer, say)
            if not ok:
                report.state = "gate-failed"
                report.range_diff_note = RANGE_DIFF_AT_THE_END
                failed = report.failed_gate
                assert failed is not None
                if not dry_run:
                    state.phase = "gates-failed"
                    keep_range_logs(state, mirror_of(config, store, state.upstream).path)
                    save_progress(config, state)
                    report.next_steps = [
                        f"gate {failed.name} ({failed.kind}) of series {failed.series} failed: {failed.detail}",
                        "matrix.yaml and patches/ are unchanged",
                        *gate_fix_steps(config, state, Path(entry.tree)),
                        f"then run `{sync_command(state.upstream, '--continue')}`",
                        f"or drop the sync with `{sync_command(state.upstream, '--abort')}`",
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
            forget_dropped(config, entry.name, [r.patch for r in dropped_records(state) if r.series == entry.name])
        from . import vendor  # see sync_gates.gate_series

        vendor.prune_empty_dirs(config, [c.path for _, _, vendored in planned.values() for c in vendored if c.deletes])
        _remove_sync_root(config, store, worktree.sync_root(config.root, state.upstream), state)
    report.state = "synced"
    report.warnings = drop_warnings(state, done=True)  # the files are gone now: say so in the past tense
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


def _refuse_vendored_edits(config: Config, store: Store, series_list: list[Series]) -> None:
    """A vendored copy that is not the old pin + series holds edits pin-sync would overwrite:
    refuse before anything is replayed, saying how to keep or drop them."""
    from . import vendor  # see sync_gates.gate_series

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
        patches = series_patches(config, state, series.name)
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
    head = tree_head(state, entry) if entry.next < len(patches) else None
    while entry.next < len(patches):
        patch = patches[entry.next]
        say(f"replaying {series.name}: {patch.name}")
        entry.head_before = head
        carried = carry.carry_patch(tree, move, patch)
        outcome = carried.outcome
        head = outcome.commit or head  # a patch already upstream commits nothing
        tree_moved(state, entry, head)
        if outcome.commit:  # made on HEAD, where the patch itself was first applied strictly
            strict = outcome.status in (Status.APPLIED, Status.OFFSET) and carried.applied is patch
            entry.replayed[outcome.commit] = [patch.digest, strict]
        record = carried_record(series.name, patch, carried, tree)
        twin = None if carried.needs_look else _note_taken(record, tree, move, patch, outcome)
        state.records.append(record)
        this_run(state).stopped = (patch, carried)  # what `explaining` reads, if this one stops
        if carried.needs_look or twin is not None:
            this_run(state).twin = twin or ""
            return f"{series.name}/{patch.name}: {record.classification} ({record.detail})"
        if outcome.ok or outcome.status == Status.ALREADY_APPLIED:
            entry.next += 1
            entry.head_before = None
            continue
        this_run(state).unmerged = outcome.conflict_files  # what `conflict_steps` names
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


def _check_out_and_seed(config: Config, store: Store, state: SyncState) -> None:
    """Each series' sync tree checked out at the target while its seed (`_seed`) is made in
    the mirror on another thread: the two share only the object store, to which each only
    adds. The replay starts on the checkout and waits for the seed at its first 3-way merge
    (`_seeding`); on a real bump the seed took 0.2 to 0.7 s of the first run, the checkout less."""
    mirrors = {entry.name: mirror_of(config, store, entry.upstream) for entry in state.series}
    seeding = this_run(state).seeding
    previous = None  # one seed at a time, in the series' order
    for entry in state.series:
        patches = series_patches(config, state, entry.name)
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
            tree_moved(state, entry, commit)
    except BaseException:
        for seed in seeding.values():
            if not seed.cancel():
                seed.exception()  # waited for: nothing of this run writes on after it ends
        raise


def _seeding(state: SyncState, entry: SeriesProgress) -> Callable[[], str | None] | None:
    """How to wait for ENTRY's seed where `_check_out_and_seed` started it (once), else None."""
    seed = this_run(state).seeding.pop(entry.name, None)
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


# The commands below are printed to be pasted as they are, from the repository root (where
# matrix.yaml is; every path in the report is relative to it): paths are shell-quoted, and a
# patch file is read by the shell (`< FILE`), never by a git that -C moved elsewhere.


def _check_sync_tree(config: Config, state: SyncState, tree: Path) -> None:
    """A stopped sync resumes only in the trees it left: a link there (to a directory elsewhere,
    where git would commit, or to a file), a file or a FIFO is one line (exit 3), never followed;
    a tree gone is one line that says to start again."""
    treeswap.refuse_link(tree)
    if kind_of(tree) is None:
        raise EnvironmentFailure(
            f"{worktree.display(config.root, tree)} is gone: the tree of the stopped sync; drop the sync "
            f"(`{sync_command(state.upstream, '--abort')}`) and start again"
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
    patch = series_patches(config, state, entry.name)[entry.next]
    record = next(r for r in reversed(state.records) if r.series == entry.name and r.patch == patch.name)
    head, changed, unmerged = changes_in(tree)
    if drop and head == entry.head_before:
        # As `git am --skip` does: whatever the stop (a conflict, a patch that needs a hand or a
        # look), the patch's merge and any edit made for it are undone, and the patch is dropped.
        git.run(["reset", "-q", "--hard", entry.head_before], tree)
        head, changed, unmerged = entry.head_before, [], []
    if head is not None:
        tree_moved(state, entry, head)  # where the user left the tree: no rev-parse for `tree_head`
    if unmerged:
        raise UsageError(
            f"still unmerged in {shown}: {', '.join(unmerged)}; resolve them, "
            f"`{git_command(shown, 'add', '--', *unmerged)}`, then `{sync_command(state.upstream, '--continue')}`; "
            f"or drop the patch: `{sync_command(state.upstream, '--continue', '--drop')}`"
        )
    marked = [name for name in changed if has_marker(tree_file(tree, name) or b"")]
    if marked:
        raise UsageError(
            f"conflict markers left in {', '.join(marked)} ({shown}); finish resolving, then "
            f"`{sync_command(state.upstream, '--continue')}`; or drop the patch: "
            f"`{sync_command(state.upstream, '--continue', '--drop')}`"
        )
    head = tree_head(state, entry)
    if drop and head != entry.head_before:
        raise UsageError(
            f"--drop: {shown} has commits made for {patch.name}, which --drop does not discard; to drop the patch, "
            f"discard them first (`{git_command(shown, 'reset', '--hard', entry.head_before[:12])}`), then "
            f"`{sync_command(state.upstream, '--continue', '--drop')}`; or keep them: "
            f"`{sync_command(state.upstream, '--continue')}`"
        )
    if head == entry.head_before:
        if changed:
            # On the HEAD where the replay found that the patch does not apply strictly, with
            # what the user changed but did not `git add` (as `git add -u` would stage it).
            head = commit_worktree(tree, patch, stage_tracked=True)
            entry.replayed[head] = [patch.digest, False]
            tree_moved(state, entry, head)
            label = "resolved by hand"
        elif drop:
            label = "dropped by hand (--drop)"
        elif record.classification == CLASSIFICATION[Status.CONFLICT]:
            label = "dropped by hand (its conflict was resolved to nothing)"
        else:
            raise UsageError(
                f"nothing was done for {patch.name} in {shown} (git could not merge it: nothing was applied); apply "
                f"it by hand and stage the files there, then `{sync_command(state.upstream, '--continue')}`; or drop "
                f"it on purpose: `{sync_command(state.upstream, '--continue', '--drop')}`; or "
                f"`{sync_command(state.upstream, '--abort')}`"
            )
    else:
        if not git.run(["merge-base", "--is-ancestor", entry.head_before, "HEAD"], tree, check=False).ok:
            raise UsageError(
                f"HEAD of {shown} no longer builds on the replayed patches; drop the sync "
                f"(`{sync_command(state.upstream, '--abort')}`) and start again"
            )
        if not is_clean(tree):
            raise UsageError(
                f"uncommitted changes in {shown}: commit them (`{git_command(shown, 'commit', '-a')}`) or discard "
                f"them (`{git_command(shown, 'reset', '--hard')}`), then "
                f"`{sync_command(state.upstream, '--continue')}`"
            )
        label = "resolved by hand"
    record.classification, record.detail = (
        label,
        f"was: {record.classification}" + (f" ({record.detail})" if record.detail else ""),
    )
    entry.next += 1
    entry.head_before = None
    state.phase = "replaying"
    save_progress(config, state)


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
