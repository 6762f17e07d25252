"""`patchctl status`: the health of each series at its pin and at the upstream tip.

For each patch: its upstream status (Yocto's `Upstream-Status:` header, `patchset`), its age
(from the commit that added its file to the project), the files it touches, its drift (how many
upstream commits between the pin and the tip touched those files: `git rev-list --count
PIN..TIP -- FILES` in the cache's mirror), its verdict at the tip (the canary's trial: strict,
else 3-way, with "taken upstream" detection from `patchctl.loop.carry`), and how it fared in the
recent pin-syncs of the project's history (kept, rewritten, needed a hand, dropped). For the
series: its size over time, from the history of its directory.

Ages are counted to the project's HEAD commit, not to the clock, so that the report is a
function of the repositories alone. This module never prints: the command renders the report
(text, `--json`, `--html` with `patchctl.loop.health_page`), and canary and pin-sync put the short
Markdown table (`report.health_markdown`) in their reports from `health_rows`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .. import git
from ..output.jsonout import to_json
from ..project.config import Series
from ..series.patchset import PatchFile

Progress = Callable[[str], None]
NO_STATUS = "none"
MALFORMED = "malformed"
RECENT_SYNCS = 5  # pin-syncs per patch in the report
SIZE_HISTORY = 200  # commits of the series directory read for its size over time
_SYNC_SUBJECT_RE = re.compile(r"^pin-sync: move (?P<upstream>\S+)")
FATES = ("kept", "rewritten", "needed a hand", "dropped")
# Trailers of a pin-sync's commit message (`patchctl.loop.sync` writes them into the commit it suggests).
NEEDED_HAND_TRAILER = "Patchctl-Needed-A-Hand"
DROPPED_TRAILER = "Patchctl-Dropped"


@dataclass
class SyncFate:
    commit: str
    date: str  # committer date, ISO 8601
    fate: str  # one of FATES


@dataclass
class PatchHealth:
    patch: str
    subject: str
    upstream_status: str  # a Yocto value, NO_STATUS or MALFORMED
    upstream_detail: str = ""
    upstream_url: str | None = None
    added: str | None = None  # when its file entered the project (ISO 8601), None outside git history
    age_days: int | None = None  # from then to the project's HEAD commit
    files: list[str] = field(default_factory=list)
    drift: int | None = None  # upstream commits between the pin and the tip that touched FILES
    verdict: str | None = None  # at the tip: ok | mechanical | needs a hand | blocked; None: not tried
    trial: str = ""  # what the 3-way trial said, when strict failed
    taken_upstream: dict | None = None  # {commit, subject, how, url}
    flags: list[str] = field(default_factory=list)  # what needs a maintainer's eye
    syncs: list[SyncFate] = field(default_factory=list)  # the recent pin-syncs, newest first


@dataclass
class SeriesSize:
    commit: str
    date: str
    patches: int


@dataclass
class SeriesHealth:
    name: str
    upstream: str
    pin: str
    tip: str
    rev_spec: str
    commits_since_pin: int | None
    patches: list[PatchHealth] = field(default_factory=list)
    size_history: list[SeriesSize] = field(default_factory=list)  # oldest first
    dropped: list[dict] = field(default_factory=list)  # {patch, commit, date, note}: dropped by recent pin-syncs
    statuses: dict[str, int] = field(default_factory=dict)  # upstream status -> patches
    commits_pin_is_ahead: int | None = None  # pin commits the tip lacks: a --rev before the pin has some


@dataclass
class HealthReport:
    series: list[SeriesHealth] = field(default_factory=list)


@dataclass
class HealthRow:
    """One line of the short table canary and pin-sync reports carry."""

    series: str
    patch: str
    upstream_status: str
    upstream_url: str | None
    drift: int | None
    verdict: str
    note: str = ""


# ---------------------------------------------------------------- per patch, cheap


def status_of(patch: PatchFile) -> tuple[str, str, str | None]:
    """(value, detail, url) of PATCH's `Upstream-Status:`; NO_STATUS or MALFORMED as the value
    when it has none or a malformed one."""
    status = patch.upstream_status
    if status is None:
        return NO_STATUS, "", None
    if not status.ok:
        return MALFORMED, status.problem, None
    return status.value, status.detail, status.url


def drift(repo: Path, pin: str, tip: str, paths: list[str]) -> int | None:
    """How many commits of TIP that PIN lacks touched PATHS (None when git cannot tell)."""
    if not paths:
        return 0
    counted = git.run(["rev-list", "--count", f"{pin}..{tip}", "--", *paths], repo, check=False)
    return int(counted.stdout.strip()) if counted.ok and counted.stdout.strip().isdigit() else None


# A pathspec git reads as more than a literal path or directory prefix: glob characters, magic
# (`:(...)`), or one git normalizes first (`.`, `..`, `//`, a leading `/`).
_PATHSPEC_SPECIAL_RE = re.compile(r"[*?[\\]|^:|^/|//|(?:^|/)\.\.?(?:/|$)|^$")
_LOG_HEADER_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?(?: [0-9a-f]{40}(?:[0-9a-f]{24})?)*")


def drifts(repo: Path, pin: str, tip: str, path_lists: list[list[str]]) -> list[int | None]:
    """`drift` of each entry of PATH_LISTS, from one `git log` of PIN..TIP: on a linear history
    a commit counts for PATHS exactly when it changes one of them (or a file under one), which
    is what `rev-list --count -- PATHS` counts there. With merges or a root commit in the range,
    and for paths git would read as a glob, magic or to normalize, `drift` counts (a process each)."""
    plain = [bool(paths) and not any(_PATHSPEC_SPECIAL_RE.search(path) for path in paths) for paths in path_lists]
    changes = _changed_paths(repo, pin, tip) if any(plain) else None
    # Per commit: the files it changes, and every directory above one of them.
    touched = [(names, {name[:at] for name in names for at in _slashes(name)}) for names in changes or []]
    return [
        sum(1 for files, dirs in touched if any(_names(path, files, dirs) for path in paths))
        if changes is not None and is_plain
        else drift(repo, pin, tip, paths)
        for paths, is_plain in zip(path_lists, plain)
    ]


def _slashes(name: str) -> list[int]:
    return [at for at, char in enumerate(name) if char == "/"]


def _names(path: str, files: set[str], dirs: set[str]) -> bool:
    """Whether pathspec PATH names a changed file or one under it (one ending in "/": only under it)."""
    return path[:-1] in dirs if path.endswith("/") else path in files or path in dirs


def _changed_paths(repo: Path, pin: str, tip: str) -> list[set[str]] | None:
    """The paths each commit of TIP that PIN lacks changes against its one parent; None when
    git cannot tell or a commit has no parent or several (history simplification counts those)."""
    # -z: each record is NUL, "<commit> <parents>", NUL, then its paths, the first after a newline, each NUL-ended.
    out = git.run_fixed(
        ["log", "-z", "--format=%x00%H %P", "--name-only", "--no-renames", f"{pin}..{tip}"], repo, commits=(pin, tip)
    )
    if not out.ok:
        return None
    tokens = out.stdout.split("\0")
    commits: list[set[str]] = []
    index = 0
    while index < len(tokens) - 1:
        if tokens[index] != "" or not _LOG_HEADER_RE.fullmatch(tokens[index + 1]):
            return None
        if len(tokens[index + 1].split(" ")) != 2:
            return None  # a merge or a root commit
        index += 2
        names: set[str] = set()
        while index < len(tokens) and tokens[index] != "":
            names.add(tokens[index].removeprefix("\n") if not names else tokens[index])
            index += 1
        commits.append(names)
    return commits


def accepted_flag(status: str, upstream_holds: bool) -> str | None:
    """A patch marked Accepted that the tip does not hold: its header, or upstream, is wrong."""
    if status == "Accepted" and not upstream_holds:
        return "marked Accepted, but upstream does not hold its change at the tip"
    return None


def health_rows(
    repo: Path, pin: str, tip: str, series: str, patches: list[PatchFile], outcomes: dict[str, dict]
) -> list[HealthRow]:
    """The short table's rows for SERIES: OUTCOMES maps a patch name to its verdict there
    (`verdict`, and `taken_upstream` and `upstream_holds` where known)."""
    rows = []
    counts = drifts(repo, pin, tip, [patch.touched_paths() for patch in patches])
    for patch, count in zip(patches, counts):
        value, _, url = status_of(patch)
        outcome = outcomes.get(patch.name, {})
        taken = outcome.get("taken_upstream")
        notes = []
        if taken:
            notes.append(f"taken upstream in {taken['commit'][:12]}")
        if flag := accepted_flag(value, bool(outcome.get("upstream_holds") or taken)):
            notes.append(flag)
        rows.append(
            HealthRow(
                series,
                patch.name,
                value,
                url,
                count,
                outcome.get("verdict", ""),
                "; ".join(notes),
            )
        )
    return rows


# ---------------------------------------------------------------- the project's own history


class ProjectHistory:
    """What git remembers of the project's series: when each patch file came, the pin-syncs
    that changed the series, and its size over time. Outside a git repository (or for files
    git does not track) every answer is empty."""

    def __init__(self, root: Path):
        found = git.run(["rev-parse", "--show-toplevel"], root, check=False)
        self.top: Path | None = Path(found.stdout.strip()).resolve() if found.ok and found.stdout.strip() else None
        head = git.run(["log", "-1", "--format=%cI"], root, check=False) if self.top else None
        self.head_date = head.stdout.strip() if head is not None and head.ok else ""

    def _relative(self, path: Path) -> str | None:
        if self.top is None:
            return None
        try:
            return path.resolve().relative_to(self.top).as_posix()
        except ValueError:
            return None

    def _git(self, *args: str) -> str:
        assert self.top is not None
        done = git.run(list(args), self.top, check=False)
        return done.stdout if done.ok else ""

    def added(self, path: Path) -> str | None:
        """When PATH entered the project (its oldest addition, following renames)."""
        relative = self._relative(path)
        if relative is None:
            return None
        dates = self._git("log", "--follow", "--diff-filter=A", "--format=%cI", "--", relative).split()
        return dates[-1] if dates else None

    def age_days(self, added: str | None) -> int | None:
        if not added or not self.head_date:
            return None
        return max((datetime.fromisoformat(self.head_date) - datetime.fromisoformat(added)).days, 0)

    def _pin_syncs(self, directory: str, upstream: str) -> list[tuple[str, str, str]]:
        """(commit, date, message) of the project's pin-syncs of UPSTREAM that changed DIRECTORY, newest first."""
        out = self._git("log", "-z", "--format=%H%x00%cI%x00%B", "--", directory)
        fields = out.split("\0")
        syncs = []
        for commit, date, message in zip(fields[0::3], fields[1::3], fields[2::3]):
            match = _SYNC_SUBJECT_RE.match(message)
            if match and match["upstream"] == upstream:
                syncs.append((commit.strip(), date, message))
        return syncs

    def _patches_at(self, commit: str, directory: str) -> dict[str, str]:
        """Patch name -> blob id under DIRECTORY at COMMIT."""
        listed = self._git("ls-tree", "-z", f"{commit}:{directory}")
        found = {}
        for entry in listed.split("\0"):
            meta, _, name = entry.partition("\t")
            if name and meta.split(" ")[1:2] == ["blob"] and name != "series":
                found[name] = meta.split(" ")[2]
        return found

    def sync_fates(self, series: Series, upstream: str) -> tuple[dict[str, list[SyncFate]], list[dict]]:
        """Per patch, how it fared in each pin-sync of UPSTREAM that changed the series (newest
        first): kept (its file unchanged), rewritten (re-exported with changes), needed a hand
        (named by the sync commit's `Patchctl-Needed-A-Hand:` trailer); and the patches those
        syncs dropped."""
        directory = self._relative(series.dir)
        if directory is None:
            return {}, []
        fates: dict[str, list[SyncFate]] = {}
        dropped: list[dict] = []
        for commit, date, message in self._pin_syncs(directory, upstream)[: RECENT_SYNCS * 4]:
            trailers = _trailers(message)
            hands = {value for key, value in trailers if key == NEEDED_HAND_TRAILER}
            notes = {value.split(" ", 1)[0]: value for key, value in trailers if key == DROPPED_TRAILER}
            before = self._patches_at(f"{commit}^", directory)
            after = self._patches_at(commit, directory)
            for name, blob in after.items():
                if name not in before:
                    continue  # new in this commit: it has no past to fare in
                fate = "kept" if before[name] == blob else "rewritten"
                if f"{series.name}/{name}" in hands:
                    fate = "needed a hand"
                fates.setdefault(name, []).append(SyncFate(commit, date, fate))
            for name in sorted(set(before) - set(after)):
                note = notes.get(f"{series.name}/{name}", "")
                dropped.append({"patch": name, "commit": commit, "date": date, "note": note})
        return fates, dropped

    def sizes(self, series: Series) -> list[SeriesSize]:
        """The number of patches in the series directory after each commit that changed it, oldest first."""
        directory = self._relative(series.dir)
        if directory is None:
            return []
        out = self._git("log", f"-n{SIZE_HISTORY}", "--format=%H %cI", "--", directory)
        sizes = []
        for line in out.splitlines():
            commit, _, date = line.partition(" ")
            names = self._patches_at(commit, directory)
            count = sum(1 for name in names if name.endswith((".patch", ".diff")))
            sizes.append(SeriesSize(commit, date, count))
        return list(reversed(sizes))


def _trailers(message: str) -> list[tuple[str, str]]:
    """`Key: value` lines of a commit message (any paragraph: a squash merge may move them)."""
    found = []
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", key):
            found.append((key, value.strip()))
    return found


# ---------------------------------------------------------------- renderings


def rows_of(report: HealthReport) -> list[dict]:
    """The report as the short table's rows (JSON form, as `report.health_markdown` reads them)."""
    rows = []
    for series in report.series:
        for patch in series.patches:
            notes = ([f"taken upstream in {patch.taken_upstream['commit'][:12]}"] if patch.taken_upstream else []) + [
                f for f in patch.flags if not f.startswith("malformed")
            ]
            row = HealthRow(
                series.name,
                patch.patch,
                patch.upstream_status,
                patch.upstream_url,
                patch.drift,
                patch.verdict or "",
                "; ".join(notes),
            )
            rows.append(to_json(row))
    return rows


def text_lines(report: HealthReport) -> list[str]:
    """The report as plain lines: per series a summary, then one line per patch."""
    lines = []
    for series in report.series:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(series.statuses.items())) or "no patches"
        since = "?" if series.commits_since_pin is None else series.commits_since_pin
        lines.append(
            f"{series.name}: {len(series.patches)} patch(es) on {series.upstream} at {series.pin[:12]}, "
            f"tip {series.tip[:12]} ({since} upstream commit(s) since the pin); upstream status: {counts}"
        )
        if series.commits_pin_is_ahead:
            lines.append(
                f"  ! {series.rev_spec} lacks {series.commits_pin_is_ahead} commit(s) of the pin: drift counts "
                "only what it has after the pin (a revision before the pin has none)"
            )
        for patch in series.patches:
            age = "?" if patch.age_days is None else f"{patch.age_days}d"
            drifted = "?" if patch.drift is None else str(patch.drift)
            fates = ",".join(f.fate for f in patch.syncs) or "-"
            status = patch.upstream_status + (f" [{patch.upstream_detail}]" if patch.upstream_detail else "")
            line = (
                f"  {patch.patch}: {status}; age {age}; drift {drifted}; "
                f"at the tip: {patch.verdict or 'not tried'}; recent pin-syncs: {fates}"
            )
            if patch.taken_upstream:
                line += f"; taken upstream in {patch.taken_upstream['commit'][:12]}"
            lines.append(line)
            lines += [f"    ! {flag}" for flag in patch.flags]
        for gone in series.dropped:
            lines.append(
                f"  dropped {gone['date'][:10]} ({gone['commit'][:12]}): {gone['patch']} {gone['note']}".rstrip()
            )
    return lines
