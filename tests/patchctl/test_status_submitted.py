"""Submitted patches, watched (`patchctl.loop.submitted`): a patch whose `Upstream-Status:
Submitted [URL]` names a GitHub pull request is asked about with `gh pr view` when asked
(`status --check-submitted`, the canary's scheduled workflow), never otherwise. Merged: "expect
taken upstream at the next bump"; closed unmerged: "rejected upstream: update the status"; in
status's text, JSON and page, and in the canary's report. gh is the rehearsal's stand-in
(tests/journeys/gh_standin.py): no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from patchctl.loop.submitted import CLOSED_NOTE, MERGED_NOTE

from .conftest import Project, Repo, make_patch, ok, run_cli
from .gh_on_path import gh_on_path

PULL = "https://github.com/example/up/pull/{}"


@pytest.fixture
def gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`gh` on PATH: the stand-in, with example/up's pull requests #17 merged, #99 closed
    unmerged, #5 open. Returns its call log (one JSON line a call)."""
    store = gh_on_path(tmp_path, monkeypatch, "ghp_personal_token_of_a_maintainer")
    pulls = [
        {"number": 17, "state": "MERGED", "mergedAt": "2026-08-01T10:00:00Z", "headRefName": "tune"},
        {"number": 99, "state": "CLOSED", "mergedAt": None, "headRefName": "decl"},
        {"number": 5, "state": "OPEN", "mergedAt": None, "headRefName": "paged"},
    ]
    for pull in pulls:
        pull["url"] = PULL.format(pull["number"])
    (store / "github.json").write_text(json.dumps({"example/up": {"pulls": pulls}}))
    return store / "gh.jsonl"


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line)["args"] for line in log.read_text().splitlines()] if log.exists() else []


def with_status(text: str, header: str) -> str:
    return text.replace("Why this change.\n", f"Why this change.\n\n{header}\n", 1)


@pytest.fixture
def sent(project: Project, upstream: Repo) -> Project:
    """Patches sent upstream as #17 (merged), #99 (closed), #5 (open), #17 again from another
    patch, one sent to a mailing list, one asked about with a URL that tries to be an option,
    and one Pending."""
    pin = upstream.head
    headers = {
        "0001-merged.patch": f"Upstream-Status: Submitted [{PULL.format(17)}]",
        "0002-closed.patch": f"Upstream-Status: Submitted [{PULL.format(99)}]",
        "0003-open.patch": f"Upstream-Status: Submitted [{PULL.format(5)}]",
        "0004-merged-too.patch": f"Upstream-Status: Submitted [{PULL.format(17)}/files]",
        "0005-mailed.patch": "Upstream-Status: Submitted [https://lists.example.org/up/2026-08/msg1.html]",
        "0006-trick.patch": f"Upstream-Status: Submitted [{PULL.format(5)}?--repo=evil/x]",
        "0007-pending.patch": "Upstream-Status: Pending",
    }
    for number, (name, header) in enumerate(headers.items(), 1):
        patch = make_patch(upstream, pin, {f"src/s{number}.c": f"int s{number};\n"}, f"Add s{number}")
        project.add_patch(name, with_status(patch, header))
    project.commit({}, "carry")
    return project


def test_status_says_what_became_of_each_pull_request(sent: Project, gh: Path, tmp_path: Path) -> None:
    payload = json.loads(ok("-C", sent.path, "status", "--check-submitted", "--no-trial", "--json"))
    patches = {p["patch"]: p for p in payload["series"][0]["patches"]}
    assert {name: (p.get("submitted") or {}).get("state") for name, p in patches.items()} == {
        "0001-merged.patch": "merged",
        "0002-closed.patch": "closed",
        "0003-open.patch": "open",
        "0004-merged-too.patch": "merged",
        "0005-mailed.patch": None,  # no pull request: nothing to ask
        "0006-trick.patch": "open",  # #5 of example/up, whatever follows the number
        "0007-pending.patch": None,
    }
    assert patches["0001-merged.patch"]["flags"] == [MERGED_NOTE]
    assert patches["0002-closed.patch"]["flags"] == [CLOSED_NOTE]
    assert patches["0003-open.patch"]["flags"] == []
    # Each pull request asked once, by number and repository, read-only.
    assert sorted(calls(gh)) == [
        ["pr", "view", "17", "--repo", "example/up", "--json", "state,mergedAt,url"],
        ["pr", "view", "5", "--repo", "example/up", "--json", "state,mergedAt,url"],
        ["pr", "view", "99", "--repo", "example/up", "--json", "state,mergedAt,url"],
    ]
    text = ok("-C", sent.path, "status", "--check-submitted", "--no-trial")
    assert f"0001-merged.patch: Submitted [{PULL.format(17)}]" in text and f"    ! {MERGED_NOTE}" in text
    assert f"    ! {CLOSED_NOTE}" in text
    page = tmp_path / "status.html"
    ok("-C", sent.path, "status", "--check-submitted", "--no-trial", "--html", page)
    assert page.read_text().count("pull request: merged") == 2
    assert "pull request: closed" in page.read_text()


def test_nothing_is_asked_unless_asked(sent: Project, gh: Path) -> None:
    payload = json.loads(ok("-C", sent.path, "status", "--no-trial", "--json"))
    assert all("submitted" not in p for p in payload["series"][0]["patches"])
    assert calls(gh) == []


def test_a_pull_request_gh_cannot_tell_about_is_not_checked_and_the_report_goes_on(
    project: Project, upstream: Repo, gh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch = make_patch(upstream, upstream.head, {"src/x.c": "int x;\n"}, "Add x")
    project.add_patch("0001-lost.patch", with_status(patch, f"Upstream-Status: Submitted [{PULL.format(404)}]"))
    payload = json.loads(ok("-C", project.path, "status", "--check-submitted", "--no-trial", "--json"))
    (entry,) = payload["series"][0]["patches"]
    assert entry["submitted"] == {
        "url": PULL.format(404),
        "state": "not checked",
        "note": "gh: GraphQL: Could not resolve to a PullRequest with the number of 404. (repository.pullRequest)",
    }
    assert entry["flags"] == []
    monkeypatch.delenv("GH_TOKEN")  # gh without a token says so; the note carries its line
    payload = json.loads(ok("-C", project.path, "status", "--check-submitted", "--no-trial", "--json"))
    assert payload["series"][0]["patches"][0]["submitted"]["note"].startswith("gh: gh: To use GitHub CLI")


def test_asking_without_gh_is_one_line_and_exit_3(
    sent: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:/usr/bin:/bin")
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "gh" else "/usr/bin/" + name)
    result = run_cli("-C", sent.path, "status", "--check-submitted", "--no-trial")
    assert result.exit_code == 3
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "checking Submitted patches asks the GitHub CLI, which is not installed: "
            "install gh (https://cli.github.com) or leave --check-submitted out"
        )
    )


def test_the_canary_reports_merged_and_closed_pull_requests(sent: Project, gh: Path) -> None:
    result = run_cli("-C", sent.path, "canary", "up", "--check-submitted", "--json")
    assert result.exit_code == 0, result.output
    notes = {row["patch"]: row["note"] for row in json.loads(result.stdout)["health"]}
    assert notes["0001-merged.patch"] == notes["0004-merged-too.patch"] == MERGED_NOTE
    assert notes["0002-closed.patch"] == CLOSED_NOTE
    assert notes["0003-open.patch"] == notes["0007-pending.patch"] == ""
    markdown = run_cli("-C", sent.path, "canary", "up", "--check-submitted", "--no-bisect").stdout
    assert MERGED_NOTE in markdown and "rejected upstream: update the status" in markdown
    before = len(calls(gh))
    run_cli("-C", sent.path, "canary", "up", "--json")
    assert len(calls(gh)) == before  # the canary asks only when told to


def test_the_scheduled_canary_asks_with_the_workflow_token() -> None:
    """The rendered canary workflow's apply job runs the canary with --check-submitted and gives
    gh the run's own token (read-only: its job writes nothing)."""
    root = Path(__file__).resolve().parents[2]
    job = yaml.safe_load((root / ".github/workflows/canary.yml").read_text())["jobs"]["resolve"]
    (step,) = [s for s in job["steps"] if s.get("id") == "canary"]
    assert "--check-submitted" in step["run"] and step["env"]["GH_TOKEN"] == "${{ github.token }}"
    assert job["permissions"] == {"contents": "read"}
