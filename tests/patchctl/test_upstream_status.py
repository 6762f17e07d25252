"""Yocto's `Upstream-Status:` header: read once per patch (patchset), required by lint with
`upstream_status: required` (PC014), counted by init, kept by export."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchctl import git
from patchctl.series.patchset import UPSTREAM_STATUSES, parse_upstream_status

from .conftest import Project, Repo, make_patch, ok, one_line_error, run_cli

URL = "https://github.com/example/up/pull/17"


def status_patch(upstream: Repo, subject: str, files: dict[str, str], header: str | None) -> str:
    body = "Why this change." + (f"\n\n{header}" if header is not None else "")
    return make_patch(upstream, upstream.head, files, subject, body)


@pytest.fixture
def statused(project: Project, upstream: Repo) -> Project:
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-tune-main.patch",
        status_patch(
            upstream,
            "Tune main",
            {"src/main.c": main_c.replace("main 5\n", "main five\n")},
            f"Upstream-Status: Submitted [{URL}]",
        ),
    )
    project.add_patch(
        "0002-add-paged.patch",
        status_patch(upstream, "Add paged", {"src/paged.c": "int paged;\n"}, "Upstream-Status: Inappropriate [ours]"),
    )
    return project


def require_status(project: Project) -> None:
    text = (project.path / "matrix.yaml").read_text()
    (project.path / "matrix.yaml").write_text(text + "    upstream_status: required\n")


def lint_findings(project: Project, *args: str) -> tuple[int, list[dict]]:
    result = run_cli("-C", project.path, "lint", "--json", *args)
    return result.exit_code, json.loads(result.stdout)["findings"]


@pytest.mark.parametrize("value", list(UPSTREAM_STATUSES))
def test_every_value_of_the_vocabulary_reads_with_its_detail(value: str) -> None:
    text = f"Subject: [PATCH] x\n\nWhy.\n\nUpstream-Status: {value} [{URL}]\n---\n a | 1 +\n"
    status = parse_upstream_status(text)
    assert status is not None and status.ok, status
    assert (status.value, status.detail, status.url, status.line) == (value, URL, URL, 5)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("Upstream-status: Pending", "malformed"),
        ("Upstream-Status:Pending", "malformed"),
        ("Upstream-Status: pending", "unknown value 'pending'"),
        ("Upstream-Status: Submitted", "Submitted needs its detail in brackets"),
        ("Upstream-Status: Backport []", "Backport needs its detail in brackets"),
        ("Upstream-Status: Inappropriate", "Inappropriate needs its detail in brackets"),
        ("Upstream-Status: Pending [x] trailing", "malformed"),
    ],
)
def test_a_malformed_header_says_why(line: str, problem: str) -> None:
    status = parse_upstream_status(f"Description: x\n{line}\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
    assert status is not None and not status.ok and problem in status.problem, status
    assert status.line == 2


def test_only_the_description_counts_not_the_diff() -> None:
    text = (
        "Subject: x\n\nWhy.\n---\n f | 1 +\n\n"
        "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+Upstream-Status: Pending\n"
    )
    assert parse_upstream_status(text) is None
    text = "Why.\nUpstream-Status: Pending\nUpstream-Status: Accepted\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
    status = parse_upstream_status(text)
    assert status is not None and "more than one" in status.problem and "lines 2, 3" in status.problem


def test_lint_requires_the_header_only_when_the_series_says_so(statused: Project, upstream: Repo) -> None:
    statused.add_patch(
        "0003-grow-util.patch",
        status_patch(upstream, "Grow util", {"src/util.c": upstream.read("src/util.c") + "util 31\n"}, None),
    )
    statused.add_patch(
        "0004-add-extra.patch",
        status_patch(upstream, "Add extra", {"src/extra.c": "int extra;\n"}, "Upstream-Status: Submitted"),
    )
    code, found = lint_findings(statused, "--no-apply")
    assert (code, found) == (0, [])  # optional by default: read, never asked for
    require_status(statused)
    code, found = lint_findings(statused, "--no-apply")
    assert code == 1
    assert [(f["rule"], f["file"], f["line"], f["subject"]) for f in found] == [
        ("PC014", "patches/main/0003-grow-util.patch", 6, "0003-grow-util.patch"),
        ("PC014", "patches/main/0004-add-extra.patch", 8, "0004-add-extra.patch"),
    ]
    assert "no Upstream-Status: header" in found[0]["message"]
    assert "Submitted needs its detail in brackets" in found[1]["message"]
    text = run_cli("-C", statused.path, "lint", "--no-apply").stdout
    assert "patches/main/0004-add-extra.patch:8: PC014: Upstream-Status: Submitted needs" in text
    # The line lint names is the header's own.
    assert (statused.series_dir / "0004-add-extra.patch").read_text().splitlines()[7] == "Upstream-Status: Submitted"


def test_a_series_with_valid_headers_passes_lint_with_the_apply_check(statused: Project) -> None:
    require_status(statused)
    assert "lint: no findings" in ok("-C", statused.path, "lint")


def test_an_unknown_policy_is_a_configuration_error(statused: Project) -> None:
    text = (statused.path / "matrix.yaml").read_text()
    (statused.path / "matrix.yaml").write_text(text + "    upstream_status: always\n")
    line = one_line_error(run_cli("-C", statused.path, "lint", "--no-apply"), 2)
    assert "series.main.upstream_status" in line and "unknown upstream_status 'always'" in line


def test_export_keeps_the_header_of_a_rewritten_patch(statused: Project) -> None:
    ok("-C", statused.path, "apply")
    tree = statused.path / ".patchctl" / "trees" / "main"
    before = (statused.series_dir / "0001-tune-main.patch").read_text()
    # The patch's change is edited: a fixup commit folded into it, its message kept as it was.
    Repo(tree).commit(
        {"src/main.c": (tree / "src/main.c").read_text().replace("main five", "main FIVE")}, "fixup! Tune main"
    )
    git.run(
        ["rebase", "-q", "-i", "--autosquash", statused.upstream.head],
        tree,
        env={"GIT_SEQUENCE_EDITOR": ":", "GIT_EDITOR": ":"},
    )
    payload = json.loads(ok("-C", statused.path, "export", "main", "--json"))
    assert "0001-tune-main.patch" in payload["written"], payload
    after = (statused.series_dir / "0001-tune-main.patch").read_text()
    assert after != before and "main FIVE" in after
    status = parse_upstream_status(after)
    assert status is not None and status.text == f"Upstream-Status: Submitted [{URL}]" and status.ok
    assert [line for line in after.splitlines() if "Upstream-Status" in line] == [
        line for line in before.splitlines() if "Upstream-Status" in line
    ]


def test_init_counts_the_headers_and_requires_them_when_every_patch_has_one(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "proj"
    git.init_repo(root)
    directory = root / "patches" / "up"
    directory.mkdir(parents=True)
    main_c = upstream.read("src/main.c")
    (directory / "0001-tune-main.patch").write_text(
        status_patch(
            upstream, "Tune main", {"src/main.c": main_c.replace("main 5\n", "main 55\n")}, "Upstream-Status: Pending"
        )
    )
    (directory / "0002-add-paged.patch").write_text(
        status_patch(upstream, "Add paged", {"src/paged.c": "int p;\n"}, f"Upstream-Status: Backport [{URL}]")
    )
    args = ("-C", root, "init", "--from", "git-dir", "patches/up", "--upstream-url", upstream.path)
    out = ok(*args, "--pin", upstream.head)
    assert "found: 2 of 2 patch(es) with a well-formed Upstream-Status: header: upstream_status: required" in out
    assert "upstream_status: required" in (root / "matrix.yaml").read_text()
    assert "lint: no findings" in ok("-C", root, "lint")
    # One patch without it: counted, and nothing is required.
    (directory / "0002-add-paged.patch").write_text(
        status_patch(upstream, "Add paged", {"src/paged.c": "int p;\n"}, None)
    )
    out = ok(*args, "--pin", upstream.head, "--force")
    assert "found: 1 of 2 patch(es) with a well-formed Upstream-Status: header\n" in out
    assert "upstream_status:" not in (root / "matrix.yaml").read_text()
    shutil.rmtree(root / "templates")
