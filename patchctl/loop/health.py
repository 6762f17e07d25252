"""`patchctl status`: the health of each series at its pin and at the upstream tip.

For each patch: its upstream status (Yocto's `Upstream-Status:` header, `patchset`), its age
(from the commit that brought its file into the series), the files it touches, its drift (how
many upstream commits between the pin and the tip touched those files, all patches from one
`git log PIN..TIP` of the cache's mirror), its verdict at the tip (the canary's trial: strict,
else 3-way, with "taken upstream" detection from `patchctl.loop.carry`), how it fared in the
pin-syncs of the project's history (kept, rewritten, the stop it was; `series_history` reads
the whole history of the series directory in one pass), and, for a Submitted patch whose pull
request was asked about (`submitted`), what became of it. For the series: its size over time
by upstream status, and the patches that left it.

Ages are counted to the project's HEAD commit, not to the clock, so that the report is a
function of the repositories alone. This module never prints: the command renders the report
(text, `--json`, `--html` with `patchctl.loop.health_page`), and canary and pin-sync put the short
Markdown table (`report.health_markdown`) in their reports from `health_rows`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import git
from ..output.jsonout import json_field, to_json
from ..patterns import lazy
from ..records import dataclass
from ..series.patchset import PatchFile

if TYPE_CHECKING:
    from .stopcause import StopCause

Progress = Callable[[str], None]
NO_STATUS = "none"
MALFORMED = "malformed"
RECENT_SYNCS = 5  # pin-syncs per patch in the report
FATES = ("kept", "rewritten", "conflict", "needed a hand", "needed a look", "dropped")
# Trailers of a pin-sync's commit message (`patchctl.loop.sync` writes them into the commit it suggests):
# one per patch the sync stopped at, named by the stop (docs/reference/index.md#stops), and the fate
# `patchctl status` reads back from it; and one per patch the sync dropped.
STOP_TRAILERS = {
    "Patchctl-Conflict": "conflict",
    "Patchctl-Needed-A-Hand": "needed a hand",
    "Patchctl-Needed-A-Look": "needed a look",
}
CONFLICT_TRAILER, NEEDED_HAND_TRAILER, NEEDED_LOOK_TRAILER = STOP_TRAILERS
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
    verdict: str | None = None  # at the tip: ok | mechanical | conflict | needs a hand | needs a look | blocked
    trial: str = ""  # what the 3-way trial said, when strict failed
    taken_upstream: dict | None = None  # {commit, subject, how, url}
    flags: list[str] = field(default_factory=list)  # what needs a maintainer's eye
    syncs: list[SyncFate] = field(default_factory=list)  # the recent pin-syncs, newest first
    pin_syncs: int = 0  # the pin-syncs of the project's history it went through
    pin_syncs_stopped: int = 0  # of those, the ones that stopped at it (a conflict, needed a hand or a look)
    blocked_by: str | None = json_field(omit_empty=True, default=None)  # at the tip: the earlier patch it waits for
    # {url, state, note}: what became of its pull request (`status --check-submitted`, the canary in CI)
    submitted: dict | None = json_field(omit_empty=True, default=None)
    # at the tip, for a patch that needs a hand: the upstream commits behind each hunk that fails
    stop_cause: StopCause | None = json_field(omit_empty=True, default=None)


@dataclass
class SeriesSize:
    commit: str
    date: str
    patches: int
    statuses: dict[str, int] = field(default_factory=dict)  # upstream status -> patches, then


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
    dropped: list[dict] = field(default_factory=list)  # {patch, commit, date, note}: dropped by pin-syncs
    statuses: dict[str, int] = field(default_factory=dict)  # upstream status -> patches
    commits_pin_is_ahead: int | None = None  # pin commits the tip lacks: a --rev before the pin has some
    verdicts: dict[str, int] = field(default_factory=dict)  # verdict at the tip -> patches (none without a trial)
    # {patch, commit, date, upstream_status, went_upstream, note}: patches that left the series, oldest first
    departures: list[dict] = field(default_factory=list)
    moved_from: list[dict] = field(default_factory=list)  # {dir, commit, date, patches}: where the series was


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
    if git.paths_fit_argv(paths):
        counted = git.run(["rev-list", "--count", f"{pin}..{tip}", "--", *paths], repo, check=False)
    else:  # long paths go on stdin, never the command line
        stdin = git.stdin_revisions_and_paths([f"{pin}..{tip}"], paths)
        counted = git.run(["rev-list", "--count", "--stdin"], repo, check=False, input=stdin)
    return int(counted.stdout.strip()) if counted.ok and counted.stdout.strip().isdigit() else None


# A pathspec git reads as more than a literal path or directory prefix: glob characters, magic
# (`:(...)`), or one git normalizes first (`.`, `..`, `//`, a leading `/`).
_PATHSPEC_SPECIAL_RE = lazy(r"[*?[\\]|^:|^/|//|(?:^|/)\.\.?(?:/|$)|^$")
_LOG_HEADER_RE = lazy(r"[0-9a-f]{40}(?:[0-9a-f]{24})?(?: [0-9a-f]{40}(?:[0-9a-f]{24})?)*")


def drifts(repo: Path, pin: str, tip: str, path_lists: list[list[str]]) -> list[int | None]:
    """`drift` of each entry of PATH_LISTS, from one `git log` of PIN..TIP read once into the
    commits that changed each file and each directory: on a linear history a commit counts for
    PATHS exactly when it changes one of them (or a file under one), which is what `rev-list
    --count -- PATHS` counts there. With merges or a root commit in the range, and for paths git
    would read as a glob, magic or to normalize, `drift` counts (a process each)."""
    plain = [bool(paths) and not any(_PATHSPEC_SPECIAL_RE.search(path) for path in paths) for paths in path_lists]
    changes = _changed_paths(repo, pin, tip) if any(plain) else None
    # A changed file, and every directory above one (with its "/"), -> the commits that changed it.
    by_path: dict[str, set[int]] = {}
    for number, names in enumerate(changes or []):
        for name in names:
            by_path.setdefault(name, set()).add(number)
            for at in _slashes(name):
                by_path.setdefault(name[: at + 1], set()).add(number)
    return [
        _count(by_path, paths) if changes is not None and is_plain else drift(repo, pin, tip, paths)
        for paths, is_plain in zip(path_lists, plain)
    ]


def _slashes(name: str) -> list[int]:
    return [at for at, char in enumerate(name) if char == "/"]


def _count(by_path: dict[str, set[int]], paths: list[str]) -> int:
    """The commits that changed a file PATHS name or one under them (a path ending in "/": only under it)."""
    commits: set[int] = set()
    for path in paths:
        commits |= by_path.get(path, set())
        if not path.endswith("/"):
            commits |= by_path.get(path + "/", set())
    return len(commits)


def ask_drift(repo: Path, pin: str, tip: str) -> None:
    """Ask git now what the drift of every patch between PIN and TIP is read from (one log of the
    range, kept for this process): a command that reports health later asks it early, on another
    thread, while it does other work."""
    _changed_paths(repo, pin, tip)


def drift_log(pin: str, tip: str) -> list[str]:
    """The one `git log` of PIN..TIP the drifts are read from (`_changed_paths`)."""
    return ["log", "-z", "--format=%x00%H %P", "--name-only", "--no-renames", f"{pin}..{tip}"]


def _changed_paths(repo: Path, pin: str, tip: str) -> list[set[str]] | None:
    """The paths each commit of TIP that PIN lacks changes against its one parent; None when
    git cannot tell or a commit has no parent or several (history simplification counts those)."""
    # -z: each record is NUL, "<commit> <parents>", NUL, then its paths, the first after a newline, each NUL-ended.
    out = git.run_fixed(drift_log(pin, tip), repo, commits=(pin, tip))
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
    (`verdict`, and `taken_upstream`, `upstream_holds` and `submitted`, a note, where known)."""
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
        if outcome.get("submitted"):  # what became of its pull request (`patchctl.loop.submitted`)
            notes.append(outcome["submitted"])
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


def trailers(message: str) -> list[tuple[str, str]]:
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


TEXT_DROPPED = 10  # pin-sync drops the text form lists (the newest)


def text_lines(report: HealthReport) -> list[str]:
    """The report as plain lines: per series a summary, then one line per patch."""
    lines = []
    for series in report.series:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(series.statuses.items())) or "no patches"
        since = "?" if series.commits_since_pin is None else series.commits_since_pin
        verdicts = ", ".join(f"{n} {v}" for v, n in series.verdicts.items()) or "not tried"
        lines.append(
            f"{series.name}: {len(series.patches)} patch(es) on {series.upstream} at {series.pin[:12]}, "
            f"tip {series.tip[:12]} ({since} upstream commit(s) since the pin); at the tip: {verdicts}; "
            f"upstream status: {counts}"
        )
        if series.departures:
            went = sum(1 for d in series.departures if d["went_upstream"])
            first = series.size_history[0].date[:10] if series.size_history else "?"
            lines.append(
                f"  history since {first}: {len(series.departures)} patch(es) left the series, {went} of them upstream"
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
            verdict = patch.verdict or "not tried"
            if patch.blocked_by:
                verdict += f" by {patch.blocked_by}"
            line = f"  {patch.patch}: {status}; age {age}; drift {drifted}; at the tip: {verdict}"
            line += f"; recent pin-syncs: {fates}"
            if patch.pin_syncs:
                line += f" (stopped {patch.pin_syncs_stopped} of {patch.pin_syncs} in all)"
            if patch.taken_upstream:
                line += f"; taken upstream in {patch.taken_upstream['commit'][:12]}"
            lines.append(line)
            lines += [f"    ! {flag}" for flag in patch.flags]
            lines += [f"    why: {line}" for line in cause_lines(patch.stop_cause)]
        for gone in series.dropped[:TEXT_DROPPED]:
            lines.append(
                f"  dropped {gone['date'][:10]} ({gone['commit'][:12]}): {gone['patch']} {gone['note']}".rstrip()
            )
        if len(series.dropped) > TEXT_DROPPED:
            lines.append(f"  and {len(series.dropped) - TEXT_DROPPED} earlier drop(s) (--json lists them)")
    return lines


def cause_lines(cause: StopCause | None) -> list[str]:
    """CAUSE (`patchctl.loop.stopcause`) as plain lines: per failed hunk, the commits upstream."""
    if cause is None:
        return []
    lines = []
    for hunk in cause.hunks:
        named = ", ".join(f'{c.sha[:12]} "{c.subject}" ({c.date})' for c in hunk.commits)
        more = f" and {hunk.more_commits} more" if hunk.more_commits else ""
        carried = "; by the series as carried: " + ", ".join(f'"{subject}"' for subject in hunk.series)
        lines.append(
            f"{hunk.where}: "
            + (f"changed upstream by {named}{more}" if named else hunk.note)
            + (carried if hunk.series else "")
        )
    if cause.upstream_version:
        lines.append(f"upstream may have its own version: {cause.advice}")
    return lines
