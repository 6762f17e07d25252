"""Applying series to a tree, transactionally: the domain of `patchctl apply`.

The whole series is first applied inside the cache's mirror, to a private index, one
commit per patch (see `applier.IndexBuilder`). Only when every patch has applied is a
tree checked out, at the last of those commits; so a failure leaves the target directory
exactly as it was, and a success leaves a git worktree whose history is the upstream rev
plus one commit per patch: the starting point for editing and `patchctl export`.

A marker in the worktree's git directory (`worktree.Marker`) records the upstream rev, the
digest of the ordered patches and the resulting commit. A re-run whose marker matches, on
a tree with no local change, is a no-op; a stale marker (other rev, other patches, moved
HEAD) is detected and never trusted. A tree whose own commits hold exactly pin + the series on
disk (the edit loop: commit in the tree, `export`, then `apply`) is the applied series: its
marker is re-recorded at its HEAD, and nothing is rewritten.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from .. import git
from ..beside import Beside
from ..confined import Root, confined_path
from ..errors import CheckFailed, UsageError
from ..output import progress
from ..output.jsonout import json_field
from ..project.config import Config, Series
from ..records import dataclass
from ..state import treeswap, worktree
from ..state.worktree import Marker
from ..upstream.store import Mirror, Store
from .applier import PatchOutcome, apply_series_to_index, is_clean, series_tree_at_once
from .patchset import PatchFile, is_excluded, read_series, series_digest


@dataclass
class ApplyResult:
    series: list[str]
    upstream: str
    rev: str
    tree: Path
    state: str  # "applied" | "unchanged" | "failed"
    outcomes: list[PatchOutcome] = json_field(name="patches", default_factory=list)
    head: str | None = None

    @property
    def failure(self) -> PatchOutcome | None:
        return next((o for o in self.outcomes if not o.ok), None)

    def lines(self, workdir: Path) -> list[str]:
        """What `patchctl apply` prints for this tree; paths relative to WORKDIR."""
        where = worktree.display(workdir, self.tree)
        names = ", ".join(self.series)
        if self.state == "unchanged":
            return [f"{names}: already applied at {self.rev[:12]} in {where} (nothing to do)"]
        return [f"{names}: applied {len(self.outcomes)} patch(es) to {self.rev[:12]} in {where}"] + [
            f"  {outcome.describe()}" for outcome in self.outcomes
        ]


class ApplyFailed(CheckFailed):
    def __init__(self, result: ApplyResult):
        failure = result.failure
        assert failure is not None
        super().__init__(
            f"series {', '.join(result.series)} does not apply to {result.rev[:12]}: {failure.describe()}; "
            f"{result.tree} left as it was"
        )
        self.result = result


@dataclass(frozen=True)
class ApplyJob:
    """One target tree: the series applied into it, in order, on one upstream."""

    series: list[Series]
    upstream: str
    tree: Path
    into: bool = False  # a tree named with --into (advice repeats it)
    rev_option: str | None = None  # --rev as given (advice repeats it)
    project: Path | None = None  # the repository TREE is patchctl's own tree in (None: a tree --into names)

    def command(self, *extra: str) -> str:
        """The `patchctl apply` that targets this tree again, with EXTRA options, ready to paste."""
        args = ["patchctl", "apply", *(s.name for s in self.series)]
        args += ["--rev", self.rev_option] if self.rev_option else []
        args += ["--into", str(self.tree)] if self.into else []
        return shlex.join([*args, *extra])

    def export_command(self, rev: str) -> str | None:
        """The `patchctl export` that turns this tree's commits into its series (None: a tree
        of several series, which no single export takes)."""
        if len(self.series) != 1:
            return None
        args = ["patchctl", "export", self.series[0].name]
        args += ["--from", str(self.tree)] if self.into else []
        args += ["--base", rev] if self.rev_option else []
        return shlex.join(args)


def plan(config: Config, names: tuple[str, ...], into: Path | None, rev: str | None = None) -> list[ApplyJob]:
    selected = config.select_series(names)
    if not selected:
        raise UsageError("matrix.yaml defines no series to apply")
    if into is None:
        owner = worktree.state_owner(config.root)
        trees = [confined_path(owner, worktree.applied_tree(config.root, s.name)) for s in selected]
        return [ApplyJob([s], s.upstream, tree, rev_option=rev, project=owner) for s, tree in zip(selected, trees)]
    upstreams = {s.upstream for s in selected}
    if len(upstreams) > 1:
        raise UsageError(f"--into takes series of one upstream; these span {', '.join(sorted(upstreams))}")
    return [ApplyJob(selected, selected[0].upstream, Path(into).resolve(), into=True, rev_option=rev)]


def apply(
    config: Config,
    store: Store,
    names: tuple[str, ...] = (),
    *,
    rev: str | None = None,
    into: Path | None = None,
    force: bool = False,
) -> list[ApplyResult]:
    """Apply the named series (all when NAMES is empty). Raises ApplyFailed on the first
    series that does not apply, after leaving its target tree untouched."""
    results = []
    jobs = plan(config, names, into, rev)
    # Every series is read (and refused, failing closed) before anything is fetched or written.
    read = {s.name: read_series(s) for job in jobs for s in job.series}
    for job in jobs:
        upstream = config.get_upstream(job.upstream)
        mirror = store.mirror(upstream.url, base=config.root)
        target = store.resolve_pin(mirror, config, job.upstream, rev)
        patches = [p for s in job.series for p in read[s.name]]
        with progress.step(f"applying {', '.join(s.name for s in job.series)} at {target[:12]}"):
            result = apply_job(store, mirror, job, target, patches, force=force)
        results.append(result)
        if result.state == "failed":
            raise ApplyFailed(result)
    return results


def apply_job(
    store: Store,
    mirror: Mirror,
    job: ApplyJob,
    rev: str,
    patches: list[PatchFile],
    *,
    force: bool = False,
    applied: tuple[list[PatchOutcome], str] | None = None,
) -> ApplyResult:
    """Apply PATCHES at REV into JOB's tree. APPLIED: the caller applied them already, strictly
    at REV in MIRROR's object store (`apply_series_to_index`, whose commits are deterministic),
    and hands over that result rather than have it made again."""
    names = [s.name for s in job.series]
    digest = series_digest(patches)
    result = ApplyResult(names, job.upstream, rev, job.tree, "failed")
    treeswap.recover_tree(job.tree, job.project)  # a run killed while replacing this tree: finish that first
    marker = worktree.read_marker(job.tree) if _where(job).kind(job.tree) is not None else None
    applying = _apply_beside(mirror, job, rev, patches, digest, marker) if applied is None else None
    local = _existing_tree_state(job, force, marker)
    existing = local.marker if local is not None else None
    carried = local is not None and _carried(local.marker, local.head, rev, digest, [p.name for p in patches])
    if carried and local is not None and local.marker.matches(names, rev, digest):
        result.state, result.head = "unchanged", local.head
        return result

    if applied is None:
        applied = applying.result() if applying is not None else apply_series_to_index(mirror.path, rev, patches)
    outcomes, head = applied
    result.outcomes = outcomes
    if result.failure is not None:
        return result
    if local is not None and not carried:
        if _holds(job.tree, mirror, local.head, rev, head):
            # The tree's own commits are pin + series (exported, or pulled): it is the applied series.
            marker = Marker(names, job.upstream, rev, digest, local.head, [p.name for p in patches], exported=True)
            worktree.write_marker(job.tree, marker)
            result.state, result.head = "unchanged", local.head
            return result
        if force:
            existing = None
        elif not _is_worktree_of(job.tree, mirror) or _not_in_series(job.tree, local, head):
            raise UsageError(_local_commits_advice(job, mirror, local, rev, digest, head))
        # else: every commit of the tree is in the series (by patch id, upstream's commits
        # included): it holds no work, and is re-applied like a tree nobody touched.
    result.head = head
    marker = Marker(names, job.upstream, rev, digest, head, [p.name for p in patches])
    if not (existing is not None and _is_worktree_of(job.tree, mirror) and _update_in_place(job, existing, marker)):
        _replace_tree(store, mirror, job, head, marker)
    result.state = "applied"
    return result


def _apply_beside(
    mirror: Mirror, job: ApplyJob, rev: str, patches: list[PatchFile], digest: str, marker: Marker | None
) -> Beside[tuple[list[PatchOutcome], str]] | None:
    """The series applied at REV in MIRROR's object store, started on another thread, where JOB's
    tree surely needs it (an earlier apply's tree, at another pin or series: its MARKER says so):
    git reads that tree meanwhile (its HEAD, whether it is clean), which the apply never touches.
    On a warm pin bump the two took 0.1 to 0.3 s each, one after the other. None elsewhere."""
    if marker is None or marker.matches([s.name for s in job.series], rev, digest):
        return None  # a tree apply did not make (refused), or one that may be unchanged: nothing to start
    return Beside(apply_series_to_index, mirror.path, rev, patches)


@dataclass(frozen=True)
class _LocalTree:
    """A clean tree `apply` made earlier: its marker, and its HEAD now."""

    marker: Marker
    head: str

    @property
    def base(self) -> str:
        """Where the user's own commits start: the pin of an exported tree (all of its commits
        are the user's), else the commit apply made."""
        return self.marker.rev if self.marker.exported else self.marker.head


def _carried(marker: Marker, head: str, rev: str, digest: str, names: list[str]) -> bool:
    """Whether a clean tree at HEAD holds nothing that patches/ (the series NAMES, DIGEST, at the
    pin REV) lacks: HEAD is what apply made; or the user's commits as `export` wrote them, and
    patches/ still holds them (unchanged at the same pin; after a pin move, a pin-sync carried
    them: every patch still there by name)."""
    if head != marker.head:
        return False
    if not marker.exported:
        return True
    if marker.rev == rev:
        return marker.digest == digest
    return set(marker.patches) <= set(names)


def _not_in_series(tree: Path, local: _LocalTree, applied: str) -> list[str]:
    """The commits of TREE that the series applied at the pin (APPLIED, a commit the tree can
    read) does not hold, by patch id (`git cherry`): "SHA subject" each, oldest first."""
    listing = git.run(["cherry", "-v", applied, local.head, local.base], tree).stdout
    return [line[2:] for line in listing.splitlines() if line.startswith("+ ")]


def _existing_tree_state(job: ApplyJob, force: bool, marker: Marker | None) -> _LocalTree | None:
    """JOB's tree as an earlier apply left it (clean; commits on top are judged by the caller),
    or None when the tree may be (re)built. Refuses to replace a directory patchctl did not
    make, or uncommitted changes, unless FORCE. MARKER: the tree's, as read by the caller."""
    tree = job.tree
    where = _where(job)
    kind = where.kind(tree)
    if kind is None:
        return None
    if kind == "directory" and not where.listdir(tree):
        return None
    if marker is not None and marker.updating:
        return None  # an in-place update was cut off: patchctl's own half-written tree, rebuilt from scratch
    if marker is None:
        if force:
            return None
        raise UsageError(
            f"{tree} exists and was not made by patchctl apply; choose another --into or replace it: "
            f"`{job.command('--force')}`"
        )
    head = git.run(["rev-parse", "HEAD"], tree, check=False).stdout.strip()
    if is_clean(tree):
        return _LocalTree(marker, head)
    if force:
        return None
    raise UsageError(_uncommitted_advice(job, marker))


def _uncommitted_advice(job: ApplyJob, marker: Marker) -> str:
    tree = job.tree
    export = job.export_command(marker.rev)
    keep = (
        f"commit them there (`git -C {shlex.quote(str(tree))} commit -a`), then export them (`{export}`)"
        if export
        else f"commit them there (`git -C {shlex.quote(str(tree))} commit -a`) to keep them"
    )
    return f"{tree} has uncommitted changes: {keep}; or discard them: `{job.command('--force')}`"


def fetch_pin(config: Config, store: Store, series_name: str) -> str:
    """The pin of SERIES_NAME's upstream, in the cache's mirror (fetched when it is not there yet,
    e.g. after a pull that moved it): an applied tree, a worktree of that mirror, then sees it."""
    upstream = config.get_series(series_name).upstream
    return store.resolve_pin(store.mirror(config.get_upstream(upstream).url, base=config.root), config, upstream)


def holds_no_work(config: Config, store: Store, series_name: str, tree: Path) -> bool:
    """Whether re-applying TREE, the applied tree of SERIES_NAME, loses nothing: it is exactly as
    an apply left it (its HEAD, no change to a tracked file); or as the user's commits were when
    `export` wrote them, and patches/ still holds them: at the same pin, unchanged since; after
    a pin move (a pin-sync carried the series), still every patch by name."""
    marker = worktree.read_marker(tree)
    if marker is None or marker.updating:
        return False
    head = git.run(["rev-parse", "HEAD"], tree, check=False).stdout.strip()
    if head != marker.head or not is_clean(tree):
        return False
    if not marker.exported:
        return True
    patches = read_series(config.get_series(series_name))
    pin = fetch_pin(config, store, series_name)
    return _carried(marker, head, pin, series_digest(patches), [p.name for p in patches])


def refuse_stale(config: Config, store: Store, series_name: str, tree: Path, *, given: bool = False) -> None:
    """Refuse, in one line, a tree `gate` would run on that is not pin + series: the pin of
    matrix.yaml (GIVEN, a tree named with --tree: the revision it was applied at) with exactly
    the patches in patches/ applied, as `export --check` and `apply` judge it. The line says
    what differs and the command that makes the tree pin + series: `patchctl apply`, or, where
    the tree holds work that is not in the series, what keeps it (`--force` last, saying that it
    discards them). A tree patchctl did not apply is left to `gates.check_tree`."""
    marker = worktree.read_marker(tree)
    if marker is None or marker.updating or series_name not in marker.series:
        return
    selected = [config.get_series(name) for name in marker.series if name in config.series]
    if [s.name for s in selected] != marker.series or {s.upstream for s in selected} != {marker.upstream}:
        return
    patches = [p for s in selected for p in read_series(s)]
    digest = series_digest(patches)
    mirror = store.mirror(config.get_upstream(marker.upstream).url, base=config.root)
    pin = store.resolve_pin(mirror, config, marker.upstream)
    rev = marker.rev if given else pin
    head = git.run(["rev-parse", "HEAD"], tree, check=False).stdout.strip()
    clean = is_clean(tree)
    if clean and head == marker.head and marker.matches(marker.series, rev, digest):
        return
    default = not given or tree.resolve() == worktree.applied_tree(config.root, series_name).resolve()
    job = ApplyJob(selected, marker.upstream, tree, into=not default, rev_option=None if rev == pin else rev)
    where = worktree.display(config.root, tree)
    outcomes, applied = apply_series_to_index(mirror.path, rev, patches)
    failure = next((o for o in outcomes if not o.ok), None)
    if failure is not None:
        raise CheckFailed(
            f"{where} is not pin + series, and none can be made: the series does not apply to {rev[:12]}: "
            f"{failure.describe()}; gate runs on pin + series only"
        )
    shared = _is_worktree_of(tree, mirror)
    if clean and shared and _holds(tree, mirror, head, rev, applied):
        return
    local = _LocalTree(marker, head)
    what = _how_it_differs(marker, rev, [p.name for p in patches], digest)
    if clean and (
        _carried(marker, head, rev, digest, [p.name for p in patches])
        or (shared and not _not_in_series(tree, local, applied))
    ):
        raise UsageError(
            f"{where} is not pin + series ({what or 'its commits are all in the series'}), so gate does not run "
            f"on it; it holds no work of yours: re-apply it (`{job.command()}`)"
        )
    if clean:
        advice = _local_commits_advice(job, mirror, local, rev, digest, applied)
    else:
        advice = _uncommitted_advice(job, marker)
    why = f" ({what})" if what else ""
    advice = advice.removeprefix(f"{tree} ")
    raise UsageError(f"{where} is not pin + series{why}, so gate does not run on it: it {advice}")


def _how_it_differs(marker: Marker, rev: str, names: list[str], digest: str) -> str:
    """What moved since MARKER's apply: the pin, or patches/ ("" when neither did)."""
    if marker.rev != rev:
        return f"it was applied at {marker.rev[:12]}, and the pin is {rev[:12]}"
    if marker.digest == digest:
        return ""
    removed = [n for n in marker.patches if n not in names]
    added = [n for n in names if n not in marker.patches]
    said = [f"{', '.join(removed)} removed from patches/"] if removed else []
    said += [f"{', '.join(added)} added to patches/"] if added else []
    return f"{' and '.join(said) or 'patches/ changed'} since it was applied"


def record_export(config: Config, series_name: str, tree: Path, base: str) -> bool:
    """After `export` wrote SERIES_NAME from TREE's commits on top of BASE: when TREE is the
    applied tree of that series and its HEAD is exactly BASE plus the series now on disk (no
    commit held back: none only on excluded paths), its marker is re-recorded at HEAD, as a
    later `apply` would. Its commits are then known to be in the series: after a pin-sync has
    carried them onto a new pin, the tree holds no work (`holds_no_work`) and is re-applied
    by itself, instead of being taken for work that would be lost. Whether it was recorded."""
    marker = worktree.read_marker(tree)
    if marker is None or marker.updating or marker.series != [series_name]:
        return False
    series = config.get_series(series_name)
    patches = read_series(series)
    if not is_clean(tree):
        return False
    head = git.run(["rev-parse", "HEAD"], tree).stdout.strip()
    ours = git.run(["rev-parse", "HEAD^{tree}"], tree).stdout.strip()
    if series_tree_at_once(tree, base, patches) != ours:
        return False
    names = [p.name for p in patches]
    marker = Marker([series_name], series.upstream, base, series_digest(patches), head, names, exported=True)
    worktree.write_marker(tree, marker)
    return True


def forget_dropped(config: Config, series_name: str, dropped: list[str]) -> None:
    """After a pin-sync wrote SERIES_NAME without the patches DROPPED (taken upstream, or
    dropped at a stop): the applied tree, where its commits were exported from the series as it
    was, still holds those patches' commits, which are no work of the user's (pin-sync dropped
    them on purpose). Its marker stops listing them, so that the tree still counts as carried
    (`holds_no_work`) and is re-applied by itself, instead of refused as holding commits that
    are not in the series. A tree with anything else on it is judged as before."""
    if not dropped:
        return
    tree = confined_path(worktree.state_owner(config.root), worktree.applied_tree(config.root, series_name))
    marker = worktree.read_marker(tree)
    if marker is None or marker.updating or not marker.exported or marker.series != [series_name]:
        return
    kept = [name for name in marker.patches if name not in dropped]
    if kept != marker.patches:
        worktree.write_marker(tree, replace(marker, patches=kept))


def _holds(tree: Path, mirror: Mirror, head: str, rev: str, applied: str) -> bool:
    """Whether the tree's HEAD is REV plus exactly what the series makes of it (APPLIED, a
    commit in MIRROR): same files, and on top of REV (what export needs)."""
    ours = git.run(["rev-parse", "--verify", "--quiet", f"{head}^{{tree}}"], tree, check=False).stdout.strip()
    theirs = git.run(["rev-parse", "--verify", "--quiet", f"{applied}^{{tree}}"], mirror.path, check=False)
    if not ours or ours != theirs.stdout.strip():
        return False
    return git.run(["merge-base", "--is-ancestor", rev, head], tree, check=False).ok


def _local_commits_advice(job: ApplyJob, mirror: Mirror, local: _LocalTree, rev: str, digest: str, applied: str) -> str:
    """Why the commits of JOB's tree that are not in the series stop apply (they would be lost),
    and the commands that go on from there: each one works as printed, `--force` last."""
    tree = job.tree
    shared = _is_worktree_of(tree, mirror)  # the commit APPLIED is then readable in the tree
    mine = _not_in_series(tree, local, applied) if shared else []
    if mine:
        shown = "; ".join(line.split(" ", 1)[0][:12] + " " + line.split(" ", 1)[-1] for line in mine[:3])
        more = f"; and {len(mine) - 3} more" if len(mine) > 3 else ""
        commits = f"{len(mine)} commit(s) not in the series ({shown}{more})"
    else:
        commits = f"commits not in the series ({local.base[:12]}..{local.head[:12]})"
    force = job.command("--force")
    discard = f"or discard them: `{force}`"
    if shared:
        listing = git.run(["diff-tree", "-r", "-z", "--name-only", "--no-renames", local.head, applied], tree).stdout
        differing = sorted(p for p in listing.split("\0") if p)
        if differing and all(is_excluded(p, s.exclude) for p in differing for s in job.series):
            return (
                f"{tree} has {commits} that differ from pin + series only in paths the series excludes "
                f"({', '.join(differing[:5])}), which export drops: patches/ cannot hold them; discard them: `{force}`"
            )
    export = job.export_command(rev)
    names = [s.name for s in job.series]
    if export and local.marker.matches(names, rev, digest):
        return f"{tree} has {commits}: export them (`{export}`; apply is then a no-op), {discard}"
    if export and local.marker.exported and local.marker.rev == rev:
        return (
            f"{tree} has {commits}: patches/ changed since the tree was exported; to keep the tree's version, "
            f"export it again (`{export}`), {discard}"
        )
    then = f", then export them (`{export}`)" if export else ""
    moved = "the pin or patches/ changed since it was applied"
    if (
        shared
        and not local.marker.exported
        and git.run(["merge-base", "--is-ancestor", local.marker.head, local.head], tree, check=False).ok
    ):
        rebase = shlex.join(["git", "-C", str(tree), "rebase", "--onto", applied, local.marker.head])
        return f"{tree} has {commits}, and {moved}: move them onto pin + series (`{rebase}`){then}; {discard}"
    if mine:
        # Rewritten since apply (or exported, then carried only in part): the commits themselves, picked.
        at = shlex.join(["git", "-C", str(tree), "checkout", "-q", "--detach", applied])
        pick = shlex.join(["git", "-C", str(tree), "cherry-pick", *(line.split(" ", 1)[0] for line in mine)])
        return f"{tree} has {commits}, and {moved}: move them onto pin + series (`{at} && {pick}`){then}; {discard}"
    return f"{tree} has {commits}, and {moved}; keep what you need from it, then discard them: `{force}`"


def _is_worktree_of(tree: Path, mirror: Mirror) -> bool:
    common = worktree.common_dir(tree)
    return common is not None and common.resolve() == mirror.path.resolve()


def _update_in_place(job: ApplyJob, existing: Marker, marker: Marker) -> bool:
    """Warm apply: move a clean applied tree to the new HEAD, writing only the files that
    differ between the two commits (untracked files, such as a build directory, stay). The
    marker says `updating` while git works, so a run cut off half-way leaves a tree the next
    apply recognises as its own and rebuilds. False when git refuses (an untracked file in
    the way): the caller then replaces the tree."""
    tree = job.tree
    with _where(job).directory(tree) as opened:  # git works in that very directory, whatever is swapped on the way
        worktree.write_marker(tree, replace(existing, updating=marker.head))
        checkout = ["-c", "checkout.workers=0", "checkout", "-q", "--detach", marker.head]  # a full commit id
        if not git.run(checkout, opened.cwd, check=False).ok:
            return False
    worktree.write_marker(tree, marker)
    return True


def _where(job: ApplyJob) -> Root:
    """What JOB's tree is reached through: its repository, or (--into) the directory holding it."""
    return Root(job.project if job.project is not None else job.tree.parent)


def _replace_tree(store: Store, mirror: Mirror, job: ApplyJob, head: str, marker: Marker) -> None:
    """Check HEAD out as a worktree at JOB's tree; a kill at any point leaves the old tree or the new."""
    treeswap.replace_tree(store, mirror, job.tree, head, marker, job.project)
