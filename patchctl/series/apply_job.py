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
from dataclasses import dataclass, replace
from pathlib import Path

from .. import git
from ..confined import Root, confined_path
from ..errors import CheckFailed, UsageError
from ..output import progress
from ..output.jsonout import json_field
from ..project.config import Config, Series
from ..state import treeswap, worktree
from ..state.worktree import Marker
from ..upstream.store import Mirror, Store
from .applier import PatchOutcome, apply_series_to_index, is_clean
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
    local = _existing_tree_state(job, force)
    existing = local.marker if local is not None else None
    if local is not None and not local.has_commits and local.marker.matches(names, rev, digest):
        result.state, result.head = "unchanged", local.head
        return result

    outcomes, head = applied if applied is not None else apply_series_to_index(mirror.path, rev, patches)
    result.outcomes = outcomes
    if result.failure is not None:
        return result
    if local is not None and local.has_commits:
        if _holds(job.tree, mirror, local.head, rev, head):
            # The tree's own commits are pin + series (exported, or pulled): it is the applied series.
            worktree.write_marker(
                job.tree, Marker(names, job.upstream, rev, digest, local.head, [p.name for p in patches])
            )
            result.state, result.head = "unchanged", local.head
            return result
        if not force:
            raise UsageError(_local_commits_advice(job, mirror, local, rev, digest, head))
        existing = None
    result.head = head
    marker = Marker(names, job.upstream, rev, digest, head, [p.name for p in patches])
    if not (existing is not None and _is_worktree_of(job.tree, mirror) and _update_in_place(job, existing, marker)):
        _replace_tree(store, mirror, job, head, marker)
    result.state = "applied"
    return result


@dataclass(frozen=True)
class _LocalTree:
    """A clean tree `apply` made earlier: its marker, and its HEAD now."""

    marker: Marker
    head: str

    @property
    def has_commits(self) -> bool:
        """Commits made on top of what apply checked out (maybe exported since)."""
        return self.head != self.marker.head


def _existing_tree_state(job: ApplyJob, force: bool) -> _LocalTree | None:
    """JOB's tree as an earlier apply left it (clean; commits on top are judged by the caller),
    or None when the tree may be (re)built. Refuses to replace a directory patchctl did not
    make, or uncommitted changes, unless FORCE."""
    tree = job.tree
    where = _where(job)
    kind = where.kind(tree)
    if kind is None:
        return None
    if kind == "directory" and not where.listdir(tree):
        return None
    marker = worktree.read_marker(tree)
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
    export = job.export_command(marker.rev)
    keep = (
        f"commit them there (`git -C {shlex.quote(str(tree))} commit -a`), then export them (`{export}`)"
        if export
        else f"commit them there (`git -C {shlex.quote(str(tree))} commit -a`) to keep them"
    )
    raise UsageError(f"{tree} has uncommitted changes: {keep}; or discard them: `{job.command('--force')}`")


def fetch_pin(config: Config, store: Store, series_name: str) -> str:
    """The pin of SERIES_NAME's upstream, in the cache's mirror (fetched when it is not there yet,
    e.g. after a pull that moved it): an applied tree, a worktree of that mirror, then sees it."""
    upstream = config.get_series(series_name).upstream
    return store.resolve_pin(store.mirror(config.get_upstream(upstream).url, base=config.root), config, upstream)


def holds_no_work(tree: Path) -> bool:
    """Whether TREE is exactly as an apply left it (its HEAD, no change to a tracked file), or as
    the user's exported commits left it: re-applying it loses nothing."""
    marker = worktree.read_marker(tree)
    if marker is None or marker.updating:
        return False
    head = git.run(["rev-parse", "HEAD"], tree, check=False).stdout.strip()
    return head == marker.head and is_clean(tree)


def _holds(tree: Path, mirror: Mirror, head: str, rev: str, applied: str) -> bool:
    """Whether the tree's HEAD is REV plus exactly what the series makes of it (APPLIED, a
    commit in MIRROR): same files, and on top of REV (what export needs)."""
    ours = git.run(["rev-parse", "--verify", "--quiet", f"{head}^{{tree}}"], tree, check=False).stdout.strip()
    theirs = git.run(["rev-parse", "--verify", "--quiet", f"{applied}^{{tree}}"], mirror.path, check=False)
    if not ours or ours != theirs.stdout.strip():
        return False
    return git.run(["merge-base", "--is-ancestor", rev, head], tree, check=False).ok


def _local_commits_advice(job: ApplyJob, mirror: Mirror, local: _LocalTree, rev: str, digest: str, applied: str) -> str:
    """Why the commits on top of JOB's tree stop apply, and the commands that go on from there."""
    tree = job.tree
    commits = f"commits on top of the applied series ({local.marker.head[:12]}..{local.head[:12]})"
    force = job.command("--force")
    discard = f"or discard them: `{force}`"
    shared = _is_worktree_of(tree, mirror)  # the commit APPLIED is then readable in the tree
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
    if shared and git.run(["merge-base", "--is-ancestor", local.marker.head, local.head], tree, check=False).ok:
        rebase = shlex.join(["git", "-C", str(tree), "rebase", "--onto", applied, local.marker.head])
        then = f", then export them (`{export}`)" if export else ""
        return (
            f"{tree} has {commits}, and the pin or patches/ changed since it was applied: move them onto pin + "
            f"series (`{rebase}`){then}; {discard}"
        )
    return f"{tree} has {commits}, and the pin or patches/ changed since it was applied; {discard}"


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
