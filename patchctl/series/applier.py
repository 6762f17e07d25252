"""Applying patches: strictly (no fuzz, offsets allowed and reported) or with a 3-way merge,
one patch at a time, classifying every failure.

Two ways to apply, one set of rules:

* `IndexBuilder` applies patches to a private index of a repository (`git apply --cached`)
  and turns each into a commit, without touching any work tree. That is how `apply`,
  `lint` and `export` validate and build a series: nothing is written to a tree until the
  whole series has applied, so a failure leaves every tree exactly as it was.
* `apply_in_worktree` applies to a checked-out tree with `--index` (optionally `-3`),
  leaving conflict markers where a 3-way merge fails; pin-sync uses it for a tree a human
  may then fix by hand.

Paths are checked before anything runs: a patch that names an absolute path, a `..`
component, `.git`, a path too long for a file system, a path through a symlink, or that
leaves a symlink pointing out of the tree (in any of its diff blocks) is refused up front;
after each apply, in an index or a work tree, every symlink of the result is resolved through
the others (`patchctl.confined.links`): a patch that leaves one pointing out of the tree, into
.git or into a loop, alone or as the last link of a chain, is refused and undone. Every check
reads the patch's one parse (`PatchFile.parsed`); the tree's links are listed again only after a
patch that parse says can change them (`diffblocks.may_change_links`: a mode 120000, or a path that
is a link, lies under one or holds one), so a series that leaves links alone costs no git call for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field
from enum import Enum
from pathlib import Path
from typing import ClassVar

from .. import git
from ..confined import Root
from ..confined.links import index_links, link_dirs, new_bad_link
from ..output.jsonout import json_field
from ..patterns import lazy
from ..records import dataclass
from ..upstream.store import prefetch_blobs
from .commits import (
    commit_message,
    commit_tree,
    commit_trees,
    commit_worktree,
    fast_import_commits,
    fast_import_each,
    fast_importable,
)
from .diffblocks import may_change_links, overlong_hunks
from .mergehunks import CONFLICT, conflicting_hunks, unmerged_stages
from .patchset import FileDiff, Hunk, MalformedPatch, PatchFile
from .pathsafety import unsafe_path_reason
from .textapply import MemoryTree, file_commands, plain_edits

_OFFSET_RE = lazy(r"^Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)\.", re.MULTILINE)
_CHECKING_RE = lazy(r"^Checking patch (.+?)\.\.\.$", re.MULTILINE)
_FAILED_AT_RE = lazy(r"^error: patch failed: (.+):(\d+)$", re.MULTILINE)
_MISSING_RE = lazy(r"^error: (.+?): (?:No such file or directory|does not exist in index)$", re.MULTILINE)
_EXISTS_RE = lazy(r"^error: (.+?): already exists in (?:working directory|index)$", re.MULTILINE)
_CONFLICT_RE = lazy(r"^U (.+)$", re.MULTILINE)
_MALFORMED_MARKERS = (
    "corrupt patch",
    "patch fragment without header",
    "No valid patches in input",
    "unrecognized input",
    "malformed patch",
    "patch with only garbage",
    "git diff header lacks filename information",
)

MAX_INDEX_BYTES = 1024 * 1024 * 1024  # a private index of an upstream's tree (chromium's: ~100 MiB)

# Pinned so that a repository's own config cannot change what a patch means.
APPLY_CONFIG = ["-c", "apply.whitespace=nowarn", "-c", "core.whitespace=", "-c", "core.filemode=true"]


class Status(str, Enum):
    APPLIED = "applied"
    OFFSET = "applied-with-offset"
    MERGED = "merged-3way"
    ALREADY_APPLIED = "already-applied"
    FILE_MISSING = "file-missing"
    CONTEXT_DRIFT = "context-drift"
    MALFORMED = "malformed"
    CONFLICT = "conflict"
    UNSAFE_PATH = "unsafe-path"

    @property
    def ok(self) -> bool:
        return self in (Status.APPLIED, Status.OFFSET, Status.MERGED)


@dataclass(frozen=True)
class HunkOffset:
    file: str
    hunk: int
    offset: int


@dataclass(frozen=True)
class FailedHunk:
    """One place a patch does not apply: a missing file, or a hunk whose context is not there."""

    file: str
    cause: str  # "file missing" | "context drift" | "already exists" | "conflict" (a 3-way merge failed on it)
    hunk: int | None = None
    hunk_header: str | None = None
    patch_line: int | None = None
    # A conflict's hunk: the lines of ours (1-based, inclusive) whose changes it conflicts with.
    ours_lines: tuple[tuple[int, int], ...] = json_field(omit=True, default=())

    def describe(self) -> str:
        where = self.file + (f" hunk #{self.hunk}" if self.hunk else "")
        return where + (f" ({self.hunk_header})" if self.hunk_header else "")


@dataclass
class PatchOutcome:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"message": "message"}

    patch: str
    status: Status
    file: str | None = None
    hunk: int | None = None
    hunk_header: str | None = None
    patch_line: int | None = None  # line of the failing hunk (or file header) in the patch file
    detail: str = ""
    offsets: list[HunkOffset] = field(default_factory=list)
    conflict_files: list[str] = field(default_factory=list)
    failures: list[FailedHunk] = json_field(omit_empty=True, default_factory=list)  # every failing file and hunk
    three_way: str = json_field(omit_empty=True, default="")  # git's own reason a 3-way merge could not run
    # a 3-way merge's parts of the patch the target already had ("FILE", "FILE hunk #N")
    upstream_parts: list[str] = json_field(omit_empty=True, default_factory=list)
    commit: str | None = json_field(omit_empty=True, default=None)

    @property
    def ok(self) -> bool:
        return self.status.ok

    @property
    def message(self) -> str:
        return self.describe()

    def describe(self) -> str:
        """One line a user can act on."""
        where = ""
        if self.file:
            where = f" in {self.file}"
            if self.hunk:
                where += f" hunk #{self.hunk}"
                if self.hunk_header:
                    where += f" ({self.hunk_header})"
        text = {
            Status.APPLIED: "applied cleanly",
            Status.OFFSET: "applied with offsets: "
            + ", ".join(f"{o.file} hunk #{o.hunk} {o.offset:+d}" for o in self.offsets),
            Status.MERGED: "applied with a 3-way merge"
            + (f"; partially upstream already: {', '.join(self.upstream_parts)}" if self.upstream_parts else ""),
            Status.ALREADY_APPLIED: self.detail or "already applied: its reverse applies cleanly",
            Status.FILE_MISSING: f"file missing{where}",
            Status.CONTEXT_DRIFT: f"context drift{where}: the hunk's context is not in the tree",
            Status.MALFORMED: "malformed patch",
            Status.CONFLICT: "3-way merge conflict in " + ", ".join(self.conflict_files or [self.file or "?"]),
            Status.UNSAFE_PATH: "refused"
            if self.detail.startswith("invalid path")
            else "refused: writes outside the tree",
        }[self.status]
        if self.status == Status.CONFLICT:
            # Only the files left unmerged: a file whose hunks failed strictly but merged cleanly 3-way is fine.
            text = "3-way merge conflict in " + ", ".join(self.conflict_files or [self.file or "?"])
        elif len(self.failures) > 1 or (self.failures and self.status == Status.CONTEXT_DRIFT and self.detail):
            text = "; ".join(
                f"{cause} in " + ", ".join(f.describe() for f in self.failures if f.cause == cause)
                for cause in dict.fromkeys(f.cause for f in self.failures)
            )
        if self.detail and self.status in (Status.MALFORMED, Status.UNSAFE_PATH):
            text += f": {self.detail}"
        if self.three_way:
            text += f"; 3-way merge not possible: {self.three_way}"
        return f"{self.patch}: {text}"


# ---------------------------------------------------------------- classification


def _offsets(output: str) -> list[HunkOffset]:
    """Offsets reported by `git apply -v`, attributed to the file being checked."""
    offsets = []
    current = None
    for line in output.split("\n"):  # git C-quotes a name with a line break; splitlines() would split on more
        if m := _CHECKING_RE.match(line):
            current = m.group(1)
        elif (m := _OFFSET_RE.match(line)) and current:
            offsets.append(HunkOffset(current, int(m.group(1)), int(m.group(3))))
    return offsets


def _classify_failure(patch: PatchFile, stderr: str, reverse_applies: bool, every_hunk: str = "") -> PatchOutcome:
    """What went wrong, from git apply's STDERR; EVERY_HUNK is the stderr of a `--check
    --reject` run, which goes on past a file's first failing hunk and so names them all."""
    if any(marker in stderr for marker in _MALFORMED_MARKERS):
        line = None
        if m := re.search(r"at line (\d+)", stderr):
            line = int(m.group(1))
        return PatchOutcome(
            patch.name, Status.MALFORMED, patch_line=line, detail=git.first_line(stderr).removeprefix("error: ")
        )
    if m := re.search(r"affected file '(.+)' is beyond a symbolic link", stderr):
        return PatchOutcome(
            patch.name, Status.UNSAFE_PATH, file=m.group(1), detail=f"path goes through a symlink: {m.group(1)!r}"
        )
    if reverse_applies:
        return PatchOutcome(patch.name, Status.ALREADY_APPLIED)
    failures = [
        FailedHunk(path, "file missing", patch_line=_file_line(patch, path)) for path in _MISSING_RE.findall(stderr)
    ]
    drifted = _FAILED_AT_RE.findall(every_hunk) or _FAILED_AT_RE.findall(stderr)
    for path, start in dict.fromkeys(drifted):
        hunk = _hunk_at(patch, path, int(start))
        failures.append(
            FailedHunk(
                path,
                "context drift",
                hunk.index if hunk else None,
                hunk.header if hunk else None,
                hunk.line if hunk else _file_line(patch, path),
            )
        )
    failures += [
        FailedHunk(path, "already exists", patch_line=_file_line(patch, path)) for path in _EXISTS_RE.findall(stderr)
    ]
    if not failures:
        return PatchOutcome(patch.name, Status.CONTEXT_DRIFT, detail=git.first_line(stderr).removeprefix("error: "))
    first = failures[0]
    status = Status.FILE_MISSING if first.cause == "file missing" else Status.CONTEXT_DRIFT
    detail = "the patch creates a file that already exists" if first.cause == "already exists" else ""
    return PatchOutcome(
        patch.name,
        status,
        file=first.file,
        hunk=first.hunk,
        hunk_header=first.hunk_header,
        patch_line=first.patch_line,
        detail=detail,
        failures=failures,
    )


def _hunk_at(patch: PatchFile, path: str, start: int):
    for diff in _safe_files(patch):
        if path in (diff.path, diff.source_path):
            return next((h for h in diff.hunks if h.source_start == start), None)
    return None


def three_way_reasons(stderr: str) -> str:
    """git's own reasons a 3-way merge could not run, per file ("a.c: repository lacks the
    necessary blob to perform 3-way merge"), without the direct-application noise after them."""
    reasons: list[str] = []
    current = None
    for line in stderr.split("\n"):  # as git writes lines (splitlines() would split a name at \x1c or U+2028)
        if m := _CHECKING_RE.match(line):
            current = m.group(1)
        elif line.startswith("error: ") and not re.match(
            r"error: (?:patch failed: |while searching for:|.+: patch does not apply$)", line
        ):
            reason = line.removeprefix("error: ").rstrip(".")
            if current and not reason.startswith(current):
                reason = f"{current}: {reason}"
            if reason not in reasons:
                reasons.append(reason)
    return "; ".join(reasons)


def _safe_files(patch: PatchFile):
    try:
        return patch.files
    except MalformedPatch:
        return ()


def _file_line(patch: PatchFile, path: str) -> int | None:
    return next((d.line for d in _safe_files(patch) if path in (d.path, d.source_path)), None)


def _malformed_before_git(patch: PatchFile) -> PatchOutcome | None:
    try:
        _ = patch.files  # parsing the patch is the check: a malformed one raises here
    except MalformedPatch as exc:
        return PatchOutcome(patch.name, Status.MALFORMED, patch_line=exc.line, detail=git.first_line(str(exc)))
    if "\0" in commit_message(patch):
        return PatchOutcome(
            patch.name, Status.MALFORMED, detail="NUL byte in the patch's message: git cannot commit it"
        )
    if extras := overlong_hunks(patch.parsed):
        extra = extras[0]
        return PatchOutcome(
            patch.name,
            Status.MALFORMED,
            file=extra.path,
            hunk=extra.hunk,
            hunk_header=extra.header,
            patch_line=extra.extra_line,
            detail=f"{extra.path} hunk #{extra.hunk} ({extra.header}): line {extra.extra_line} lies past the hunk's "
            "declared line counts and would be silently dropped",
        )
    return None


# ---------------------------------------------------------------- index-only application


class IndexBuilder:
    """Apply patches to a private index of REPO starting at BASE, committing each one.

    Works on bare repositories (the cache's mirrors) and leaves every work tree alone.
    Commits are deterministic: fixed dates, the patch's author when it names one.
    """

    def __init__(self, repo: Path, base: str):
        self.repo = Path(repo)
        self.head = base
        # Here, not at import: tempfile and shutil are paid by the runs that build an index.
        from ..confined import scratch

        self._dir = scratch.make("patchctl-index-")
        self.private = Root(self._dir, "the private index's directory")
        self.env = {"GIT_INDEX_FILE": str(self._dir / "index")}
        git.run(["read-tree", base], self.repo, env=self.env)
        self._links: dict[str, str] | None = None  # the index's symlinks before the next patch
        self._link_dirs: set[str] = set()  # the directories holding them
        self._link_targets: dict[str, str] = {}  # blob id -> target, read once
        self.undo_to: bytes | None = None  # the index to go back to when a patch is undone (else HEAD's tree)

    def close(self) -> None:
        from ..confined import scratch

        scratch.remove(self._dir)

    def _undo(self) -> None:
        """The private index as it was before the last patch: HEAD's tree, or the index saved in
        `undo_to` where the patches before it were not committed (the seed)."""
        if self.undo_to is not None:
            self.private.write_scratch("index", self.undo_to)
        else:
            git.run(["read-tree", self.head], self.repo, env=self.env)

    def __enter__(self) -> IndexBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def apply(self, patch: PatchFile, *, commit: bool = True, explain: bool = True) -> PatchOutcome:
        """Apply PATCH to the index (and commit it). A patch that does not apply is classified
        from git's words and two more `--check` runs (already applied? every failing hunk?);
        without EXPLAIN, where the caller needs to know only whether it applied, from git's
        words alone."""
        if (reason := unsafe_path_reason(None, patch)) is not None:
            return PatchOutcome(patch.name, Status.UNSAFE_PATH, detail=reason)
        if (bad := _malformed_before_git(patch)) is not None:
            return bad
        if self._links is None:
            self._links = index_links(self.repo, self.env, self._link_targets)
            self._link_dirs = link_dirs(self._links)
        # The index's links are listed again only after a patch that can change them (the parse says which).
        watch = may_change_links(patch.parsed, self._links.__contains__, self._link_dirs.__contains__)
        result = self._git_apply(patch, [])
        if not result.ok and not explain:
            return _classify_failure(patch, result.stderr, False)
        if not result.ok:
            reverse = self._git_apply(patch, ["--check", "-R"]).ok
            every_hunk = "" if reverse else self._git_apply(patch, ["--check", "--reject"]).stderr
            return _classify_failure(patch, result.stderr, reverse, every_hunk)
        if watch:
            links = index_links(self.repo, self.env, self._link_targets)
            if (link := new_bad_link(self._links, links)) is not None:
                self._undo()  # this patch, in the private index
                self._links = None
                return PatchOutcome(patch.name, Status.UNSAFE_PATH, detail=f"leaves {link.describe()}")
            self._links, self._link_dirs = links, link_dirs(links)
        offsets = _offsets(result.stdout + result.stderr)
        outcome = PatchOutcome(patch.name, Status.OFFSET if offsets else Status.APPLIED, offsets=offsets)
        if commit:
            outcome.commit = self.commit(patch)
        return outcome

    def apply_at_once(self, patches: list[PatchFile]) -> bool:
        """Apply PATCHES in order in one `git apply` (each its own input, so each applies to
        what the ones before it made, as when applied one by one), committing nothing: True
        when every one applied. False when one did not, or when one call cannot stand for
        `apply` one by one (a patch the checks before git refuse, or one that may change the
        index's links, which are checked after each): the index is then as it was, and `apply`
        one by one says which patch and why."""
        if any(unsafe_path_reason(None, p) is not None or _malformed_before_git(p) is not None for p in patches):
            return False
        if self._links is None:
            self._links = index_links(self.repo, self.env, self._link_targets)
            self._link_dirs = link_dirs(self._links)
        links, dirs = self._links, self._link_dirs
        if any(may_change_links(p.parsed, links.__contains__, dirs.__contains__) for p in patches):
            return False
        files = []
        for number, patch in enumerate(patches):
            self.private.write_scratch(f"{number:06d}.patch", patch.data)
            files.append(str(self._dir / f"{number:06d}.patch"))
        # A failing `git apply` writes no index: all of them or none.
        return git.run([*APPLY_CONFIG, "apply", "--cached", *files], self.repo, check=False, env=self.env).ok

    def commit(self, patch: PatchFile) -> str:
        self.head = commit_tree(self.repo, self.tree(), self.head, patch)
        return self.head

    def tree(self) -> str:
        # --missing-ok: the index came from read-tree and `git apply --cached`, so every entry
        # names an object that exists or, in a blobless mirror, one the promisor remote has;
        # without it write-tree fetches every blob of the tree, one revision's worth of data.
        return git.run(["write-tree", "--missing-ok"], self.repo, env=self.env).stdout.strip()

    def _git_apply(self, patch: PatchFile, extra: list[str]) -> git.GitResult:
        return git.run(
            [*APPLY_CONFIG, "apply", "-v", "--cached", *extra, "-"],
            self.repo,
            check=False,
            input=patch.data,
            env=self.env,
        )


def apply_series_to_index(
    repo: Path, base: str, patches: list[PatchFile], *, commit: bool = True
) -> tuple[list[PatchOutcome], str]:
    """Apply PATCHES in order on BASE inside REPO's object store; stop at the first failure.
    Returns the outcomes so far and the last commit (BASE when none was made). The patches that
    are plain edits come first in memory (`_apply_in_memory`), git applies the rest."""
    outcomes, base, patches = _apply_in_memory(repo, base, patches, commit=commit)
    if not patches:
        return outcomes, base
    prefetch_blobs(repo, base, [path for patch in patches for path in patch.touched_paths()])
    with IndexBuilder(repo, base) as builder:
        for patch in patches:
            outcome = builder.apply(patch, commit=commit)
            outcomes.append(outcome)
            if not outcome.ok:
                break
        return outcomes, builder.head


def _apply_in_memory(
    repo: Path, base: str, patches: list[PatchFile], *, commit: bool
) -> tuple[list[PatchOutcome], str, list[PatchFile]]:
    """`apply_series_to_index` without a `git apply` or a commit process a patch, as far as the
    series goes in plain edits that `textapply` places as git does (its offsets, as `git apply
    -v` reports them), committed in one `git fast-import` (the very commits `commit_tree`
    makes): (their outcomes, the last commit, the patches left to git from the first it leaves
    on). A patch that is not plain, does not apply as it stands or that git's own checks refuse
    (an unsafe path, a malformed patch) is git's, from there on; without COMMIT, the whole series
    is, unless every patch applied in memory. A warm `apply` of 30 patches asked git 90
    processes for what this does in three; on a real bump's seed one patch of 27, the 26th, was
    left to git: the 25 before it cost one process instead of one each."""
    plain: list[PatchFile] = []
    for patch in patches:
        if commit and not fast_importable(patch):
            break
        if unsafe_path_reason(None, patch) is not None or _malformed_before_git(patch) is not None:
            break
        try:
            if not plain_edits(patch.parsed):
                break
        except MalformedPatch:
            break
        plain.append(patch)
    if not plain or (not commit and len(plain) < len(patches)):
        return [], base, patches
    memory = MemoryTree(repo, base)
    memory.read_ahead(plain)
    outcomes: list[PatchOutcome] = []
    changes: list[tuple[list[bytes], PatchFile]] = []
    for patch in plain:
        applied = memory.apply(patch)
        if applied is None:
            break
        offsets = [HunkOffset(path, number, offset) for path, number, offset in applied[1]]
        outcomes.append(PatchOutcome(patch.name, Status.OFFSET if offsets else Status.APPLIED, offsets=offsets))
        changes.append((file_commands(applied[0]), patch))
    if not commit:
        return (outcomes, base, []) if len(outcomes) == len(patches) else ([], base, patches)
    commits = fast_import_each(repo, base, changes) if changes else None
    if commits is None:
        return [], base, patches
    for outcome, made in zip(outcomes, commits, strict=True):
        outcome.commit = made
    return outcomes, commits[-1], patches[len(changes) :]


def series_tree_at_once(repo: Path, base: str, patches: list[PatchFile]) -> str | None:
    """The tree PATCHES give applied strictly in order at BASE inside REPO's object store, from
    one `git apply` (`IndexBuilder.apply_at_once`), no commit made; None when that call does
    not apply them all (`apply_series_to_index` then says which patch fails and why)."""
    prefetch_blobs(repo, base, [path for patch in patches for path in patch.touched_paths()])
    with IndexBuilder(repo, base) as builder:
        return builder.tree() if builder.apply_at_once(patches) else None


def seed_three_way_objects(repo: Path, base: str, patches: list[PatchFile]) -> str:
    """Write into REPO's object store every blob the series produces when applied at BASE.

    A 3-way merge needs the preimage blob each patch's `index` line names. For a stacked
    series those blobs are the outputs of the earlier patches, which exist only if something
    once applied them in this object store (an `apply`, a `lint`): without this, verdicts
    would depend on the cache's history. Creating them every time makes them a function of
    the series and the pin alone. Patches that do not apply at BASE are skipped.

    Returns the series as commits on BASE as far as it applies in order: what
    `apply_series_to_index` returns (the same deterministic commits), made on the way."""
    head, rest = base, patches
    if all(fast_importable(patch) for patch in patches):
        # As far as textapply takes the series, in memory; git applies the rest, on top of that.
        _, head, rest = _apply_in_memory(repo, base, patches, commit=True)
        tail = _seed_in_one_import(repo, head, rest) if rest else head
        if tail is not None:
            return tail
    trees: list[tuple[str, PatchFile]] = []  # the tree each patch in order gives, to commit at the end
    with IndexBuilder(repo, head) as builder:
        in_order = True
        for patch in rest:
            in_order = builder.apply(patch, commit=False).ok and in_order
            if in_order:
                trees.append((builder.tree(), patch))
                builder.head = trees[-1][0]  # what a patch refused after it is undone to (read-tree takes a tree)
    return commit_trees(repo, head, trees)


def _seed_in_one_import(repo: Path, base: str, patches: list[PatchFile]) -> str | None:
    """The seed with no process a patch but its `git apply`: what each patch in order changed
    is read from the private index itself (saved after each), and one `git fast-import` writes
    the commits, each tree its parent's with those changes, as `commit_tree` would commit them.
    The last tree must be what `git write-tree` makes of the last index, else (and on an index
    this does not read) None: the seed is then made a write-tree a patch."""
    changes: list[tuple[list[bytes], PatchFile]] = []  # per patch in order: its fast-import file commands
    with IndexBuilder(repo, base) as builder:
        before = _index_entries(builder.private.read_bytes("index", MAX_INDEX_BYTES) or b"")
        if before is None or len(base) != 40:  # a SHA-256 repository's index: not read here
            return None
        in_order = True
        for patch in patches:
            in_order = builder.apply(patch, commit=False).ok and in_order
            if not in_order:
                continue
            data = builder.private.read_bytes("index", MAX_INDEX_BYTES) or b""
            after = _index_entries(data)
            if after is None:
                return None
            gone = sorted(before.keys() - after.keys())
            made = sorted(path for path, entry in after.items() if before.get(path) != entry)
            if any(b"\n" in path or path.startswith(b'"') for path in gone + made):
                return None  # a name fast-import would read quoted: left to write-tree
            files = [b"D " + path for path in gone]
            files += [b"M %06o %s " % (after[path][0], after[path][1].hex().encode()) + path for path in made]
            changes.append((files, patch))
            builder.undo_to, before = data, after  # a patch refused later is undone to this index
        if not changes:
            return base
        final_tree = builder.tree()
    return fast_import_commits(repo, base, changes, final_tree)


def _index_entries(data: bytes) -> dict[bytes, tuple[int, bytes]] | None:
    """Path -> (mode, object id) of every entry of a version 2 index file (what read-tree and
    `git apply --cached` write under patchctl's isolated config); None for anything else (another
    version, an extended or unmerged entry), which the caller leaves to git."""
    if data[:4] != b"DIRC" or int.from_bytes(data[4:8], "big") != 2:
        return None
    count, position, entries = int.from_bytes(data[8:12], "big"), 12, {}
    for _ in range(count):
        flags = int.from_bytes(data[position + 60 : position + 62], "big")
        if flags & 0x7000:  # extended flags or a merge stage
            return None
        end = data.find(b"\0", position + 62)
        if end < 0:
            return None
        mode = int.from_bytes(data[position + 24 : position + 28], "big")
        entries[data[position + 62 : end]] = (mode, data[position + 40 : position + 60])
        position += (end - position + 8) & ~7  # the entry and 1 to 8 NULs: a multiple of 8 bytes
    return entries


# ---------------------------------------------------------------- work-tree application


def apply_in_worktree(
    tree: Path,
    patch: PatchFile,
    *,
    three_way: bool = False,
    commit: bool = True,
    before_merge: Callable[[], object] | None = None,
) -> PatchOutcome:
    """Apply PATCH to the checked-out TREE with `--index`; with THREE_WAY a strict failure is
    retried as a 3-way merge, which may leave conflict markers (status CONFLICT). BEFORE_MERGE
    is called first, only then: what the merge needs may still be in the making (the seed)."""
    tree = Path(tree)
    if (reason := unsafe_path_reason(tree, patch)) is not None:
        return PatchOutcome(patch.name, Status.UNSAFE_PATH, detail=reason)
    if (bad := _malformed_before_git(patch)) is not None:
        return bad
    # The tree's links on disk say whether the patch can change them; only then are they listed, before and after.
    watch = may_change_links(
        patch.parsed, lambda path: _on_disk(tree, path, Path.is_symlink), lambda path: _on_disk(tree, path, Path.is_dir)
    )
    links = index_links(tree) if watch else None
    strict = git.run([*APPLY_CONFIG, "apply", "-v", "--index", "-"], tree, check=False, input=patch.data)
    if strict.ok:
        offsets = _offsets(strict.stdout + strict.stderr)
        outcome = PatchOutcome(patch.name, Status.OFFSET if offsets else Status.APPLIED, offsets=offsets)
    else:
        reverse = git.run(
            [*APPLY_CONFIG, "apply", "--check", "-R", "--index", "-"], tree, check=False, input=patch.data
        ).ok
        # Every failing hunk, not only each file's first: asked of git only where the outcome
        # names them (a strict failure, a failed or conflicting merge), never for a clean merge.
        every_hunk = "" if reverse or three_way else _every_failing_hunk(tree, patch)
        outcome = _classify_failure(patch, strict.stderr, reverse, every_hunk)
        if not three_way or outcome.status in (Status.MALFORMED, Status.UNSAFE_PATH, Status.ALREADY_APPLIED):
            return outcome
        if before_merge is not None:
            before_merge()
        merged = git.run(
            [*APPLY_CONFIG, *git.CONFLICT_STYLE, "apply", "-3", "-v", "--index", "-"],
            tree,
            check=False,
            input=patch.data,
        )
        conflicts = sorted(set(_CONFLICT_RE.findall(merged.stdout + merged.stderr)))
        if conflicts:
            # Only the files the index really holds unmerged, and only the hunks the merge failed
            # on: a file or a hunk git merged cleanly is no conflict, however it failed strictly.
            # (one `ls-files -u` says which, and their stages for the hunks)
            stages = unmerged_stages(tree, check=False)
            return _conflict_outcome(tree, patch, sorted(stages) or conflicts, stages)
        if not merged.ok:
            # A failed merge wrote nothing: the hunks are checked in the tree, still as it was.
            outcome = _classify_failure(patch, strict.stderr, reverse, _every_failing_hunk(tree, patch))
            # 3-way could not even start (missing file, no preimage blob): keep the strict cause, add git's reason
            outcome.three_way = three_way_reasons(merged.stderr) or git.first_line(merged.stderr).removeprefix(
                "error: "
            )
            return outcome
        outcome = _merged_outcome(tree, patch)
        if outcome.status == Status.ALREADY_APPLIED:
            return outcome  # nothing to commit: the merge changed nothing
    if links is not None and (link := new_bad_link(links, index_links(tree))) is not None:
        git.run(["reset", "-q", "--hard", "HEAD"], tree)  # the tree as it was before this patch
        return PatchOutcome(patch.name, Status.UNSAFE_PATH, detail=f"leaves {link.describe()}")
    if commit:
        outcome.commit = commit_worktree(tree, patch)
    return outcome


def _conflict_outcome(
    tree: Path, patch: PatchFile, files: list[str], stages: dict[str, dict[int, str]] | None = None
) -> PatchOutcome:
    """A 3-way merge that left FILES unmerged in TREE, naming the hunks it failed on
    (`patchctl.series.mergehunks`), the first as the outcome's file and hunk."""
    failures = [
        FailedHunk(found.diff.path, CONFLICT, found.hunk.index, found.hunk.header, found.hunk.line, found.ours_lines)
        if found.hunk is not None
        else FailedHunk(found.diff.path, CONFLICT, patch_line=found.diff.line)
        for found in conflicting_hunks(tree, _safe_files(patch), files, stages)
    ]
    first = failures[0] if failures else FailedHunk(files[0], CONFLICT)
    return PatchOutcome(
        patch.name,
        Status.CONFLICT,
        file=first.file,
        hunk=first.hunk,
        hunk_header=first.hunk_header,
        patch_line=first.patch_line,
        conflict_files=files,
        failures=failures,
    )


def _every_failing_hunk(tree: Path, patch: PatchFile) -> str:
    """git's words (stderr) on every hunk of PATCH that fails in TREE, from a `--check --reject`
    run, which goes on past a file's first failing hunk."""
    return git.run(
        [*APPLY_CONFIG, "apply", "-v", "--check", "--reject", "--index", "-"], tree, check=False, input=patch.data
    ).stderr


def _on_disk(tree: Path, path: str, test: Callable[[Path], bool]) -> bool:
    """TEST (is a link, is a directory) of PATH in TREE, without following a link; a path that
    cannot be looked at counts as one that passes, so that the links are checked."""
    try:
        return test(tree / path)
    except (OSError, ValueError):
        return True


def _merged_outcome(tree: Path, patch: PatchFile) -> PatchOutcome:
    """A clean 3-way merge, classified by what it staged: nothing (the target already has the
    whole change, in other context: already applied), or less than the patch (the parts the
    target already has are named: partially upstream)."""
    changes = _staged_changes(tree)
    staged = set(changes)
    if not staged:
        return PatchOutcome(
            patch.name,
            Status.ALREADY_APPLIED,
            detail="already upstream: a 3-way merge of it changes nothing (the target has the whole change)",
        )
    parts = []
    for diff in _safe_files(patch):
        paths = {diff.path, diff.source_path} - {None}
        if not paths & staged:
            parts.append(diff.path)
            continue
        changed = changes.get(diff.path, set())
        for hunk in diff.hunks:
            lines = [line for line in hunk.body if line[:1] in "+-"]
            kept = sum(line in changed for line in lines)
            if kept < len(lines):
                parts.append(f"{diff.path} hunk #{hunk.index}" + (" (in part)" if kept else ""))
    return PatchOutcome(patch.name, Status.MERGED, upstream_parts=parts)


def hunks_already_upstream(tree: Path, patch: PatchFile) -> list[tuple[FileDiff, Hunk, list[str]]]:
    """After a clean apply of PATCH in TREE (staged, not committed): every hunk whose change
    the target already had, in whole or in part, with its +/- lines the apply did not stage.
    With nothing staged (already applied), that is every hunk."""
    changes = _staged_changes(tree)
    found = []
    for diff in _safe_files(patch):
        changed = changes.get(diff.path, set())
        for hunk in diff.hunks:
            upstream = [line for line in hunk.body if line[:1] in "+-" and line not in changed]
            if upstream:
                found.append((diff, hunk, upstream))
    return found


def _staged_changes(tree: Path) -> dict[str, set[str]]:
    """Per path TREE's index changes against HEAD (`--no-renames`): the +/- lines of its staged
    change. Two git calls whatever the number of files: the names, then one `-U0` diff of them
    all, cut at its `diff --git` lines (one per path, in the names' order)."""
    names = [
        n
        for n in git.run(["diff", "--cached", "--name-only", "-z", "--no-renames", "HEAD"], tree).stdout.split("\0")
        if n
    ]
    if not names:
        return {}
    diff = git.run(["diff", "--cached", "-U0", "--no-renames", "HEAD"], tree, binary=True).stdout
    chunks: list[list[str]] = []
    for line in diff.decode("utf-8", errors="surrogateescape").splitlines():
        if line.startswith("diff --git "):
            chunks.append([])
        elif chunks:
            chunks[-1].append(line)
    if len(chunks) != len(names):  # never seen; a path at a time then, as named
        return {name: _changed_lines(tree, name) for name in names}
    return {name: _plus_minus(lines) for name, lines in zip(names, chunks, strict=True)}


def _changed_lines(tree: Path, path: str) -> set[str]:
    """The +/- lines of PATH's staged change."""
    diff = git.run(["diff", "--cached", "-U0", "--no-renames", "HEAD", "--", path], tree, binary=True).stdout
    return _plus_minus(diff.decode("utf-8", errors="surrogateescape").splitlines())


def _plus_minus(lines: list[str]) -> set[str]:
    return {line for line in lines if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))}


def is_clean(tree: Path) -> bool:
    """No staged or unstaged change to a tracked file (untracked files are allowed)."""
    return git.run(["status", "--porcelain", "--untracked-files=no"], tree).stdout.strip() == ""
