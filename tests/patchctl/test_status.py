"""`patchctl status`: per patch its upstream status, age, drift, verdict at the tip, recent
pin-syncs; "taken upstream" in status, canary and pin-sync; the page and the short table."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from patchctl import git
from patchctl.loop import health

from .conftest import Project, Repo, make_patch, numbered, ok, run_cli

SENT = "https://github.com/example/up/pull/17"
TAKEN_URL = "https://github.com/example/up/pull/99"
DAY = 86400
T0 = 1_700_000_000


def when(days: int) -> str:
    return f"{T0 + days * DAY} +0000"


def with_status(text: str, header: str) -> str:
    """A format-patch mail with HEADER as the last line of its description."""
    return text.replace("Why this change.\n", f"Why this change.\n\n{header}\n", 1)


@pytest.fixture
def history(project: Project, upstream: Repo) -> dict:
    """A project whose git history has a pin-sync, and an upstream that moved on: it touched
    the file of 0001, took 0004's change as it is, and changed a README."""
    pin = upstream.head
    main_c, util_c = upstream.read("src/main.c"), upstream.read("src/util.c")
    tune = make_patch(upstream, pin, {"src/main.c": main_c.replace("main 5\n", "main five\n")}, "Tune main")
    paged = make_patch(upstream, pin, {"src/paged.c": "int paged;\n"}, "Add paged")
    grow = make_patch(upstream, pin, {"src/util.c": util_c.replace("util 3\n", "util three\n")}, "Grow util")
    gone = make_patch(upstream, pin, {"src/gone.c": "int gone;\n"}, "Add gone")
    header = numbered(10, "decl").replace("decl 2\n", "decl two\n")
    taken = make_patch(upstream, pin, {"include/util.h": header}, "Rename decl two")
    project.add_patch("0001-tune-main.patch", with_status(tune, f"Upstream-Status: Submitted [{SENT}]"))
    project.add_patch("0002-add-paged.patch", with_status(paged, "Upstream-Status: Pending"))
    project.add_patch("0003-grow-util.patch", with_status(grow, "Upstream-Status: Accepted"))
    project.add_patch("0005-add-gone.patch", gone)
    project.commit({}, "Adopt the series", date=when(0))
    # A pin-sync 10 days later: 0001 re-exported with a changed description, 0002 resolved by
    # hand, 0003 untouched, 0005 dropped (its trailers as pin-sync's suggested commit writes them).
    project.write(
        {
            "patches/main/0001-tune-main.patch": project.read("patches/main/0001-tune-main.patch").replace(
                "Why this change.", "Why this change, said again."
            ),
            "patches/main/0002-add-paged.patch": project.read("patches/main/0002-add-paged.patch").replace(
                "int paged;", "int paged = 0;"
            ),
            "patches/main/0005-add-gone.patch": None,
        }
    )
    project.commit(
        {},
        f"pin-sync: move up to {pin[:12]}\n\n"
        "Patchctl-Needed-A-Hand: main/0002-add-paged.patch\n"
        f"Patchctl-Dropped: main/0005-add-gone.patch (taken upstream in {'a' * 40})",
        date=when(10),
    )
    project.add_patch("0004-rename-decl-two.patch", with_status(taken, f"Upstream-Status: Submitted [{TAKEN_URL}]"))
    project.commit({}, "Carry the decl rename", date=when(30))
    touching = upstream.commit({"src/main.c": main_c.replace("main 30\n", "main thirty\n")}, "Upstream edits main")
    took = upstream.commit({"include/util.h": header}, "Rename decl two (from downstream)")
    upstream.commit({"README.md": "# upstream, renamed\n"}, "Docs")
    return {"pin": pin, "touching": touching, "took": took, "tip": upstream.head}


def patches_by_name(payload: dict) -> dict[str, dict]:
    (series,) = payload["series"]
    return {p["patch"]: p for p in series["patches"]}


def test_status_json_gives_each_patch_its_status_age_drift_verdict_and_history(project: Project, history: dict) -> None:
    payload = json.loads(ok("-C", project.path, "status", "--json"))
    (series,) = payload["series"]
    assert (series["pin"], series["tip"], series["commits_since_pin"]) == (history["pin"], history["tip"], 3)
    patches = patches_by_name(payload)
    assert list(patches) == [
        "0001-tune-main.patch",
        "0002-add-paged.patch",
        "0003-grow-util.patch",
        "0004-rename-decl-two.patch",
    ]
    table = {
        name: (p["upstream_status"], p["upstream_url"], p["drift"], p["verdict"], p["age_days"], p["files"])
        for name, p in patches.items()
    }
    assert table == {
        "0001-tune-main.patch": ("Submitted", SENT, 1, "ok", 30, ["src/main.c"]),
        "0002-add-paged.patch": ("Pending", None, 0, "ok", 30, ["src/paged.c"]),
        "0003-grow-util.patch": ("Accepted", None, 0, "ok", 30, ["src/util.c"]),
        "0004-rename-decl-two.patch": ("Submitted", TAKEN_URL, 1, "mechanical", 0, ["include/util.h"]),
    }
    taken = patches["0004-rename-decl-two.patch"]["taken_upstream"]
    assert taken == {
        "commit": history["took"],
        "subject": "Rename decl two (from downstream)",
        "how": "same patch-id",
        "url": TAKEN_URL,
    }
    assert f"taken upstream in {history['took'][:12]}" in patches["0004-rename-decl-two.patch"]["trial"]
    # Accepted, but the tip does not hold it: flagged. Nothing else is.
    assert patches["0003-grow-util.patch"]["flags"] == [
        "marked Accepted, but upstream does not hold its change at the tip"
    ]
    assert [p["flags"] for n, p in patches.items() if n != "0003-grow-util.patch"] == [[], [], []]
    fates = {name: [s["fate"] for s in p["syncs"]] for name, p in patches.items()}
    assert fates == {
        "0001-tune-main.patch": ["rewritten"],
        "0002-add-paged.patch": ["needed a hand"],
        "0003-grow-util.patch": ["kept"],
        "0004-rename-decl-two.patch": [],
    }
    (dropped,) = series["dropped"]
    assert dropped["patch"] == "0005-add-gone.patch" and "taken upstream in aaaa" in dropped["note"]
    # The series' size after each commit that changed its directory, oldest first.
    assert [s["patches"] for s in series["size_history"]] == [4, 3, 4]
    assert series["statuses"] == {"Accepted": 1, "Pending": 1, "Submitted": 2}


def test_status_at_a_revision_and_without_the_trial(project: Project, upstream: Repo, history: dict) -> None:
    payload = json.loads(ok("-C", project.path, "status", "--json", "--rev", history["touching"], "--no-trial"))
    patches = patches_by_name(payload)
    assert {n: (p["drift"], p["verdict"]) for n, p in patches.items()} == {
        "0001-tune-main.patch": (1, None),
        "0002-add-paged.patch": (0, None),
        "0003-grow-util.patch": (0, None),
        "0004-rename-decl-two.patch": (0, None),
    }
    text = ok("-C", project.path, "status", "--rev", history["touching"])
    assert "0001-tune-main.patch: Submitted [" + SENT + "]; age 30d; drift 1; at the tip: ok" in text
    assert "recent pin-syncs: needed a hand" in text
    assert "lacks" not in text
    # A revision that lacks the pin (here a commit with no parent, as a revision from before the pin
    # would be): the report says its drift counts only what follows the pin.
    tree = git.run(["rev-parse", f"{history['pin']}^{{tree}}"], upstream.path).stdout.strip()
    before = git.run(["commit-tree", tree, "-m", "elsewhere"], upstream.path).stdout.strip()
    git.run(["update-ref", "refs/heads/elsewhere", before], upstream.path)
    payload = json.loads(ok("-C", project.path, "status", "--json", "--rev", before, "--no-trial"))
    assert payload["series"][0]["commits_pin_is_ahead"] == 1
    text = ok("-C", project.path, "status", "--rev", before, "--no-trial")
    assert f"! {before} lacks 1 commit(s) of the pin: drift counts only what it has after the pin" in text


def test_status_of_an_unknown_series_is_a_usage_error(project: Project, history: dict) -> None:
    result = run_cli("-C", project.path, "status", "nope")
    assert result.exit_code == 2 and "unknown series 'nope'" in result.stderr


def test_the_page_is_self_contained_with_an_svg_chart(project: Project, history: dict, tmp_path: Path) -> None:
    page = tmp_path / "status.html"
    markdown = tmp_path / "status.md"
    old_mask = os.umask(0o022)
    try:
        ok("-C", project.path, "status", "--html", page, "--markdown", markdown)
    finally:
        os.umask(old_mask)
    # A page to publish: readable by a web server as any new file is (the umask's mode, not mkstemp's 0600).
    assert stat.S_IMODE(page.stat().st_mode) == stat.S_IMODE(markdown.stat().st_mode) == 0o644
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2  # the series at the tip, and over time
    assert "<script" not in text and "<link" not in text and "@import" not in text
    # Nothing to fetch: the only references are in-page ones (the SVG's) and the patches' URLs.
    assert not re.search(r"""(?:src|href)=["'](?!#|https://github\.com/example/)""", text)
    assert re.search(r"<path\b", text)  # the chart is drawn (markers and glyphs are paths)
    for name in ("0001-tune-main.patch", "0004-rename-decl-two.patch", "Pending", "Accepted"):
        assert name in text
    # The same report gives the same page.
    again = tmp_path / "again.html"
    ok("-C", project.path, "status", "--html", again)
    assert again.read_text() == text
    table = markdown.read_text()
    assert f"| main | 0004-rename-decl-two.patch | Submitted <{TAKEN_URL}> | 1 | mechanical |" in table
    assert f"taken upstream in {history['took'][:12]}" in table


def test_canary_says_taken_upstream_and_carries_the_table(project: Project, history: dict) -> None:
    result = run_cli("-C", project.path, "canary", "up", "--json")
    assert result.exit_code == 1, result.output  # 0004 no longer applies strictly: red
    payload = json.loads(result.stdout)
    (series,) = payload["series"]
    taken = next(p for p in series["patches"] if p["patch"] == "0004-rename-decl-two.patch")
    assert taken["verdict"] == "mechanical" and taken["taken_upstream"]["commit"] == history["took"]
    rows = {row["patch"]: row for row in payload["health"]}
    assert rows["0003-grow-util.patch"]["note"] == "marked Accepted, but upstream does not hold its change at the tip"
    markdown = run_cli("-C", project.path, "canary", "up", "--no-bisect")
    assert "Series health: 4 patch(es)" in markdown.stdout
    assert f"taken upstream in {history['took'][:12]}" in markdown.stdout


def test_pin_sync_drops_a_patch_taken_upstream_with_the_note(project: Project, history: dict) -> None:
    result = run_cli("-C", project.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 0, result.output
    assert "0004-rename-decl-two.patch" not in project.patch_names()
    assert f"taken upstream in {history['took'][:12]}" in result.stdout
    assert TAKEN_URL in result.stdout
    assert "Series health" in result.stdout
    # Its suggested commit says so in a trailer, which `status` reads back.
    assert f"Patchctl-Dropped: main/0004-rename-decl-two.patch (taken upstream in {history['took']})" in result.stdout


@pytest.mark.parametrize(
    ("detail", "linked"),
    [
        ("javascript:alert(1)", None),
        ("https://evil.example/a><img src=x onerror=alert(1)>", "https://evil.example/a"),
        ("https://evil.example/`x` @octocat #1", None),
        ("see https://evil.example/pr|1 and <b>bold</b>", None),
    ],
)
def test_a_hostile_submitted_detail_links_at_most_its_plain_url(
    project: Project, upstream: Repo, tmp_path: Path, detail: str, linked: str | None
) -> None:
    """The report links only a plain http(s) URL read from the header (the part of the detail
    before anything that could end it); nothing else of the detail becomes a tag or a link."""
    from .markdown_check import FOREIGN_TAG, render

    main_c = upstream.read("src/main.c")
    patch = make_patch(upstream, upstream.head, {"src/main.c": main_c.replace("main 5\n", "main V\n")}, "Tune")
    project.add_patch("0001-tune.patch", with_status(patch, f"Upstream-Status: Submitted [{detail}]"))
    markdown, page = tmp_path / "status.md", tmp_path / "status.html"
    ok("-C", project.path, "status", "--no-trial", "--markdown", markdown, "--html", page)
    rendered = render(markdown.read_text())
    assert re.findall(r'<a href="([^"]*)"', rendered) == ([linked] if linked else [])
    assert not FOREIGN_TAG.search(re.sub(r"</?a\b[^>]*>", "", rendered))
    text = page.read_text()
    assert "<img" not in text and "<b>" not in text
    assert re.findall(r'<a href="([^"]*)"', text) == ([linked] if linked else [])


def test_drifts_from_one_log_count_what_rev_list_counts(upstream: Repo) -> None:
    """The drift of every patch from one `git log` of the range agrees with `git rev-list
    --count PIN..TIP -- PATHS` for each (files, directories, a name that starts like another,
    paths git reads as globs or normalizes, an empty commit, a deletion, a new file), also
    across a merge, where the history simplification of rev-list is left to rev-list."""
    pin = upstream.head
    upstream.commit({"src/main.c": numbered(41, "main")}, "main")
    upstream.commit({"src/main.cc": "int cc;\n", "src/[x].c": "int x;\n"}, "names that look alike")
    upstream.git("commit", "-q", "--allow-empty", "-m", "empty")
    upstream.commit({"include/util.h": None}, "drop the header")
    upstream.commit({"src/deep/new.c": "int deep;\n", "README.md": "# moved on\n"}, "deeper")
    linear_tip = upstream.head
    upstream.git("checkout", "-q", "-b", "side", pin)
    upstream.commit({"src/util.c": numbered(31, "util")}, "side")
    upstream.git("checkout", "-q", "main")
    upstream.git("merge", "-q", "--no-edit", "side")
    path_lists = [
        [],
        ["src/main.c"],
        ["src/main.cc"],
        ["src/main"],
        ["src"],
        ["src/"],
        ["src/deep"],
        ["include/util.h", "README.md"],
        ["src/util.c"],
        ["src/[x].c"],
        ["src/*.c"],
        ["./src/main.c"],
        ["nowhere.c"],
    ]
    for tip in (linear_tip, upstream.head):
        expected = [health.drift(upstream.path, pin, tip, paths) for paths in path_lists]
        assert health.drifts(upstream.path, pin, tip, path_lists) == expected
    assert health.drifts(upstream.path, pin, linear_tip, path_lists)[1:6] == [1, 1, 0, 3, 3]
    assert health.drifts(upstream.path, "0" * 40, linear_tip, [["src"]]) == [None]
