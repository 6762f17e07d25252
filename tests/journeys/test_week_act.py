"""A week on github.com, rehearsed here under act (issue 30, item 3; issue 43, items 3, 6, 7, 8, 9).

Five weeks of one repository's rendered workflows, started by the events GitHub would send
(tests/journeys/github_rehearsal.py), for this repository (a bot token), for a downstream just
made by `patchctl init` with an image row, and for Ollama's vendoring layout adopted by
`patchctl init --from makefile-sync` (no image, an apply-only canary); the downstreams have
GITHUB_TOKEN alone:

1. the upstream advances cleanly: the canary is green; pin-sync builds and gates in its read-only
   job, and its publish job checks the change and pushes a branch (every pin moved) and opens a
   pull request whose body has the range-diff; that pull request's CI (pull_request, or
   workflow_dispatch when only GITHUB_TOKEN opened it) lints, applies and gates the new pin, runs
   the repository's own `.ci/run` series tests, and builds its images; merging it (a push to
   main) builds and pushes the images at the new pin, and joins each amd64/arm64 pair;
2. the upstream breaks the patch: the canary opens one issue, with its key (one red job);
   pin-sync stops and opens one issue with what to do;
3. still broken at a newer tip: the same issue gets a comment;
4. fixed upstream: the canary's issue is closed; pin-sync goes through and closes its own;
5. the upstream edits a patch's context: pin-sync rewrites the patch in the open pull request,
   and on that branch lint and export --check pass under the `ci` source; under the default
   they pass, or (a default frozen at the old pin) say in one line that it cannot serve the pin.

Every scheduled run of the canary and of pin-sync keeps the dashboard issue (issue 47, item 4):
opened by the first one (week 1's canary), edited in place by every later one (the same number,
never a second issue), showing the series' verdict at the tip, the open pin-sync pull request and
the open canary and pin-sync issues of the moment. The gh stand-in refuses what the job's
`permissions:` would not let GITHUB_TOKEN do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.patchctl.docker_image import require_engine

from .github_rehearsal import GitHubRehearsal, WorkflowRun, uses_of
from .week_fixtures import (
    REPO,
    OllamaUpstream,
    WeekUpstream,
    base_image,
    copy_checkout,
    new_downstream,
    ollama_downstream,
    this_repository,
)

pytestmark = [pytest.mark.journey, pytest.mark.docker]

CANARY_KEY = "<!-- patchctl-canary-key: "
DASHBOARD_LABEL = "patchctl-dashboard"
BOT_SECRETS = {
    "PATCHCTL_BOT_TOKEN": "github_pat_rehearsal_bot",
    "DOCKER_IO_USERNAME": "rehearsal",
    "DOCKER_IO_PASSWORD": "rehearsal-password",
    "QUAY_IO_USERNAME": "rehearsal",
    "QUAY_IO_PASSWORD": "rehearsal-password",
}


@pytest.fixture(scope="module")
def image() -> str:
    require_engine("the week's images (act runs the rows' jobs in them)")
    return base_image()


def ok(run: WorkflowRun) -> WorkflowRun:
    assert run.conclusion == "success", run.describe()
    return run


def only(runs: list[WorkflowRun], workflow: str) -> WorkflowRun:
    found = [r for r in runs if r.workflow == workflow]
    assert len(found) == 1, f"{workflow} started {len(found)} times: {[r.workflow for r in runs]}"
    return found[0]


def gh(github: GitHubRehearsal, run: WorkflowRun, *words: str) -> list[dict]:
    return [c for c in github.gh_calls(run.run_id) if c["args"][: len(words)] == list(words)]


PIN_SYNC_STOP = "<!-- patchctl-pin-sync-stop: "


def pinned(github: GitHubRehearsal, ref: str, upstream: str, *, source: str = "ci") -> str:
    """The pin the workflows follow on github.com (the `ci:` source's where there is one), or the
    embedded default's."""
    import yaml

    config = yaml.safe_load(github.origin_git("show", f"{ref}:matrix.yaml"))
    up = config["upstreams"][upstream]
    return ((up.get("ci") or up) if source == "ci" else up).get("pin", up["pin"])


class Week:
    """One repository's four weeks, with the checks a maintainer would make after each."""

    def __init__(
        self,
        github: GitHubRehearsal,
        upstream: WeekUpstream,
        name: str,
        series: str | None = None,
        *,
        frozen_default: bool,
    ) -> None:
        self.github = github
        # The embedded default source is a mirror frozen at the first pin (`ci:` follows the live one).
        self.frozen_default = frozen_default
        self.upstream = upstream
        self.name = name  # the upstream's name
        self.series = series or name
        self.timings: dict[str, float] = {}
        # With PATCHCTL_BOT_TOKEN the pin-sync pull request runs CI as any other; with GITHUB_TOKEN
        # alone GitHub starts none for it, and pin-sync starts CI on its branch by workflow_dispatch.
        self.bot = "PATCHCTL_BOT_TOKEN" in github.secrets
        self.images = "backend.yml" in github.workflows_at(github.sha(f"refs/heads/{github.default_branch}"))
        self.runs: list[WorkflowRun] = []  # every run of the week, for the report
        self.board: int | None = None  # the dashboard issue's number, once the first run opened it

    def record(self, runs: WorkflowRun | list[WorkflowRun]) -> None:
        self.runs += runs if isinstance(runs, list) else [runs]

    def pin_sync_issues(self) -> list[dict]:
        return [i for i in self.github.issues() if PIN_SYNC_STOP in i["body"]]

    def canary(self, label: str) -> WorkflowRun:
        start = time.monotonic()
        run = self.github.schedule("canary.yml")
        self.timings[label] = time.monotonic() - start
        self.record(run)
        # The schedule's payload has no repository: the issues job must run all the same.
        assert run.ran("issues"), f"the canary's issues job did not run on a schedule\n{run.describe()}"
        assert [j.result for j in run.ran("issues")] == ["success"], run.describe()
        return run

    def dashboard(self, run: WorkflowRun, *shows: str, gone: tuple[str, ...] = ()) -> dict:
        """The dashboard issue after RUN (a scheduled canary or pin-sync): one, the bot's with its
        label, opened by the week's first run and edited in place since (the same number, never a
        second one); its body says SHOWS and none of GONE. The seconds the dashboard took in RUN (its
        job, and pin-sync's status job or the canary's status step) go into the week's timings."""
        assert run.results().get("dashboard") == ["success"], run.describe()
        boards = [i for i in self.github.issues() if DASHBOARD_LABEL in {x["name"] for x in i["labels"]}]
        assert len(boards) == 1, [(b["number"], b["state"]) for b in boards]
        [board] = boards
        assert board["state"] == "OPEN" and board["author"]["login"] == "app/github-actions", board
        opened = [c for c in gh(self.github, run, "issue", "create") if DASHBOARD_LABEL in c["args"]]
        if self.board is None:
            assert [c["job"] for c in opened] == ["dashboard"], opened
            self.board = board["number"]
        else:
            assert opened == [] and board["number"] == self.board, (opened, board["number"], self.board)
        for text in shows:
            assert text in board["body"], (text, board["body"])
        for text in gone:
            assert text not in board["body"], (text, board["body"])
        # What the dashboard adds to the run, for the report: its job (after the run's own jobs),
        # and the status it renders (the canary's step in its resolve job; pin-sync's job, which
        # runs beside the sync jobs).
        judged = (
            ("status job (beside sync)", run.seconds("status"))
            if run.workflow == "pin-sync.yml"
            else ("status step (canary)", run.seconds("resolve", "judge every series for the dashboard"))
        )
        for key, seconds in (("dashboard jobs", run.seconds("dashboard")), judged):
            self.timings[key] = self.timings.get(key, 0.0) + seconds
        return board

    def canary_issues(self) -> list[dict]:
        return [i for i in self.github.issues() if CANARY_KEY in i["body"]]

    def week1(self) -> None:
        github, upstream = self.github, self.upstream
        tip = upstream.advance_cleanly()
        canary = ok(self.canary("week 1 canary"))
        assert self.canary_issues() == []
        # The first scheduled run opens the dashboard: the series applies at the tip, nothing is open.
        self.dashboard(canary, f"| {self.series} | {self.name} |", "✅ **Every series applies strictly")
        # The canary's jobs saved what they fetched: next week starts from the cache.
        assert any(key.startswith("patchctl-v2-") for key in github.cache_keys()), github.action_calls(canary.run_id)

        start = time.monotonic()
        sync = ok(github.schedule("pin-sync.yml"))
        self.record(sync)
        self.timings["week 1 pin-sync"] = time.monotonic() - start
        # The build and the gates ran in the sync job, read-only; the publish job pushed.
        assert sync.results() == {
            "sync": ["success"],
            "publish": ["success"],
            "status": ["success"],
            "dashboard": ["success"],
        }, sync.describe()
        branch = f"patchctl/pin-sync/{self.name}"
        assert pinned(github, f"refs/heads/{branch}", self.name) == tip
        assert pinned(github, f"refs/heads/{branch}", self.name, source="default") == tip  # every pin moved
        [create] = gh(github, sync, "pr", "create")
        assert create["job"] == "publish"
        assert "git range-diff" in create["body"] and self.upstream.subject in create["body"]
        [pull] = github.pulls("open")
        assert pull["headRefName"] == branch and {x["name"] for x in pull["labels"]} == {"pin-sync", "dependencies"}
        # pin-sync's run edits the dashboard: its pull request, and its checks as the token reads them.
        self.dashboard(sync, f"- #{pull['number']} pin-sync: move {self.name} forward (`{branch}`): mergeable")
        assert "not readable with this token" not in self.board_body()

        # The pull request's CI: the new pin linted, applied and gated; its images built, not pushed.
        start = time.monotonic()
        if self.bot:
            assert create["caller"] != "app/github-actions", "the pull request would get no CI"
            assert gh(github, sync, "workflow", "run") == []
            checks = github.on_pull_request(pull["number"])
        else:
            # GITHUB_TOKEN's pull request starts no workflow; pin-sync started CI on the branch.
            assert create["caller"] == "app/github-actions"
            assert github.on_pull_request(pull["number"]) == []
            dispatched = [c["args"][2] for c in gh(github, sync, "workflow", "run")]
            assert dispatched == ["ci.yml", *(["backend.yml"] if self.images else [])], dispatched
            checks = github.run_dispatches()
            assert {r.event for r in checks} == {"workflow_dispatch"}
        self.record(checks)
        self.timings["week 1 pull request CI"] = time.monotonic() - start
        # This repository also builds its manual on every pull request (docs.yml, not rendered).
        manual = ["docs.yml"] if any(r.workflow == "docs.yml" for r in checks) else []
        expected = sorted(["ci.yml", *(["backend.yml"] if self.images else []), *manual])
        assert sorted(r.workflow for r in checks) == expected, [r.workflow for r in checks]
        for docs in manual:
            built = ok(only(checks, docs))
            assert built.results()["build"] == ["success"], built.describe()
            assert "success" not in built.results().get("deploy", []), built.describe()  # no Pages from a PR
        ci = ok(only(checks, "ci.yml"))
        assert ci.results()["patchctl"] == ["success"], ci.describe()
        [applied] = github.artifacts(ci.run_id, "patchctl-patchctl-apply-*")
        report = "".join(p.read_text() for p in applied.rglob("*.md"))
        assert tip[:12] in report, f"the pull request's CI applied another pin than {tip[:12]}:\n{report}"
        if "test" in ci.results():
            # The pull request's own .ci/run: its series tests at the pin of the source CI follows.
            assert ci.results()["test"] == ["success"], ci.describe()
            assert "2 passed" in ci.output_of("test"), ci.output_of("test")[-3000:]
        if self.images:
            # A pull request that only moves the pin builds the images made from that upstream (the
            # plan's `matrix changed --base`), and pushes none.
            backend = ok(only(checks, "backend.yml"))
            assert backend.results()["plan"] == ["success"], backend.describe()
            assert "success" in backend.results().get("linux", []), backend.describe()
            builds = [c for c in github.action_calls(backend.run_id) if c["action"] == "docker/build-push-action"]
            assert builds and not any(c.get("push") for c in builds), builds
            assert [e for e in github.registry() if e["run_id"] == str(backend.run_id)] == []
        self.check_the_branch_under_both_sources(branch, tip)

        # Merged: a push to main builds and pushes the images at the new pin.
        start = time.monotonic()
        pushed = github.merge_pull(pull["number"])
        self.record(pushed)
        self.timings["week 1 merge"] = time.monotonic() - start
        ok(only(pushed, "ci.yml"))
        for docs in manual:  # from main, the manual is published to Pages
            published = ok(only(pushed, docs))
            assert published.results()["deploy"] == ["success"], published.describe()
        if not self.images:
            assert sorted(r.workflow for r in pushed) == ["ci.yml"], [r.workflow for r in pushed]
            return None
        backend = ok(only(pushed, "backend.yml"))
        entries = [e for e in github.registry() if e["run_id"] == str(backend.run_id)]
        images = {e["image"] for e in entries if "image" in e}
        assert images, backend.describe()
        main_sha = github.sha("refs/heads/main")
        assert any(e["tag"].endswith(f":sha-{main_sha}" + e["tag"].split(main_sha)[-1]) for e in entries)
        name, text = self.upstream.new_file
        for image_id in images:
            week_file = subprocess.run(
                ["docker", "run", "--rm", image_id, "cat", f"/opt/tree/{name}"], capture_output=True, text=True
            )
            assert week_file.stdout == text, f"image {image_id} is not at the new pin: {week_file.stderr}"
        return None

    def week2(self) -> None:
        broke = self.upstream.break_the_patch()
        canary = self.canary("week 2 canary")
        assert canary.conclusion == "failure"
        [issue] = self.canary_issues()
        assert issue["state"] == "OPEN" and f"{self.name}/apply/" in issue["body"]
        assert self.upstream.broken_patch in issue["title"] + issue["body"]
        # The dashboard says the series stops, and names the canary's issue beside the patch.
        self.dashboard(canary, "❌ **1 of 1 series stops at the upstream tip**", f"- #{issue['number']} (canary) ")
        assert f"canary issue #{issue['number']})" in self.board_body()
        # ... and the stop's cause: the upstream commit that changed the patch's lines.
        assert "**conflict** at the tip" in self.board_body()
        assert f"upstream changed its lines in `{broke[:12]}`" in self.board_body(), self.board_body()
        sync = self.github.schedule("pin-sync.yml")
        self.record(sync)
        # The sync stops at the conflict (its job red); no pull request is open, so one issue says
        # where it stopped and what to run, opened by the workflow's bot with its label.
        assert sync.results() == {
            "sync": ["failure"],
            "publish": ["success"],
            "status": ["success"],
            "dashboard": ["success"],
        }, sync.describe()
        assert gh(self.github, sync, "pr", "create") == [] and gh(self.github, sync, "pr", "edit") == []
        [stop] = self.pin_sync_issues()
        assert stop["state"] == "OPEN" and stop["author"]["login"] == "app/github-actions"
        assert {x["name"] for x in stop["labels"]} == {"patchctl-pin-sync"}
        assert f"pin-sync {self.name} --continue" in stop["body"] and "conflict" in stop["body"]
        # ... and the dashboard lists pin-sync's stop beside the canary's issue (week 1's pull request
        # was merged: none is open).
        self.dashboard(sync, f"- #{stop['number']} (pin-sync stop) ", f"- #{issue['number']} (canary) ")
        assert "### Pin-sync pull requests\n\nNone open." in self.board_body()
        self.issue, self.stop = issue, stop

    def week3(self) -> None:
        tip = self.upstream.stay_broken()
        canary = self.canary("week 3 canary")
        self.dashboard(canary, f"`{tip[:12]}`", f"- #{self.issue['number']} (canary) ")
        [issue] = self.canary_issues()
        assert issue["number"] == self.issue["number"] and issue["state"] == "OPEN"
        [comment] = issue["comments"]
        assert CANARY_KEY in comment["body"] or tip[:12] in comment["body"], comment

    def week4(self) -> None:
        tip = self.upstream.fix()
        canary = ok(self.canary("week 4 canary"))
        # The canary's issue closed, the dashboard lists it no more (pin-sync's stop is still open).
        self.dashboard(canary, f"- #{self.stop['number']} (pin-sync stop) ", gone=(f"#{self.issue['number']} ",))
        [issue] = self.canary_issues()
        assert issue["number"] == self.issue["number"] and issue["state"] == "CLOSED"
        assert tip[:12] in issue["comments"][-1]["body"]
        # pin-sync goes through again: a new pull request, and the issue of its stop is closed.
        sync = ok(self.github.schedule("pin-sync.yml"))
        self.record(sync)
        [pull] = self.github.pulls("open")
        assert pinned(self.github, f"refs/heads/{pull['headRefName']}", self.name) == tip
        [stop] = self.pin_sync_issues()
        assert stop["number"] == self.stop["number"] and stop["state"] == "CLOSED"
        assert f"#{pull['number']}" in stop["comments"][-1]["body"]
        self.dashboard(sync, f"- #{pull['number']} pin-sync: move ", "Issues patchctl's workflows opened\n\nNone open.")

    def week5(self) -> None:
        """The upstream edits a line of a patch's context: pin-sync merges it 3-way and rewrites the
        patch in the open pull request; on that branch every check passes under the source CI
        follows (and the embedded default serves the new pin, or says in one line it cannot)."""
        tip = self.upstream.edit_the_context()
        sync = ok(self.github.schedule("pin-sync.yml"))
        self.record(sync)
        [pull] = self.github.pulls("open")
        assert gh(self.github, sync, "pr", "edit") and not gh(self.github, sync, "pr", "create")
        self.dashboard(sync, f"- #{pull['number']} pin-sync: move ")
        branch = pull["headRefName"]
        assert pinned(self.github, f"refs/heads/{branch}", self.name) == tip
        changed = self.github.origin_git("diff", "--name-only", f"main...refs/heads/{branch}").split()
        assert any(path.endswith("/" + self.upstream.broken_patch) for path in changed), changed
        self.check_the_branch_under_both_sources(branch, tip)

    def board_body(self) -> str:
        [board] = [i for i in self.github.issues() if i["number"] == self.board]
        return board["body"]

    def check_the_branch_under_both_sources(self, branch: str, tip: str) -> None:
        """On the pin-sync branch, as a maintainer checks it: lint and export --check pass under
        the source CI follows; an embedded default frozen at the old pin (as llama-cpp-python's
        sdists are) says in one line that it cannot serve the new pin, another passes too."""
        clone = self.github.clone(f"refs/heads/{branch}", self.github.root / f"branch-check-{tip[:12]}")
        for source, expected in (("ci", 0), ("default", 3 if self.frozen_default else 0)):
            for args in (["lint"], ["export", self.series, "--check"]):
                result = patchctl(clone, "--upstream-source", source, *args)
                assert result.returncode == expected, (source, args, result.stdout, result.stderr)
                if expected == 3:
                    [line] = [x for x in result.stderr.splitlines() if x.startswith("patchctl: error:")]
                    assert f"cannot serve the pin {tip[:12]}" in line and "--upstream-source ci" in line, line

    def jobs(self) -> list[tuple[int, str, str, str, str]]:
        """(run, workflow, event, job, result) of every job of every run of the week, for the
        report: a job its `if:` left out is `skipped`."""
        found = []
        for run in self.runs:
            found += [(run.run_id, run.workflow, run.event, j.job_id, j.result) for j in run.jobs]
            ran = {j.job_id for j in run.jobs}
            found += [
                (run.run_id, run.workflow, run.event, job, "skipped") for job in run.jobs_defined if job not in ran
            ]
        return found


def patchctl(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHCTL_")}
    env["PATCHCTL_CACHE"] = str(project.parent / "maintainer-cache")
    return subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project), *args], capture_output=True, text=True, env=env
    )


def run_week(
    github: GitHubRehearsal,
    upstream: WeekUpstream | OllamaUpstream,
    name: str,
    series: str | None = None,
    *,
    frozen_default: bool,
) -> Week:
    week = Week(github, upstream, name, series, frozen_default=frozen_default)
    for step in (week.week1, week.week2, week.week3, week.week4, week.week5):
        step()
    return week


@pytest.fixture
def report_week(request: pytest.FixtureRequest) -> Iterator[list[Week]]:
    """The week's timings and every job it ran (workflow, event, job, result), in the test's report."""
    weeks: list[Week] = []
    yield weeks
    for week in weeks:
        timings = {k: round(v, 1) for k, v in week.timings.items()}
        request.node.user_properties.append(("week_timings", json.dumps(timings)))
        request.node.user_properties.append(("week_jobs", json.dumps(week.jobs())))
        out = os.environ.get("PATCHCTL_WEEK_REPORT")
        if out:
            with open(out, "a") as report:
                report.write(json.dumps({"test": request.node.name, "timings": timings, "jobs": week.jobs()}) + "\n")


def test_week_for_this_repository(tmp_path: Path, image: str, report_week: list[Week]) -> None:
    upstream = WeekUpstream(tmp_path)
    source = this_repository(tmp_path / "checkout", upstream, image)
    github = GitHubRehearsal(tmp_path / "github", "rehearsal/patchctl", secrets=BOT_SECRETS)
    github.publish(source)
    try:
        report_week.append(run_week(github, upstream, "llama.cpp", frozen_default=True))
    finally:
        github.remove_images()


def test_week_for_a_new_downstream(tmp_path: Path, image: str, report_week: list[Week]) -> None:
    """A downstream just made by `init`, with an image row: the registries' secrets, and no bot
    token nor App, so pin-sync's pull request gets its CI (ci.yml, and backend.yml for the rows
    the moved pin feeds) by workflow_dispatch."""
    upstream = WeekUpstream(tmp_path)
    source = new_downstream(tmp_path / "checkout", upstream, image)
    assert not (source / "action.yml").exists() and not (source / ".ci").exists()
    linters_find_nothing(source)
    registry_secrets = {k: v for k, v in BOT_SECRETS.items() if k != "PATCHCTL_BOT_TOKEN"}
    github = GitHubRehearsal(
        tmp_path / "github", "acme/libfoo", secrets=registry_secrets, published_actions=published(source, tmp_path)
    )
    github.publish(source)
    try:
        report_week.append(run_week(github, upstream, "libfoo", frozen_default=False))
    finally:
        github.remove_images()


def linters_find_nothing(source: Path) -> None:
    """actionlint, and zizmor as its default and its auditor persona, on every rendered workflow."""
    from tests.patchctl.tools import installed_tool

    workflows = sorted(str(p) for p in (source / ".github/workflows").glob("*.yml"))
    assert workflows
    lint = subprocess.run([installed_tool("actionlint"), "-no-color", *workflows], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    for persona in ("regular", "auditor"):
        audit = subprocess.run(
            [installed_tool("zizmor"), "--offline", "--persona", persona, *workflows], capture_output=True, text=True
        )
        assert audit.returncode == 0 and "No findings to report" in audit.stdout + audit.stderr, (
            persona,
            audit.stdout + audit.stderr,
        )


def published(source: Path, tmp_path: Path) -> dict[str, Path]:
    """OWNER/patchctl (whatever owner the workflows name) -> a copy of this checkout."""
    checkout = copy_checkout(REPO, tmp_path / "published-patchctl")
    actions = {
        "/".join(u.split("@")[0].split("/")[:2])
        for p in (source / ".github/workflows").glob("*.yml")
        for u in uses_of(p.read_text())
    }
    return {a: checkout for a in actions if a.endswith("/patchctl")}


def test_week_for_ollama_adopted_by_init(tmp_path: Path, report_week: list[Week]) -> None:
    """Ollama's vendoring layout (a Makefile.sync and its rsync'd copies of llama.cpp, the fixture
    of tests/patchctl/fixtures/ollama_layout) after `patchctl init --from makefile-sync` and
    nothing else: the same week, with GITHUB_TOKEN alone (no bot token, no App), so pin-sync starts
    its pull request's CI by workflow_dispatch. No image row: an apply-only canary, no Docker."""
    upstream = OllamaUpstream(tmp_path)
    source = ollama_downstream(tmp_path / "checkout", upstream)
    assert sorted(p.name for p in (source / ".github/workflows").glob("*.yml")) == [
        "canary.yml",
        "ci.yml",
        "pin-sync.yml",
    ]
    for path in (source / ".github/workflows").glob("*.yml"):  # patchctl alone: no engine gate
        assert "extras:" not in path.read_text(), path.name
    linters_find_nothing(source)
    github = GitHubRehearsal(tmp_path / "github", "acme/ollama", published_actions=published(source, tmp_path))
    github.publish(source)
    week = run_week(github, upstream, "llama.cpp", "llama", frozen_default=False)
    report_week.append(week)
    # The canary has no toolchain: it applies, and files from the apply job alone.
    canaries = [r for r in week.runs if r.workflow == "canary.yml"]
    assert canaries and all(set(r.results()) == {"resolve", "issues", "dashboard"} for r in canaries)
    # pin-sync moved every place Ollama states the pin: matrix.yaml, Makefile.sync's FETCH_HEAD,
    # and the vendored copy (the week's upstream work is in it).
    merged = github.sha("refs/heads/main")
    pin = pinned(github, merged, "llama.cpp")
    assert f"FETCH_HEAD={pin}\n" in github.origin_git("show", f"{merged}:Makefile.sync")
    assert github.origin_git("show", f"{merged}:llama/llama.cpp/src/llama-vocab.cpp").endswith(
        "// week 1: upstream work\n"
    )
