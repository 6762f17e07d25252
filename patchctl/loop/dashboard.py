"""`patchctl dashboard`: the whole picture in one issue per repository, as Renovate's Dependency
Dashboard is for dependencies.

What it says, built here from two sources:

* `patchctl status`'s report in its JSON form (run here, or read from the file another job wrote
  with `status --json`: a read-only job judges, the job that writes the issue only renders): every
  series with its upstream, pin, tip and the verdicts at the tip; each patch's upstream status,
  age, drift, verdict and flags (a Submitted pull request merged or closed among them);
* GitHub, through gh (`patchctl.loop.dashboard_issue`), only when asked: the open pin-sync pull
  requests (branch `patchctl/pin-sync/UPSTREAM` of this repository) with their state, and the
  open issues patchctl's workflows filed (the canary's breaks, pin-sync's stops), each found by
  its label and its bot author, as the workflows find them.

The patches to look at are those with something to do or to watch, most urgent first: one that
needs a hand at the tip or is blocked by one that does; one that fails strictly but merges
(a pin-sync is mechanical), one upstream took, one flagged (`status`'s flags: a merged or closed
Submitted pull request, an Accepted patch the tip lacks, a patch that needed a hand in several
pin-syncs); then the ones with the highest drift of their series, and the ones carried a year or
more that were never sent upstream (Pending; or without a header, in a series whose other patches
have one: Electron's have none, and a series that marks none says nothing by it). Each names its
canary issue when one is open.

This module never prints and never talks to GitHub itself: `patchctl.output.dashboard` renders
the body from the JSON form of `Dashboard`, and `patchctl.loop.dashboard_issue` asks gh and keeps
the issue.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..output.escape import marker_token
from ..output.jsonout import json_field, to_json
from ..records import dataclass
from . import dashboard_issue
from .dashboard_issue import DEFAULT_AUTHOR, IssueLine, IssueOutcome, PullLine

if TYPE_CHECKING:
    from ..project.config import Config
    from ..upstream.store import Store

Progress = Callable[[str], None]

# status' words for a patch at the tip (docs/reference/index.md#stops): where a pin-sync would stop
STOPS = ("conflict", "needs a hand", "needs a look")
BLOCKED = "blocked"
MECHANICAL = "mechanical"
CAUSE_COMMITS_SHOWN = 3  # the upstream commits behind a stop, named per patch (the rest counted)
DRIFT_SHOWN = 5  # per series, the patches with the highest drift (above 0) that are listed for it alone
LONG_CARRIED_DAYS = 365  # a patch never sent upstream, carried this long, is listed
NO_STATUS = "none"  # no Upstream-Status: header (status's word)
STATUS_FILE_LIMIT = 64 * 1024 * 1024
# Priorities in the list of patches to look at (higher first).
PRIORITY = {"stop": 5, "blocked": 4, "mechanical": 3, "flagged": 2, "watch": 1}


@dataclass
class SeriesLine:
    name: str
    upstream: str
    pin: str
    tip: str
    rev_spec: str
    commits_since_pin: int | None
    patches: int
    verdicts: dict[str, int] = field(default_factory=dict)  # verdict at the tip -> patches
    statuses: dict[str, int] = field(default_factory=dict)  # upstream status -> patches
    left: int = 0  # patches that left the series in its history
    went_upstream: int = 0  # of those, the ones that went upstream


@dataclass
class CauseCommit:
    """An upstream commit behind a stop, as status' stop_cause names it."""

    sha: str
    subject: str
    date: str = ""
    url: str | None = json_field(omit_empty=True, default=None)


@dataclass
class PatchLine:
    series: str
    patch: str
    upstream_status: str
    upstream_url: str | None = None
    age_days: int | None = None
    drift: int | None = None
    verdict: str | None = None  # None: not tried
    blocked_by: str | None = json_field(omit_empty=True, default=None)
    trial: str = json_field(omit_empty=True, default="")  # the 3-way trial's words when strict failed
    # A stop's cause (status' stop_cause): the upstream commits that changed the lines it touches,
    # oldest first, and whether upstream may hold its own version of the patch.
    cause: list[CauseCommit] = json_field(omit_empty=True, default_factory=list)
    more_causes: int = json_field(omit_empty=True, default=0)  # commits named beyond `cause`
    upstream_version: bool = json_field(omit_empty=True, default=False)
    taken_upstream: str | None = json_field(omit_empty=True, default=None)  # the upstream commit that holds it
    flags: list[str] = field(default_factory=list)
    submitted: str | None = json_field(omit_empty=True, default=None)  # its pull request: open, merged, closed
    # Why it is worth a look (a stop's word: "conflict", "needs a hand", "needs a look"; "blocked",
    # "mechanical", "taken upstream", "flagged", "drift", "long carried"); empty: nothing to look at.
    reasons: list[str] = field(default_factory=list)
    priority: int = 0  # PRIORITY's value of its most urgent reason; 0 without one
    issue: int | None = json_field(omit_empty=True, default=None)  # the open canary issue about it


@dataclass
class RunLine:
    """The workflow run that updated the dashboard (GitHub Actions' own variables)."""

    workflow: str
    url: str


@dataclass
class Dashboard:
    series: list[SeriesLine] = field(default_factory=list)
    patches: list[PatchLine] = field(default_factory=list)
    github: bool = False  # whether GitHub was asked (pulls and issues mean something)
    pulls: list[PullLine] = field(default_factory=list)
    issues: list[IssueLine] = field(default_factory=list)
    run: RunLine | None = json_field(omit_empty=True, default=None)
    issue: IssueOutcome | None = json_field(omit_empty=True, default=None)  # after --update


def dashboard(
    config: Config | None,
    store: Store | None,
    *,
    status: dict[str, Any] | None = None,
    github: bool = False,
    author: str = DEFAULT_AUTHOR,
    run: RunLine | None = None,
    progress: Progress | None = None,
) -> Dashboard:
    """The dashboard: of STATUS (a checked `patchctl status --json` report), or else of every
    series of CONFIG judged here as `patchctl status` judges them; with GITHUB, what GitHub says
    of the open pin-sync pull requests and the issues AUTHOR filed (and, judged here, of the
    Submitted patches' pull requests)."""
    if status is None:
        from .status import status as judge  # the trial and the history: only when judged here

        if config is None or store is None:
            raise UsageError("the dashboard needs matrix.yaml's series, or a status report (--status FILE)")
        status = to_json(judge(config, store, check_submitted=github, progress=progress))
    if not github:
        return build(status, run=run)
    gh = dashboard_issue.GitHub()
    pulls, issues = dashboard_issue.pin_sync_pulls(gh), dashboard_issue.filed_issues(gh, author)
    return build(status, pulls=pulls, issues=issues, run=run)


# ---------------------------------------------------------------- from status's report


def build(
    status: dict[str, Any],
    *,
    pulls: list[PullLine] | None = None,
    issues: list[IssueLine] | None = None,
    run: RunLine | None = None,
) -> Dashboard:
    """The dashboard of STATUS (`patchctl status --json`'s form, checked by `check_status`), with
    GitHub's PULLS and ISSUES when GitHub was asked (None: not asked)."""
    asked = pulls is not None or issues is not None
    board = Dashboard(github=asked, pulls=list(pulls or []), issues=list(issues or []), run=run)
    issue_keys = {issue.key: issue.number for issue in board.issues if issue.kind == "canary" and issue.key}
    for series in status["series"]:
        departures = series.get("departures") or []
        board.series.append(
            SeriesLine(
                series["name"],
                series["upstream"],
                series["pin"],
                series["tip"],
                series["rev_spec"],
                series["commits_since_pin"],
                len(series["patches"]),
                dict(series["verdicts"]),
                dict(series["statuses"]),
                len(departures),
                sum(1 for gone in departures if gone.get("went_upstream")),
            )
        )
        # A series that marks its patches: one without a header was never sent either.
        marked = any(patch["upstream_status"] != NO_STATUS for patch in series["patches"])
        lines = [_patch_line(series["name"], patch, marked) for patch in series["patches"]]
        _watch_drift(lines)
        for line in lines:
            line.issue = _canary_issue(issue_keys, series["upstream"], series["name"], line.patch)
        board.patches += lines
    return board


def _patch_line(series: str, patch: dict[str, Any], marked: bool) -> PatchLine:
    taken = patch.get("taken_upstream")
    submitted = patch.get("submitted")
    line = PatchLine(
        series,
        patch["patch"],
        patch["upstream_status"],
        patch.get("upstream_url"),
        patch.get("age_days"),
        patch.get("drift"),
        patch.get("verdict"),
        blocked_by=patch.get("blocked_by"),
        trial=patch.get("trial") or "",
        taken_upstream=taken["commit"] if taken else None,
        flags=list(patch.get("flags") or []),
        submitted=submitted["state"] if submitted else None,
    )
    if line.verdict in STOPS:
        _reason(line, line.verdict, "stop")
        _cause(line, patch.get("stop_cause"))
    elif line.verdict == BLOCKED:
        _reason(line, "blocked", "blocked")
    elif line.taken_upstream:  # the tip holds it: pin-sync drops it (a mechanical verdict says no more)
        _reason(line, "taken upstream", "mechanical")
    elif line.verdict == MECHANICAL:
        _reason(line, "mechanical", "mechanical")
    if line.flags:
        _reason(line, "flagged", "flagged")
    never_sent = line.upstream_status == "Pending" or (marked and line.upstream_status == NO_STATUS)
    if never_sent and (line.age_days or 0) >= LONG_CARRIED_DAYS:
        _reason(line, "long carried", "watch")
    return line


def _cause(line: PatchLine, cause: dict[str, Any] | None) -> None:
    """LINE's stop cause from status' STOP_CAUSE: every upstream commit its hunks name, once, in
    the order they name them (CAUSE_COMMITS_SHOWN of them, the rest counted)."""
    if not cause:
        return
    seen: dict[str, CauseCommit] = {}
    extra = 0
    for hunk in cause["hunks"]:
        extra += hunk.get("more_commits") or 0
        for commit in hunk["commits"]:
            seen.setdefault(
                commit["sha"], CauseCommit(commit["sha"], commit["subject"], commit["date"], commit.get("url"))
            )
    commits = list(seen.values())
    line.cause, line.more_causes = commits[:CAUSE_COMMITS_SHOWN], len(commits[CAUSE_COMMITS_SHOWN:]) + extra
    line.upstream_version = cause.get("upstream_version") is True


def _reason(line: PatchLine, reason: str, priority: str) -> None:
    line.reasons.append(reason)
    line.priority = max(line.priority, PRIORITY[priority])


def _watch_drift(lines: list[PatchLine]) -> None:
    """The DRIFT_SHOWN patches of a series with the highest drift (above 0) are worth a look: the
    next bump is likeliest to stop at them."""
    ranked = sorted((line for line in lines if (line.drift or 0) > 0), key=lambda line: -(line.drift or 0))
    for line in ranked[:DRIFT_SHOWN]:
        _reason(line, "drift", "watch")


def _canary_issue(keys: dict[str, int], upstream: str, series: str, patch: str) -> int | None:
    """The open canary issue about PATCH: its key is UPSTREAM/apply/SERIES/PATCH/FIRST-BAD-COMMIT
    (`patchctl.loop.canary`), each word a marker token."""
    prefix = "/".join(marker_token(word) for word in (upstream, "apply", series, patch)) + "/"
    found = [number for key, number in keys.items() if key.startswith(prefix)]
    return min(found) if found else None


# ---------------------------------------------------------------- a status report from a file


def read_status(path: Path | None, stdin: Callable[[], bytes] | None = None) -> dict[str, Any]:
    """The report in PATH (`patchctl status --json`'s output; None or '-': STDIN's), checked."""
    from ..confined.regular import NotRegular, TooLarge, read_regular

    name = "-" if path is None or str(path) == "-" else str(path)
    try:
        data = stdin() if name == "-" and stdin is not None else read_regular(Path(name), STATUS_FILE_LIMIT)
    except (NotRegular, TooLarge) as exc:
        raise UsageError(f"--status {exc}") from None
    except OSError as exc:
        raise UsageError(f"--status {name}: {exc.strerror or exc}") from None
    if data is None:
        raise UsageError(f"--status {name}: no such file (write it with `patchctl status --json > {name}`)")
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--status {name}: not JSON ({exc})") from None
    return check_status(payload, name)


def check_status(payload: Any, source: str) -> dict[str, Any]:
    """PAYLOAD when it has the shape of `patchctl status --json` in every field the dashboard
    reads; else UsageError naming the first field that does not (a file handed over by another
    job is read as untrusted: nothing in it is trusted to be what it claims)."""
    where = f"--status {source}"
    _expect(payload, dict, where, "the report")
    series_list = _expect(payload.get("series"), list, where, "series")
    if not series_list:
        raise UsageError(f"{where}: the report has no series: the dashboard would say nothing")
    for i, series in enumerate(series_list):
        at = f"series[{i}]"
        _expect(series, dict, where, at)
        for key in ("name", "upstream", "pin", "tip", "rev_spec"):
            _expect(series.get(key), str, where, f"{at}.{key}")
        _expect(series.get("commits_since_pin"), (int, type(None)), where, f"{at}.commits_since_pin")
        for key in ("verdicts", "statuses"):
            counts = _expect(series.get(key), dict, where, f"{at}.{key}")
            for name, count in counts.items():
                _expect(count, int, where, f"{at}.{key}[{name!r}]")
        for j, gone in enumerate(_expect(series.get("departures", []), list, where, f"{at}.departures")):
            _expect(gone, dict, where, f"{at}.departures[{j}]")
        for j, patch in enumerate(_expect(series.get("patches"), list, where, f"{at}.patches")):
            _check_patch(patch, where, f"{at}.patches[{j}]")
    return payload


def _check_patch(patch: Any, where: str, at: str) -> None:
    _expect(patch, dict, where, at)
    for key in ("patch", "upstream_status"):
        _expect(patch.get(key), str, where, f"{at}.{key}")
    for key in ("upstream_url", "verdict", "blocked_by"):
        _expect(patch.get(key), (str, type(None)), where, f"{at}.{key}")
    _expect(patch.get("trial", ""), str, where, f"{at}.trial")
    for key in ("age_days", "drift"):
        _expect(patch.get(key), (int, type(None)), where, f"{at}.{key}")
    for k, flag in enumerate(_expect(patch.get("flags", []), list, where, f"{at}.flags")):
        _expect(flag, str, where, f"{at}.flags[{k}]")
    for key, inner in (("taken_upstream", "commit"), ("submitted", "state")):
        value = _expect(patch.get(key), (dict, type(None)), where, f"{at}.{key}")
        if value is not None:
            _expect(value.get(inner), str, where, f"{at}.{key}.{inner}")
    cause = _expect(patch.get("stop_cause"), (dict, type(None)), where, f"{at}.stop_cause")
    if cause is not None:
        _expect(cause.get("upstream_version", False), bool, where, f"{at}.stop_cause.upstream_version")
        for h, hunk in enumerate(_expect(cause.get("hunks"), list, where, f"{at}.stop_cause.hunks")):
            there = f"{at}.stop_cause.hunks[{h}]"
            _expect(hunk, dict, where, there)
            _expect(hunk.get("more_commits", 0), int, where, f"{there}.more_commits")
            for c, commit in enumerate(_expect(hunk.get("commits"), list, where, f"{there}.commits")):
                _expect(commit, dict, where, f"{there}.commits[{c}]")
                for key in ("sha", "subject", "date"):
                    _expect(commit.get(key), str, where, f"{there}.commits[{c}].{key}")
                _expect(commit.get("url"), (str, type(None)), where, f"{there}.commits[{c}].url")


_KINDS = {
    bool: "true or false",
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a whole number",
    type(None): "null",
}


def _expect(value: Any, kinds: type | tuple[type, ...], where: str, what: str) -> Any:
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    # JSON's true and false are no counts (bool is an int to Python)
    if (isinstance(value, bool) and bool not in wanted) or not isinstance(value, wanted):
        said = " or ".join(_KINDS[kind] for kind in wanted)
        raise UsageError(f"{where}: {what} is not {said}: not a report of `patchctl status --json`")
    return value
