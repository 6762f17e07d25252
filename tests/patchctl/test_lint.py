"""`patchctl lint`: one test per rule, each with its file:line."""

from __future__ import annotations

import json

import pytest

from .conftest import Project, Repo, make_patch


@pytest.fixture
def good(project: Project, upstream: Repo) -> Project:
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(
            upstream,
            upstream.head,
            {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main five\n")},
            "Tune main",
        ),
    )
    project.add_patch(
        "0002-add-paged.patch", make_patch(upstream, upstream.head, {"src/paged.c": "int paged;\n"}, "Add paged")
    )
    return project


def findings(cli, project: Project, *args: str) -> list[dict]:
    result = cli("-C", project.path, "lint", "--json", *args)
    payload = json.loads(result.stdout)
    assert result.exit_code == (1 if payload["findings"] else 0), result.output
    return payload["findings"]


def test_clean_series_has_no_findings(good: Project, cli) -> None:
    result = cli("-C", good.path, "lint")
    assert result.exit_code == 0 and "lint: no findings" in result.stdout


def test_numbering_and_names(good: Project, cli) -> None:
    (good.series_dir / "0002-add-paged.patch").rename(good.series_dir / "0003-add-paged.patch")
    (good.series_dir / "0001-dup.patch").write_text(
        (good.series_dir / "0001-tune-main.patch").read_text().replace("Tune main", "Dup")
    )
    (good.series_dir / "Fix Things.patch").write_text("x")
    rules = {(f["rule"], f["file"]) for f in findings(cli, good, "--no-apply")}
    assert ("PC001", "patches/main/0001-tune-main.patch") in rules  # duplicate number
    assert ("PC001", "patches/main/0003-add-paged.patch") not in rules  # a gap is allowed by default
    assert ("PC002", "patches/main/Fix Things.patch") in rules
    text = (good.path / "matrix.yaml").read_text()
    (good.path / "matrix.yaml").write_text(text.replace("dir: patches/main", "dir: patches/main\n    naming: strict"))
    strict = {(f["rule"], f["file"], f["message"]) for f in findings(cli, good, "--no-apply")}
    assert (
        "PC001",
        "patches/main/0003-add-paged.patch",
        "numbering gap: 0002 missing before 0003 (naming: strict)",
    ) in (strict)


def test_malformed_subject_description(good: Project, cli) -> None:
    good.add_patch("0003-bad.patch", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n garbage\n")
    text = (good.series_dir / "0002-add-paged.patch").read_text().replace("Why this change.\n", "")
    (good.series_dir / "0002-add-paged.patch").write_text(text)
    found = findings(cli, good)
    rules = {f["rule"]: f for f in found}
    assert rules["PC003"]["file"] == "patches/main/0003-bad.patch"
    assert rules["PC007"]["file"] == "patches/main/0003-bad.patch"
    no_description = {(f["file"], f["line"]) for f in found if f["rule"] == "PC008"}
    # A header-less patch has no description either (its subject comes from its file name).
    assert no_description == {("patches/main/0002-add-paged.patch", 6), ("patches/main/0003-bad.patch", 1)}


def test_excluded_path_crlf_and_binary(good: Project, upstream: Repo, cli) -> None:
    good.add_patch("0003-docs.patch", make_patch(upstream, upstream.head, {"docs/guide.md": "guide\n"}, "Docs"))
    crlf = make_patch(upstream, upstream.head, {"src/win.c": "int a;\r\nint b;\r\n"}, "Windows file")
    good.add_patch("0004-windows-file.patch", crlf)
    binary = make_patch(upstream, upstream.head, {"data/blob.bin": bytes(range(256))}, "Blob")
    good.add_patch("0005-blob.patch", binary)
    found = {f["rule"]: f for f in findings(cli, good, "--no-apply")}
    assert found["PC004"]["file"] == "patches/main/0003-docs.patch" and "docs/guide.md" in found["PC004"]["message"]
    assert found["PC005"]["file"] == "patches/main/0004-windows-file.patch"
    assert crlf.split("\n")[found["PC005"]["line"] - 1].endswith("\r")
    assert found["PC006"]["file"] == "patches/main/0005-blob.patch"


def test_allowing_crlf_and_binary_on_the_series(good: Project, upstream: Repo, cli) -> None:
    good.add_patch(
        "0003-windows-file.patch", make_patch(upstream, upstream.head, {"src/win.c": "int a;\r\n"}, "Windows file")
    )
    good.write_config(upstream.head, "    allow_crlf: true\n")
    assert findings(cli, good) == []


def test_series_must_apply_to_the_pin(good: Project, upstream: Repo, cli) -> None:
    upstream.commit(
        {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main cinq\n")}, "conflicting upstream change"
    )
    good.write_config(upstream.head)
    found = findings(cli, good)
    assert [f["rule"] for f in found] == ["PC009"]
    assert found[0]["file"] == "patches/main/0001-tune-main.patch"
    assert "context drift in src/main.c hunk #1" in found[0]["message"]
    text = (good.series_dir / "0001-tune-main.patch").read_text().splitlines()
    assert text[found[0]["line"] - 1].startswith("@@ -2,7 +2,7 @@")


def test_unsafe_path(good: Project, cli) -> None:
    good.add_patch(
        "0003-escape.patch",
        "Subject: [PATCH] escape\n\nx\n---\ndiff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ "
        "b/../x\n@@ -0,0 +1 @@\n+x\n",
    )
    found = findings(cli, good)
    assert any(f["rule"] == "PC012" and f["file"] == "patches/main/0003-escape.patch" for f in found)


def test_pin_files_and_tracks(good: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    (good.path / "Makefile").write_text(f"CC=cc\nUP_VERSION?={pin}\nOTHER_VERSION?={'a' * 40}\n")
    config = (good.path / "matrix.yaml").read_text()
    config = config.replace(
        "    pin: " + pin + "  # the pin\n",
        "    pin: " + pin + "  # the pin\n"
        "    pin_files:\n"
        "      - {path: Makefile, pattern: 'UP_VERSION\\?=(?P<pin>[0-9a-f]{40})'}\n"
        "      - {path: Makefile, pattern: 'OTHER_VERSION\\?=(?P<pin>[0-9a-f]{40})'}\n"
        "      - {path: missing.mk, pattern: 'V=(?P<pin>.*)'}\n"
        "  mirror:\n"
        f"    url: {upstream.path}\n"
        "    tracks: up\n"
        f"    pin: {'b' * 40}\n",
    )
    (good.path / "matrix.yaml").write_text(config)
    found = findings(cli, good, "--no-apply")
    by_rule = [(f["rule"], f["file"], f["line"]) for f in found]
    assert ("PC010", "Makefile", 3) in by_rule
    assert ("PC010", "matrix.yaml", 11) in by_rule  # missing.mk
    assert ("PC011", "matrix.yaml", 15) in by_rule
    assert not any(rule == "PC010" and line == 2 for rule, _, line in by_rule)


def test_github_annotations(good: Project, monkeypatch, cli) -> None:
    (good.series_dir / "0002-add-paged.patch").rename(good.series_dir / "0007-add-paged.patch")
    text = (good.path / "matrix.yaml").read_text()
    (good.path / "matrix.yaml").write_text(text.replace("dir: patches/main", "dir: patches/main\n    naming: strict"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = cli("-C", good.path, "lint", "--no-apply")
    assert result.exit_code == 1
    assert "patches/main/0007-add-paged.patch:1: PC001: numbering gap: 0002-0006 missing before 0007" in result.stdout
    assert (
        "::error file=patches/main/0007-add-paged.patch,line=1,title=PC001::numbering gap: 0002-0006" in result.stdout
    )


def test_a_stale_allow_empty_is_a_warning_that_does_not_fail(
    project: Project, upstream: Repo, monkeypatch, cli, tmp_path
) -> None:
    """`patchctl init` writes `allow_empty: true  # no patch yet: remove once the first one is in`
    for a series without patches; once one is in, lint says so (PC016), and still exits 0."""
    from patchctl import git

    root = tmp_path / "downstream"
    git.init_repo(root)
    (root / "patches" / "up").mkdir(parents=True)
    init = cli(
        "-C",
        root,
        "init",
        "--from",
        "git-dir",
        "patches/up",
        "--upstream-url",
        upstream.path,
        "--pin",
        upstream.head,
        "--name",
        "up",
    )
    assert init.exit_code == 0, init.output
    text = (root / "matrix.yaml").read_text()
    assert "allow_empty: true  # no patch yet: remove once the first one is in" in text
    line = text[: text.index("allow_empty: true")].count("\n") + 1
    quiet = cli("-C", root, "lint")
    assert quiet.exit_code == 0 and "PC016" not in quiet.output, quiet.output  # no patch yet: right as it is

    patch = make_patch(upstream, upstream.head, {"src/paged.c": "int paged;\n"}, "Add paged", "Paging needs it.")
    (root / "patches" / "up" / "0001-Add-paged.patch").write_text(patch)
    warned = cli("-C", root, "lint")
    assert warned.exit_code == 0, warned.output
    assert warned.stdout == "lint: no findings\n"
    assert warned.stderr == (
        f"matrix.yaml:{line}: warning: PC016: series up has 1 patch(es) and still says allow_empty: true; "
        "remove it, so that a series emptied by mistake fails again\n"
    )
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    annotated = cli("-C", root, "lint")
    assert annotated.exit_code == 0
    as_json = cli("-C", root, "lint", "--json")
    assert json.loads(as_json.stdout)["ok"] is True and "PC016" in as_json.stderr
    assert f"::warning file=matrix.yaml,line={line},title=PC016::series up has 1 patch(es)" in annotated.stdout
    (root / "matrix.yaml").write_text(
        text.replace("    allow_empty: true  # no patch yet: remove once the first one is in\n", "")
    )
    assert cli("-C", root, "lint").stderr == ""
