"""Applying series to a tree, transactionally: the domain of `patchctl apply`.

The whole series is first applied inside the cache's mirror, to a private index, one
commit per patch (see `applier.IndexBuilder`). Only when every patch has applied is a
tree checked out, at the last of those commits; so a failure leaves the target directory
exactly as it was, and a success leaves a git worktree whose history is the upstream rev
plus one commit per patch: the starting point for editing and `patchctl export`.

A marker in the worktree's git directory (`worktree.Marker`) records the upstream rev, the
digest of the ordered patches and the resulting commit. A re-run whose marker matches, on
a tree with no local change, is a no-op; a stale marker (other rev, other patches, moved
HEAD) is detected and never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from . import git, progress, treeswap, worktree
from .applier import PatchOutcome, apply_series_to_index, is_clean
from .config import Config, Series
from .confined import confined_path
from .errors import CheckFailed, UsageError
from .jsonout import json_field
from .patchset import PatchFile, read_series, series_digest
from .store import Mirror, Store
from .worktree import Marker


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


def plan(config: Config, names: tuple[str, ...], into: Path | None) -> list[ApplyJob]:
    selected = config.select_series(names)
    if not selected:
        raise UsageError("matrix.yaml defines no series to apply")
    if into is None:
        trees = [confined_path(config.root, worktree.applied_tree(config.root, s.name)) for s in selected]
        return [ApplyJob([s], s.upstream, tree) for s, tree in zip(selected, trees)]
    upstreams = {s.upstream for s in selected}
    if len(upstreams) > 1:
        raise UsageError(f"--into takes series of one upstream; these span {', '.join(sorted(upstreams))}")
    return [ApplyJob(selected, selected[0].upstream, Path(into).resolve())]


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
    jobs = plan(config, names, into)
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
    store: Store, mirror: Mirror, job: ApplyJob, rev: str, patches: list[PatchFile], *, force: bool = False
) -> ApplyResult:
    names = [s.name for s in job.series]
    digest = series_digest(patches)
    result = ApplyResult(names, job.upstream, rev, job.tree, "failed")
    treeswap.recover_tree(job.tree)  # a run killed while replacing this tree: finish that first
    existing = _existing_tree_state(job.tree, force)
    if existing is not None and existing.matches(names, rev, digest):
        result.state, result.head = "unchanged", existing.head
        return result

    outcomes, head = apply_series_to_index(mirror.path, rev, patches)
    result.outcomes = outcomes
    if result.failure is not None:
        return result
    result.head = head
    marker = Marker(names, job.upstream, rev, digest, head, [p.name for p in patches])
    if not (
        existing is not None and _is_worktree_of(job.tree, mirror) and _update_in_place(job.tree, existing, marker)
    ):
        _replace_tree(store, mirror, job.tree, head, marker)
    result.state = "applied"
    return result


def _existing_tree_state(tree: Path, force: bool) -> Marker | None:
    """The trustworthy marker of TREE, or None when TREE may be (re)built. Refuses to
    replace a directory patchctl did not make, or one with local work, unless FORCE."""
    if not tree.exists():
        return None
    if tree.is_dir() and not any(tree.iterdir()):
        return None
    marker = worktree.read_marker(tree)
    if marker is not None and marker.updating:
        return None  # an in-place update was cut off: patchctl's own half-written tree, rebuilt from scratch
    if marker is None:
        if force:
            return None
        raise UsageError(
            f"{tree} exists and was not made by patchctl apply; choose another --into or pass --force to replace it"
        )
    head = git.run(["rev-parse", "HEAD"], tree, check=False).stdout.strip()
    clean = is_clean(tree)
    if head == marker.head and clean:
        return marker
    if not force:
        what = "uncommitted changes" if not clean else f"commits on top of the applied series (HEAD {head[:12]})"
        raise UsageError(f"{tree} has {what}; export them (patchctl export) or pass --force to discard them")
    return None


def _is_worktree_of(tree: Path, mirror: Mirror) -> bool:
    common = worktree.common_dir(tree)
    return common is not None and common.resolve() == mirror.path.resolve()


def _update_in_place(tree: Path, existing: Marker, marker: Marker) -> bool:
    """Warm apply: move a clean applied tree to the new HEAD, writing only the files that
    differ between the two commits (untracked files, such as a build directory, stay). The
    marker says `updating` while git works, so a run cut off half-way leaves a tree the next
    apply recognises as its own and rebuilds. False when git refuses (an untracked file in
    the way): the caller then replaces the tree."""
    worktree.write_marker(tree, replace(existing, updating=marker.head))
    checkout = git.run(["-c", "checkout.workers=0", "checkout", "-q", "--detach", marker.head], tree, check=False)
    if not checkout.ok:
        return False
    worktree.write_marker(tree, marker)
    return True


def _replace_tree(store: Store, mirror: Mirror, tree: Path, head: str, marker: Marker) -> None:
    """Check HEAD out as a worktree at TREE; a kill at any point leaves the old tree or the new."""
    treeswap.replace_tree(store, mirror, tree, head, marker)
