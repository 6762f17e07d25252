"""A week on github.com, rehearsed here under act (issue 30, item 3).

Four weeks of one repository's rendered workflows, started by the events GitHub would send
(tests/journeys/github_rehearsal.py), for this repository and for a downstream just made by
`patchctl init`:

1. the upstream advances cleanly: the canary is green; pin-sync pushes a branch and opens a pull
   request whose body has the range-diff; that pull request's CI lints, applies and gates the
   new pin and builds its images; merging it (a push to main) builds and pushes the images at
   the new pin, and joins each amd64/arm64 pair;
2. the upstream breaks the patch: the canary opens one issue, with its key;
3. still broken at a newer tip: the same issue gets a comment;
4. fixed upstream: the issue is closed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.patchctl.docker_image import require_engine

from .github_rehearsal import GitHubRehearsal, WorkflowRun, uses_of
from .week_fixtures import REPO, WeekUpstream, base_image, copy_checkout, new_downstream, this_repository

pytestmark = [pytest.mark.journey, pytest.mark.docker]

CANARY_KEY = "<!-- patchctl-canary-key: "
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


def pinned(github: GitHubRehearsal, ref: str, upstream: str) -> str:
    """The pin the workflows follow on github.com: the `ci:` source's where there is one."""
    import yaml

    config = yaml.safe_load(github.origin_git("show", f"{ref}:matrix.yaml"))
    up = config["upstreams"][upstream]
    return (up.get("ci") or up)["pin"]


class Week:
    """One repository's four weeks, with the checks a maintainer would make after each."""

    def __init__(self, github: GitHubRehearsal, upstream: WeekUpstream, name: str) -> None:
        self.github = github
        self.upstream = upstream
        self.name = name  # the upstream's and the series' name
        self.timings: dict[str, float] = {}

    def canary(self, label: str) -> WorkflowRun:
        start = time.monotonic()
        run = self.github.schedule("canary.yml")
        self.timings[label] = time.monotonic() - start
        # The schedule's payload has no repository: the issues job must run all the same.
        assert run.ran("issues"), f"the canary's issues job did not run on a schedule\n{run.describe()}"
        assert [j.result for j in run.ran("issues")] == ["success"], run.describe()
        return run

    def canary_issues(self) -> list[dict]:
        return [i for i in self.github.issues() if CANARY_KEY in i["body"]]

    def week1(self) -> None:
        github, upstream = self.github, self.upstream
        tip = upstream.advance_cleanly()
        canary = ok(self.canary("week 1 canary"))
        assert self.canary_issues() == []
        # The canary's jobs saved what they fetched: next week starts from the cache.
        assert any(key.startswith("patchctl-v2-") for key in github.cache_keys()), github.action_calls(canary.run_id)

        start = time.monotonic()
        sync = ok(github.schedule("pin-sync.yml"))
        self.timings["week 1 pin-sync"] = time.monotonic() - start
        branch = f"patchctl/pin-sync/{self.name}"
        assert pinned(github, f"refs/heads/{branch}", self.name) == tip
        [create] = gh(github, sync, "pr", "create")
        assert create["caller"] != "app/github-actions", "the pull request would get no CI"
        assert "git range-diff" in create["body"] and "Patch line twenty" in create["body"]
        [pull] = github.pulls("open")
        assert pull["headRefName"] == branch and {x["name"] for x in pull["labels"]} == {"pin-sync", "dependencies"}

        # The pull request's CI: the new pin linted, applied and gated; its images built, not pushed.
        start = time.monotonic()
        checks = github.on_pull_request(pull["number"])
        self.timings["week 1 pull request CI"] = time.monotonic() - start
        # This repository also builds its manual on every pull request (docs.yml, not rendered).
        manual = ["docs.yml"] if any(r.workflow == "docs.yml" for r in checks) else []
        assert sorted(r.workflow for r in checks) == ["backend.yml", "ci.yml", *manual], [r.workflow for r in checks]
        for docs in manual:
            built = ok(only(checks, docs))
            assert built.results()["build"] == ["success"], built.describe()
            assert "success" not in built.results().get("deploy", []), built.describe()  # no Pages from a PR
        ci = ok(only(checks, "ci.yml"))
        assert ci.results()["patchctl"] == ["success"], ci.describe()
        [applied] = github.artifacts(ci.run_id, "patchctl-patchctl-apply-*")
        report = "".join(p.read_text() for p in applied.rglob("*.md"))
        assert tip[:12] in report, f"the pull request's CI applied another pin than {tip[:12]}:\n{report}"
        # backend.yml starts (matrix.yaml changed) and pushes nothing from a pull request. Its plan
        # (`matrix changed --base`) selects rows by the files they build from, and a moved pin is
        # no file of theirs: the pull request builds no image (the push to main builds them all).
        backend = ok(only(checks, "backend.yml"))
        assert backend.results()["plan"] == ["success"], backend.describe()
        assert [e for e in github.registry() if e["run_id"] == str(backend.run_id)] == []

        # Merged: a push to main builds and pushes the images at the new pin.
        start = time.monotonic()
        pushed = github.merge_pull(pull["number"])
        self.timings["week 1 merge"] = time.monotonic() - start
        backend = ok(only(pushed, "backend.yml"))
        ok(only(pushed, "ci.yml"))
        for docs in manual:  # from main, the manual is published to Pages
            published = ok(only(pushed, docs))
            assert published.results()["deploy"] == ["success"], published.describe()
        entries = [e for e in github.registry() if e["run_id"] == str(backend.run_id)]
        images = {e["image"] for e in entries if "image" in e}
        assert images, backend.describe()
        main_sha = github.sha("refs/heads/main")
        assert any(e["tag"].endswith(f":sha-{main_sha}" + e["tag"].split(main_sha)[-1]) for e in entries)
        for image_id in images:
            week_file = subprocess.run(
                ["docker", "run", "--rm", image_id, "cat", "/opt/tree/src/new.c"], capture_output=True, text=True
            )
            assert week_file.stdout == "int week1;\n", f"image {image_id} is not at the new pin: {week_file.stderr}"
        return None

    def week2(self) -> None:
        self.upstream.break_the_patch()
        canary = self.canary("week 2 canary")
        assert canary.conclusion == "failure"
        [issue] = self.canary_issues()
        assert issue["state"] == "OPEN" and f"{self.name}/apply/" in issue["body"]
        assert "0001-patch-line-twenty.patch" in issue["title"] + issue["body"]
        sync = self.github.schedule("pin-sync.yml")
        assert sync.conclusion == "failure" and gh(self.github, sync, "pr") == []
        self.issue = issue

    def week3(self) -> None:
        tip = self.upstream.stay_broken()
        self.canary("week 3 canary")
        [issue] = self.canary_issues()
        assert issue["number"] == self.issue["number"] and issue["state"] == "OPEN"
        [comment] = issue["comments"]
        assert CANARY_KEY in comment["body"] or tip[:12] in comment["body"], comment

    def week4(self) -> None:
        tip = self.upstream.fix()
        ok(self.canary("week 4 canary"))
        [issue] = self.canary_issues()
        assert issue["number"] == self.issue["number"] and issue["state"] == "CLOSED"
        assert tip[:12] in issue["comments"][-1]["body"]


def run_week(github: GitHubRehearsal, upstream: WeekUpstream, name: str) -> dict[str, float]:
    week = Week(github, upstream, name)
    for step in (week.week1, week.week2, week.week3, week.week4):
        step()
    return week.timings


@pytest.fixture
def report_timings(request: pytest.FixtureRequest) -> Iterator[dict[str, float]]:
    timings: dict[str, float] = {}
    yield timings
    request.node.user_properties.append(("week_timings", json.dumps({k: round(v, 1) for k, v in timings.items()})))


def test_week_for_this_repository(tmp_path: Path, image: str, report_timings: dict[str, float]) -> None:
    upstream = WeekUpstream(tmp_path)
    source = this_repository(tmp_path / "checkout", upstream, image)
    github = GitHubRehearsal(tmp_path / "github", "rehearsal/patchctl", secrets=BOT_SECRETS)
    github.publish(source)
    try:
        report_timings.update(run_week(github, upstream, "llama.cpp"))
    finally:
        github.remove_images()


def test_week_for_a_new_downstream(tmp_path: Path, image: str, report_timings: dict[str, float]) -> None:
    upstream = WeekUpstream(tmp_path)
    source = new_downstream(tmp_path / "checkout", upstream, image)
    assert not (source / "action.yml").exists() and not (source / ".ci").exists()
    published = copy_checkout(REPO, tmp_path / "published-patchctl")
    actions = {
        "/".join(u.split("@")[0].split("/")[:2])
        for p in (source / ".github/workflows").glob("*.yml")
        for u in uses_of(p.read_text())
    }
    patchctl_actions = {a: published for a in actions if a.endswith("/patchctl")}
    github = GitHubRehearsal(
        tmp_path / "github", "acme/libfoo", secrets=BOT_SECRETS, published_actions=patchctl_actions
    )
    github.publish(source)
    try:
        report_timings.update(run_week(github, upstream, "libfoo"))
    finally:
        github.remove_images()
