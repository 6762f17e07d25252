"""A series directory's past, read from the project's git history in one pass.

`patchctl status` once asked git about each patch on its own (`git log --follow` per file: 7
minutes for Electron's 161 chromium patches in its 30,000 commits). Here one `git log` of the
series directory (`--raw -M`, parents rewritten to the commits that changed it, a merge diffed
against its first parent) is replayed oldest first, so that each patch file is followed through
its renames as one *lineage*:

* its age: the commit that brought the lineage into the series (the file added, followed through
  renames; a whole directory moved in from elsewhere, as Electron's patches/common/chromium became
  patches/chromium, is followed into its old place, read the same way);
* how it fared in each pin-sync of the upstream that changed the series (subject
  `pin-sync: move UPSTREAM`): kept, rewritten, or the stop a trailer of the commit names
  (`health.STOP_TRAILERS`); the patches those pin-syncs dropped, with their trailer's note;
* the series over time, along its main line (first parents from the newest commit): how many
  patches it carried, by upstream status (at most `SIZE_HISTORY` points, evenly spread);
* the patches that left the series on that line, with the upstream status they had last: those
  marked Backport, Submitted or Accepted, and those a pin-sync dropped as taken upstream, went
  upstream.

Besides the log: one `git log --no-walk` for the messages of the pin-sync commits (their trailers), one
`git diff-tree --stdin` over the commits that added files (renames from outside the directory),
and one `git cat-file --batch` for the versions whose `Upstream-Status:` the chart counts.
Outside a git repository, or when git cannot answer, the history is empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import field
from datetime import datetime
from pathlib import Path

from .. import git
from ..records import dataclass
from ..series.patchset import parse_upstream_status
from .health import (
    DROPPED_TRAILER,
    MALFORMED,
    NO_STATUS,
    STOP_TRAILERS,
    SeriesSize,
    SyncFate,
    trailers,
)

SIZE_HISTORY = 120  # points of the series' size over time (a chart's width holds no more)
WENT_UPSTREAM = ("Accepted", "Backport", "Submitted")  # a patch that left with one of these went upstream
MAX_MOVES = 3  # directories a series moved from that are followed (each read once)
PATCH_SUFFIXES = (".patch", ".diff")
_SYNC_SUBJECT_RE = re.compile(r"pin-sync: move (?P<upstream>\S+)")
_OID = r"[0-9a-f]{40}(?:[0-9a-f]{24})?"
_HEADER_RE = re.compile(rf"{_OID}(?: {_OID})*")
_DATE_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]\d\d:\d\d)")
_RAW_RE = re.compile(rf"\n?:\d{{6}} \d{{6}} (?P<old>{_OID}) (?P<new>{_OID}) (?P<status>[ACDMRTUX])\d*")
_NULL_OID = re.compile(r"0+")


@dataclass
class Lineage:
    """One patch file, followed through its renames."""

    added: str  # committer date (ISO 8601) of the commit that brought it into the series
    added_commit: str
    fates: list[SyncFate] = field(default_factory=list)  # in the pin-syncs it went through, oldest first
    dropped_note: str = ""  # the trailer of the pin-sync that dropped it

    @property
    def stops(self) -> int:
        return sum(1 for fate in self.fates if fate.fate in STOP_TRAILERS.values())


@dataclass
class Departure:
    """A patch that left the series on its main line."""

    patch: str
    commit: str
    date: str
    added: str  # when it had entered the series
    upstream_status: str  # of its last version: a Yocto value, NO_STATUS or MALFORMED
    went_upstream: bool  # marked Backport, Submitted or Accepted, or dropped by a pin-sync as taken upstream
    note: str = ""  # the pin-sync's Patchctl-Dropped trailer, when one dropped it


@dataclass
class SeriesHistory:
    lineages: dict[str, Lineage] = field(default_factory=dict)  # path from the project's top -> its lineage
    sizes: list[SeriesSize] = field(default_factory=list)  # oldest first
    departures: list[Departure] = field(default_factory=list)  # oldest first
    dropped: list[dict] = field(default_factory=list)  # {patch, commit, date, note}: by pin-syncs, newest first
    moved_from: list[dict] = field(default_factory=list)  # {dir, commit, date, patches}: where it was before


@dataclass
class _Change:
    status: str  # A, M, T, D or R (a rename, -M)
    old: str | None
    new: str | None
    old_blob: str
    new_blob: str


@dataclass
class _Commit:
    sha: str
    parents: list[str]  # rewritten: the nearest ancestors that changed the directory
    date: str
    subject: str
    changes: list[_Change]


@dataclass
class _Entry:
    blob: str
    lineage: Lineage


@dataclass
class _Point:
    commit: str
    date: str
    blobs: list[str]  # of the patch files the series held after the commit


@dataclass
class _Replay:
    """What one directory's log gave: its main-line points and departures, and its final state."""

    points: list[_Point] = field(default_factory=list)
    departures: list[tuple[Departure, str]] = field(default_factory=list)  # and the blob it left with
    dropped: list[dict] = field(default_factory=list)
    state: dict[str, _Entry] = field(default_factory=dict)
    moved_from: list[dict] = field(default_factory=list)


class ProjectHistory:
    """The project's git repository, asked about its series directories. Outside a git
    repository every answer is empty."""

    def __init__(self, root: Path):
        found = git.run(["rev-parse", "--show-toplevel"], root, check=False)
        self.top: Path | None = Path(found.stdout.strip()).resolve() if found.ok and found.stdout.strip() else None
        head = git.run(["log", "-1", "--format=%cI"], root, check=False) if self.top else None
        self.head_date = head.stdout.strip() if head is not None and head.ok else ""

    def relative(self, path: Path) -> str | None:
        if self.top is None:
            return None
        try:
            return path.resolve().relative_to(self.top).as_posix()
        except ValueError:
            return None

    def age_days(self, added: str | None) -> int | None:
        if not added or not self.head_date:
            return None
        return max((datetime.fromisoformat(self.head_date) - datetime.fromisoformat(added)).days, 0)

    def series(self, directory: Path, series: str, upstream: str) -> SeriesHistory:
        """The history of the series SERIES (on UPSTREAM) kept in DIRECTORY."""
        relative = self.relative(directory)
        if self.top is None or relative is None:
            return SeriesHistory()
        reader = _Reader(self.top, series, upstream)
        replay = reader.replay([relative], "HEAD", depth=0)
        if replay is None:
            return SeriesHistory()
        statuses = reader.statuses(
            {blob for point in replay.points for blob in point.blobs} | {blob for _, blob in replay.departures}
        )
        history = SeriesHistory(dropped=replay.dropped, moved_from=replay.moved_from)
        history.lineages = {path: entry.lineage for path, entry in replay.state.items()}
        for point in replay.points:
            counts: dict[str, int] = {}
            for blob in point.blobs:
                status = statuses.get(blob, NO_STATUS)
                counts[status] = counts.get(status, 0) + 1
            history.sizes.append(SeriesSize(point.commit, point.date, len(point.blobs), dict(sorted(counts.items()))))
        for departure, blob in replay.departures:
            departure.upstream_status = statuses.get(blob, NO_STATUS)
            departure.went_upstream = departure.upstream_status in WENT_UPSTREAM or "taken upstream" in departure.note
            history.departures.append(departure)
        return history


def is_patch_name(relative: str) -> bool:
    """Whether a file of the series directory (RELATIVE to it) counts as one of its patches."""
    return "/" not in relative and relative.endswith(PATCH_SUFFIXES)


class _Reader:
    def __init__(self, top: Path, series: str, upstream: str):
        self.top, self.series_name, self.upstream = top, series, upstream
        self.moves_left = MAX_MOVES  # directories moved from, still to follow

    def _git(self, args: list[str], stdin: str | None = None) -> str | None:
        done = git.run(args, self.top, check=False, input=stdin)
        return done.stdout if done.ok else None

    # ------------------------------------------------------------ reading

    def log(self, directories: list[str], rev: str) -> list[_Commit] | None:
        """The commits of REV that changed DIRECTORIES, oldest first (parents before children)."""
        # Merges get no diff here: `--diff-merges` would also show every merge the directory's
        # history simplification leaves out (4,933 commits of Electron's instead of 884).
        out = self._git(
            [
                "log",
                "-z",
                "--raw",
                "--no-abbrev",
                "-M",
                "--parents",
                "--topo-order",
                "--reverse",
                "--format=%x00%H %P%x00%cI%x00%s",
                rev,
                "--",
                *_pathspecs(directories),
            ]
        )
        commits = None if out is None else _parse_log(out)
        merges = [commit for commit in commits or [] if len(commit.parents) > 1]
        if merges:
            changes = self._diff_tree(
                [c.sha for c in merges], ["--diff-merges=first-parent", "--", *_pathspecs(directories)]
            )
            if changes is None:
                return None
            for merge in merges:
                merge.changes = changes.get(merge.sha, [])
        return commits

    def _diff_tree(self, commits: list[str], args: list[str]) -> dict[str, list[_Change]] | None:
        """Commit -> its changes against its first parent (`git diff-tree --stdin` ARGS), for COMMITS."""
        out = self._git(
            ["diff-tree", "--stdin", "-r", "-M", "-z", "--no-abbrev", *args], stdin="\n".join(commits) + "\n"
        )
        if out is None:
            return None
        found: dict[str, list[_Change]] = {}
        tokens = out.split("\0")
        index = 0
        while index < len(tokens) - 1:
            if not _HEADER_RE.fullmatch(tokens[index].lstrip("\n")):
                return None
            changes = found.setdefault(tokens[index].lstrip("\n"), [])
            index = _read_changes(tokens, index + 1, changes)
            if index < 0:
                return None
        return found

    def sync_messages(self, commits: list[_Commit]) -> dict[str, str]:
        """Commit -> message, of the pin-syncs of this upstream among COMMITS (read by their subject)."""
        syncs = [c.sha for c in commits if (m := _SYNC_SUBJECT_RE.match(c.subject)) and m["upstream"] == self.upstream]
        if not syncs:
            return {}
        fields = (self._git(["log", "--no-walk=unsorted", "-z", "--format=%H%x00%B", *syncs]) or "").split("\0")
        return {commit: message for commit, message in zip(fields[0::2], fields[1::2]) if commit in syncs}

    def moved_in(self, commits: list[_Commit], directories: list[str], *, copies: bool) -> dict[tuple[str, str], str]:
        """(commit, path) -> the path outside DIRECTORIES it came from, for the files COMMITS
        added: renamed from there (their whole diffs: a rename from outside the directories is
        one only there), or, where a commit brought in most of the series at once, copied from
        there (git's copy detection among all files, as `git log --follow` finds them: Ollama
        copied llm/patches to llama/patches, then deleted the old directory)."""
        adding = [c for c in commits if any(change.status == "A" for change in c.changes)]
        if not adding:
            return {}
        found = self._diff_tree([c.sha for c in adding], ["--diff-merges=first-parent", "--diff-filter=R"]) or {}
        bulk = [c.sha for c in _bulk_adds(commits, directories) if copies and not found.get(c.sha)]
        if bulk:
            harder = ["-C", "--find-copies-harder", "--diff-merges=first-parent", "--diff-filter=C"]
            found.update(self._diff_tree(bulk, harder) or {})
        return {
            (commit, change.new): change.old
            for commit, changes in found.items()
            for change in changes
            if change.new and change.old and _under(change.new, directories) and not _under(change.old, directories)
        }

    def statuses(self, blobs: Iterable[str]) -> dict[str, str]:
        """Blob -> the `Upstream-Status:` value of that version of a patch (NO_STATUS, MALFORMED)."""
        wanted = sorted(blob for blob in blobs if not _NULL_OID.fullmatch(blob))
        if not wanted:
            return {}
        done = git.run(["cat-file", "--batch"], self.top, check=False, input="\n".join(wanted) + "\n", binary=True)
        if not done.ok:
            return {}
        data: bytes = done.stdout  # type: ignore[assignment]
        found, at = {}, 0
        while at < len(data):
            end = data.index(b"\n", at)
            header = data[at:end].split(b" ")
            if len(header) != 3:  # "<oid> missing"
                at = end + 1
                continue
            size = int(header[2])
            found[header[0].decode()] = _status_of(data[end + 1 : end + 1 + size])
            at = end + 1 + size + 1
        return found

    # ------------------------------------------------------------ replaying

    def replay(self, directories: list[str], rev: str, *, depth: int) -> _Replay | None:
        commits = self.log(directories, rev)
        if commits is None:
            return None
        messages = self.sync_messages(commits)
        moves = self.moved_in(commits, directories, copies=depth == 0) if depth < 2 else {}
        imported, moved = self._follow_moves(moves, depth)
        moved_at = {commit for commit, *_ in moved}
        carried: dict[str, int] = {}  # move commit -> the patches the series held before it
        result = _Replay()
        children: dict[str, int] = {}
        for commit in commits:
            for parent in commit.parents:
                children[parent] = children.get(parent, 0) + 1
        main_line = _main_line(commits)
        sampled, main_line_set = _sample(main_line, SIZE_HISTORY), set(main_line)
        states: dict[str, dict[str, _Entry]] = {}
        for commit in commits:
            state = self._state_before(commit, states, children)
            if commit.sha in moved_at:  # did the series hold patches here before the move?
                carried[commit.sha] = sum(1 for path in state if is_patch_name(_relative(path, directories)))
            others = [states.get(parent, {}) for parent in commit.parents[1:]]
            if commit.sha in messages:
                self._fates(commit, state, messages[commit.sha], directories, result)
            on_main_line = commit.sha in main_line_set
            for change in commit.changes:
                self._apply(change, commit, state, others, imported, directories, result if on_main_line else None)
            for parent in commit.parents[1:]:
                _release(parent, states, children)
            if commit.sha in sampled:
                blobs = [entry.blob for path, entry in state.items() if is_patch_name(_relative(path, directories))]
                result.points.append(_Point(commit.sha, commit.date, sorted(blobs)))
            if children.get(commit.sha):
                states[commit.sha] = state
            elif commit.sha == commits[-1].sha:
                result.state = state
        result.dropped.reverse()  # newest first
        dates = {commit.sha: commit.date for commit in commits}
        for commit, source, files, before in moved:
            _prepend_moved(result, commit, dates[commit], source, files, before, carried[commit], directories)
        result.moved_from.sort(key=lambda moved: moved["date"])
        return result

    def _state_before(
        self, commit: _Commit, states: dict[str, dict[str, _Entry]], children: dict[str, int]
    ) -> dict[str, _Entry]:
        """The directory's files after COMMIT's first parent: that parent's own state when
        COMMIT is its last child to be replayed (a straight line copies nothing)."""
        if not commit.parents or commit.parents[0] not in states:
            return {}
        parent = commit.parents[0]
        if children[parent] == 1:
            children[parent] = 0
            return states.pop(parent)
        children[parent] -= 1
        return dict(states[parent])

    def _apply(
        self,
        change: _Change,
        commit: _Commit,
        state: dict[str, _Entry],
        others: list[dict[str, _Entry]],
        imported: dict[tuple[str, str], Lineage],
        directories: list[str],
        main: _Replay | None,
    ) -> None:
        if change.status in ("D", "R") and change.old is not None:
            gone = state.pop(change.old, None)
            if change.status == "D" and gone is not None and main is not None:
                name = _relative(change.old, directories)
                if is_patch_name(name):
                    lineage = gone.lineage
                    departure = Departure(
                        name, commit.sha, commit.date, lineage.added, NO_STATUS, False, lineage.dropped_note
                    )
                    main.departures.append((departure, change.old_blob))
            if change.status == "R" and change.new is not None:
                lineage = gone.lineage if gone is not None else Lineage(commit.date, commit.sha)
                state[change.new] = _Entry(change.new_blob, lineage)
            return
        if change.new is None:
            return
        if change.status == "A":
            lineage = imported.get((commit.sha, change.new))
            if lineage is None:  # a merge brings what its other parent had: that file's lineage
                lineage = next((other[change.new].lineage for other in others if change.new in other), None)
            state[change.new] = _Entry(change.new_blob, lineage or Lineage(commit.date, commit.sha))
        else:  # M, T (or an unmerged entry): the same file changed
            before = state.get(change.new)
            state[change.new] = _Entry(change.new_blob, before.lineage if before else Lineage(commit.date, commit.sha))

    def _fates(
        self, commit: _Commit, before: dict[str, _Entry], message: str, directories: list[str], result: _Replay
    ) -> None:
        """How each patch fared in the pin-sync COMMIT (BEFORE: the series before it)."""
        found = trailers(message)
        stops = {value.split(" ", 1)[0]: STOP_TRAILERS[key] for key, value in found if key in STOP_TRAILERS}
        notes = {value.split(" ", 1)[0]: value for key, value in found if key == DROPPED_TRAILER}
        changed: dict[str, tuple[str, str]] = {}  # old path -> (new path, how)
        deleted = []
        for change in commit.changes:
            if change.status == "D" and change.old is not None:
                deleted.append(change.old)
            elif change.status == "R" and change.old is not None and change.new is not None:
                changed[change.old] = (change.new, "kept" if change.old_blob == change.new_blob else "rewritten")
            elif change.status in ("M", "T") and change.new is not None:
                changed[change.new] = (change.new, "rewritten")
        for path, entry in before.items():
            if path in deleted:
                continue
            new, how = changed.get(path, (path, "kept"))
            name = _relative(new, directories)
            if is_patch_name(name):
                how = stops.get(f"{self.series_name}/{name}", how)
                entry.lineage.fates.append(SyncFate(commit.sha, commit.date, how))
        for path in sorted(deleted):
            name = _relative(path, directories)
            if not is_patch_name(name) or path not in before:
                continue
            note = notes.get(f"{self.series_name}/{name}", "")
            before[path].lineage.dropped_note = note
            result.dropped.append({"patch": name, "commit": commit.sha, "date": commit.date, "note": note})

    def _follow_moves(
        self, moves: dict[tuple[str, str], str], depth: int
    ) -> tuple[dict[tuple[str, str], Lineage], list[tuple[str, str, list[tuple[str, str]], _Replay]]]:
        """The lineages of the files renamed into the directory from elsewhere, read in the
        directory they came from (one log each, up to MAX_MOVES directories), and per such
        directory: (commit, directory, [(new path, old path)], its replay up to the commit)."""
        imported: dict[tuple[str, str], Lineage] = {}
        moved = []
        by_source: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for (commit, new), old in moves.items():
            by_source.setdefault((commit, old.rpartition("/")[0]), []).append((new, old))
        for (commit, source), files in sorted(by_source.items(), key=lambda item: -len(item[1])):
            if self.moves_left <= 0:
                break
            self.moves_left -= 1
            before = self.replay([source], f"{commit}^1", depth=depth + 1)
            if before is None:
                continue
            for new, old in files:
                if old in before.state:
                    imported[(commit, new)] = before.state[old].lineage
            moved.append((commit, source, files, before))
        return imported, moved


def _prepend_moved(
    result: _Replay,
    commit: str,
    date: str,
    source: str,
    files: list[tuple[str, str]],
    before: _Replay,
    carried: int,
    directories: list[str],
) -> None:
    """SOURCE, a directory files moved from into the series at COMMIT: when the series held no
    patch before (the move made it), it was the series' own past, and its points, departures and
    drops come first."""
    patches = sum(1 for new, _ in files if is_patch_name(_relative(new, directories)))
    result.moved_from.append({"dir": source, "commit": commit, "date": date, "patches": patches})
    if patches and not carried:
        result.points[:0] = before.points
        result.departures[:0] = before.departures
        result.dropped += before.dropped
        result.moved_from += before.moved_from


def _status_of(blob: bytes) -> str:
    """The `Upstream-Status:` value of one version of a patch, read from its description only."""
    head = blob[: blob.find(b"\ndiff ") + 1 or None]
    if b"status" not in head.lower():
        return NO_STATUS
    status = parse_upstream_status(head.decode("utf-8", errors="replace"))
    if status is None:
        return NO_STATUS
    return status.value if status.ok else MALFORMED


def _parse_log(out: str) -> list[_Commit] | None:
    """`git log -z --raw --format=%x00%H %P%x00%cI%x00%s` as commits; None when it reads otherwise.
    Every field is a token of its own, read by position: a subject is never read as anything else."""
    tokens = out.split("\0")
    commits: list[_Commit] = []
    index = 0
    while index < len(tokens) - 1:
        if tokens[index] != "" or index + 3 >= len(tokens):
            return None
        header, date = tokens[index + 1].rstrip(" "), tokens[index + 2]  # a root commit: "<commit> "
        if not _HEADER_RE.fullmatch(header) or not _DATE_RE.fullmatch(date):
            return None
        sha, *parents = header.split(" ")
        commits.append(_Commit(sha, parents, date, tokens[index + 3], []))
        index = _read_changes(tokens, index + 4, commits[-1].changes)
        if index < 0:
            return None
    return commits


def _read_changes(tokens: list[str], index: int, changes: list[_Change]) -> int:
    """Read `--raw -z` entries from TOKENS[INDEX:] into CHANGES, up to the first token that is
    none; where that is (-1: an entry cut short). Each path is a token of its own, taken by
    position: a path that looks like an entry is read as the path it is."""
    while index < len(tokens) and (raw := _RAW_RE.fullmatch(tokens[index])):
        status = raw["status"]
        paths = 2 if status in ("R", "C") else 1
        if index + paths >= len(tokens):
            return -1
        first, second = tokens[index + 1], tokens[index + paths]
        changes.append(
            _Change(status, None if status == "A" else first, None if status == "D" else second, raw["old"], raw["new"])
        )
        index += 1 + paths
    return index


def _bulk_adds(commits: list[_Commit], directories: list[str]) -> list[_Commit]:
    """The commits that added at least three patches, and at least half of those the series
    then held (counted along the log's order: an estimate, which is all this needs)."""
    held: set[str] = set()
    bulk = []
    for commit in commits:
        added = 0
        for change in commit.changes:
            if change.old is not None:
                held.discard(change.old)
            if change.new is not None and is_patch_name(_relative(change.new, directories)):
                held.add(change.new)
                added += change.status == "A"
        if added >= 3 and 2 * added >= len(held):
            bulk.append(commit)
    return bulk


def _main_line(commits: list[_Commit]) -> list[str]:
    """The first-parent line from the newest commit, oldest first."""
    by_sha = {c.sha: c for c in commits}
    line: list[str] = []
    current = commits[-1] if commits else None
    while current is not None:
        line.append(current.sha)
        current = by_sha.get(current.parents[0]) if current.parents else None
    return line[::-1]


def _sample(line: list[str], most: int) -> set[str]:
    """At most MOST commits of LINE, evenly spread, its first and last among them."""
    if len(line) <= most:
        return set(line)
    step = (len(line) - 1) / (most - 1)
    return {line[round(i * step)] for i in range(most)}


def _release(parent: str, states: dict[str, dict[str, _Entry]], children: dict[str, int]) -> None:
    if parent in states:
        children[parent] -= 1
        if children[parent] <= 0:
            del states[parent]


def _pathspecs(directories: list[str]) -> list[str]:
    return [f":(literal){directory}" if directory else ":(top)" for directory in directories]


def _under(path: str, directories: list[str]) -> bool:
    return any(not d or path.startswith(d + "/") for d in directories)


def _relative(path: str, directories: list[str]) -> str:
    for directory in directories:
        if not directory:
            return path
        if path.startswith(directory + "/"):
            return path[len(directory) + 1 :]
    return path
