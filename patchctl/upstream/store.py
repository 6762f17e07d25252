"""The cache of upstream repositories.

One bare mirror per upstream URL under the cache directory, fetched incrementally and
guarded by a file lock so that two runs cannot corrupt it. Mirrors are never shallow:
`git apply -3` needs the preimage blobs named by a patch's index lines to build its fake
ancestor. Mirrors of remote URLs are blobless partial clones (`--filter=blob:none`): every
commit and tree, but a blob only when something reads it (a checkout, an archive, the
preimage `apply -3` asks for), fetched on demand from the promisor remote; a fresh runner
then downloads one revision's files instead of the whole history (about 1.4 GB for
llama.cpp). A server that does not support filters sends everything, and the mirror is an
ordinary full clone. Local paths and sdists are always full: there is nothing to save.
Checkouts are git worktrees of a mirror, or clean exports of a rev.

git runs in the mirrors, never in the repositories they copy: a local repository (a path in
matrix.yaml, the `file://` repository a vendoring Makefile names) is fetched over `file://`
alone, and only its upload-pack runs there (docs/security.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .. import git
from ..confined import Refused, Root
from ..errors import EnvironmentFailure, GitError, UsageError
from ..output import progress
from ..paths import cache_dir
from ..patterns import lazy
from ..project import upstream_checks
from ..project.yamlloc import format_keypath
from ..records import dataclass

if TYPE_CHECKING:
    from filelock import FileLock

    from ..project.config import Config, Upstream

LOCK_TIMEOUT_S = 600
PARTIAL_CLONE_FILTER = "blob:none"
# Transports that can carry a filter request to a remote upload-pack.
_REMOTE_URL = lazy(r"^(https?|git|ssh|git\+ssh|ssh\+git|file)://|^[\w.-]+@[\w.-]+:")
_FILTER_IGNORED = "filtering not recognized by server"
_ADDING = b"initializing"  # the lock reason of `git worktree add` until its checkout is done (LC_ALL=C)


@dataclass(frozen=True)
class Mirror:
    url: str
    path: Path

    @property
    def lock(self) -> FileLock:
        from filelock import FileLock  # here, not at the top: 28 ms of start-up a command that locks no mirror saves

        return FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT_S)


class RevisionNotFound(GitError):
    """REV is not a commit of the mirror; FETCHED says the upstream answered a fetch just now."""

    def __init__(self, message: str, rev: str, fetched: bool):
        super().__init__(message)
        self.rev = rev
        self.fetched = fetched


class UpstreamPathMissing(EnvironmentFailure):
    """A local upstream path that does not exist; SOURCE is what its mirror is keyed by."""

    def __init__(self, source: str):
        super().__init__(f"upstream path does not exist: {source}")
        self.source = source


class Store:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else cache_dir()
        self.cache = Root(cache_dir(self.root), "the cache")
        self.cache.mkdirs("mirrors")
        git.own_bare_repositories_in(self.root / "mirrors")

    def mirror(self, url: str, base: Path | None = None) -> Mirror:
        """The mirror for URL, created (and fetched) on first use. Relative paths resolve from BASE.
        A local path that is gone (an unmounted disk, a checkout elsewhere) is no error while its
        mirror is cached: like an unreachable URL, the cache answers until something must be fetched."""
        try:
            source = self.resolve_source(url, base)
        except UpstreamPathMissing as missing:
            cached = self._mirror_at(missing.source)
            if not (cached.path / "HEAD").exists():
                raise
            return cached
        mirror = self._mirror_at(source)
        if not (mirror.path / "HEAD").exists():
            with self._locked(mirror):
                if not (mirror.path / "HEAD").exists():
                    self._create(mirror)
        return mirror

    def _mirror_at(self, source: str) -> Mirror:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", source.rstrip("/").rsplit("/", 1)[-1])[:40] or "repo"
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        return Mirror(source, self.root / "mirrors" / f"{slug}-{digest}.git")

    @staticmethod
    def resolve_source(url: str, base: Path | None = None) -> str:
        """What git should fetch from: URLs as given, local paths made absolute, sdists built."""
        if upstream_checks.is_sdist_url(url):
            from . import sdist  # an sdist's reader, only for an sdist URL

            return str(sdist.materialize(url))
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url) or re.match(r"^[\w.-]+@[\w.-]+:", url):
            return url
        path = Path(url).expanduser()
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if not path.exists():
            raise UpstreamPathMissing(str(path.resolve()))
        return str(path.resolve())

    def local_mirror(self, url: str) -> Path | None:
        """The mirror of the local repository URL names (a path, or a `file://` URL; relative to
        the working directory), brought up to date over `file://` alone; None when URL names no
        local directory. What to run git in to read a repository that input names: never the
        repository itself, whose config (a partial clone's promisor, its hooks) is not ours."""
        local = Path(url.removeprefix("file://")).expanduser()
        if not local.is_dir():
            return None
        source = str(local.resolve())
        existed = (self._mirror_at(source).path / "HEAD").exists()
        mirror = self.mirror(source)
        if existed:
            self.fetch(mirror)  # as fresh as reading the repository itself was
        return mirror.path

    def fetch(self, mirror: Mirror) -> None:
        with self._locked(mirror), progress.step(f"fetching {mirror.url}"):
            self._fetch_unlocked(mirror)

    def resolve(self, mirror: Mirror, rev: str, *, fetch_if_missing: bool = True) -> str:
        """REV as a full commit id. A full id already in the cache needs no network; names
        (branches, tags) can move upstream, so they are fetched first."""
        if git.is_full_sha(rev) or not fetch_if_missing:
            found = self._rev_parse(mirror, rev)
            if found or not fetch_if_missing:
                if not found:
                    raise RevisionNotFound(f"revision {rev!r} not found in upstream {mirror.url}", rev, False)
                return found
        self.fetch(mirror)
        found = self._rev_parse(mirror, rev)
        if not found:
            raise RevisionNotFound(f"revision {rev!r} not found in upstream {mirror.url} (fetched just now)", rev, True)
        return found

    def resolve_pin(self, mirror: Mirror, config: Config, name: str, rev: str | None = None) -> str:
        """REV (from --rev) or upstream NAME's pin as a full commit id. A pin that does not
        resolve is matrix.yaml's fault: the error names its `pin:` line and says whether the
        upstream was reachable (exit 2), or unreachable while the pin is not cached (exit 3)."""
        upstream = config.get_upstream(name)
        if rev:
            return self.resolve_requested(mirror, config, name, rev)
        try:
            return self.resolve(mirror, upstream.pin)
        except RevisionNotFound as missing:
            if upstream.ci is not None:
                # Two sources state this revision (pin-sync moves both): this one cannot serve it.
                raise EnvironmentFailure(cannot_serve(mirror, upstream)) from None
            raise config.error(
                ("upstreams", name, "pin"),
                f"{missing.rev} is not a commit of upstream {name} ({upstream.url}); the upstream was reachable "
                "(fetched just now), so the pin is wrong: set it to a commit that exists",
            ) from None
        except GitError as failed:
            key = ("upstreams", name, "pin")
            raise EnvironmentFailure(
                f"{config.path}:{config.doc.line_of(key)}: {format_keypath(key)}: pin {upstream.pin[:12]} is not in "
                f"the cache and upstream {name} is unreachable ({failed})"
            ) from None

    def resolve_requested(self, mirror: Mirror, config: Config, name: str, rev: str, option: str = "--rev") -> str:
        """REV, named on the command line by OPTION (`apply --rev`, `pin-sync --to`, `canary --rev`),
        as a full commit id. A revision the upstream answered without is a usage error (exit 2);
        an upstream that cannot be reached stays an environment error (exit 3)."""
        try:
            return self.resolve(mirror, rev)
        except RevisionNotFound:
            raise UsageError(
                f"{option} {rev!r}: no such revision in upstream {name} ({config.get_upstream(name).url}); "
                "the upstream was reachable (fetched just now)"
            ) from None

    @staticmethod
    def _rev_parse(mirror: Mirror, rev: str) -> str | None:
        found = git.run(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], mirror.path, check=False
        )
        return found.stdout.strip() if found.ok else None

    def branch_tip(self, mirror: Mirror, branch: str) -> str:
        """The newest commit of BRANCH upstream (fetches first)."""
        self.fetch(mirror)
        return self.resolve(mirror, f"refs/heads/{branch}", fetch_if_missing=False)

    def add_worktree(self, mirror: Mirror, rev: str, dest: Path) -> Path:
        """A detached git worktree of the mirror at REV, at DEST (which must not exist)."""
        dest = Path(dest)
        with self._locked(mirror), progress.step(f"checking out {rev[:12]}"):
            unlock_killed_adds(mirror.path)
            git.run(["worktree", "prune"], mirror.path)
            # Checkout is bound by writing files; parallel workers overlap inflating and writing.
            git.run(["-c", "checkout.workers=0", "worktree", "add", "-q", "--detach", str(dest), rev], mirror.path)
        return dest

    def remove_worktree(self, mirror: Mirror, dest: Path) -> None:
        """Delete the worktree DEST (a scratch tree of the canary, or a directory the user named) and
        its entry in MIRROR. Its files go by descriptor, no link followed (a FIFO or a link where
        the tree was is removed itself, never opened); then git forgets it (`worktree prune`)."""
        with self._locked(mirror):
            unlock_killed_adds(mirror.path)
            Root(dest.parent, "the directory").remove_tree(dest.name)
            git.run(["worktree", "prune"], mirror.path, check=False)

    def _create(self, mirror: Mirror) -> None:
        tmp = mirror.path.with_name(mirror.path.name + ".partial")
        self.cache.remove_tree(tmp)
        self.cache.mkdirs(tmp)
        git.init_repo(tmp, bare=True)
        git.run(["remote", "add", "--mirror=fetch", "origin", fetch_url(mirror.url)], tmp)
        # Worktrees of a mirror must not see the user's hooks or gc the objects 3-way needs.
        git.run(["config", "gc.auto", "0"], tmp)
        partial = supports_partial_clone(mirror.url)
        if partial:
            git.run(["config", "remote.origin.promisor", "true"], tmp)
            git.run(["config", "remote.origin.partialclonefilter", PARTIAL_CLONE_FILTER], tmp)
        try:
            with progress.step(f"mirroring {mirror.url}"):
                warnings = self._fetch_unlocked(Mirror(mirror.url, tmp))
        except GitError:
            self.cache.remove_tree(tmp)
            raise
        if partial and _FILTER_IGNORED in warnings:
            # The server sent everything: an ordinary full mirror, which never fetches lazily.
            git.run(["config", "--unset", "remote.origin.promisor"], tmp)
            git.run(["config", "--unset", "remote.origin.partialclonefilter"], tmp)
        self.cache.remove_tree(mirror.path)  # a directory without HEAD: what a failed creation left
        self.cache.rename(tmp, mirror.path)

    @staticmethod
    def _fetch_unlocked(mirror: Mirror) -> str:
        """Fetch every ref; git's warnings (stderr) are returned."""
        protocols = git.LOCAL_PROTOCOLS if is_local(mirror.url) else git.ALLOWED_PROTOCOLS
        result = git.run(
            ["fetch", "--quiet", "--prune", "--tags", "origin"], mirror.path, check=False, protocols=protocols
        )
        if not result.ok:
            raise GitError(f"cannot fetch {mirror.url}: {git.explain(result.stderr)}")
        return result.stderr

    @staticmethod
    @contextlib.contextmanager
    def _locked(mirror: Mirror) -> Iterator[None]:
        from filelock import Timeout  # see Mirror.lock

        try:
            with mirror.lock:
                yield
        except Timeout:
            raise EnvironmentFailure(f"the cache is locked by another patchctl run: {mirror.lock.lock_file}") from None


def cannot_serve(mirror: Mirror, upstream: Upstream) -> str:
    """One line: the source followed here (URL) lacks UPSTREAM's pin, and which source has it.

    An upstream with a `ci:` block has two sources of one revision (the embedded default and
    CI's), and pin-sync under either moves both pins: the commit it moved to may exist in one
    only (llama-cpp-python's sdists vendor a few llama.cpp commits, not every one)."""
    following_ci = upstream.ci is not None and upstream.url == upstream.ci.url
    other = "default" if following_ci else "ci"
    vendored = ""
    if upstream_checks.is_sdist_url(upstream.url):
        tags = git.run(["tag", "--list", "v*"], mirror.path, check=False).stdout.split()
        vendored = f" (its sdists vendor {', '.join(tags) or 'no version'} only)"
    return (
        f"upstream {upstream.name}: this source ({upstream.url}) cannot serve the pin {upstream.pin[:12]}{vendored}; "
        f"follow the source that can: --upstream-source {other} (or PATCHCTL_UPSTREAM_SOURCE={other})"
    )


def settle_checkout(tree: Path) -> None:
    """Date the files of TREE, a checkout just made, a second back, and refresh its index once.
    A file written in the same second as the index is "racily clean" to git, which then reads
    it whole at every later index write to be sure. Right after a checkout of llama.cpp that
    is every file: each `apply --index` and `commit` of a replay's first second took 20 to 40
    ms longer. Dated before the index, the files are read once, here. (Only time is at stake:
    a file that cannot be dated stays racily clean, and git reads it again.)"""
    Root(tree, "the sync tree").set_times(int(time.time()) - 1)
    git.run(["update-index", "-q", "--refresh"], tree, check=False)


def unlock_killed_adds(mirror: Path) -> None:
    """Unlock the worktrees of MIRROR that a killed `git worktree add` left locked.

    `git worktree add` locks its new entry ("initializing") until the checkout is done; a
    run killed meanwhile leaves it locked, and git then refuses every later add at that path
    ("a missing but locked worktree") and never prunes it. Every add of the cache's mirrors
    happens under the mirror's lock, which the caller holds: no add is under way, so every
    entry still initializing is a killed one. Other locks (`patchctl.state.treeswap` moving a tree)
    are left alone."""
    where = Root(mirror, "the mirror")
    if where.kind("worktrees") != "directory":
        return
    for entry in where.listdir("worktrees") or []:
        locked = f"worktrees/{entry}/locked"
        try:
            reason = where.read_bytes(locked, 4096)
        except (OSError, Refused):
            continue
        if reason is not None and reason.strip() == _ADDING:
            where.unlink(locked)


def is_local(url: str) -> bool:
    """Whether URL (a mirror's source) is a repository on this machine: a path or `file://`."""
    return url.startswith(("/", "file://"))


def fetch_url(source: str) -> str:
    """What a mirror of SOURCE fetches from: a local path as a `file://` URL (its characters
    quoted: git decodes `%` in one), anything else as it is."""
    if not source.startswith("/"):
        return source
    from urllib.parse import quote  # here: only a mirror's creation asks

    return "file://" + quote(source, safe="/")


def supports_partial_clone(url: str) -> bool:
    """Whether URL names a remote whose upload-pack may honour `--filter` (local paths do not)."""
    return bool(_REMOTE_URL.match(url))


def prefetch_blobs(repo: Path, rev: str, paths: list[str]) -> None:
    """In a blobless mirror, fetch REV's blobs at PATHS in one request.

    Reading them one by one (what `git apply --cached` does to each preimage) costs one
    round trip each. Blobs already present are not asked for; a full mirror does nothing.
    """
    if not git.run(["config", "--bool", "remote.origin.promisor"], repo, check=False).stdout.strip() == "true":
        return
    if not paths:
        return
    wanted = sorted(set(paths))
    if git.paths_fit_argv(wanted):
        listing = git.run(["ls-tree", "-z", rev, "--", *wanted], repo).stdout
        entries = [entry.partition("\t")[0] for entry in listing.split("\0") if entry]
    else:  # long paths: the whole tree, read here, never the command line
        listing = git.run(["ls-tree", "-r", "-z", "--full-tree", rev], repo).stdout
        chosen = set(wanted)
        entries = [meta for meta, _, path in (e.partition("\t") for e in listing.split("\0") if e) if path in chosen]
    blobs = [meta.split()[2] for meta in entries if meta.split()[1:2] == ["blob"]]
    if not blobs:
        return
    # rev-list marks what is absent without fetching it (naming an absent blob directly is an error).
    # Ids only: a path printed beside an id could hold a line break and a forged `?<id>` line.
    listing = git.run(["rev-list", "--objects", "--no-object-names", "--no-walk", "--missing=print", rev], repo).stdout
    absent = {line[1:].strip() for line in listing.split("\n") if line.startswith("?")}
    missing = sorted(absent.intersection(blobs))
    if missing:
        progress.note(f"fetching {len(missing)} blob(s) the series patches")
        # The request git itself makes for a lazy fetch, with every blob at once.
        git.run(
            ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
            + ["--recurse-submodules=no", f"--filter={PARTIAL_CLONE_FILTER}", "--stdin", "origin"],
            repo,
            check=False,
            input="".join(f"{oid}\n" for oid in missing),
        )
