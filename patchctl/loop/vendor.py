"""Vendored copies of the patched tree: the domain of `patchctl vendor` (and of the vendored
half of `pin-sync` and `export --from-vendor`).

A series' `vendor:` entries (`config.VendorCopy`) say which files of the patched tree (the
upstream at its pin with the series applied) the repository carries, and where. A file of
the tree at FROM/PATH is *selected* when an include glob matches PATH, no exclude glob does
and the copy's rsync `filter:` (if any) sends PATH; it belongs at TO/PATH unless a protect
glob or a protect rule of the filter matches PATH, or PATH is the filter file itself (then
that path is the project's own). A `files:` item copies one upstream file from anywhere in
the tree to its path in TO. Within TO, the copy *manages* every path that is selected and
not protected, and every `files:` destination: such a file must equal the tree's (bytes and
executable bit), and one the tree lacks is stale and deleted. Every other file in TO (build
glue, bindings) is left alone.

The patched tree is built in the upstream's mirror with a private index (no work tree is
checked out); vendored files are compared by their git blob ids, hashed here, so a check needs
no blob of the mirror. Writes go through the journal: all or nothing.

Every read, write and delete in a copy goes through `patchctl.confined.Root`: a link anywhere
on the way to a vendored file (`third_party -> .git`, a linked subdirectory inside the copy)
refuses the command before anything is written, naming the link (exit 2): reads here, writes and
deletes in the journal (`patchctl.state.journal`), which checks every target before its first byte.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import field
from pathlib import Path

from .. import git
from ..confined import Root
from ..confined.regular import file_kind
from ..errors import CheckFailed, UsageError
from ..output import progress
from ..output.jsonout import json_field
from ..project.config import Config, Series, VendorCopy, VendorFile
from ..project.globs import any_match
from ..records import dataclass
from ..series.applier import apply_series_to_index, is_clean
from ..series.patchset import read_series
from ..state import journal, worktree
from ..upstream.store import Store, prefetch_blobs

REGULAR_MODES = {"100644": 0o644, "100755": 0o755}
MAX_VENDORED_FILE_BYTES = 512 * 1024 * 1024  # far above any source file; a bound on what a copy makes patchctl read
DEFAULT_MESSAGE = "Changes made in the vendored copy"


@dataclass(frozen=True)
class Wanted:
    """One file of a vendored copy, as pin + series has it."""

    source: str  # path in the patched tree
    mode: str  # git mode: 100644 or 100755
    blob: str


@dataclass(frozen=True)
class Difference:
    path: str  # repository-relative
    kind: str  # "differs" | "mode" | "missing" | "extra" | a file kind ("symlink", "directory", ...)

    def line(self) -> str:
        what = {
            "differs": "differs from pin + series",
            "mode": "executable bit differs from pin + series",
            "missing": "missing (pin + series has it)",
            "extra": "not in pin + series (a stale file the copy manages)",
        }.get(self.kind, f"a {self.kind} where pin + series has a regular file")
        return f"{self.path}: {what}"


@dataclass
class SeriesCopy:
    """One series' vendored copies compared with (or written from) pin + series."""

    series: str
    rev: str  # the upstream pin
    head: str  # the commit of the patched tree
    files: int  # files the copies hold
    differences: list[Difference] = field(default_factory=list)
    written: list[str] = json_field(default_factory=list)
    deleted: list[str] = json_field(default_factory=list)


@dataclass
class VendorResult:
    check: bool
    copies: list[SeriesCopy]

    @property
    def ok(self) -> bool:
        return not any(c.differences for c in self.copies) if self.check else True

    def lines(self) -> list[str]:
        out = []
        for copy in self.copies:
            where = f"{copy.series}: {copy.files} vendored file(s) from {copy.rev[:12]} + series"
            if self.check:
                out += [d.line() for d in copy.differences]
                state = f"{len(copy.differences)} differ" if copy.differences else "up to date"
                out.append(f"{where}: {state}")
            elif copy.written or copy.deleted:
                out.append(f"{where}: wrote {len(copy.written)}, deleted {len(copy.deleted)}")
            else:
                out.append(f"{where}: up to date (nothing written)")
        return out


class VendorOutOfDate(CheckFailed):
    def __init__(self, result: VendorResult):
        count = sum(len(c.differences) for c in result.copies)
        super().__init__(f"{count} vendored file(s) differ from pin + series: run `patchctl vendor` to rewrite them")
        self.result = result


# ---------------------------------------------------------------- entry points


def vendored_series(config: Config, names: tuple[str, ...]) -> list[Series]:
    """The named series (default: every series with a `vendor:` entry); fails closed when none is."""
    selected = config.select_series(names)
    without = [s.name for s in selected if not s.vendor]
    if names and without:
        raise UsageError(f"series {', '.join(without)} declares no `vendor:` copy in {config.path.name}")
    chosen = [s for s in selected if s.vendor]
    if not chosen:
        raise UsageError(f"no series in {config.path.name} declares a `vendor:` copy: nothing to vendor or check")
    return chosen


def run(config: Config, store: Store, names: tuple[str, ...] = (), *, check: bool = False) -> VendorResult:
    """Compare (CHECK) or rewrite the vendored copies of the named series from pin + series.
    Raises VendorOutOfDate when a check finds a difference."""
    copies = []
    planned: list[journal.FileChange] = []
    for series in vendored_series(config, names):
        repo, rev, head = patched_commit(config, store, series)
        wanted = wanted_files(config, series, repo, head)
        copy = SeriesCopy(series.name, rev, head, len(wanted), compare(config, series, wanted))
        if not check:
            changes = changes_for(config, repo, head, wanted, copy.differences)
            copy.written = [d.path for d in copy.differences if d.kind != "extra"]
            copy.deleted = [d.path for d in copy.differences if d.kind == "extra"]
            copy.differences = []
            planned += changes
        copies.append(copy)
    if planned:
        journal.commit(config.path, planned)
        prune_empty_dirs(config, [c.path for c in planned if c.deletes])
    result = VendorResult(check, copies)
    if not result.ok:
        raise VendorOutOfDate(result)
    return result


def patched_commit(config: Config, store: Store, series: Series) -> tuple[Path, str, str]:
    """(mirror, pin, commit of the pin with SERIES applied), made in the mirror's object store."""
    upstream = config.get_upstream(series.upstream)
    mirror = store.mirror(upstream.url, base=config.root)
    rev = store.resolve_pin(mirror, config, series.upstream)
    with progress.step(f"applying {series.name} at {rev[:12]} for its vendored copy"):
        outcomes, head = apply_series_to_index(mirror.path, rev, read_series(series))
    failure = next((o for o in outcomes if not o.ok), None)
    if failure is not None:
        raise CheckFailed(
            f"series {series.name} does not apply to {rev[:12]}: {failure.describe()}; the vendored copy cannot be "
            "made from it (fix the series first: `patchctl lint`)"
        )
    return mirror.path, rev, head


# ---------------------------------------------------------------- what the copy should hold


def wanted_files(config: Config, series: Series, repo: Path, commit: str) -> dict[str, Wanted]:
    """Repository-relative path -> the file the vendored copies of SERIES hold there."""
    wanted: dict[str, Wanted] = {}
    for copy in series.vendor:
        prefix = f"{copy.source}/" if copy.source else ""
        scope = ["--", copy.source] if copy.source else []
        singles = _singles(copy)
        # No `-l`: sizes would make a blobless mirror fetch every blob; the ids are enough to compare.
        selected = 0
        for mode, blob, source in _tree_entries(repo, commit, scope):
            relative = source[len(prefix) :]
            if not source.startswith(prefix) or not _selected(copy, relative):
                continue
            selected += 1
            if relative in singles:
                raise UsageError(
                    f"{copy.where}: {copy.dest}/{relative} is both the upstream's {source} and the `files:` item "
                    f"from {singles[relative].source}: exclude one of them"
                )
            if _protected(copy, relative):
                continue
            wanted[f"{copy.dest}/{relative}"] = _wanted(copy, source, relative, mode, blob)
        if not selected:
            raise UsageError(
                f"{copy.where}: selects no file of the patched tree under {copy.source or 'its root'}/ at "
                f"{commit[:12]} (check from, include, exclude and filter)"
            )
        if singles:
            found = {source: (mode, blob) for mode, blob, source in _tree_entries(repo, commit, _literal(singles))}
            for relative, single in singles.items():
                if single.source not in found:
                    raise UsageError(
                        f"{copy.where}: files: the patched tree has no file {single.source} at {commit[:12]} "
                        f"(to copy to {single.dest})"
                    )
                wanted[single.dest] = _wanted(copy, single.source, relative, *found[single.source])
    return wanted


def _tree_entries(repo: Path, commit: str, scope: list[str]) -> list[tuple[str, str, str]]:
    """(mode, blob id, path) of each file of COMMIT in SCOPE; a submodule (a commit) is no file to copy."""
    listing = git.run(["ls-tree", "-r", "-z", "--full-tree", commit, *scope], repo).stdout
    entries = []
    for entry in listing.split("\0"):
        if entry:
            meta, _, path = entry.partition("\t")
            mode, kind, blob = meta.split()
            if kind == "blob":
                entries.append((mode, blob, path))
    return entries


def _literal(singles: dict[str, VendorFile]) -> list[str]:
    return ["--", *sorted(f":(literal){f.source}" for f in singles.values())]


def _wanted(copy: VendorCopy, source: str, relative: str, mode: str, blob: str) -> Wanted:
    if mode not in REGULAR_MODES:
        raise UsageError(
            f"{copy.where}: the upstream's {source} is a symlink; a vendored copy holds regular files only: "
            + (f"add {relative!r} to exclude" if source.endswith(relative) else "remove it from files")
        )
    return Wanted(source, mode, blob)


@functools.cache
def _singles(copy: VendorCopy) -> dict[str, VendorFile]:
    """A copy's `files:` items by their path relative to the copy's directory."""
    return {f.dest[len(copy.dest) + 1 :]: f for f in copy.files}


def _selected(copy: VendorCopy, relative: str) -> bool:
    if copy.filter is not None and not copy.filter.sends(relative):
        return False
    return any_match(relative, copy.include) and not any_match(relative, copy.exclude)


def _protected(copy: VendorCopy, relative: str) -> bool:
    if any_match(relative, copy.protect):
        return True
    return copy.filter is not None and (
        copy.filter.protects(relative) or f"{copy.dest}/{relative}" in copy.filter.files
    )


def managed(copy: VendorCopy, relative: str) -> bool:
    """Whether the vendored copy owns TO/RELATIVE (a `files:` destination, or selected by the copy
    and not the project's)."""
    return relative in _singles(copy) or (_selected(copy, relative) and not _protected(copy, relative))


def upstream_path(copy: VendorCopy, relative: str) -> str:
    """The path in the patched tree of the file the copy holds at TO/RELATIVE."""
    single = _singles(copy).get(relative)
    if single is not None:
        return single.source
    return f"{copy.source}/{relative}" if copy.source else relative


# ---------------------------------------------------------------- comparing and writing


def compare(config: Config, series: Series, wanted: dict[str, Wanted]) -> list[Difference]:
    """Every managed path of SERIES' copies that does not hold what WANTED says, sorted."""
    root = Root(config.root)
    differences: dict[str, Difference] = {}
    present: set[str] = set()
    for copy in series.vendor:
        for relative, info in root.walk(copy.dest):
            path = f"{copy.dest}/{relative}"
            if not managed(copy, relative):
                continue
            present.add(path)
            want = wanted.get(path)
            if want is None:
                differences[path] = Difference(path, "extra" if stat.S_ISREG(info.st_mode) else _kind(info))
            elif not stat.S_ISREG(info.st_mode):
                differences[path] = Difference(path, _kind(info))
            elif _blob_id(root, path, want.blob) != want.blob:
                differences[path] = Difference(path, "differs")
            elif bool(info.st_mode & 0o111) != (want.mode == "100755"):
                differences[path] = Difference(path, "mode")
    for path in wanted.keys() - present:
        differences[path] = Difference(path, "missing")
    return [differences[p] for p in sorted(differences)]


def changes_for(
    config: Config, repo: Path, commit: str, wanted: dict[str, Wanted], differences: list[Difference]
) -> list[journal.FileChange]:
    """The journal changes that make the copies hold WANTED (COMMIT's files, read from REPO)."""
    root = config.root
    for difference in differences:
        if difference.kind not in ("differs", "mode", "missing", "extra"):
            raise UsageError(
                f"{difference.path} is a {difference.kind} in a vendored directory, where patchctl writes regular "
                f"files: remove it, then run `patchctl vendor` again"
            )
    # A link or `.git` on the way to any of them is refused by the journal, before its first byte.
    rewrite = [wanted[d.path] for d in differences if d.kind != "extra"]
    contents = read_blobs(repo, commit, rewrite)
    changes = []
    for difference in differences:
        want = wanted.get(difference.path)
        if want is None:
            changes.append(journal.FileChange(root / difference.path, None))
        else:
            changes.append(journal.FileChange(root / difference.path, contents[want.blob], REGULAR_MODES[want.mode]))
    return changes


def changes_from_tree(config: Config, series: Series, repo: Path, commit: str) -> list[journal.FileChange]:
    """The changes that bring SERIES' vendored copies to COMMIT's tree (pin-sync's new pin)."""
    wanted = wanted_files(config, series, repo, commit)
    return changes_for(config, repo, commit, wanted, compare(config, series, wanted))


def read_blobs(repo: Path, commit: str, files: list[Wanted]) -> dict[str, bytes]:
    """Blob id -> bytes of FILES (of COMMIT's tree); a blobless mirror fetches them in one request."""
    if not files:
        return {}
    prefetch_blobs(repo, commit, [f.source for f in files])
    request = "".join(f"{f.blob}\n" for f in files).encode()
    out = git.run(["cat-file", "--batch"], repo, input=request, binary=True).stdout
    contents: dict[str, bytes] = {}
    at = 0
    while at < len(out):
        header_end = out.index(b"\n", at)
        sha, kind, size = out[at:header_end].decode().split()
        start = header_end + 1
        contents[sha] = out[start : start + int(size)]
        at = start + int(size) + 1
    return contents


def prune_empty_dirs(config: Config, deleted: list[Path]) -> None:
    """Remove the directories that deleting DELETED left empty (git keeps no empty directory)."""
    root = Root(config.root)
    for path in sorted({p.parent for p in deleted}, key=lambda p: len(p.parts), reverse=True):
        for directory in (path, *path.parents):
            if directory == config.root or config.root not in directory.parents or not root.rmdir(directory):
                break


# ---------------------------------------------------------------- taking edits back (export --from-vendor)


def take_back(config: Config, series: Series, tree: Path, message: str) -> list[str]:
    """Commit the edits made in SERIES' vendored copies into the applied TREE, as one commit on
    top of it (MESSAGE): what `export` then turns into a patch. Returns the upstream paths changed."""
    if not is_clean(tree):
        raise UsageError(
            f"{worktree.display(config.root, tree)} has uncommitted changes: commit or discard them before "
            "taking the vendored copy's edits back"
        )
    changed: list[str] = []
    repository, applied = Root(config.root), worktree.tree_root(tree, "the applied tree")
    for copy in series.vendor:
        prefix = f"{copy.source}/" if copy.source else ""
        if repository.kind(copy.dest) != "directory":  # a missing copy is no edit that deletes every file
            raise UsageError(
                f"{copy.where}: the vendored copy {copy.dest} is {repository.kind(copy.dest) or 'missing'}, not a "
                "directory: nothing to take back (run `patchctl vendor` to write it)"
            )
        vendored = {rel: info for rel, info in repository.walk(copy.dest) if managed(copy, rel)}
        singles = _singles(copy)
        # Tracked files only: an untracked file in the tree (a build's output) is never deleted.
        scope = ["--", f":(literal){copy.source}", *_literal(singles)[1:]] if copy.source else []
        tracked = set(git.run(["ls-files", "-z", "--full-name", *scope], tree).stdout.split("\0")) - {""}
        in_tree = {
            relative
            for path in tracked
            if path.startswith(prefix) and (relative := path[len(prefix) :]) not in singles and managed(copy, relative)
        }
        in_tree |= {relative for relative, single in singles.items() if single.source in tracked}
        for relative, info in sorted(vendored.items()):
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"{copy.dest}/{relative} is a {_kind(info)}: a vendored copy holds regular files only")
            data = repository.read_bytes(f"{copy.dest}/{relative}", MAX_VENDORED_FILE_BYTES) or b""
            target = upstream_path(copy, relative)
            executable = bool(info.st_mode & 0o111)
            current = applied.lstat(target)
            if (
                current is not None
                and stat.S_ISREG(current.st_mode)
                and bool(current.st_mode & 0o111) == executable
                and applied.read_bytes(target, MAX_VENDORED_FILE_BYTES) == data
            ):
                continue
            if current is not None and stat.S_ISLNK(current.st_mode):
                applied.unlink(target)  # the upstream's link becomes the vendored file, as the copy says
            applied.write_bytes(target, data, 0o755 if executable else 0o644)
            changed.append(target)
        for relative in sorted(in_tree - vendored.keys()):
            applied.unlink(upstream_path(copy, relative))
            changed.append(upstream_path(copy, relative))
    if not changed:
        raise UsageError(f"the vendored copies of {series.name} hold no edit: nothing to take back")
    git.run(["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"], tree, input="\0".join(changed).encode())
    git.run(
        ["commit", "-q", "--no-verify", "-F", "-"],
        tree,
        input=message.strip() + "\n",
        env={"GIT_AUTHOR_DATE": git.FIXED_DATE, "GIT_COMMITTER_DATE": git.FIXED_DATE},
    )
    return sorted(changed)


# ---------------------------------------------------------------- files on disk


def _kind(info: os.stat_result) -> str:
    return file_kind(info.st_mode)


def _blob_id(root: Root, path: str, like: str) -> str:
    """The git blob id of the file PATH (below ROOT), in the object format of the id LIKE (sha1
    or sha256); opened through `Root`, so never through a link nor blocking on a FIFO."""
    digest = hashlib.sha256() if len(like) == 64 else hashlib.sha1()  # noqa: S324 - git's object ids
    with root.open_regular(path) as (handle, info):
        digest.update(b"blob %d\0" % info.st_size)
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
