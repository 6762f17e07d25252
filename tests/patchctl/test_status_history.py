"""`patchctl status` reads a series directory's history once (`patchctl.loop.series_history`):
each patch followed through renames, a moved directory, a copied one and a merge, as `git log
--follow` per patch found it; the pin-syncs it went through (a squash, a merge of the pin-sync
branch, a rename between two syncs); the series over time by upstream status; the patches that
left it, and which of them went upstream. Hostile names and subjects are read as what they are.
And the number of git processes does not grow with the number of patches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchctl import git
from patchctl.loop import series_history
from patchctl.loop.series_history import ProjectHistory

from .conftest import Project, Repo, make_patch, ok

DAY = 86400
T0 = 1_700_000_000


def when(days: float) -> str:
    return f"{int(T0 + days * DAY)} +0000"


def iso(days: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(int(T0 + days * DAY), tz=timezone.utc).isoformat()


def patch_text(subject: str, status: str | None = None, revision: int = 0) -> str:
    header = f"\nUpstream-Status: {status}\n" if status else ""
    return (
        f"From: Dev <dev@example.com>\nSubject: [PATCH] {subject}\n\nWhy, take {revision}.\n{header}---\n"
        f"diff --git a/src/{subject}.c b/src/{subject}.c\n--- a/src/{subject}.c\n+++ b/src/{subject}.c\n"
        f"@@ -1 +1 @@\n-old\n+{subject} {revision}\n"
    )


def merge(repo: Repo, branch: str, message: str, date: str) -> None:
    """BRANCH merged into the checked-out branch with a merge commit at DATE, as GitHub merges a pull request."""
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git.run(["merge", "-q", "--no-ff", "-m", message, branch], repo.path, env=env)


def followed(repo: Path, path: str) -> str | None:
    """When PATH entered the project as `git log --follow` tells it: the path before #46.3."""
    dates = git.run(["log", "--follow", "--diff-filter=A", "--format=%cI", "--", path], repo).stdout.split()
    return dates[-1] if dates else None


@pytest.fixture
def lived(tmp_path: Path) -> Repo:
    """A project whose series lived a life: carried under patches/old, renamed, moved to
    patches/main, brought in from a side branch by a merge, migrated by copy from another
    directory (then the old one deleted, as Ollama did), rewritten and dropped by pin-syncs
    (one squashed on main, one merged from its branch), and left by hand."""
    repo = Repo(tmp_path / "project")
    repo.commit({"README.md": "# project\n"}, "start", date=when(0))
    repo.commit(
        {f"patches/old/000{i}-p{i}.patch": patch_text(f"p{i}", "Pending") for i in (1, 2, 3)}, "carry", date=when(1)
    )
    repo.git("mv", "patches/old/0002-p2.patch", "patches/old/0002-p2-renamed.patch")
    repo.commit({}, "rename one", date=when(2))
    repo.commit({"app.c": "int app;\n"}, "unrelated", date=when(3))
    repo.git("mv", "patches/old", "patches/main")
    repo.commit({}, "move the series", date=when(4))
    # A side branch carries p4, merged with a merge commit.
    repo.git("checkout", "-q", "-b", "side")
    repo.commit(
        {"patches/main/0004-p4.patch": patch_text("p4", "Submitted [https://github.com/up/up/pull/4]")},
        "p4",
        date=when(5),
    )
    repo.git("checkout", "-q", "main")
    repo.commit({"app.c": "int app = 1;\n"}, "main moves on", date=when(6))
    merge(repo, "side", "Merge branch 'side'", when(7))
    # Another directory's patches, copied in all at once (at least half the series: a migration,
    # where git's copy detection among all files runs), the old directory deleted later.
    vendor = {i: patch_text(f"v{i}", "Backport [https://up/{i}]") for i in (5, 6, 7, 8)}
    repo.commit(
        {f"vendor/patches/000{i}-v{i}.patch": text for i, text in vendor.items()}, "vendor patches", date=when(8)
    )
    repo.commit({f"patches/main/000{i}-v{i}.patch": text for i, text in vendor.items()}, "adopt them", date=when(20))
    repo.commit({f"vendor/patches/000{i}-v{i}.patch": None for i in vendor}, "drop the old copy", date=when(21))
    # A pin-sync, squashed: p1 rewritten and needed a hand, p3 dropped as taken upstream.
    repo.commit(
        {"patches/main/0001-p1.patch": patch_text("p1", "Pending", 1), "patches/main/0003-p3.patch": None},
        "pin-sync: move up to abc\n\nPatchctl-Needed-A-Hand: main/0001-p1.patch\n"
        f"Patchctl-Dropped: main/0003-p3.patch (taken upstream in {'c' * 40})",
        date=when(30),
    )
    # A pin-sync on its own branch, merged: v5 rewritten.
    repo.git("checkout", "-q", "-b", "patchctl/pin-sync")
    repo.commit(
        {"patches/main/0005-v5.patch": patch_text("v5", "Backport [https://up/5]", 2)},
        "pin-sync: move up to def",
        date=when(40),
    )
    repo.git("checkout", "-q", "main")
    repo.commit({"app.c": "int app = 2;\n"}, "main moves on again", date=when(41))
    merge(repo, "patchctl/pin-sync", "Merge pull request #9 from patchctl/pin-sync", when(42))
    # Renamed between two syncs, then a pin-sync that stops at it; v6 submitted, then left by hand.
    repo.git("mv", "patches/main/0001-p1.patch", "patches/main/0001-p1-renumbered.patch")
    repo.commit({}, "renumber", date=when(50))
    repo.commit(
        {"patches/main/0001-p1-renumbered.patch": patch_text("p1", "Pending", 3)},
        "pin-sync: move up to 123\n\nPatchctl-Needed-A-Hand: main/0001-p1-renumbered.patch",
        date=when(60),
    )
    repo.commit(
        {"patches/main/0006-v6.patch": patch_text("v6", "Submitted [https://github.com/up/up/pull/6]")},
        "sent",
        date=when(70),
    )
    repo.commit({"patches/main/0006-v6.patch": None}, "merged upstream", date=when(80))
    repo.commit({"patches/main/0007-v7.patch": None}, "not needed", date=when(90))
    return repo


def test_ages_follow_renames_moves_copies_and_merges_as_git_log_follow_does(lived: Repo) -> None:
    history = ProjectHistory(lived.path)
    past = history.series(lived.path / "patches/main", "main", "up")
    now = sorted(path for path in past.lineages if series_history.is_patch_name(path.rsplit("/", 1)[-1]))
    assert now == [
        "patches/main/0001-p1-renumbered.patch",
        "patches/main/0002-p2-renamed.patch",
        "patches/main/0004-p4.patch",
        "patches/main/0005-v5.patch",
        "patches/main/0008-v8.patch",
    ]
    ages = {path: past.lineages[path].added for path in now}
    assert ages == {
        "patches/main/0001-p1-renumbered.patch": iso(1),  # renamed, and moved with its directory
        "patches/main/0002-p2-renamed.patch": iso(1),  # renamed, then moved
        "patches/main/0004-p4.patch": iso(5),  # the side branch's commit, not the merge
        "patches/main/0005-v5.patch": iso(8),  # copied from vendor/patches, where it came first
        "patches/main/0008-v8.patch": iso(8),
    }
    # What `git log --follow` per patch said (the path status took before): the same dates.
    assert {path: followed(lived.path, path) for path in now} == ages
    assert [(m["dir"], m["patches"]) for m in past.moved_from] == [("patches/old", 3), ("vendor/patches", 4)]


def test_pin_syncs_are_read_squashed_or_merged_and_follow_a_renamed_patch(lived: Repo) -> None:
    past = ProjectHistory(lived.path).series(lived.path / "patches/main", "main", "up")
    fates = {
        path.rsplit("/", 1)[-1]: [(f.date, f.fate) for f in lineage.fates] for path, lineage in past.lineages.items()
    }
    assert fates["0001-p1-renumbered.patch"] == [
        (iso(30), "needed a hand"),
        (iso(40), "kept"),
        (iso(60), "needed a hand"),
    ]
    assert fates["0005-v5.patch"] == [(iso(30), "kept"), (iso(40), "rewritten"), (iso(60), "kept")]
    assert past.lineages["patches/main/0001-p1-renumbered.patch"].stops == 2
    # A pin-sync of another upstream is no pin-sync of this one.
    other = ProjectHistory(lived.path).series(lived.path / "patches/main", "main", "elsewhere")
    assert all(not lineage.fates for lineage in other.lineages.values())
    assert [(d["patch"], d["date"]) for d in past.dropped] == [("0003-p3.patch", iso(30))]
    assert past.dropped[0]["note"].startswith("main/0003-p3.patch (taken upstream in cccc")


def test_the_series_over_time_and_the_patches_that_left_it(lived: Repo) -> None:
    past = ProjectHistory(lived.path).series(lived.path / "patches/main", "main", "up")
    # Along the main line (the side branches' commits are in their merges), oldest first: the
    # moved directory's own past comes first.
    sizes = [(s.date, s.patches, s.statuses) for s in past.sizes]
    assert sizes[0] == (iso(1), 3, {"Pending": 3})
    # The merge that brought p4 changed nothing its side had not: the line goes through the side's commit.
    assert (iso(5), 4, {"Pending": 3, "Submitted": 1}) in sizes
    assert (iso(20), 8, {"Backport": 4, "Pending": 3, "Submitted": 1}) in sizes
    assert sizes[-1] == (iso(90), 5, {"Backport": 2, "Pending": 2, "Submitted": 1})
    left = [(d.patch, d.date, d.upstream_status, d.went_upstream) for d in past.departures]
    assert left == [
        ("0003-p3.patch", iso(30), "Pending", True),  # dropped by a pin-sync as taken upstream
        ("0006-v6.patch", iso(80), "Submitted", True),  # removed while Submitted (since day 70): merged upstream
        ("0007-v7.patch", iso(90), "Backport", True),  # a backport leaves when upstream has it
    ]
    assert [d.added for d in past.departures] == [iso(1), iso(8), iso(8)]


def test_status_json_carries_the_history_for_a_dashboard(project: Project, upstream: Repo) -> None:
    """`status --json` holds what a dashboard needs: per patch its age, pin-syncs and stops; per
    series the verdicts counted, its size over time by status, the patches that left it."""
    pin = upstream.head
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-tune.patch", make_patch(upstream, pin, {"src/main.c": main_c.replace("main 5\n", "main V\n")}, "Tune")
    )
    project.commit({}, "carry", date=when(0))
    rewritten = project.read("patches/main/0001-tune.patch").replace("Why this change.", "Why this change, again.")
    project.commit(
        {"patches/main/0001-tune.patch": rewritten},
        "pin-sync: move up to x\n\nPatchctl-Needed-A-Hand: main/0001-tune.patch",
        date=when(3),
    )
    project.add_patch("0002-gone.patch", make_patch(upstream, pin, {"src/gone.c": "int gone;\n"}, "Gone"))
    project.commit({}, "carry another", date=when(5))
    (project.series_dir / "0002-gone.patch").unlink()
    project.commit({}, "drop it", date=when(9))
    payload = json.loads(ok("-C", project.path, "status", "--json"))
    (series,) = payload["series"]
    (patch,) = series["patches"]
    assert (patch["age_days"], patch["pin_syncs"], patch["pin_syncs_stopped"], patch["verdict"]) == (9, 1, 1, "ok")
    assert series["verdicts"] == {"ok": 1}
    assert [(s["patches"], s["statuses"]) for s in series["size_history"]] == [
        (1, {"none": 1}),
        (1, {"none": 1}),
        (2, {"none": 2}),
        (1, {"none": 1}),
    ]
    assert series["departures"] == [
        {
            "patch": "0002-gone.patch",
            "commit": project.head,
            "date": iso(9),
            "added": iso(5),
            "upstream_status": "none",
            "went_upstream": False,
            "note": "",
        }
    ]


def test_hostile_names_and_subjects_are_read_as_what_they_are(tmp_path: Path) -> None:
    """Paths and subjects that look like the log's own records: a subject shaped like a raw
    diff line, a name with a tab, a newline, quotes and a leading colon; a subject that claims
    to be a pin-sync of another upstream."""
    repo = Repo(tmp_path / "project")
    fake = ":100644 100644 " + "a" * 40 + " " + "b" * 40 + " D"
    names = ["0001-tab\there.patch", "0002-new\nline.patch", '0003-"quoted".patch', ":0004-colon.patch", "0005-x.patch"]
    repo.commit({f"patches/main/{name}": patch_text(f"p{i}") for i, name in enumerate(names)}, fake, date=when(1))
    repo.commit(
        {"patches/main/0005-x.patch": None},
        "pin-sync: move other to x\n\nPatchctl-Dropped: main/0005-x.patch",
        date=when(2),
    )
    repo.commit({"patches/main/0001-tab\there.patch": patch_text("p0", revision=1)}, fake, date=when(3))
    past = ProjectHistory(repo.path).series(repo.path / "patches/main", "main", "up")
    assert sorted(p.removeprefix("patches/main/") for p in past.lineages) == sorted(names[:4])
    assert all(lineage.added == iso(1) for lineage in past.lineages.values())
    assert [(d.patch, d.note) for d in past.departures] == [("0005-x.patch", "")]  # not this upstream's pin-sync
    assert [s.patches for s in past.sizes] == [5, 4, 4]


def test_status_runs_as_many_git_processes_for_thirty_patches_as_for_three(
    project: Project, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history is read once: the project's git processes do not grow with the series."""
    pin = upstream.head
    counts = []
    for total in (3, 30):
        for number in range(1, total + 1):
            name = f"{number:04}-p{number}.patch"
            if not (project.series_dir / name).exists():
                project.add_patch(
                    name, make_patch(upstream, pin, {f"src/p{number}.c": f"int p{number};\n"}, f"P{number}")
                )
        project.commit({}, f"{total} patches", date=when(total))
        calls: list[list[str]] = []
        with monkeypatch.context() as patched:
            patched.setattr(git, "run", _counting(git.run, project.path, calls))
            ok("-C", project.path, "status", "--no-trial", "--json")
        counts.append(len(calls))
    assert counts[0] == counts[1], counts


def _counting(real, where: Path, calls: list[list[str]]):
    """git.run, noting each call made in WHERE."""

    def counting(args, cwd, **kwargs):
        if Path(cwd).resolve() == where.resolve():
            calls.append(args)
        return real(args, cwd, **kwargs)

    return counting


def test_hostile_names_and_subjects_stay_text_on_the_page(project: Project, upstream: Repo, tmp_path: Path) -> None:
    """Names and subjects that would be markup: escaped in the page, and in the SVG's comments
    (matplotlib writes each label's text in one) a `-->` cannot end the comment early."""
    from html.parser import HTMLParser

    pin = upstream.head
    names = ["0001-<img src=x onerror=alert(1)>.patch", "0002---><script>alert(2).patch", "0003-$\\x$.patch"]
    for number, name in enumerate(names, 1):
        patch = make_patch(upstream, pin, {f"src/h{number}.c": f"int h{number};\n"}, f"<b>bold</b> --> {number}")
        project.add_patch(name, patch)
    project.commit({}, "carry", date=when(1))
    project.commit({"patches/main/0003-$\\x$.patch": None}, "<svg onload=alert(3)>", date=when(5))
    page = tmp_path / "status.html"
    ok("-C", project.path, "status", "--html", page)
    text = page.read_text()

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: set[str] = set()
            self.comments: list[str] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            self.tags.add(tag)

        def handle_comment(self, data: str) -> None:
            self.comments.append(data)

    parsed = Tags()
    parsed.feed(text)
    assert not parsed.tags & {"img", "script", "b"}, parsed.tags
    assert len(parsed.comments) == text.count("<!--")  # no comment ended early
    assert text.count("<svg") == 2 and text.count("</svg>") == 2
    assert all(html_escape(name) in text for name in names[:2])


def html_escape(text: str) -> str:
    import html

    return html.escape(text)
