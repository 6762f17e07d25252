"""What a stopped pin-sync tells its user to do next, the patches it did not reach, the
warnings for dropped patches, and the commit trailers that record how each patch fared."""

from __future__ import annotations

from pathlib import Path

from .. import git
from ..output.escape import shell_word
from ..project.config import Config
from ..state import worktree
from ..state.sync_state import PatchRecord, SyncState
from . import health
from .sync_round import git_command, series_patches, sync_command, this_run


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
    was (`was: conflict ...`, as `sync._take_resolution` writes it)."""
    was = detail.removeprefix("was: ")
    if was.startswith("conflict"):
        return health.CONFLICT_TRAILER
    if was.startswith("needs a look"):
        return health.NEEDED_LOOK_TRAILER
    return health.NEEDED_HAND_TRAILER


def look_steps(config: Config, state: SyncState) -> list[str]:
    entry = next(e for e in state.series if e.head_before is not None)
    tree = worktree.display(config.root, Path(entry.tree))
    patch = series_patches(config, state, entry.name)[entry.next]
    if twin := this_run(state).twin:
        return [
            f"{patch.name}: compare its change with upstream's (`{git_command(tree, 'show', twin)}`), the same but "
            f"for whitespace or changed since; nothing of the patch is applied in {tree}",
            f"if upstream's version stands for the patch: `{sync_command(state.upstream, '--continue', '--drop')}`",
            *by_hand_steps(config, state)[1:4],
            f"or `{sync_command(state.upstream, '--abort')}` to drop the sync; matrix.yaml and patches/ are "
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


def conflict_steps(config: Config, state: SyncState) -> list[str]:
    entry = next(e for e in state.series if e.head_before is not None)
    tree = worktree.display(config.root, Path(entry.tree))
    files = this_run(state).unmerged or git.z_list(Path(entry.tree), "diff", "--name-only", "--diff-filter=U")
    return [
        f"resolve the conflict in {tree}: edit {', '.join(files)} and remove the markers",
        f"then `{git_command(tree, 'add', '--', *files)}` and either commit yourself or let --continue commit with "
        "the patch's message",
        f"then run `{sync_command(state.upstream, '--continue')}`; or `{sync_command(state.upstream, '--abort')}` "
        "to drop the sync",
        f"to drop the patch instead: `{sync_command(state.upstream, '--continue', '--drop')}` (it undoes the "
        "patch's merge; said in the report)",
        "matrix.yaml and patches/ are unchanged until every gate has passed",
    ]


def by_hand_steps(config: Config, state: SyncState) -> list[str]:
    entry = next(e for e in state.series if e.head_before is not None)
    tree = worktree.display(config.root, Path(entry.tree))
    patch = series_patches(config, state, entry.name)[entry.next]
    apply = f"{git_command(tree, 'apply', '--reject')} < {shell_word(worktree.display(config.root, patch.path))}"
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
        f"`{git_command(tree, 'add', '-A', '--', '.', ':!*.rej')}`",
        f"then run `{sync_command(state.upstream, '--continue')}` (it commits with the patch's message)",
        f"to drop the patch from the series on purpose: `{sync_command(state.upstream, '--continue', '--drop')}`",
        f"or `{sync_command(state.upstream, '--abort')}` to drop the sync; matrix.yaml and patches/ are unchanged "
        "until every gate has passed",
    ]


def gate_fix_steps(config: Config, state: SyncState, tree_path: Path) -> list[str]:
    tree = worktree.display(config.root, tree_path)
    return [
        f"fix the series in {tree}, where each patch is a commit "
        f"(`{git_command(tree, 'log', '--oneline', f'{state.target[:12]}..')}`): a commit whose subject is "
        "`fixup! <subject of the patch it fixes>` (what git commit's --fixup option writes) is folded into that "
        "patch; any other commit becomes a new patch, which needs a description (a blank line after its subject, "
        "then why) to pass lint",
    ]


def blocked_records(config: Config, state: SyncState) -> list[PatchRecord]:
    """The patches after the one that stopped the replay that touch its files (or those of a
    patch it blocks): reported as blocked by it, so that a cascade never reads as an upstream break."""
    entry = next((e for e in state.series if e.head_before is not None), None)
    if entry is None:
        return []
    patches = series_patches(config, state, entry.name)
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


def dropped_records(state: SyncState) -> list[PatchRecord]:
    return [r for r in state.records if r.classification.startswith(("dropped", "already upstream", "taken upstream"))]


def drop_warnings(state: SyncState, *, done: bool = False) -> list[str]:
    """One warning per dropped patch; DONE: the sync has written the series, the file is deleted already."""
    if done:
        return [
            f"{r.series}/{r.patch} was DROPPED from the series ({r.classification}): its file was deleted"
            for r in dropped_records(state)
        ]
    return [
        f"{r.series}/{r.patch} is DROPPED from the series ({r.classification}): its file will be deleted"
        for r in dropped_records(state)
    ]
