"""The dashboard issue (`patchctl dashboard`, `patchctl.loop.dashboard`): status's picture of every
series and what GitHub holds open (pin-sync pull requests, the workflows' issues), in one issue
found by its label and its bot author only, edited in place and never duplicated, its text inert.

GitHub is the rehearsal's `gh` stand-in (tests/journeys/gh_standin.py): its state is a file that
outlives one process, every call is logged, and it answers concurrent processes one at a time, as
the API does. No network."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchctl.loop.dashboard_issue import LABEL, TITLE
from patchctl.loop.submitted import MERGED_NOTE
from patchctl.output.dashboard import MAX_BODY, STOPS

from .conftest import CliResult, Project, Repo, make_patch, ok, run_cli
from .gh_on_path import STANDIN, gh_on_path
from .markdown_check import assert_inert, render

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/project"
BOT_TOKEN = "ghs_rehearsal_github_token"  # the stand-in's GITHUB_TOKEN: calls made with it are app/github-actions'
BOT = {"login": "app/github-actions", "is_bot": True}
PERSON = {"login": "mallory", "is_bot": False}
DAY = 86400


class GitHub:
    """The stand-in's state and call log, seeded and read by the tests."""

    def __init__(self, store: Path) -> None:
        self.store = store

    def seed(self, repo: str, **state: Any) -> None:
        path = self.store / "github.json"
        everything = json.loads(path.read_text()) if path.exists() else {}
        everything.setdefault(repo, {}).update(state)
        path.write_text(json.dumps(everything))

    def state(self, repo: str = REPO) -> dict[str, Any]:
        return json.loads((self.store / "github.json").read_text()).get(repo, {})

    def issues(self, label: str | None = None) -> list[dict[str, Any]]:
        found = self.state().get("issues", [])
        return [i for i in found if label is None or label in {x["name"] for x in i["labels"]}]

    def calls(self, *words: str) -> list[dict[str, Any]]:
        log = self.store / "gh.jsonl"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [c for c in calls if c["args"][: len(words)] == list(words)]


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitHub:
    """`gh` on PATH: the stand-in, repository acme/project, the workflow's GITHUB_TOKEN."""
    store = gh_on_path(tmp_path, monkeypatch, BOT_TOKEN)
    monkeypatch.setenv("JOURNEY_GITHUB_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("GH_REPO", REPO)
    return GitHub(store)


def issue(number: int, title: str, body: str, label: str | None, author: dict, state: str = "OPEN") -> dict:
    return {
        "number": number,
        "title": title,
        "body": body,
        "state": state,
        "labels": [{"name": label}] if label else [],
        "author": author,
        "comments": [],
        "url": f"https://github.com/{REPO}/issues/{number}",
    }


def lines(n: int, prefix: str, changes: dict[int, str]) -> str:
    return "".join(f"{changes.get(i, f'{prefix} {i}')}\n" for i in range(1, n + 1))


def with_status(text: str, header: str) -> str:
    return text.replace("Why this change.\n", f"Why this change.\n\n{header}\n", 1)


@pytest.fixture
def carried(project: Project, upstream: Repo) -> Project:
    """A series of five at a tip that broke two of them: 0001 rewritten by upstream (needs a hand),
    0002 on top of it (blocked), 0003 sent as a pull request that was merged, 0004 Pending and
    carried 400 days (the others one), 0005 fine."""
    pin = upstream.head
    pending = make_patch(upstream, pin, {"include/util.h": lines(10, "decl", {6: "DECL 6"})}, "Declare more")
    project.add_patch("0004-Declare-more.patch", with_status(pending, "Upstream-Status: Pending"))
    project.commit({}, "carry a first patch", date="1600000000 +0000")
    project.add_patch(
        "0001-Patch-main.patch",
        make_patch(upstream, pin, {"src/main.c": lines(40, "main", {20: "MAIN 20 patched"})}, "Patch main"),
    )
    on_top = "".join(f" main {i}\n" if i != 22 else "-main 22\n+MAIN 22\n" for i in range(19, 26))
    project.add_patch(
        "0002-Tune-main.patch",
        "From: Dev <dev@example.org>\nSubject: [PATCH] Tune main\n\nMain needs it.\n---\n"
        "diff --git a/src/main.c b/src/main.c\n--- a/src/main.c\n+++ b/src/main.c\n@@ -19,7 +19,7 @@\n"
        + on_top.replace(" main 20\n", " MAIN 20 patched\n"),
    )
    merged = make_patch(upstream, pin, {"src/util.c": lines(30, "util", {5: "UTIL 5"})}, "Tune util")
    project.add_patch(
        "0003-Tune-util.patch",
        with_status(merged, "Upstream-Status: Submitted [https://github.com/example/up/pull/17]"),
    )
    project.add_patch("0005-Readme.patch", make_patch(upstream, pin, {"README.md": "# upstream, ours\n"}, "Readme"))
    project.commit({}, "carry the series", date=f"{1600000000 + 399 * DAY} +0000")
    project.commit({"notes.txt": "a year on\n"}, "later", date=f"{1600000000 + 400 * DAY} +0000")
    upstream.commit({"src/main.c": lines(40, "main", {20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    upstream.commit({"src/util.c": lines(30, "util", {29: "util twenty-nine"})}, "Upstream touches util")
    return project


def seed_open_work(github: GitHub, key: str) -> None:
    """acme/project's open pull requests and issues (a pin-sync one, a fork's look-alike, the
    canary's issue and a person's copy of it, a pin-sync stop), and example/up's pull request #17."""
    merged = {"number": 17, "state": "MERGED", "mergedAt": "2026-08-01T10:00:00Z", "headRefName": "tune"}
    github.seed("example/up", pulls=[{**merged, "url": "https://github.com/example/up/pull/17"}])
    checks = [
        {"__typename": "CheckRun", "status": "COMPLETED", "conclusion": "SUCCESS"},
        {"__typename": "CheckRun", "status": "COMPLETED", "conclusion": "SKIPPED"},
        {"__typename": "CheckRun", "status": "COMPLETED", "conclusion": "FAILURE"},
        {"__typename": "CheckRun", "status": "IN_PROGRESS", "conclusion": ""},
        {"__typename": "StatusContext", "state": "PENDING"},
    ]
    canary_body = f"<!-- patchctl-canary-key: {key} -->\nThe canary found a break on upstream **up**.\n"
    github.seed(
        REPO,
        next=20,
        labels=[{"name": "patchctl-canary"}, {"name": "patchctl-pin-sync"}],
        pulls=[
            {"number": 11, "title": "pin-sync: move up forward", "state": "OPEN",
             "headRefName": "patchctl/pin-sync/up", "isCrossRepository": False, "isDraft": False,
             "mergeable": "MERGEABLE", "reviewDecision": "REVIEW_REQUIRED", "statusCheckRollup": checks},
            {"number": 12, "title": "pin-sync: move up forward (from a fork)", "state": "OPEN",
             "headRefName": "patchctl/pin-sync/up", "isCrossRepository": True},
            {"number": 13, "title": "Docs", "state": "OPEN", "headRefName": "docs"},
            {"number": 14, "title": "pin-sync: an old one", "state": "MERGED", "headRefName": "patchctl/pin-sync/up"},
        ],
        issues=[
            issue(15, "canary up: main/0001-Patch-main.patch no longer applies", canary_body, "patchctl-canary", BOT),
            issue(16, "canary up: a copy", canary_body, "patchctl-canary", PERSON),
            issue(17, "pin-sync of up needs a hand", "<!-- patchctl-pin-sync-stop: up -->\n", "patchctl-pin-sync", BOT),
            issue(18, "canary up: fixed long ago", canary_body, "patchctl-canary", BOT, state="CLOSED"),
        ],
    )  # fmt: skip


def test_the_dashboard_is_status_and_the_open_work_on_github(carried: Project, github: GitHub, tmp_path: Path) -> None:
    tip = carried.upstream.git("rev-parse", "HEAD").strip()
    first_bad = carried.upstream.git("rev-parse", "HEAD~1").strip()
    seed_open_work(github, f"up/apply/main/0001-Patch-main.patch/{first_bad}")
    board = json.loads(ok("-C", carried.path, "dashboard", "--github", "--json"))

    [series] = board["series"]
    assert (series["name"], series["upstream"], series["tip"], series["commits_since_pin"]) == ("main", "up", tip, 2)
    assert series["verdicts"] == {"conflict": 1, "blocked": 1, "ok": 3}
    assert series["statuses"] == {"none": 3, "Submitted": 1, "Pending": 1}
    patches = {p["patch"]: p for p in board["patches"]}
    assert patches["0001-Patch-main.patch"]["reasons"] == ["conflict", "drift"]
    # The stop's cause, as status names it: the upstream commit that rewrote the patch's line.
    [cause] = patches["0001-Patch-main.patch"]["cause"]
    assert (cause["sha"], cause["subject"]) == (first_bad, "Upstream rewrites line 20")
    assert "upstream_version" not in patches["0001-Patch-main.patch"]  # upstream's edit is not the patch's
    assert patches["0001-Patch-main.patch"]["issue"] == 15  # the canary's issue, by its key; not the copy (#16)
    assert patches["0002-Tune-main.patch"]["reasons"] == ["blocked", "drift"]
    assert patches["0002-Tune-main.patch"]["blocked_by"] == "0001-Patch-main.patch"
    assert patches["0003-Tune-util.patch"]["flags"] == [MERGED_NOTE]  # asked of gh: example/up#17
    assert patches["0003-Tune-util.patch"]["reasons"] == ["flagged", "drift"]
    assert patches["0004-Declare-more.patch"]["reasons"] == ["long carried"]
    assert patches["0004-Declare-more.patch"]["age_days"] == 400
    assert patches["0005-Readme.patch"]["reasons"] == []
    # The pin-sync pull request of this repository only (not the fork's, not a merged one), with its state.
    assert board["pulls"] == [
        {
            "number": 11,
            "title": "pin-sync: move up forward",
            "branch": "patchctl/pin-sync/up",
            "draft": False,
            "mergeable": "MERGEABLE",
            "review": "REVIEW_REQUIRED",
            "checks": {"passed": 2, "failing": 1, "pending": 2},
        }
    ]
    # The workflows' open issues: by the bot, with their labels; a person's copy and a closed one are not.
    assert [(i["number"], i["kind"]) for i in board["issues"]] == [(15, "canary"), (17, "pin-sync")]

    text = body("-C", carried.path, "dashboard", "--github")
    assert text.startswith(
        "❌ **1 of 1 series stops at the upstream tip** · 1 pin-sync pull request open · 2 issues open\n"
    )
    assert (
        "- #11 pin-sync: move up forward (`patchctl/pin-sync/up`): mergeable, review required, "
        "checks: 1 failing, 2 pending, 2 passed" in text
    )
    assert "- #15 (canary) canary up: main/0001-Patch-main.patch no longer applies" in text
    assert "- #17 (pin-sync stop) pin-sync of up needs a hand" in text
    look = text.split("### Patches to look at", 1)[1].split("<details>", 1)[0]
    rows = [line for line in look.splitlines() if line.startswith("- ")]
    # Most urgent first: a stop and the one it blocks, then flagged, then carried long.
    assert [row.split("`")[1] for row in rows] == [
        "0001-Patch-main.patch",
        "0002-Tune-main.patch",
        "0003-Tune-util.patch",
        "0004-Declare-more.patch",
    ]
    assert rows[0].startswith("- `0001-Patch-main.patch`: **conflict** at the tip: "), rows[0]
    assert f"; upstream changed its lines in `{first_bad[:12]}` `Upstream rewrites line 20` (" in rows[0], rows[0]
    assert rows[0].endswith("(drift 1, age 1 day, upstream status none, canary issue #15)"), rows[0]
    assert "**blocked** at the tip by `0001-Patch-main.patch`" in rows[1]
    assert "expect taken upstream at the next bump" in rows[2] and "(pull request merged)" in rows[2]
    assert "carried 400 days and never sent upstream" in rows[3]
    assert "<summary>Every patch (5)</summary>" in text, text
    assert "found by its label `patchctl-dashboard` and its author" in text
    # Only reads: nothing was written to GitHub.
    assert {tuple(c["args"][:2]) for c in github.calls()} == {("issue", "list"), ("pr", "list"), ("pr", "view")}


def test_a_status_report_handed_over_gives_the_same_bytes(carried: Project, tmp_path: Path) -> None:
    """A read-only job judges (`status --json`), the job that writes only renders (`--status FILE`)."""
    report = tmp_path / "status.json"
    report.write_text(ok("-C", carried.path, "status", "--json"))
    here = ok("-C", carried.path, "dashboard")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # no matrix.yaml needed: nothing but the report is read
    assert ok("-C", elsewhere, "dashboard", "--status", report) == here
    piped = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(elsewhere), "dashboard", "--status", "-"],
        input=report.read_bytes(),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert piped.returncode == 0 and piped.stdout.decode() == here, piped.stderr
    assert (
        "Not asked" in here
        and json.loads(ok("-C", elsewhere, "dashboard", "--status", report, "--json"))["github"] is False
    )


def status_report(**series: Any) -> dict[str, Any]:
    """A `patchctl status --json` report of one series (fields as status writes them; SERIES overrides)."""
    patch = {
        "patch": "0001-a.patch",
        "subject": "A",
        "upstream_status": "none",
        "upstream_detail": "",
        "upstream_url": None,
        "added": "2026-01-01T00:00:00+00:00",
        "age_days": 3,
        "files": ["src/a.c"],
        "drift": 0,
        "verdict": "ok",
        "trial": "",
        "taken_upstream": None,
        "flags": [],
        "syncs": [],
        "pin_syncs": 0,
        "pin_syncs_stopped": 0,
    }
    entry = {
        "name": "main",
        "upstream": "up",
        "pin": "a" * 40,
        "tip": "b" * 40,
        "rev_spec": "tip of main",
        "commits_since_pin": 4,
        "patches": [patch],
        "size_history": [],
        "dropped": [],
        "statuses": {"none": 1},
        "commits_pin_is_ahead": 0,
        "verdicts": {"ok": 1},
        "departures": [],
        "moved_from": [],
    }
    entry.update(series)
    return {"series": [entry]}


def dashboard(*args: str | Path) -> str:
    return ok("dashboard", *args)


def body(*args: str | Path) -> str:
    """The issue's Markdown body, as `dashboard ARGS --markdown FILE` writes it (stdout is plain text)."""
    with tempfile.TemporaryDirectory(prefix="dashboard-body-") as scratch:
        written = Path(scratch) / "body.md"
        ok(*args, "--markdown", written)
        return written.read_text()


def test_update_opens_one_dashboard_then_edits_it_in_place(github: GitHub, tmp_path: Path) -> None:
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    # Look-alikes: a person's issue with the label and the title, the bot's issue with the title but no label.
    github.seed(
        REPO,
        next=3,
        issues=[
            issue(1, TITLE, "not the dashboard", LABEL, PERSON),
            issue(2, TITLE, "not the dashboard either", None, BOT),
        ],
    )
    assert dashboard("--status", report, "--update") == f"dashboard #3 created: https://github.com/{REPO}/issues/3\n"
    [created] = [i for i in github.issues(LABEL) if i["author"] == BOT]
    assert (created["number"], created["title"], created["state"]) == (3, TITLE, "OPEN")
    assert created["body"] == body("dashboard", "--status", report, "--github")
    assert [i["body"] for i in github.issues() if i["number"] in (1, 2)] == [
        "not the dashboard",
        "not the dashboard either",
    ]
    [label] = github.calls("label", "create")
    assert label["args"][2] == LABEL
    # Found by its label and author and nothing else: edit its title, the next run still finds it.
    github.seed(REPO, issues=[*github.issues()[:2], {**created, "title": "renamed by a maintainer"}])
    assert dashboard("--status", report, "--update").startswith("dashboard #3 unchanged")
    assert github.calls("issue", "edit") == []  # nothing to say: no edit at all

    report.write_text(json.dumps(status_report(verdicts={"needs a hand": 1})))
    assert dashboard("--status", report, "--update").startswith("dashboard #3 updated")
    [edit] = github.calls("issue", "edit")
    assert edit["args"][2] == "3" and edit["body"].startswith("❌ **1 of 1 series stops at the upstream tip")
    assert len(github.calls("issue", "create")) == 1 and len(github.issues(LABEL)) == 2

    # A maintainer closes it: it is still edited, and stays closed; no new one is opened.
    github.seed(REPO, issues=[{**i, "state": "CLOSED"} if i["number"] == 3 else i for i in github.issues()])
    report.write_text(json.dumps(status_report()))
    said = dashboard("--status", report, "--update")
    assert said.startswith("dashboard #3 updated (a maintainer closed it: edited, left closed)")
    assert [(i["number"], i["state"]) for i in github.issues(LABEL) if i["author"] == BOT] == [(3, "CLOSED")]
    assert "✅ **Every series applies strictly" in github.issues(LABEL)[-1]["body"]
    # The label taken off: that one is no dashboard any more, the next run opens a new one.
    github.seed(REPO, issues=[{**i, "labels": []} if i["number"] == 3 else i for i in github.issues()])
    assert dashboard("--status", report, "--update").startswith("dashboard #4 created")


@pytest.mark.parametrize("workflow, reader", [("canary.yml", "resolve"), ("pin-sync.yml", "status")])
def test_the_rendered_dashboard_job_holds_the_permissions_it_needs_and_no_more(
    github: GitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workflow: str, reader: str
) -> None:
    """`dashboard --update` as the rendered workflow's dashboard job runs it, GITHUB_TOKEN limited
    by the job's `permissions:` as github.com limits it (the gh stand-in reads them): it updates
    the issue and reads the pin-sync pull request's checks; without any one of its permissions it
    fails in one line or says the checks are unreadable; the read-only job that judged cannot."""
    document = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())
    granted = document["jobs"]["dashboard"]["permissions"]
    assert {scope for scope, level in granted.items() if level == "write"} == {"issues"}
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    rollup = [{"__typename": "CheckRun", "status": "COMPLETED", "conclusion": "SUCCESS"}]
    pull = {"number": 5, "title": "pin-sync: move up forward", "state": "OPEN", "headRefName": "patchctl/pin-sync/up",
            "isCrossRepository": False, "mergeable": "MERGEABLE", "statusCheckRollup": rollup}  # fmt: skip
    github.seed(REPO, next=6, pulls=[pull])
    path = tmp_path / workflow
    monkeypatch.setenv("JOURNEY_WORKFLOW", str(path))

    def update(job: str, permissions: dict[str, str]) -> CliResult:
        document["jobs"][job]["permissions"] = permissions
        path.write_text(yaml.safe_dump(document))
        monkeypatch.setenv("GITHUB_JOB", job)
        return run_cli("dashboard", "--status", report, "--update")

    def board() -> str:
        return github.issues(LABEL)[-1]["body"]

    assert update("dashboard", granted).exit_code == 0
    assert "(`patchctl/pin-sync/up`): mergeable, checks: 1 passed" in board()
    for scope in ("issues", "pull-requests", "checks", "statuses"):
        done = update("dashboard", {k: v for k, v in granted.items() if k != scope})
        if scope in ("checks", "statuses"):  # said, not guessed
            assert done.exit_code == 0 and "checks: not readable with this token" in board(), (scope, done.stderr)
        else:
            assert done.exit_code == 3 and "Resource not accessible by integration" in done.stderr, (scope, done)
    denied = update(reader, document["jobs"][reader]["permissions"])
    assert denied.exit_code == 3 and "Resource not accessible by integration" in denied.stderr, denied


def wrapped_gh(tmp_path: Path, name: str, prelude: str) -> Path:
    """A directory with a `gh` that runs PRELUDE (Python: `args` is its argument list, which it may
    change) and then the stand-in with ARGS: a gh that behaves otherwise, for one test."""
    directory = tmp_path / name
    directory.mkdir()
    script = (
        f"#!{sys.executable}\nimport os, sys, time\nargs = sys.argv[1:]\n{textwrap.dedent(prelude)}\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, {str(STANDIN)!r}, *args])\n"
    )
    (directory / "gh").write_text(script)
    (directory / "gh").chmod(0o755)
    return directory


# gh that answers more than it was asked: `issue list` with its --author and --label dropped.
LOOSE = """
    if args[:2] == ["issue", "list"]:
        for name in ("--author", "--label"):
            at = args.index(name)
            del args[at : at + 2]
"""


def test_only_the_bots_labelled_issues_count_even_when_gh_answers_more(
    github: GitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """patchctl checks every issue gh lists for the label and the author again: a gh (or a search)
    that answers more than asked does not make a look-alike the dashboard or a canary issue."""
    monkeypatch.setenv("PATH", f"{wrapped_gh(tmp_path, 'loose', LOOSE)}:{os.environ['PATH']}")
    canary = "<!-- patchctl-canary-key: up/apply/main/0001-a.patch/unbisected -->\n"
    github.seed(
        REPO,
        next=5,
        issues=[
            issue(1, TITLE, "a person's", LABEL, PERSON),
            issue(2, TITLE, "the bot's, unlabelled", None, BOT),
            issue(3, "canary up: a copy", canary, "patchctl-canary", PERSON),
            issue(4, "canary up: unlabelled", canary, None, BOT),
        ],
    )
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    board = json.loads(dashboard("--status", report, "--update", "--json"))
    assert board["issues"] == [] and board["issue"]["number"] == 5 and board["issue"]["action"] == "created"
    assert [i["body"] for i in github.issues()[:4]] == ["a person's", "the bot's, unlabelled", canary, canary]
    assert all(i["state"] == "OPEN" for i in github.issues())


# gh as GitHub answers a token that may not read commit statuses or checks.
NO_CHECKS = """
    if args[:2] == ["pr", "list"] and "statusCheckRollup" in args[args.index("--json") + 1]:
        sys.stderr.write("GraphQL: Resource not accessible by integration (repository.pullRequests.nodes.0)\\n")
        sys.exit(1)
"""


def test_checks_a_token_may_not_read_are_said_not_guessed(
    github: GitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    github.seed(REPO, next=2, pulls=[{"number": 1, "title": "pin-sync: move up forward", "state": "OPEN",
                                      "headRefName": "patchctl/pin-sync/up", "statusCheckRollup": []}])  # fmt: skip
    text = body("dashboard", "--status", report, "--github")
    assert "- #1 pin-sync: move up forward (`patchctl/pin-sync/up`): no checks reported" in text
    monkeypatch.setenv("PATH", f"{wrapped_gh(tmp_path, 'no-checks', NO_CHECKS)}:{os.environ['PATH']}")
    board = json.loads(dashboard("--status", report, "--github", "--json"))
    assert board["pulls"][0]["checks"] is None
    text = body("dashboard", "--status", report, "--github")
    assert "checks: not readable with this token (statuses: read, checks: read)" in text


def test_every_open_dashboard_but_the_oldest_is_closed_as_its_duplicate(github: GitHub, tmp_path: Path) -> None:
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    github.seed(REPO, next=9, issues=[issue(n, TITLE, "old", LABEL, BOT) for n in (5, 7, 8)])
    said = dashboard("--status", report, "--update")
    assert said.startswith("dashboard #5 updated; closed #7, #8 as duplicates")
    states = {i["number"]: i["state"] for i in github.issues(LABEL)}
    assert states == {5: "OPEN", 7: "CLOSED", 8: "CLOSED"}
    assert github.issues(LABEL)[1]["comments"][0]["body"].startswith("Duplicate of #5")


# gh for the race: every `issue create` waits until both runs have reached theirs, so that each
# looked for a dashboard before either opened one (the race, every time).
RACER = """
    if args[:2] == ["issue", "create"]:
        open(os.path.join(os.environ["BARRIER"], str(os.getpid())), "w").close()
        deadline = time.monotonic() + 60
        while len(os.listdir(os.environ["BARRIER"])) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
"""


def test_two_runs_racing_leave_one_dashboard(github: GitHub, tmp_path: Path) -> None:
    """Two runs (a scheduled one and one by hand) both find no dashboard and both open one: each
    looks again after opening, and the newer is closed as the older's duplicate."""
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racing = wrapped_gh(tmp_path, "racing", RACER)
    env = {**os.environ, "PATH": f"{racing}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "BARRIER": str(barrier)}
    command = [sys.executable, "-m", "patchctl", "dashboard", "--status", str(report), "--update"]
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    said = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], said
    assert len(os.listdir(barrier)) == 2 and len(github.calls("issue", "create")) == 2  # the race did happen
    dashboards = github.issues(LABEL)
    assert [(i["number"], i["state"]) for i in dashboards] == [(1, "OPEN"), (2, "CLOSED")]
    assert dashboards[1]["comments"][0]["body"].startswith("Duplicate of #1")
    assert dashboards[0]["body"] == body("dashboard", "--status", report, "--github")
    # and the next run finds the one, and leaves it be
    assert dashboard("--status", report, "--update").startswith("dashboard #1 unchanged")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--status {path}: no such file (write it with `patchctl status --json > {path}`)"),
        (b"\xff\xfe", "--status {path}: not JSON"),
        (b"[1, 2]", "--status {path}: the report is not an object: not a report of `patchctl status --json`"),
        (b'{"series": []}', "--status {path}: the report has no series: the dashboard would say nothing"),
        (
            json.dumps(status_report(commits_since_pin="4")).encode(),
            "--status {path}: series[0].commits_since_pin is not a whole number or null",
        ),
        (
            json.dumps(status_report(verdicts={"ok": True})).encode(),
            "--status {path}: series[0].verdicts['ok'] is not a whole number",
        ),
        (
            json.dumps(status_report(patches=[{"patch": "x", "upstream_status": "none", "flags": "none"}])).encode(),
            "--status {path}: series[0].patches[0].flags is not a list",
        ),
    ],
)
def test_a_report_that_is_not_status_s_is_refused_in_one_line(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "status.json"
    if content is not None:
        path.write_bytes(content)
    result = run_cli("dashboard", "--status", path)
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("patchctl: error: " + message.format(path=path)), line


def test_a_fifo_or_a_directory_handed_over_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "status.json"
    os.mkfifo(fifo)
    result = run_cli("dashboard", "--status", fifo)
    assert result.exit_code == 2 and result.stderr == f"patchctl: error: --status {fifo}: a FIFO, not a regular file\n"
    link = tmp_path / "link.json"
    link.symlink_to(fifo)  # the path the user names is followed, to what it is
    result = run_cli("dashboard", "--status", link)
    assert result.exit_code == 2 and result.stderr == f"patchctl: error: --status {fifo}: a FIFO, not a regular file\n"
    result = run_cli("dashboard", "--status", tmp_path)
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "is a directory" in result.stderr


def test_update_without_gh_is_one_line_and_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "gh" else "/usr/bin/" + name)
    result = run_cli("dashboard", "--status", report, "--update")
    assert result.exit_code == 3 and result.stdout == ""
    assert result.stderr == (
        "patchctl: error: the dashboard asks GitHub with the GitHub CLI, which is not installed: "
        "install gh (https://cli.github.com) or leave --github and --update out\n"
    )


def test_gh_refusing_is_one_line_and_exit_3(github: GitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    monkeypatch.delenv("GH_TOKEN")
    github.seed(REPO, next=2, issues=[])
    result = run_cli("dashboard", "--status", report, "--update")
    assert result.exit_code == 3
    assert result.stderr == (
        "patchctl: error: gh label create failed: gh: To use GitHub CLI in a GitHub Actions workflow, set the "
        "GH_TOKEN environment variable. Example:\n"
    )
    assert github.issues() == []


HOSTILE = [
    "Ping @octocat and fix #1 (see GH-2, https://evil.example)",
    "<img src=x onerror=alert(1)> </details> <b>bold</b> <!-- hidden",
    "[click](javascript:alert(1)) ![i](http://evil.example/x.png) a | b",
    "line\nbreak | cell\r\n| forged | row |",
    "100% done ::warning::pwned ##[error]legacy `code` ``` fence",
]


def test_hostile_names_titles_and_words_are_inert(
    github: GitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every text the body quotes (series, upstream, patch names, the trial's words, flags, URLs,
    pull request and issue titles and branches, the run's workflow) from a report and a GitHub
    that try to be markup: rendered as GitHub renders, no tag, link, image, mention or reference
    comes out, no table cell is forged, and the one fold stays one."""
    patches = []
    for number, text in enumerate(HOSTILE, 1):
        patches.append(
            {
                "patch": f"000{number}-{text}.patch",
                "upstream_status": text,
                "upstream_url": "javascript:alert(1)" if number == 1 else f"https://example.org/{number}) <b>",
                "age_days": 400,
                "drift": number,
                "verdict": ["needs a hand", "blocked", "mechanical", text, "ok"][number - 1],
                "blocked_by": text,
                "trial": text,
                "taken_upstream": {"commit": text},
                "flags": [text],
                "submitted": {"state": text},
            }
        )
    hostile = status_report(
        name=HOSTILE[0],
        upstream=HOSTILE[1],
        tip=HOSTILE[4],
        rev_spec=HOSTILE[2],
        patches=patches,
        verdicts={text: 1 for text in HOSTILE},
        statuses={text: 1 for text in HOSTILE},
    )
    second = status_report(name=HOSTILE[3], upstream=HOSTILE[4], patches=patches[:2])["series"]
    hostile["series"] += second  # two series: the tables get a series column
    report = tmp_path / "status.json"
    report.write_text(json.dumps(hostile))
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "7",
        "GITHUB_WORKFLOW": HOSTILE[1],
    }.items():
        monkeypatch.setenv(name, value)
    github.seed(
        REPO,
        next=30,
        pulls=[
            {"number": 21 + n, "title": t, "state": "OPEN", "headRefName": f"patchctl/pin-sync/{t}", "mergeable": t}
            for n, t in enumerate(HOSTILE)
        ],
        issues=[
            issue(26, t, f"<!-- patchctl-canary-key: {t} -->", "patchctl-canary", BOT) for t in HOSTILE[:1]
        ] + [issue(27 + n, t, t, "patchctl-pin-sync", BOT) for n, t in enumerate(HOSTILE[:3])],
    )  # fmt: skip
    written = tmp_path / "body.md"
    ok("dashboard", "--status", report, "--github", "--markdown", written)
    body = written.read_text()
    # What the body itself links: the numbers of this repository's pull requests and issues, nothing else.
    ours = [f"#{n}" for n in range(21, 30)]
    run = f"<https://github.com/{REPO}/actions/runs/7>"  # and the run that wrote it
    assert body.count(run) == 1
    unlinked = body.replace(run, "")
    for number in ours:
        unlinked = unlinked.replace(f"- {number} ", "- ").replace(f"| {number} |", "| |")
    rendered = assert_inert(unlinked, folds=1)
    cells = [row.count("<td>") for row in rendered.split("<tr>")[1:] if "<td>" in row]
    assert cells == [8, 8] + [6] * 7, cells  # the two series, then every patch of both
    assert len(body) <= MAX_BODY
    # every hostile text is there, as text
    text = render(body)
    assert "octocat" in text and "onerror" in text and "javascript" in text and "::warning::pwned" in text


def test_the_body_fits_an_issue_and_says_what_it_left_out(tmp_path: Path) -> None:
    patches = [
        {
            "patch": f"{n:04d}-{'a-long-patch-name-' * 6}.patch",
            "upstream_status": "Pending",
            "age_days": 500,
            "drift": n,
            "verdict": "needs a hand",
            "trial": "3-way conflict in " + "src/a/very/long/path.c, " * 20,
            "flags": [],
        }
        for n in range(1, 3001)
    ]
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report(patches=patches, verdicts={"needs a hand": 3000})))
    text = body("dashboard", "--status", report)
    assert len(text) <= MAX_BODY
    assert "<summary>Every patch (3000)</summary>" in text
    assert "… and 3000 more (`patchctl status` lists every patch)" in text  # the fold goes first
    left = int(text.split("… and ")[1].split(" more (`patchctl dashboard --json`")[0])
    shown = len(re.findall(r"\n- `\d{4}-", text.split("### Patches to look at")[1].split("<details>")[0]))
    assert shown + left == 3000 and shown > 10
    assert text.rstrip().endswith("take the label off to have a new one opened.")  # the footer is never cut


def test_the_run_that_updated_it_is_named_under_github_actions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report()))
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_WORKFLOW": "canary",
    }.items():
        monkeypatch.setenv(name, value)
    text = body("dashboard", "--status", report)
    assert f"Last updated by the `canary` workflow: <https://github.com/{REPO}/actions/runs/4242>." in text
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/x> <img src=x>")
    assert "<img" not in body("dashboard", "--status", report)  # an address it cannot link is left out


def test_electrons_161_chromium_patches_read_as_one_issue(tmp_path: Path) -> None:
    """Electron's real series (names, order, ages, the patches that left it: `status_corpus`) at a tip
    made to give every verdict: the body fits an issue with every patch in its fold, the patches
    where a pin-sync would stop lead, each blocked one names its blocker, and a series that marks no patch with
    Upstream-Status: gets no "never sent upstream" for all of them."""
    from . import status_corpus

    built = status_corpus.build(status_corpus.load("electron/electron"), tmp_path)
    report = tmp_path / "status.json"
    report.write_text(ok("-C", built.project, "status", "--json"))  # judged once, rendered twice
    board = json.loads(ok("dashboard", "--status", report, "--json"))
    text = body("dashboard", "--status", report)
    assert len(text) <= MAX_BODY
    assert f"<summary>Every patch ({len(built.names)})</summary>" in text and "… and" not in text
    assert_inert(text, folds=1)
    [series] = board["series"]
    expected = {verdict: list(built.verdicts.values()).count(verdict) for verdict in set(built.verdicts.values())}
    assert series["verdicts"] == expected
    look = [p for p in board["patches"] if p["reasons"]]
    stops = sorted(name for name, verdict in built.verdicts.items() if verdict in STOPS)
    assert stops and sorted(p["patch"] for p in look if set(p["reasons"]) & set(STOPS)) == stops
    listed = text.split("### Patches to look at", 1)[1].split("<details>", 1)[0]
    rows = [line for line in listed.splitlines() if line.startswith("- ")]
    assert all(any(f"**{word}**" in row for word in STOPS) for row in rows[: len(stops)])
    assert "**blocked**" in rows[len(stops)]
    assert not any("long carried" in p["reasons"] for p in board["patches"])


def cause(*, commits: int = 1, more: int = 0, own_version: bool = False) -> dict[str, Any]:
    """A stop cause as `status --json` writes it: two failed hunks, naming COMMITS commits (the first twice)."""
    named = [
        {"sha": str(n) * 40, "subject": f"Upstream change {n}", "date": "2026-01-02",
         "url": f"https://github.com/example/up/commit/{str(n) * 40}"}
        for n in range(1, commits + 1)
    ]  # fmt: skip
    hunks = [
        {"file": "src/a.c", "hunk": 1, "commits": named[:1], "more_commits": 0},
        {"file": "src/a.c", "hunk": 2, "commits": named, "more_commits": more},
    ]
    return {"hunks": hunks, "upstream_version": own_version}


def test_each_patch_is_listed_for_its_own_reason_most_urgent_first(tmp_path: Path) -> None:
    def patch(name: str, **fields: Any) -> dict[str, Any]:
        return {"patch": name, "upstream_status": "Pending", "age_days": 10, "drift": 0, "verdict": "ok", **fields}

    taken = {"commit": "c0ffee" * 6 + "c0ff", "subject": "Upstream's own", "how": "same patch-id", "url": None}
    patches = [
        patch("a-fine.patch"),
        patch("b-taken.patch", verdict="mechanical", taken_upstream=taken),
        patch("c-merges.patch", verdict="mechanical", drift=2),
        patch("d-flagged.patch", flags=["needed a hand in 2 of the last 5 pin-syncs"]),
        patch("e-old.patch", age_days=800),
        patch("f-blocked.patch", verdict="blocked", blocked_by="g-hand.patch"),
        patch("g-hand.patch", verdict="needs a hand", trial="3-way conflict in `src/a.c`"),
        *(patch(f"h{n}-drifts.patch", drift=n) for n in range(1, 8)),
        # every stop word, with the cause status found (docs/reference/index.md#stops)
        patch("i-conflict.patch", verdict="conflict", stop_cause=cause(own_version=True)),
        patch("j-look.patch", verdict="needs a look", stop_cause=cause(commits=5, more=7)),
    ]
    report = tmp_path / "status.json"
    report.write_text(json.dumps(status_report(patches=patches)))
    board = json.loads(dashboard("--status", report, "--json"))
    reasons = {p["patch"]: p["reasons"] for p in board["patches"]}
    assert reasons == {
        "a-fine.patch": [],
        "b-taken.patch": ["taken upstream"],  # not "mechanical" too: pin-sync drops it
        "c-merges.patch": ["mechanical"],
        "d-flagged.patch": ["flagged"],
        "e-old.patch": ["long carried"],
        "f-blocked.patch": ["blocked"],
        "g-hand.patch": ["needs a hand"],
        "i-conflict.patch": ["conflict"],
        "j-look.patch": ["needs a look"],
        # the five highest drifts of the series (c-merges' 2 is not among them)
        **{f"h{n}-drifts.patch": ["drift"] if n >= 3 else [] for n in range(1, 8)},
    }
    listed = body("dashboard", "--status", report).split("### Patches to look at\n\n")[1].split("\n\n")[0].splitlines()
    assert listed == [
        "- `g-hand.patch`: **needs a hand** at the tip: 3-way conflict in `src/a.c` "
        "(drift 0, age 10 days, upstream status Pending)",
        "- `i-conflict.patch`: **conflict** at the tip; upstream changed its lines in `111111111111` "
        f"`Upstream change 1` (2026-01-02) <https://github.com/example/up/commit/{'1' * 40}>; "
        "upstream may have its own version: compare, then `patchctl pin-sync --continue --drop` "
        "(drift 0, age 10 days, upstream status Pending)",
        "- `j-look.patch`: **needs a look** at the tip; upstream changed its lines in "
        + ", ".join(
            f"`{str(n) * 12}` `Upstream change {n}` (2026-01-02) <https://github.com/example/up/commit/{str(n) * 40}>"
            for n in (1, 2, 3)
        )
        + ", 9 more (drift 0, age 10 days, upstream status Pending)",
        "- `f-blocked.patch`: **blocked** at the tip by `g-hand.patch` (drift 0, age 10 days, upstream status Pending)",
        "- `c-merges.patch`: fails strictly at the tip, merges 3-way (a pin-sync carries it) "
        "(drift 2, age 10 days, upstream status Pending)",
        "- `b-taken.patch`: taken upstream in `c0ffeec0ffee`: pin-sync drops it "
        "(drift 0, age 10 days, upstream status Pending)",
        "- `d-flagged.patch`: needed a hand in 2 of the last 5 pin-syncs "
        "(drift 0, age 10 days, upstream status Pending)",
        *(
            f"- `h{n}-drifts.patch`: drift {n}: among the highest of its series "
            f"(drift {n}, age 10 days, upstream status Pending)"
            for n in range(7, 2, -1)
        ),
        "- `e-old.patch`: carried 800 days and never sent upstream (drift 0, age 800 days, upstream status Pending)",
    ]
