"""A pin-sync's gates, per series: the series re-exported and applied strictly at the
target, its build steps and gate commands; and the fixes a user commits after a gate failed."""

from __future__ import annotations

import time
from pathlib import Path

from .. import git
from ..confined import Root
from ..errors import CheckFailed, UsageError
from ..project.config import Config, Series
from ..series.applier import is_clean
from ..series.patchset import PatchFile
from ..state import treeswap, worktree
from ..state.sync_state import SeriesProgress, SyncState
from ..upstream.store import Mirror, Store
from .sync_report import GateRecord, Progress, SyncReport, Timer
from .sync_round import git_command, mirror_of, series_patches, sync_command, tree_moved


def gate_series(
    config: Config,
    store: Store,
    state: SyncState,
    entry: SeriesProgress,
    report: SyncReport,
    planned: dict,
    timer: Timer,
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
    mirror = mirror_of(config, store, series.upstream)
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
    from ..series import exporter  # see gate_series
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


def take_gate_fixes(config: Config, state: SyncState, entry: SeriesProgress) -> None:
    """The user's fixes after a failing gate, committed in the sync tree: `fixup!` commits are
    folded into the patches they name (git's autosquash); any other new commit must carry a
    description, since it becomes a new patch that lint would reject without one (PC008)."""
    series, tree = config.get_series(entry.name), Path(entry.tree)
    shown = worktree.display(config.root, tree)
    tree_moved(state, entry, None)  # the user's commits, maybe folded below
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
                f"fold them by hand (`{git_command(shown, 'rebase', '-i', '--autosquash', state.target[:12])}`), "
                f"then `{sync_command(state.upstream, '--continue')}`"
            )
    if series.allow_undescribed:
        return
    titles = {patch.title for patch in series_patches(config, state, series.name)}
    log = git.run(["log", "--format=%H%x00%s%x00%b%x1e", f"{state.target}..HEAD"], tree).stdout
    head = git.rev_parse(tree, "HEAD")
    listing = git_command(shown, "log", "--oneline", f"{state.target[:12]}..")
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
                f"`{sync_command(state.upstream, '--continue')}`"
            )
        reword = (
            f"`{git_command(shown, 'commit', '--amend')}`"
            if commit == head
            else f"reword it: `{git_command(shown, 'rebase', '-i', state.target[:12])}`"
        )
        raise UsageError(
            f"commit {commit[:12]} ({subject!r}) in {shown} would be a new patch of series {series.name} with no "
            f"description, which lint rejects (PC008): give it one, a blank line after the subject then why "
            f"({reword}), or make it a fixup of the patch it fixes (its subject `fixup! <that patch's subject>`); then "
            f"`{sync_command(state.upstream, '--continue')}`"
        )


def changes_in(tree: Path) -> tuple[str | None, list[str], list[str]]:
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
