"""The dashboard's GitHub side, through gh (the GitHub CLI, with the token it finds: GH_TOKEN in a
workflow, and the repository GH_REPO or the checkout's remote names):

* the open pin-sync pull requests: branch `patchctl/pin-sync/UPSTREAM` of this repository (a pull
  request from a fork never counts, whatever its branch is called), with GitHub's word on each:
  draft, mergeable, review, checks;
* the open issues patchctl's workflows filed: the canary's (label `patchctl-canary`, each with its
  break key from the marker the canary writes) and pin-sync's stops (label `patchctl-pin-sync`);
* the dashboard issue itself (label `patchctl-dashboard`), kept by `upkeep`.

Every issue is found by its label and its author only, as the canary's workflow finds its own:
never by title or text, which anyone can copy into an issue of their own. The author is the bot
whose token the workflows use (`app/github-actions`, GITHUB_TOKEN's); gh is asked with `--author`
and every answer is checked again here.

One dashboard, edited in place: the oldest issue with the label and the author, open or closed,
is the dashboard; a maintainer who closes it keeps it closed (it is still edited); taking the
label off starts a new one at the next run. Two runs that find none at the same time (the
workflows queue their dashboard jobs in one concurrency group; `--update` by hand does not) both
open one; each looks again after opening, and every run closes any open dashboard newer than the
oldest as its duplicate, so the race ends with one. GitHub's issue search may take a few seconds
to show a new issue: then the next run closes the duplicate.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import field
from typing import Any

from ..confined import scratch as scratch_dirs
from ..confined.root import Root
from ..errors import EnvironmentFailure
from ..git import first_line
from ..records import dataclass

LABEL = "patchctl-dashboard"
LABEL_COLOR = "0e8a16"
TITLE = "patchctl dashboard"
DEFAULT_AUTHOR = "app/github-actions"  # GITHUB_TOKEN's bot, as gh names it
PIN_SYNC_BRANCH = "patchctl/pin-sync/"
FILED_LABELS = {"patchctl-canary": "canary", "patchctl-pin-sync": "pin-sync"}  # label -> kind
CANARY_MARKER = re.compile(r"<!-- patchctl-canary-key: (\S+) -->")
GH_TIMEOUT_S = 120
LIST_LIMIT = 1000
PULL_FIELDS = "number,title,headRefName,isDraft,mergeable,reviewDecision,isCrossRepository"
CHECKS_FIELD = "statusCheckRollup"  # needs a token that may read commit statuses and checks
UNREADABLE = "Resource not accessible by integration"  # GitHub's words for a field the token may not read
_ISSUE_URL = re.compile(r"/issues/([1-9][0-9]{0,9})\s*$")
# GitHub's states of a check run's conclusion that count as passed (a skipped job is no failure)
_PASSED = ("SUCCESS", "NEUTRAL", "SKIPPED")


@dataclass
class PullLine:
    """An open pin-sync pull request and its state."""

    number: int
    title: str
    branch: str
    draft: bool = False
    mergeable: str = ""  # GitHub's: MERGEABLE, CONFLICTING, UNKNOWN (empty: not said)
    review: str = ""  # GitHub's reviewDecision: APPROVED, CHANGES_REQUESTED, REVIEW_REQUIRED, or empty
    # passed / failing / pending -> how many; None: the token may not read them (statuses, checks: read)
    checks: dict[str, int] | None = field(default_factory=dict)


@dataclass
class IssueLine:
    """An open issue one of patchctl's workflows filed."""

    number: int
    title: str
    kind: str  # canary | pin-sync
    key: str = ""  # the canary's break key (from its marker); empty for another kind


@dataclass
class IssueOutcome:
    """What `upkeep` did to the dashboard issue."""

    number: int
    url: str
    action: str  # created | updated | unchanged
    state: str  # OPEN, or CLOSED: a maintainer closed it; it is edited and stays closed
    duplicates_closed: list[int] = field(default_factory=list)


class GitHub:
    """gh, run with the environment's token and repository; a failure is one line, exit 3."""

    def __init__(self) -> None:
        found = shutil.which("gh")
        if found is None:
            raise EnvironmentFailure(
                "the dashboard asks GitHub with the GitHub CLI, which is not installed: "
                "install gh (https://cli.github.com) or leave --github and --update out"
            )
        self.gh = found

    def run(self, *args: str, body: str | None = None) -> str:
        """gh ARGS (BODY, when given, as --body-file in a private scratch directory); its stdout."""
        with scratch_dirs.directory("patchctl-gh-") as scratch:
            words = list(args)
            if body is not None:
                Root(scratch, "the scratch directory").write_scratch("body.md", body.encode("utf-8"))
                words += ["--body-file", str(scratch / "body.md")]
            try:
                done = subprocess.run(
                    [self.gh, *words],
                    capture_output=True,
                    text=True,
                    timeout=GH_TIMEOUT_S,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired:
                raise EnvironmentFailure(f"gh {' '.join(args[:2])}: no answer in {GH_TIMEOUT_S} s") from None
            except OSError as exc:
                raise EnvironmentFailure(f"gh could not run: {exc.strerror or exc}") from None
        if done.returncode != 0:
            said = first_line(done.stderr) or f"exit {done.returncode}"
            raise EnvironmentFailure(f"gh {' '.join(args[:2])} failed: {said}")
        return done.stdout

    def rows(self, *args: str) -> list[dict[str, Any]]:
        """gh ARGS (a list with --json): its rows, each checked to be an object with a number."""
        text = self.run(*args)
        try:
            rows = json.loads(text)
        except ValueError:
            rows = None
        if not isinstance(rows, list) or not all(isinstance(row, dict) and _whole(row.get("number")) for row in rows):
            raise EnvironmentFailure(f"gh {' '.join(args[:2])}: its answer is not the JSON list asked for")
        return rows


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def login_of(author: str) -> str:
    """AUTHOR as gh writes an issue's author: a bot's `NAME[bot]` is `app/NAME`."""
    return "app/" + author.removesuffix("[bot]") if author.endswith("[bot]") else author


def _authored(row: dict[str, Any], author: str) -> bool:
    if author == "@me":  # gh resolves it; only gh knows who "me" is
        return True
    who = row.get("author")
    return isinstance(who, dict) and who.get("login") == login_of(author)


def _labelled(row: dict[str, Any], label: str) -> bool:
    labels = row.get("labels")
    return isinstance(labels, list) and any(isinstance(x, dict) and x.get("name") == label for x in labels)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def issues_by(gh: GitHub, label: str, author: str, *, state: str, fields: str) -> list[dict[str, Any]]:
    """The issues with LABEL that AUTHOR opened, in STATE (open, closed, all), oldest first."""
    rows = gh.rows(
        "issue", "list", "--state", state, "--label", label, "--author", author,
        "--limit", str(LIST_LIMIT), "--json", f"{fields},author,labels",
    )  # fmt: skip
    return sorted((row for row in rows if _authored(row, author) and _labelled(row, label)), key=lambda r: r["number"])


# ---------------------------------------------------------------- what the workflows left open


def pin_sync_pulls(gh: GitHub) -> list[PullLine]:
    """The open pull requests of this repository's pin-sync branches, oldest first; their checks
    too, where the token may read them (GitHub refuses the whole list otherwise: then without)."""
    asked = ("pr", "list", "--state", "open", "--limit", str(LIST_LIMIT), "--json")
    try:
        rows, readable = gh.rows(*asked, f"{PULL_FIELDS},{CHECKS_FIELD}"), True
    except EnvironmentFailure as exc:
        if UNREADABLE not in str(exc):
            raise
        rows, readable = gh.rows(*asked, PULL_FIELDS), False
    pulls = []
    for row in sorted(rows, key=lambda r: r["number"]):
        branch = _text(row.get("headRefName"))
        if not branch.startswith(PIN_SYNC_BRANCH) or row.get("isCrossRepository") is True:
            continue  # a fork's branch may bear the name; only this repository's is pin-sync's
        pulls.append(
            PullLine(
                row["number"],
                _text(row.get("title")),
                branch,
                row.get("isDraft") is True,
                _text(row.get("mergeable")),
                _text(row.get("reviewDecision")),
                _checks(row.get(CHECKS_FIELD)) if readable else None,
            )
        )
    return pulls


def _checks(rollup: Any) -> dict[str, int]:
    """GitHub's status check rollup counted: passed, failing, pending (check runs and commit statuses)."""
    counts = {"passed": 0, "failing": 0, "pending": 0}
    for check in rollup if isinstance(rollup, list) else []:
        if not isinstance(check, dict):
            continue
        state, status, conclusion = (_text(check.get(key)).upper() for key in ("state", "status", "conclusion"))
        if state:  # a commit status: SUCCESS, PENDING, EXPECTED, FAILURE, ERROR
            kind = "passed" if state == "SUCCESS" else "pending" if state in ("PENDING", "EXPECTED") else "failing"
        elif status and status != "COMPLETED":
            kind = "pending"
        else:
            kind = "passed" if conclusion in _PASSED else "failing"
        counts[kind] += 1
    return {kind: count for kind, count in counts.items() if count}


def filed_issues(gh: GitHub, author: str) -> list[IssueLine]:
    """The open issues patchctl's workflows filed (FILED_LABELS, by AUTHOR), oldest first."""
    found = []
    for label, kind in FILED_LABELS.items():
        for row in issues_by(gh, label, author, state="open", fields="number,title,body"):
            first = _text(row.get("body")).split("\n", 1)[0]
            marker = CANARY_MARKER.fullmatch(first.strip()) if kind == "canary" else None
            found.append(IssueLine(row["number"], _text(row.get("title")), kind, marker.group(1) if marker else ""))
    return sorted(found, key=lambda issue: issue.number)


# ---------------------------------------------------------------- the dashboard issue


def upkeep(gh: GitHub, body: str, *, author: str = DEFAULT_AUTHOR) -> IssueOutcome:
    """Make the dashboard issue say BODY: the oldest one (label and AUTHOR, any state) edited in
    place when its body differs, one opened when there is none; any other open one closed as its
    duplicate."""
    found = _dashboards(gh, author)
    created = None
    if not found:
        gh.run("label", "create", LABEL, "--force", "--color", LABEL_COLOR, "--description", "patchctl: the dashboard")
        url = gh.run("issue", "create", "--title", TITLE, "--label", LABEL, body=body).strip()
        match = _ISSUE_URL.search(url)
        if match is None:
            raise EnvironmentFailure(f"gh issue create: no issue address in its answer ({first_line(url)!r})")
        created = int(match.group(1))
        # Another run may have opened one meanwhile: look again; the oldest stays the dashboard.
        found = _dashboards(gh, author)
        if created not in {row["number"] for row in found}:  # not in the search yet
            found = sorted([*found, {"number": created, "state": "OPEN", "body": body, "url": url}], key=_number)
    keep, others = found[0], found[1:]
    closed = []
    for other in others:
        if _text(other.get("state")).upper() == "OPEN":
            gh.run(
                "issue", "close", str(other["number"]), "--reason", "not planned",
                "--comment", f"Duplicate of #{keep['number']}: patchctl keeps one dashboard issue.",
            )  # fmt: skip
            closed.append(other["number"])
    if keep["number"] == created:
        action = "created"
    elif _same(_text(keep.get("body")), body):
        action = "unchanged"
    else:
        gh.run("issue", "edit", str(keep["number"]), body=body)
        action = "updated"
    return IssueOutcome(keep["number"], _text(keep.get("url")), action, _text(keep.get("state")).upper(), closed)


def _dashboards(gh: GitHub, author: str) -> list[dict[str, Any]]:
    return issues_by(gh, LABEL, author, state="all", fields="number,state,body,url")


def _number(row: dict[str, Any]) -> int:
    return row["number"]


def _same(old: str, new: str) -> bool:
    """Whether two bodies read the same (GitHub may keep a body's line ends as CRLF)."""
    return old.replace("\r\n", "\n").rstrip() == new.replace("\r\n", "\n").rstrip()
