"""Which hunks of a patch a conflicting 3-way merge failed on.

`git apply -3` merges a whole file at a time and says only which files it left unmerged. The
hunks that fail a strict apply are no guide to which of them conflicted: a hunk whose context
moved fails strictly and merges cleanly, in the same file as one that conflicts or in another
file. So each of the patch's hunks on an unmerged file is merged again alone, as git merged
the file: the base and ours from the index's stages 1 and 2, theirs the base with only that
hunk applied (`git merge-file`, the same three-way merge of lines). A hunk that conflicts
alone is one the merge failed on; the others merged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

from .. import git
from ..beside import each_beside
from ..confined import Refused, Root
from ..patterns import lazy
from ..records import dataclass
from .patchset import FileDiff, Hunk

MAX_MERGED_BYTES = 64 * 1024 * 1024  # a merged file read back from the sync tree (its own bound)
CONFLICT = "conflict"  # the cause of a FailedHunk (patchctl.series.applier) that a 3-way merge left unmerged


class Conflicting(NamedTuple):
    """A hunk a 3-way merge failed on (None: the file as a whole, where no hunk can be told), and
    the lines of ours (1-based, inclusive) whose changes it conflicts with: where `git log -L`
    finds the commits behind the conflict, upstream's and the carried series' alike."""

    diff: FileDiff
    hunk: Hunk | None
    ours_lines: tuple[tuple[int, int], ...] = ()


def conflicting_hunks(
    tree: Path,
    diffs: tuple[FileDiff, ...] | list[FileDiff],
    unmerged: list[str],
    stages: dict[str, dict[int, str]] | None = None,
) -> list[Conflicting]:
    """For each file of DIFFS that TREE's index holds UNMERGED: every hunk of it that conflicts
    when merged alone, in patch order; the file alone where no hunk can be told (one side
    deleted or added it, its stages are not text, or only its hunks together conflict). A
    file's only hunk is the one that conflicts: it costs no git call (its `ours_lines` are
    asked for later, `conflict_lines`, where they are needed). STAGES: the index's unmerged
    entries (`unmerged_stages`), when the caller has read them already."""
    found: list[Conflicting] = []
    for diff in diffs:
        if diff.path not in unmerged:
            continue  # merged cleanly: none of its hunks failed
        if len(diff.hunks) == 1:
            found.append(Conflicting(diff, diff.hunks[0]))
            continue
        stages = unmerged_stages(tree) if stages is None else stages
        blobs = stages.get(diff.path, {})
        told = _failing_alone(tree, diff, blobs) if {1, 2} <= set(blobs) and diff.hunks else None
        found += told or [Conflicting(diff, None)]
    return found


def conflict_lines(tree: Path, path: str, hunk: Hunk) -> tuple[tuple[int, int], ...]:
    """The lines of ours (TREE's HEAD version of PATH, unmerged in its index) whose changes HUNK
    conflicts with (1-based, inclusive), as `Conflicting.ours_lines` gives them; () when the
    index no longer holds the conflict or they cannot be told."""
    blobs = unmerged_stages(tree, path).get(path, {})
    if not {1, 2} <= set(blobs):
        return ()
    changes = line_changes(tree, blobs[1], blobs[2])
    base_data = _blob(tree, blobs[1])
    if changes is None or base_data is None:
        return ()
    base = FileLines(base_data)
    pre = preimage(hunk)
    at = base.locate(pre, hunk.source_start - 1 if pre else hunk.source_start)
    return () if at is None else _meeting_lines(changes, base, hunk, at)


def _meeting_lines(changes: list[Change], base: FileLines, hunk: Hunk, at: int) -> tuple[tuple[int, int], ...]:
    """The lines of ours (1-based, inclusive) whose changes (CHANGES of BASE) meet the lines
    HUNK, standing at AT in BASE, changes."""
    low, high = changed_span(hunk)
    ours_length = len(base.plain) + sum(change.new - change.old for change in changes)
    meeting = [change for change in changes if change.meets(at + low, at + high)]
    return tuple(dict.fromkeys(traced(change, ours_length) for change in meeting))


@dataclass(frozen=True)
class Change:
    """One change between two versions of a file (`git diff -U0`), 0-based: the old lines
    [start, start+old) became the new lines [new_start, new_start+new); an empty side is a
    position (between two lines)."""

    start: int
    old: int
    new_start: int
    new: int

    @classmethod
    def of(cls, start: int, old: int, new_start: int, new: int) -> Change:
        """The change a hunk header `@@ -START,OLD +NEW_START,NEW @@` says (git numbers an empty
        side by the line before it: 0-based, that is the position itself)."""
        return cls(start - 1 if old else start, old, new_start - 1 if new else new_start, new)

    def meets(self, low: int, high: int) -> bool:
        """Whether it overlaps or adjoins the old lines [LOW, HIGH): where a 3-way merge finds
        two sides' changes in conflict."""
        return self.start <= high and low <= self.start + self.old


def line_changes(repo: Path, old: str, new: str) -> list[Change] | None:
    """What changed from OLD to NEW (two blobs, or REV:PATH each), in order; None when git does
    not diff them as text."""
    # As a 3-way merge of lines diffs them (git apply -3, git merge-file): Myers, no indent heuristic.
    plain = ["--diff-algorithm=myers", "--no-indent-heuristic"]
    shown = git.run(["diff", "-U0", "--no-color", "--no-ext-diff", *plain, old, new], repo, check=False)
    if not shown.ok or "\nBinary files " in "\n" + shown.stdout:
        return None
    changes = []
    for line in shown.stdout.split("\n"):
        if match := _HUNK_RE.match(line):
            changes.append(Change.of(int(match[1]), int(match[2] or 1), int(match[3]), int(match[4] or 1)))
    return changes


_HUNK_RE = lazy(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class FileLines:
    """A file's lines as git reads them for a patch (split at newlines only), with their CRs
    (`raw`) and without (`plain`), and where each line stands, asked for once."""

    def __init__(self, data: bytes):
        text = data.decode("utf-8", "surrogateescape")
        self.raw = text.split("\n")
        self.plain = [line[:-1] if line.endswith("\r") else line for line in self.raw] if "\r" in text else self.raw[:]
        if self.plain and self.plain[-1] == "":
            self.plain.pop()  # after the last line end: no line
        self._where: dict[str, list[int]] | None = None

    def where(self, text: str) -> list[int]:
        if self._where is None:
            self._where = {}
            for number, line in enumerate(self.plain):
                self._where.setdefault(line, []).append(number)
        return self._where.get(text, [])

    def locate(self, wanted: list[str], near: int) -> int | None:
        """Where WANTED stands as a whole, the start nearest NEAR; an empty WANTED stands at NEAR."""
        if not wanted:
            return near if 0 <= near <= len(self.plain) else None
        matches = [
            start for start in self.where(wanted[0]) if self.plain[start : start + len(wanted)] == wanted
        ]  # only where its first line stands
        return min(matches, key=lambda start: (abs(start - near), start)) if matches else None

    def place(self, wanted: list[str], near: int) -> int:
        """Where WANTED stands: as a whole, nearest NEAR; else where most of its lines are equal
        (something changed some of them), nearest NEAR; else NEAR itself."""
        exact = self.locate(wanted, near)
        if exact is not None:
            return exact
        best: tuple[int, int] | None = None
        chosen = min(max(near, 0), max(len(self.plain) - 1, 0))
        for start in sorted({number - i for i, text in enumerate(wanted) for number in self.where(text)}):
            score = sum(1 for i, text in enumerate(wanted) if self.plain[start + i : start + i + 1] == [text])
            key = (score, -abs(start - near))
            if best is None or key > best:
                best, chosen = key, start
        return max(chosen, 0)


def preimage(hunk: Hunk) -> list[str]:
    """The lines HUNK applies to: its context and the lines it removes."""
    return [line[1:] for line in hunk.body if line[:1] in (" ", "-")]


def unmerged_stages(tree: Path, *paths: str, check: bool = True) -> dict[str, dict[int, str]]:
    """Path -> {stage: blob} of every unmerged entry in TREE's index (`git ls-files -u`), of PATHS when named
    (without CHECK, none where git fails)."""
    found: dict[str, dict[int, str]] = {}
    literal = ["--", *(f":(literal){path}" for path in paths)] if paths else []
    for entry in git.run(["ls-files", "-u", "-z", *literal], tree, check=check).stdout.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3 and fields[2].isdigit():
            found.setdefault(path, {})[int(fields[2])] = fields[1]
    return found


# A hunk whose changed lines are further than this from every change upstream made merges cleanly:
# it is not merged again (the lines git's diff may slide an insertion along, and then some).
_MARGIN = 3
# The lines of common text around a hunk merged again: its merge reads that window of the three
# versions, not the whole files (a window starts and ends where base and ours are the same text).
_WINDOW = 12


def _failing_alone(tree: Path, diff: FileDiff, blobs: dict[int, str]) -> list[Conflicting] | None:
    """The hunks of DIFF that conflict when each is merged alone; None when it cannot be told.
    Only a hunk near a change upstream made (the base against ours) can conflict: the others
    are not merged again, and where only one is near, it is the one the merge failed on."""
    changes = line_changes(tree, blobs[1], blobs[2])
    base_data, ours_data = _blobs(tree, blobs[1], blobs[2])
    if changes is None or base_data is None or ours_data is None:
        return None
    base = FileLines(base_data)
    near: list[tuple[Hunk, int]] = []
    for hunk in diff.hunks:
        pre = preimage(hunk)
        at = base.locate(pre, hunk.source_start - 1 if pre else hunk.source_start)
        if at is None:
            return None  # its preimage is not in the base: git could not have merged it either
        low, high = changed_span(hunk)
        if any(change.meets(at + low - _MARGIN, at + high + _MARGIN) for change in changes):
            near.append((hunk, at))
    if len(near) <= 1:
        failing: list[tuple[Hunk, int]] | None = near
    else:
        failing = _as_merged(tree, diff.path, base, ours_data, changes, near)
        if failing is None:  # the merge's blocks are not the overlaps: each hunk merged again
            failing = _confirmed(tree, base, base_data, ours_data, changes, near)
        if failing is None:
            return None
    return [Conflicting(diff, hunk, _meeting_lines(changes, base, hunk, at)) for hunk, at in failing]


def _as_merged(
    tree: Path, path: str, base: FileLines, ours_data: bytes, changes: list[Change], near: list[tuple[Hunk, int]]
) -> list[tuple[Hunk, int]] | None:
    """The hunks of NEAR the merge left in conflict, read from what it left in TREE. A 3-way merge
    of lines (zdiff3, as pin-sync merges) conflicts in each run of changes where one of ours
    (CHANGES) and one of theirs (a hunk's, where it stands) overlap or meet, unless both sides
    make the run the same text; it never splits a run. When the file holds as many conflict
    blocks as there are such runs, the hunks in them are those that conflicted. None when the
    counts differ (the hunk's own -/+ lines need not be git's diff of them): then each hunk is
    merged again."""
    edits = [
        (start, removed, added, number)
        for number, (hunk, at) in enumerate(near)
        for start, removed, added in _edits(hunk, at)
    ]
    marks = sorted([(c.start, c.old, [], -1) for c in changes] + edits, key=lambda mark: (mark[0], mark[1], mark[3]))
    runs: list[list[tuple[int, int, list[str], int]]] = []
    high = -1
    for mark in marks:
        if runs and mark[0] <= high:
            runs[-1].append(mark)
            high = max(high, mark[0] + mark[1])
        else:
            runs.append([mark])
            high = mark[0] + mark[1]
    runs = [run for run in runs if any(mark[3] == -1 for mark in run) and any(mark[3] >= 0 for mark in run)]
    try:
        merged = Root(tree, "the sync tree").read_bytes(path, MAX_MERGED_BYTES)
    except (Refused, OSError):
        return None
    if merged is None:
        return None
    ours = FileLines(ours_data).plain
    conflicting = [run for run in runs if _ours_text(run, changes, ours) != _theirs_text(run, base.plain)]
    blocks = sum(1 for line in merged.split(b"\n") if line.rstrip(b"\r") == b"<<<<<<< ours")
    if blocks != len(conflicting):
        return None
    failing = {mark[3] for run in conflicting for mark in run if mark[3] >= 0}
    return [entry for number, entry in enumerate(near) if number in failing]


def _span(run: list[tuple[int, int, list[str], int]]) -> tuple[int, int]:
    return min(mark[0] for mark in run), max(mark[0] + mark[1] for mark in run)


def _ours_text(run: list[tuple[int, int, list[str], int]], changes: list[Change], ours: list[str]) -> list[str]:
    """What ours holds where RUN's base lines were."""
    low, high = _span(run)
    return ours[_to_ours(changes, low) : _to_ours(changes, high)]


def _theirs_text(run: list[tuple[int, int, list[str], int]], base: list[str]) -> list[str]:
    """What the hunks make of RUN's base lines."""
    low, high = _span(run)
    text: list[str] = []
    position = low
    for start, removed, added, _ in sorted(mark for mark in run if mark[3] >= 0):
        text += base[position:start] + added
        position = start + removed
    return text + base[position:high]


def _edits(hunk: Hunk, at: int) -> list[tuple[int, int, list[str]]]:
    """HUNK's changes where its preimage stands (AT) in the base: (start, lines removed, lines
    added) per run of -/+ lines, an insertion at a position."""
    edits: list[tuple[int, int, list[str]]] = []
    position, start, removed, added = at, None, 0, []
    for line in hunk.body:
        tag = line[:1]
        if tag in ("-", "+"):
            if start is None:
                start, removed, added = position, 0, []
            if tag == "-":
                removed += 1
                position += 1
            else:
                added.append(line[1:])
        elif tag == " ":
            if start is not None:
                edits.append((start, removed, added))
                start = None
            position += 1
    if start is not None:
        edits.append((start, removed, added))
    return edits


def _confirmed(
    tree: Path, base: FileLines, base_data: bytes, ours_data: bytes, changes: list[Change], near: list[tuple[Hunk, int]]
) -> list[tuple[Hunk, int]] | None:
    """The hunks of NEAR (each with where it stands in BASE) that conflict when merged alone with
    ours, each merged with the whole files, as git merges them (xdiff weighs a line by how often
    the whole file holds it: a window of the files alone can merge otherwise). Where many are
    near, one merge of their windows first tells which may conflict; only those are merged whole,
    two at a time."""
    maybe = near
    if len(near) > _FEW:
        ours = ours_data.decode("utf-8", "surrogateescape").split("\n")
        windowed = _merged_alone(tree, base, ours, changes, near)
        maybe = [entry for entry in near if entry[0] in windowed] if windowed else near
    from ..confined import scratch  # tempfile and shutil: only where hunks are merged one by one

    with scratch.directory("patchctl-hunks-") as work:
        files = Root(work, "a scratch directory")
        files.write_scratch("ours", ours_data)
        files.write_scratch("base", base_data)

        def conflicts(number: int) -> int:
            hunk, at = maybe[number]
            theirs = f"theirs-{number}"
            files.write_scratch(theirs, "\n".join(_with_hunk(base.raw, hunk, at)).encode("utf-8", "surrogateescape"))
            merge = ["merge-file", "-p", "-q", str(work / "ours"), str(work / "base"), str(work / theirs)]
            return git.run(merge, tree, check=False).returncode  # the number of conflicts

        counts = each_beside(conflicts, range(len(maybe)), at_once=2)  # each merge a process of its own
    if not all(0 <= count < 128 for count in counts):
        return None  # git refused the files (binary): no hunk told apart
    return [entry for entry, count in zip(maybe, counts) if count > 0]


# Up to this many hunks near upstream's changes are merged whole at once; more are first told
# apart by one merge of their windows.
_FEW = 3


def changed_span(hunk: Hunk) -> tuple[int, int]:
    """The preimage lines HUNK changes, [low, high) in its preimage (a position for an insertion)."""
    at = 0
    touched: list[int] = []
    for line in hunk.body:
        tag = line[:1]
        if tag == "-":
            touched += [at, at + 1]
            at += 1
        elif tag == "+":
            touched.append(at)
        elif tag == " ":
            at += 1
    return (min(touched), max(touched)) if touched else (0, 0)


def traced(change: Change, lines: int) -> tuple[int, int]:
    """The new version's lines (1-based, inclusive; of LINES) that `git log -L` traces CHANGE
    with: its new lines, or for a deletion the two lines around the gap; (0, 0) for no line."""
    if lines == 0:
        return 0, 0
    if change.new:
        return change.new_start + 1, change.new_start + change.new
    # The lines before and after the gap; at an end of the file, the two lines there.
    first = min(max(change.new_start, 1), max(lines - 1, 1))
    return first, min(first + 1, lines)


def _merged_alone(
    tree: Path, base: FileLines, ours: list[str], changes: list[Change], near: list[tuple[Hunk, int]]
) -> list[Hunk] | None:
    """The hunks of NEAR (each with where it stands in BASE) that conflict when merged alone, in
    one `git merge-file`: each hunk's window of the three versions (the base, OURS, the base
    with only that hunk) one after the other, between lines of their own that no file holds,
    which every version shares, so each window merges by itself; its conflicts are counted
    between them. None when git refuses the files or the windows do not come back apart."""
    # A line no version holds: its own text hashed (so the same files merge the same way every time).
    fence = (
        "patchctl window " + hashlib.sha256("\n".join(ours + base.raw).encode("utf-8", "surrogateescape")).hexdigest()
    )
    sides: tuple[list[str], list[str], list[str]] = ([], [], [])
    for number, (hunk, at) in enumerate(near):
        pre = preimage(hunk)
        low, high = _window(changes, at, at + len(pre), len(base.raw))
        theirs = _with_hunk(base.raw[:high], hunk, at)[low:]
        for side, lines in zip(
            sides, (ours[_to_ours(changes, low) : _to_ours(changes, high)], base.raw[low:high], theirs)
        ):
            side += [*lines, f"{fence} {number}"]
    from ..confined import scratch  # tempfile and shutil: only where hunks are merged one by one

    with scratch.directory("patchctl-hunks-") as work:
        names = ("ours", "base", "theirs")
        for name, lines in zip(names, sides):
            Root(work, "a scratch directory").write_scratch(name, _joined(lines))
        merged = git.run(["merge-file", "-p", "-q", *(str(work / name) for name in names)], tree, check=False)
    if not 0 <= merged.returncode < 128:
        return None  # git refused the files (binary): no hunk told apart
    failing, conflicts, seen = [], 0, 0
    for line in merged.stdout.split("\n"):
        if line.startswith("<<<<<<< "):
            conflicts += 1
        elif line.startswith(fence):
            if seen >= len(near) or line != f"{fence} {seen}":
                return None  # a fence inside a conflict: the windows did not merge apart
            if conflicts:
                failing.append(near[seen][0])
            conflicts, seen = 0, seen + 1
    return failing if seen == len(near) else None


def _window(changes: list[Change], low: int, high: int, lines: int) -> tuple[int, int]:
    """Base lines [LOW, HIGH) widened until _WINDOW lines upstream left alone stand on each side
    (through any change upstream made there), within the file's LINES."""
    low, high = low - _WINDOW, high + _WINDOW
    for change in reversed(changes):  # in order: a change below moves LOW only further down
        if change.meets(low, low + _WINDOW):
            low = change.start - _WINDOW
    for change in changes:
        if change.meets(high - _WINDOW, high):
            high = change.start + change.old + _WINDOW
    return max(low, 0), min(high, lines)


def _with_hunk(lines: list[str], hunk: Hunk, at: int) -> list[str]:
    """LINES (with their CRs) with only HUNK applied at AT, where its preimage stands."""
    crlf = at < len(lines) and lines[at].endswith("\r")
    post = [line[1:] + ("\r" if crlf else "") for line in hunk.body if line[:1] in (" ", "+")]
    return lines[:at] + post + lines[at + len(preimage(hunk)) :]


def _to_ours(changes: list[Change], position: int) -> int:
    """Where POSITION (between two base lines no change meets) is in ours."""
    return position + sum(change.new - change.old for change in changes if change.start + change.old <= position)


def _joined(lines: list[str]) -> bytes:
    return "\n".join(lines).encode("utf-8", "surrogateescape") + b"\n"


def _blobs(tree: Path, *blobs: str) -> list[bytes | None]:
    """The contents of BLOBS, in one `git cat-file --batch` (None: not a blob)."""
    out = git.run(["cat-file", "--batch"], tree, input="".join(f"{blob}\n" for blob in blobs), check=False, binary=True)
    data: bytes = out.stdout  # type: ignore[assignment]
    found: list[bytes | None] = []
    at = 0
    for _ in blobs:
        end = data.find(b"\n", at)
        header = data[at:end].split(b" ") if end >= 0 else []
        size = int(header[2]) if len(header) == 3 and header[2].isdigit() else -1
        found.append(data[end + 1 : end + 1 + size] if size >= 0 and header[1] == b"blob" else None)
        at = end + 1 + (size + 1 if size >= 0 else 0)
    return found


def _blob(tree: Path, blob: str) -> bytes | None:
    shown = git.run(["cat-file", "blob", blob], tree, check=False, binary=True)
    return shown.stdout if shown.ok else None  # type: ignore[return-value]
