"""Patch series as others write them: numbering gaps and format-patch names, header-less
patches (bare `git diff`, plain `---`/`+++` diffs, quilt `Index:` preambles, DEP-3 headers),
quilt `series` files; apply + export of an unchanged series changes no file."""

from __future__ import annotations

import json
from pathlib import Path

from patchctl import git
from patchctl.series.naming import format_patch_slug
from patchctl.series.patchset import PatchFile, parse_message, title_from_name

from .conftest import Project, Repo, make_patch


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / project.series_name


def set_naming(project: Project, naming: str) -> None:
    text = (project.path / "matrix.yaml").read_text()
    (project.path / "matrix.yaml").write_text(
        text.replace("dir: patches/main", f"dir: patches/main\n    naming: {naming}")
    )


def export_json(cli, project: Project, *args: str) -> dict:
    result = cli("-C", project.path, "export", "main", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def bare_diff(upstream: Repo, files: dict[str, str]) -> str:
    """What `git diff` prints for FILES against the upstream's HEAD: no mail header at all."""
    upstream.write(files)
    try:
        return git.run(["diff", "--full-index"], upstream.path).stdout
    finally:
        git.run(["checkout", "-q", "--", "."], upstream.path)


def quilt_diff(upstream: Repo, path: str, new: str) -> str:
    """A quilt-style diff (`Index:` + `====` preamble, tar.orig/ and tar/ prefixes, timestamps)."""
    body = bare_diff(upstream, {path: new}).split("\n@@", 1)[1]
    return (
        f"Index: tar/{path}\n{'=' * 67}\n--- tar.orig/{path}\t2021-02-12 16:50:15.514898226 +0000\n"
        f"+++ tar/{path}\t2021-02-12 16:50:15.510898194 +0000\n@@{body}"
    )


def test_header_forms_parse_with_a_sensible_subject() -> None:
    dep3 = parse_message(
        "Description: Do not encode unknown mode bits.\n The oldgnu format can.\n .\n Second paragraph.\n"
        "Author: Guillem Jover <guillem@debian.org>\nOrigin: vendor\nLast-Update: 2018-10-14\n\n---\n\n"
        "Index: tar.git/src/create.c\n=====\n--- tar.git.orig/src/create.c\n+++ tar.git/src/create.c\n"
    )
    assert dep3.subject == "Do not encode unknown mode bits."
    assert dep3.description == "The oldgnu format can.\n\nSecond paragraph.\n\nOrigin: vendor\nLast-Update: 2018-10-14"
    assert dep3.author == "Guillem Jover <guillem@debian.org>"
    bare = parse_message("diff --git a/x.c b/x.c\nindex 1..2 100644\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n")
    assert (bare.subject, bare.description, bare.body_line) == ("", "", 1)
    plain = parse_message("--- a/tests/listed03.at\n+++ b/tests/listed03.at\n@@ -1 +1 @@\n-a\n+b\n")
    assert (plain.subject, plain.description) == ("", "")
    quilt = parse_message("Index: tar/src/a.c\n" + "=" * 67 + "\n--- tar.orig/src/a.c\n+++ tar/src/a.c\n")
    assert (quilt.subject, quilt.description) == ("", "")
    encoded = parse_message("From: =?UTF-8?q?Holger=20Hoffst=C3=A4tte?= <h@x>\nSubject: [PATCH] Fix\n\nWhy.\n---\n")
    assert encoded.author == "Holger Hoffstätte <h@x>"
    assert title_from_name("gcc-10-warnings.diff") == "gcc 10 warnings"
    assert title_from_name("0003-bool-is-a-keyword-in-C23.patch") == "bool is a keyword in C23"


def test_format_patch_slug_is_gits() -> None:
    assert (
        format_patch_slug("hlink: Fix function pointer cast in qsort()") == "hlink-Fix-function-pointer-cast-in-qsort"
    )
    long = format_patch_slug("Fix warning about conflicting lseek/lseek64 prototypes")
    assert long == "Fix-warning-about-conflicting-lseek-lseek64-prototyp"  # what git wrote in rsync's series


GIT_SLUG_SUBJECTS = [
    "012345678901234567890123456789012345678901234567890 tail",  # the cut lands on a '-': git keeps it
    "012345678901234567890123456789012345678901234567890.x",  # ... and on a '.'
    "- leading dash, trailing dots...",
    "[PATCH] ggml: add unpad operator (x2)",
    "Fix warning about conflicting lseek/lseek64 prototypes",
    "über ümlauts & spaces -- and   tabs\tin it",
    "a" * 80,
]


def test_format_patch_slug_is_what_git_format_patch_writes(tmp_path: Path) -> None:
    """Against the git on this machine: the names `git format-patch` writes are the names
    export writes, and lint (naming: format-patch) takes every one of them."""
    from patchctl.series.naming import well_named as _well_named

    repo = tmp_path / "repo"
    git.run(["init", "-q", str(repo)], tmp_path)
    for number, subject in enumerate(GIT_SLUG_SUBJECTS):
        (repo / "f").write_text(f"{number}\n")
        git.commit_all(repo, subject)
    out = tmp_path / "out"
    git.run(["format-patch", "-q", f"-{len(GIT_SLUG_SUBJECTS)}", "-o", str(out)], repo)
    written = sorted(p.name for p in out.iterdir())
    assert written == [f"{n:04d}-{format_patch_slug(s)}.patch" for n, s in enumerate(GIT_SLUG_SUBJECTS, 1)]
    assert written[0].endswith("-.patch") and written[1].endswith("..patch")  # the cuts git leaves
    assert [name for name in written if not _well_named("format-patch", name)] == []
    assert not _well_named("format-patch", "0001-short-.patch")  # not a cut: git never writes it


def test_gaps_and_capitals_survive_apply_and_export(project: Project, upstream: Repo, cli) -> None:
    main_c = upstream.read("src/main.c")
    first = make_patch(upstream, upstream.head, {"src/main.c": main_c.replace("main 5\n", "main five\n")}, "Tune Main")
    project.add_patch("0001-Tune-Main.patch", first)
    project.add_patch(
        "0007-Add-a-Paged-file.patch",
        make_patch(upstream, upstream.head, {"src/paged.c": "int paged;\n"}, "Add a Paged file"),
    )
    before = project.snapshot()
    lint = cli("-C", project.path, "lint")
    assert lint.exit_code == 0, lint.output  # a gap and capitals are fine with naming: format-patch
    assert cli("-C", project.path, "apply").exit_code == 0
    payload = export_json(cli, project)
    assert (payload["written"], payload["renamed"], payload["deleted"]) == ([], [], [])
    assert project.snapshot() == before
    # A new commit gets the number after the highest, and git format-patch's slug.
    Repo(tree_of(project)).commit({"src/new.c": "int fresh;\n"}, "Add the New thing")
    payload = export_json(cli, project)
    assert payload["written"] == ["0008-Add-the-New-thing.patch"] and payload["deleted"] == []
    assert project.patch_names() == [
        "0001-Tune-Main.patch",
        "0007-Add-a-Paged-file.patch",
        "0008-Add-the-New-thing.patch",
    ]


def test_file_order_and_diff_shape_are_no_change(project: Project, upstream: Repo, cli) -> None:
    """A patch that lists its files in another order, with short index lines and no mail date,
    says the same as the commit: it stays byte for byte."""
    text = make_patch(
        upstream,
        upstream.head,
        {"src/util.c": upstream.read("src/util.c") + "util end\n", "include/util.h": "decl 0\n"},
        "Grow util",
    )
    head, *blocks = text.split("diff --git ")
    assert len(blocks) == 2
    reordered = head + "".join("diff --git " + block for block in reversed(blocks))
    reordered = reordered.replace("\nindex ", "\nindex ").replace(
        "Date: ", "X-Date: "
    )  # no mail date: the commit gets a fixed one, which must not count as a change
    project.add_patch("0001-Grow-util.patch", reordered)
    assert [f.path for f in PatchFile(Path("x"), reordered.encode()).files] == ["src/util.c", "include/util.h"]
    before = project.snapshot()
    assert cli("-C", project.path, "apply").exit_code == 0
    payload = export_json(cli, project)
    assert payload["unchanged"] == ["0001-Grow-util.patch"]
    assert project.snapshot() == before


def test_renamed_is_not_deleted(project: Project, upstream: Repo, cli) -> None:
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-Tune-main.patch",
        make_patch(upstream, upstream.head, {"src/main.c": main_c.replace("main 5\n", "main five\n")}, "Tune main"),
    )
    project.add_patch(
        "0002-Add-paged.patch", make_patch(upstream, upstream.head, {"src/paged.c": "int paged;\n"}, "Add paged")
    )
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = tree_of(project)
    # Swap the two commits: 0002 now comes first, so the other one needs a new number.
    base = git.run(["rev-parse", "HEAD~2"], tree).stdout.strip()
    first, second = git.run(["rev-list", "--reverse", f"{base}..HEAD"], tree).stdout.split()
    git.run(["reset", "-q", "--hard", base], tree)
    git.run(["cherry-pick", second, first], tree)
    payload = export_json(cli, project)
    assert payload["deleted"] == []
    assert payload["unchanged"] == ["0002-Add-paged.patch"]
    assert payload["renamed"] == [{"from": "0001-Tune-main.patch", "to": "0003-Tune-main.patch"}]
    assert project.patch_names() == ["0002-Add-paged.patch", "0003-Tune-main.patch"]


def test_header_less_quilt_series_applies_and_exports_byte_identical(project: Project, upstream: Repo, cli) -> None:
    set_naming(project, "quilt")
    series = {
        "gcc-warnings.diff": quilt_diff(
            upstream, "src/main.c", upstream.read("src/main.c").replace("main 3\n", "m3\n")
        ),
        "listed03-linux-only": bare_diff(upstream, {"src/util.c": upstream.read("src/util.c") + "util end\n"})
        .replace("diff --git a/src/util.c b/src/util.c\n", "")
        .split("\n--- ", 1)[1]
        .join(["--- ", ""]),
        "bare-git-diff.patch": bare_diff(upstream, {"include/util.h": "decl 0\n"}),
        "dep3.patch": "Description: Add the paged file\n It is needed for the paged cache.\n"
        "Author: Jane Doe <jane@example.org>\nOrigin: vendor\n\n---\n\n"
        + bare_diff(upstream, {"CMakeLists.txt": "project(up)\n"}),
    }
    for name, text in series.items():
        project.add_patch(name, text)
    (project.series_dir / "series").write_text("# quilt order\n" + "\n".join(series) + "\n")
    before = project.snapshot()
    assert cli("-C", project.path, "apply").exit_code == 0
    log = git.run(["log", "--format=%s|%an|%b", "-4", "--reverse"], tree_of(project)).stdout
    assert log.splitlines()[0] == "gcc warnings|patchctl|"
    assert "listed03 linux only|" in log and "bare git diff|" in log
    assert "Add the paged file|Jane Doe|It is needed for the paged cache." in log
    payload = export_json(cli, project)
    assert payload["unchanged"] == list(series) and payload["written"] == []
    assert project.snapshot() == before
    lint = {(f["rule"], f["file"]) for f in json.loads(cli("-C", project.path, "lint", "--json").stdout)["findings"]}
    assert ("PC008", "patches/main/gcc-warnings.diff") in lint and ("PC008", "patches/main/dep3.patch") not in lint
    assert not any(rule in ("PC001", "PC002", "PC003", "PC009") for rule, _ in lint)
    # A changed header-less patch is rewritten as a mail under its old name; a new commit joins `series`.
    Repo(tree_of(project)).commit({"src/new.c": "int fresh;\n"}, "Add the new thing")
    payload = export_json(cli, project)
    assert payload["written"] == ["add-the-new-thing.patch", "series"]
    assert (project.series_dir / "series").read_text().splitlines()[-1] == "add-the-new-thing.patch"


def test_quilt_series_file_naming_a_missing_patch_is_a_usage_error(project: Project, cli) -> None:
    set_naming(project, "quilt")
    (project.series_dir / "series").write_text("missing.patch\n")
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 2 and "missing.patch" in result.stderr and "Traceback" not in result.output


def test_unknown_naming_is_a_config_error(project: Project, cli) -> None:
    set_naming(project, "fancy")
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2 and "unknown naming 'fancy'" in result.stderr
