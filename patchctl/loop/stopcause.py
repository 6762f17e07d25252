"""Why a patch stops at a pin move: the upstream commits between the pins that changed the
lines it touches, and whether upstream may have made its own version of it.

pin-sync (at a stop), the canary and `status` (for each patch that needs a hand) explain the
hunks that really failed: a conflict's hunks as `patchctl.series.mergehunks` tells them, the
hunks a patch git could not merge fails on, the hunks upstream made itself in a "needs a look"
stop. For each such hunk:

* its lines at the old pin: where the hunk's preimage stands in the old pin's file (the path
  before any rename upstream made; nearest the line the hunk names), the lines it changes
  (its whole preimage where the context itself no longer matches: a hunk git could not merge);
* what upstream changed there between the pins: one `git diff -U0` of the file's two
  versions, whose changes touching those lines are the cause (a 3-way merge conflicts where
  the two sides' changes overlap or meet, so a change next to the hunk's counts);
* the commits that made each of those changes: the one commit between the pins that touched
  the file, where only one did; else `git log -L` of the changed lines at the new pin over
  OLD..NEW, which follows lines through renames and merges. Lines upstream deleted are traced
  on the two lines around the gap, which is where `git log -L` sees a deletion. A file
  upstream deleted is traced by `git log --diff-filter=D`;
* a conflict whose lines upstream left alone, or whose lines do not stand at the old pin as the
  hunk has them (an earlier patch changed them), is traced where the merge met it: `git log -L`
  over OLD..HEAD of the lines of the tree's HEAD it conflicts with, which names upstream's
  commits and the earlier patches of the series as carried (resolved by hand, maybe).

Where every hunk of the patch already stands at the new pin in substance (in the region the
hunk's preimage maps to, its added lines are there and its removed lines are gone, lines
compared with their whitespace collapsed), upstream may have made its own version of the
patch: the cause says so, with both sides of each failed hunk. A hunk upstream changed
otherwise (a near miss: its added line is not there, or one it removes still is) makes it
say nothing of the kind.

Commits are named by short id, subject, committer date and, for an upstream on github.com, a
link to the commit; subjects are upstream text, escaped where they are written
(`patchctl.output`). This module never prints.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .. import git
from ..beside import Beside
from ..output.jsonout import json_field
from ..patterns import lazy
from ..records import dataclass
from ..series.applier import Status
from ..series.diffblocks import parse_diff_text
from ..series.mergehunks import Change, FileLines, changed_span, conflict_lines, line_changes, preimage, traced
from ..series.patchset import FileDiff, Hunk, MalformedPatch, PatchFile

if TYPE_CHECKING:
    from .carry import Carried

CONFLICT = "conflict"  # the hunks conflicted in a 3-way merge: the lines they change count
UNMERGEABLE = "unmergeable"  # git could not merge them: their whole preimage counts, context included
SAME_EDIT = "same edit"  # upstream made their edit itself: the lines they change count
MAX_COMMITS = 10  # named per hunk; the rest are counted
_GITHUB_RE = lazy(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
_LOG_FORMAT = "--format=%H%x00%cs%x00%s"


@dataclass
class UpstreamCommit:
    sha: str
    subject: str
    date: str  # its committer date, YYYY-MM-DD
    url: str | None = json_field(omit_empty=True, default=None)  # on github.com: the commit's page


@dataclass
class HunkCause:
    """One failed hunk of the patch (or a file, where no hunk is told) and the upstream commits behind it."""

    file: str  # the path at the new pin
    hunk: int | None  # 1-based, as git apply numbers them; None: the file as a whole
    header: str = ""  # the hunk's `@@ -A,B +C,D @@`
    old_path: str = json_field(omit_empty=True, default="")  # where upstream had the file at the old pin, if moved
    old_lines: str = ""  # "A-B": the hunk's preimage at the old pin ("" where it stands nowhere there)
    commits: list[UpstreamCommit] = field(default_factory=list)  # oldest first
    more_commits: int = json_field(omit_empty=True, default=0)  # beyond MAX_COMMITS
    # a conflict with what the series carried before the patch: the subjects of those patches
    series: list[str] = json_field(omit_empty=True, default_factory=list)
    note: str = json_field(omit_empty=True, default="")  # why no commit is named, or what upstream did
    # Shown when upstream may have its own version: the hunk as the patch has it, and upstream's lines there.
    patch_side: str = json_field(omit_empty=True, default="")
    upstream_side: str = json_field(omit_empty=True, default="")

    @property
    def where(self) -> str:
        return f"{self.file} hunk #{self.hunk}" if self.hunk else self.file


@dataclass
class StopCause:
    """Why a patch stops: a cause per failed hunk, and whether upstream may have its own version."""

    hunks: list[HunkCause] = field(default_factory=list)
    # Every hunk of the patch stands at the new pin in substance: compare, then drop the patch.
    upstream_version: bool = False
    advice: str = json_field(omit_empty=True, default="")  # what to do about it, a command in backticks

    @property
    def commits(self) -> list[UpstreamCommit]:
        """Every commit named, once, in the order the hunks name them."""
        seen: dict[str, UpstreamCommit] = {}
        for hunk in self.hunks:
            for commit in hunk.commits:
                seen.setdefault(commit.sha, commit)
        return list(seen.values())


def commit_url_base(urls: list[str | None]) -> str | None:
    """`https://github.com/OWNER/REPO/commit/` for the first of URLS on github.com, else None."""
    for url in urls:
        match = _GITHUB_RE.match(url or "")
        if match:
            return f"https://github.com/{match[1]}/{match[2]}/commit/"
    return None


def upstream_urls(config, name: str) -> list[str | None]:
    """Where upstream NAME lives: the url followed, its `ci:` url, and the url matrix.yaml
    declares (a `--upstream-url` mirror of a GitHub upstream still links to GitHub)."""
    up = config.get_upstream(name)
    declared = config.raw.get("upstreams", {}).get(name) if isinstance(config.raw, dict) else None
    declared = declared if isinstance(declared, dict) else {}
    ci = declared.get("ci") if isinstance(declared.get("ci"), dict) else {}
    urls = [up.url, up.ci.url if up.ci is not None else None, declared.get("url"), ci.get("url")]
    return [url if isinstance(url, str) else None for url in urls]


class Failed(NamedTuple):
    """A hunk that failed (its path as applied; None: the file as a whole), and for a conflict the
    lines of the tree's HEAD it conflicts with (`patchctl.series.mergehunks.Conflicting`)."""

    path: str
    hunk: int | None
    ours_lines: tuple[tuple[int, int], ...] = ()


class Pins:
    """The upstream between two pins in REPO (a repository with both), as causes read it: each
    file's two versions and their diff asked of git once."""

    def __init__(self, repo: Path, old: str, new: str, commit_url: str | None = None):
        self.repo = Path(repo)
        self.old = old
        self.new = new
        self.commit_url = commit_url
        self._files: dict[str, FileLines | None] = {}  # REV:PATH -> its lines
        self._changes: dict[tuple[str, str], list[Change] | None] = {}  # (old path, new path) -> upstream's changes
        self._touching: dict[tuple[str, str], list[UpstreamCommit]] = {}  # (old path, new path) -> commits
        self._carried: set[str] | None = None  # the commits REPO's HEAD has on top of NEW

    # ------------------------------------------------------------ the entry point

    def explain(self, original: PatchFile, applied: PatchFile, failed: list[Failed], kind: str) -> StopCause:
        """The cause of each FAILED hunk (its path as APPLIED names it, its number; None: the
        file as a whole) of ORIGINAL (the patch as the series has it; APPLIED: as it was
        applied, with the renames upstream made followed). KIND: CONFLICT, UNMERGEABLE or SAME_EDIT."""
        try:
            pairs = list(zip(original.files, applied.files, strict=True))
        except (MalformedPatch, ValueError):
            return StopCause()
        by_path = {new.path: (old, new) for old, new in pairs}
        failed = [entry for entry in dict.fromkeys(failed) if entry.path in by_path]
        self._prefetch([by_path[entry.path] for entry in failed])
        cause = StopCause()
        upstream_sides: list[list[str]] = []
        told: set[tuple[str, int]] = set()
        for path, number, ours_lines in failed:
            old, new = by_path[path]
            hunk = old.hunks[number - 1] if number and number <= len(old.hunks) else None
            cause.hunks.append(self._cause(old, new, hunk, kind, ours_lines))
            upstream_sides.append(self._upstream_holds(old, new, hunk))
            if hunk is not None:
                told.add((path, hunk.index))
                cause.hunks[-1].patch_side = "\n".join(hunk.body)
        cause.upstream_version = self._own_version(cause, pairs, upstream_sides, told)
        for hunk_cause, lines in zip(cause.hunks, upstream_sides):
            if cause.upstream_version:
                hunk_cause.upstream_side = "\n".join(lines)
            else:
                hunk_cause.patch_side = ""  # both sides are shown only where upstream may have its own version
        return cause

    def _own_version(
        self, cause: StopCause, pairs: list[tuple[FileDiff, FileDiff]], sides: list[list[str]], told: set
    ) -> bool:
        """Whether upstream may have its own version of the patch: every failed hunk stands there in
        substance (SIDES: upstream's lines for each, [] where not), one of them changed by a commit
        named, and every other hunk of the patch (not in TOLD) stands there too."""
        if not cause.hunks or not all(sides) or not any(hunk.commits for hunk in cause.hunks):
            return False
        if not all(old.hunks for old, _ in pairs):
            return False  # a file without hunks (binary, a mode, a rename alone): nothing to compare
        self._read_files(pairs)
        rest = [(old, new, hunk) for old, new in pairs for hunk in old.hunks if (new.path, hunk.index) not in told]
        return all(self._upstream_holds(old, new, hunk) for old, new, hunk in rest)

    def explain_carried(self, patch: PatchFile, carried: Carried) -> StopCause:
        """The cause of PATCH's stop, from how CARRIED (`patchctl.loop.carry`) says it failed: the
        hunks upstream made itself, those a conflict left unmerged, or those git could not merge."""
        if carried.same_edits:
            return self.explain(patch, carried.applied, [Failed(e.file, e.hunk) for e in carried.same_edits], SAME_EDIT)
        outcome = carried.outcome
        failed = [Failed(failure.file, failure.hunk, failure.ours_lines) for failure in outcome.failures]
        kind = CONFLICT if outcome.status == Status.CONFLICT else UNMERGEABLE
        return self.explain(patch, carried.applied, failed, kind)

    # ------------------------------------------------------------ one hunk

    def _cause(
        self, old: FileDiff, new: FileDiff, hunk: Hunk | None, kind: str, ours_lines: tuple[tuple[int, int], ...] = ()
    ) -> HunkCause:
        old_path, new_path = _old_path(old), _new_path(new)
        cause = HunkCause(new_path, hunk.index if hunk else None, hunk.header if hunk else "")
        if old_path != new_path:
            cause.old_path = old_path
        before, after = self._lines(self.old, old_path), self._lines(self.new, new_path)
        if old.is_added:
            cause.note = f"upstream added {new_path} as well"
            self._name(cause, self._log(["--diff-filter=A"], [new_path]))
            return cause
        if before is None:
            cause.note = f"the old pin has no {old_path}: an earlier patch of the series adds it"
            return cause
        if after is None:
            cause.note = f"upstream deleted {old_path}"
            self._name(cause, self._log(["--diff-filter=D"], [old_path]))
            return cause
        if hunk is None:
            cause.note = f"upstream changed {new_path}"
            self._name(cause, self._log([], [new_path]))
            return cause
        pre = preimage(hunk)
        near = hunk.source_start - 1 if pre else hunk.source_start
        span = (0, len(pre)) if kind == UNMERGEABLE else changed_span(hunk)
        exact = before.locate(pre, near)
        if exact is not None:
            cause.old_lines = f"{exact + 1}-{exact + max(len(pre), 1)}"
            self._at_old_pin(cause, old_path, new_path, exact, span, strict=kind == UNMERGEABLE, lines=len(after.plain))
        if kind == CONFLICT and not cause.commits:
            # Where the merge met it, in the tree: the commits (upstream's, the carried series') that made those lines.
            lines = ours_lines or conflict_lines(self.repo, new_path, hunk)
            if lines:
                self._in_the_tree(cause, new_path, lines)
                return cause
        if exact is None:  # an earlier patch of the series changed some of its lines: where most of them are
            at = before.place(pre, near)
            self._at_old_pin(cause, old_path, new_path, at, span, strict=kind == UNMERGEABLE, lines=len(after.plain))
        return cause

    def _at_old_pin(
        self,
        cause: HunkCause,
        old_path: str,
        new_path: str,
        at: int,
        span: tuple[int, int],
        *,
        strict: bool,
        lines: int,
    ) -> None:
        """The commits that changed the old pin's lines [AT+span): upstream's changes there,
        and who made them (the one commit that touched the file, or `git log -L` of them)."""
        changes = self._file_changes(old_path, new_path)
        if changes is None:  # not text to git
            cause.note = f"upstream changed {new_path}"
            self._name(cause, self._log([], [new_path]))
            return
        touching = [c for c in changes if _touches(c, at + span[0], at + span[1], strict=strict)]
        if not touching:
            cause.note = "upstream left these lines as they were at the old pin"
            return
        commits = self._commits_touching(old_path, new_path)
        if len(commits) > 1:  # which of them changed these lines: git log -L of what they left there
            ranges = dict.fromkeys(traced(change, lines) for change in touching)
            commits = self._log([f"-L{first},{last}:{new_path}" for first, last in ranges if first])
        self._name(cause, commits)  # (one commit alone touched the file: it made every change there)
        cause.note = "" if cause.commits else "git log -L named no commit for these lines"

    def _in_the_tree(self, cause: HunkCause, path: str, ours_lines: tuple[tuple[int, int], ...]) -> None:
        """The commits of OLD..HEAD (REPO's) that made the conflict's lines of PATH at HEAD: those
        upstream made, named; those of the series carried before the patch, by their subjects."""
        found = self._log([f"-L{first},{last}:{path}" for first, last in ours_lines if first], head="HEAD")
        series = self._series()
        self._name(cause, [commit for commit in found if commit.sha not in series])
        cause.series = [commit.subject for commit in found if commit.sha in series]
        if cause.series and not cause.commits:
            cause.note = (
                "upstream left these lines as they were; earlier patches of the series, as carried, changed them"
            )
        elif not cause.commits:
            cause.note = (
                "neither upstream nor a patch carried before this one changed these lines: the patch was written on "
                "top of an earlier one that is not carried as it was (dropped, or resolved otherwise)"
            )

    def _name(self, cause: HunkCause, commits: list[UpstreamCommit]) -> None:
        cause.commits = commits[:MAX_COMMITS]
        cause.more_commits = max(len(commits) - MAX_COMMITS, 0)

    def _upstream_holds(self, old: FileDiff, new: FileDiff, hunk: Hunk | None) -> list[str]:
        """Upstream's lines where HUNK's preimage maps to at the new pin, when they hold its edit
        in substance (its added lines there, its removed lines gone); [] when they do not."""
        if hunk is None:
            return []
        after = self._lines(self.new, _new_path(new))
        if after is None:
            return []
        pre = preimage(hunk)
        if old.is_added or not pre:
            region = after.plain  # a new file, or lines added to an empty one: the file as a whole
        else:
            before = self._lines(self.old, _old_path(old))
            changes = self._file_changes(_old_path(old), _new_path(new))
            if before is None or changes is None:
                return []
            at = before.place(pre, hunk.source_start - 1)  # (where most of its lines are, when not all)
            region = after.plain[_moved(changes, at, start=True) : _moved(changes, at + len(pre), start=False)]
        there = Counter(_collapsed(line) for line in region)
        kept = Counter(_collapsed(line[1:]) for line in hunk.body if line[:1] in (" ", "+"))
        added = {_collapsed(line[1:]) for line in hunk.body if line[:1] == "+"} - {""}
        removed = {_collapsed(line[1:]) for line in hunk.body if line[:1] == "-"} - {""}
        if not added and not removed:
            return []
        holds = all(there[text] >= kept[text] for text in added) and all(there[text] <= kept[text] for text in removed)
        return region if holds and region else []

    # ------------------------------------------------------------ git

    def _read_files(self, pairs: list[tuple[FileDiff, FileDiff]]) -> None:
        """Both versions of the files of PAIRS (the patch's, as the series has it and as applied), read."""
        self._read(
            [f"{self.old}:{_old_path(old)}" for old, _ in pairs] + [f"{self.new}:{_new_path(new)}" for _, new in pairs]
        )

    def _read(self, specs: list[str]) -> None:
        """The files SPECS (`REV:PATH`) name, read in one `git cat-file --batch` (None: not a file there)."""
        wanted = [spec for spec in dict.fromkeys(specs) if spec not in self._files]
        batch = [spec for spec in wanted if "\n" not in spec]
        for spec in set(wanted) - set(batch):
            self._files[spec] = None  # a path with a line break: the batch protocol cannot ask for it
        if not batch:
            return
        out = git.run(["cat-file", "--batch"], self.repo, input="".join(f"{spec}\n" for spec in batch), binary=True)
        data: bytes = out.stdout  # type: ignore[assignment]
        at = 0
        for spec in batch:
            end = data.index(b"\n", at)
            header = data[at:end].split(b" ")
            at = end + 1
            size = int(header[2]) if len(header) == 3 and header[2].isdigit() else 0
            self._files[spec] = FileLines(data[at : at + size]) if len(header) == 3 and header[1] == b"blob" else None
            at += size + 1 if len(header) == 3 else 0

    def _prefetch(self, diffs: list[tuple[FileDiff, FileDiff]]) -> None:
        """What the causes of DIFFS' hunks read, for them all in three git calls run side by side:
        both versions of each file (`git cat-file --batch`), upstream's changes to them (`git diff
        -U0 -M` of the pins) and the commits that touched each (`git log --name-only`). What these
        do not tell is asked file by file, later."""
        pairs = [(_old_path(old), _new_path(new)) for old, new in diffs]
        wanted = [pair for pair in dict.fromkeys(pairs) if pair not in self._changes]
        # Each a git process of its own: two on threads beside this one, the third on this one.
        done = [Beside(self._changes_of, wanted), Beside(self._touching_of, wanted)] if wanted else []
        try:
            self._read_files(diffs)
        finally:
            errors = [work.exception() for work in done]  # every one has ended before an error is raised
        for error in errors:
            if error is not None:
                raise error

    def _changes_of(self, wanted: list[tuple[str, str]]) -> None:
        """Upstream's changes to the files WANTED names ((old path, new path)), from one `git diff -U0 -M`."""
        paths = ["--", *(f":(literal){path}" for path in dict.fromkeys(p for pair in wanted for p in pair))]
        diff = [
            "diff",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--diff-algorithm=myers",
            "-M",
            self.old,
            self.new,
            *paths,
        ]
        shown = git.run(diff, self.repo, check=False)
        if shown.ok:
            found: dict[tuple[str, str], list[Change] | None] = {}
            named: set[str] = set()
            for block in parse_diff_text(shown.stdout).blocks:
                source = block.renamed_from or block.old_path
                named |= {source, block.new_path}
                changes = [
                    Change.of(h.source_start, h.source_length, h.target_start, h.target_length) for h in block.hunks
                ]
                found[(source, block.new_path)] = None if block.binary else changes
            for pair in wanted:
                if pair in found:
                    self._changes[pair] = found[pair]
                elif pair[0] == pair[1] and pair[0] not in named:
                    self._changes[pair] = []  # the same at both pins

    def _touching_of(self, wanted: list[tuple[str, str]]) -> None:
        """The commits between the pins that touched each file WANTED names, from one `git log --name-only`."""
        paths = ["--", *(f":(literal){path}" for path in dict.fromkeys(p for pair in wanted for p in pair))]
        log = ["log", "-z", "--no-renames", "--name-only", "--format=%x01%H%x00%cs%x00%s"]
        listed = git.run([*log, f"{self.old}..{self.new}", *paths], self.repo, check=False)
        if not listed.ok:
            return
        touched: dict[str, list[UpstreamCommit]] = {}  # path -> the commits that touched it, newest first
        tokens = listed.stdout.split("\0")
        at, commit = 0, None
        while at < len(tokens):  # "\x01SHA", date, subject, then the paths (the first after a line break)
            token = tokens[at].lstrip("\n")
            if token.startswith("\x01") and git.is_full_sha(token[1:]) and at + 2 < len(tokens):
                commit = self._commit(token[1:], tokens[at + 1], tokens[at + 2])
                at += 3
                continue
            if commit is not None and token:
                touched.setdefault(token, []).append(commit)
            at += 1
        for old_path, new_path in wanted:  # (how many: one alone made every change there)
            both = touched.get(old_path, []) + touched.get(new_path, [])
            self._touching[(old_path, new_path)] = list({commit.sha: commit for commit in both}.values())

    def _commit(self, sha: str, date: str, subject: str) -> UpstreamCommit:
        return UpstreamCommit(sha, subject, date, f"{self.commit_url}{sha}" if self.commit_url else None)

    def _lines(self, rev: str, path: str) -> FileLines | None:
        spec = f"{rev}:{path}"
        if spec not in self._files:
            self._read([spec])
        return self._files[spec]

    def _file_changes(self, old_path: str, new_path: str) -> list[Change] | None:
        """What upstream changed in the file between the pins, in order; None when git does not diff it as text."""
        key = (old_path, new_path)
        if key not in self._changes:
            self._changes[key] = line_changes(self.repo, f"{self.old}:{old_path}", f"{self.new}:{new_path}")
        return self._changes[key]

    def _commits_touching(self, old_path: str, new_path: str) -> list[UpstreamCommit]:
        """The commits between the pins that changed the file, under either of its names."""
        key = (old_path, new_path)
        if key not in self._touching:
            self._touching[key] = self._log([], list(dict.fromkeys([old_path, new_path])))
        return self._touching[key]

    def _series(self) -> set[str]:
        """The commits REPO's HEAD has on top of NEW: the series carried so far."""
        if self._carried is None:
            listed = git.run(["rev-list", f"{self.new}..HEAD"], self.repo, check=False)
            self._carried = set(listed.stdout.split()) if listed.ok else set()
        return self._carried

    def _log(self, options: list[str], paths: list[str] | None = None, *, head: str = "") -> list[UpstreamCommit]:
        """The commits of OLD..NEW (OLD..HEAD) that `git log OPTIONS [-- PATHS]` lists, oldest first."""
        if not options and not paths:
            return []
        listed = git.run(
            ["log", "-s", "-z", _LOG_FORMAT, *options, f"{self.old}..{head or self.new}"]
            + (["--", *paths] if paths else []),
            self.repo,
            check=False,
        )
        if not listed.ok:
            return []
        fields = listed.stdout.split("\0")
        commits: dict[str, UpstreamCommit] = {}
        for sha, date, subject in zip(fields[0::3], fields[1::3], fields[2::3]):
            sha = sha.strip("\n")
            if git.is_full_sha(sha):
                commits.setdefault(sha, self._commit(sha, date, subject))
        return list(reversed(commits.values()))  # git lists the newest first


# ---------------------------------------------------------------- lines


def _old_path(diff: FileDiff) -> str:
    """Where DIFF's file is before the patch (its source for a rename or copy)."""
    return diff.source_path or diff.path


def _new_path(diff: FileDiff) -> str:
    """Where the applied DIFF found its file at the new pin (renames upstream made followed)."""
    return diff.source_path or diff.path


def _touches(change: Change, low: int, high: int, *, strict: bool) -> bool:
    """Whether CHANGE meets the old lines [LOW, HIGH). STRICT: it changes one of them (a
    context that no longer matches); else it overlaps or adjoins them, as a 3-way merge
    counts a conflict."""
    if strict:
        return change.start < high and change.start + change.old > low if change.old else low < change.start < high
    return change.meets(low, high)


def _moved(changes: list[Change], position: int, *, start: bool) -> int:
    """Where POSITION (between two old lines) is at the new pin: a START of a region takes in a
    change it falls inside or that begins there, an end one inside or that ends there."""
    offset = 0
    for change in changes:
        if position < change.start or (position == change.start and (start or change.old > 0)):
            break
        if change.start < position < change.start + change.old:
            return change.new_start if start else change.new_start + change.new
        offset += change.new - change.old
    return position + offset


def _collapsed(line: str) -> str:
    """LINE with its runs of whitespace as one space and none at its ends (re-indented code compares equal)."""
    return " ".join(line.split())
