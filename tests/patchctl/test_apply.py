"""`patchctl apply`: strict, transactional, classified failures, idempotent re-runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchctl import git

from .conftest import Project, Repo, make_patch, numbered, tree_files


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / project.series_name


def edit_line(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


@pytest.fixture
def two_patches(project: Project, upstream: Repo) -> Project:
    base = upstream.head
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(upstream, base, {"src/main.c": edit_line(main_c, "main 5\n", "main five\n")}, "Tune main"),
    )
    project.add_patch("0002-add-paged.patch", make_patch(upstream, base, {"src/paged.c": "int paged;\n"}, "Add paged"))
    return project


def test_apply_builds_worktree_with_one_commit_per_patch(two_patches: Project, upstream: Repo, cli) -> None:
    result = cli("-C", two_patches.path, "apply")
    assert result.exit_code == 0, result.output
    tree = tree_of(two_patches)
    assert "main five" in (tree / "src/main.c").read_text()
    assert (tree / "src/paged.c").read_text() == "int paged;\n"
    log = git.run(["log", "--format=%s", f"{upstream.head}..HEAD"], tree).stdout.split("\n")
    assert log[:2] == ["Add paged", "Tune main"]
    assert "0001-tune-main.patch: applied cleanly" in result.stdout


def test_rerun_is_a_noop_and_a_stale_marker_is_not_trusted(two_patches: Project, upstream: Repo, cli) -> None:
    assert cli("-C", two_patches.path, "apply").exit_code == 0
    tree = tree_of(two_patches)
    head = git.rev_parse(tree, "HEAD")
    again = cli("-C", two_patches.path, "apply")
    assert again.exit_code == 0 and "nothing to do" in again.stdout
    # The same commits are made on every run: the result is deterministic.
    assert git.rev_parse(tree, "HEAD") == head

    main_c = upstream.read("src/main.c")
    two_patches.add_patch(
        "0001-tune-main.patch",
        make_patch(upstream, upstream.head, {"src/main.c": edit_line(main_c, "main 5\n", "main FIVE\n")}, "Tune main"),
    )
    rerun = cli("-C", two_patches.path, "apply")
    assert rerun.exit_code == 0 and "nothing to do" not in rerun.stdout
    assert "main FIVE" in (tree / "src/main.c").read_text()


def test_offsets_are_allowed_and_reported(project: Project, upstream: Repo, cli) -> None:
    old = upstream.head
    main_c = upstream.read("src/main.c")
    patch = make_patch(upstream, old, {"src/main.c": edit_line(main_c, "main 30\n", "main thirty\n")}, "Edit tail")
    upstream.commit({"src/main.c": "new 1\nnew 2\nnew 3\n" + main_c}, "grow head")
    project.write_config(upstream.head)
    project.add_patch("0001-edit-tail.patch", patch)
    result = cli("-C", project.path, "apply", "--json")
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)["results"][0]["patches"][0]
    assert outcome["status"] == "applied-with-offset"
    assert outcome["offsets"] == [{"file": "src/main.c", "hunk": 1, "offset": 3}]


def test_missing_file_names_patch_and_file_and_touches_nothing(two_patches: Project, upstream: Repo, cli) -> None:
    # A dev-doc hunk against a file a clean upstream checkout does not have.
    doc = make_patch(upstream, upstream.head, {"docs/dev.md": "notes\n"}, "Dev notes")
    doc = (
        doc.replace(
            "new file mode 100644\nindex 0000000000000000000000000000000000000000",
            "index 1111111111111111111111111111111111111111",
        )
        .replace("--- /dev/null", "--- a/docs/dev.md")
        .replace("@@ -0,0 +1 @@", "@@ -1 +1,2 @@\n old")
    )
    two_patches.add_patch("0003-dev-notes.patch", doc)
    result = cli("-C", two_patches.path, "apply")
    assert result.exit_code == 1
    assert "0003-dev-notes.patch: file missing in docs/dev.md" in result.stderr
    assert not tree_of(two_patches).exists(), "a failed apply must leave no tree behind"


def test_failure_leaves_an_existing_tree_exactly_as_it_was(two_patches: Project, upstream: Repo, cli) -> None:
    assert cli("-C", two_patches.path, "apply").exit_code == 0
    tree = tree_of(two_patches)
    before, head = tree_files(tree), git.rev_parse(tree, "HEAD")
    util = upstream.read("src/util.c")
    drift = make_patch(upstream, upstream.head, {"src/util.c": edit_line(util, "util 20\n", "util twenty\n")}, "Util")
    two_patches.add_patch("0003-util.patch", drift.replace(" util 18\n", " util eighteen\n"))
    result = cli("-C", two_patches.path, "apply")
    assert result.exit_code == 1
    assert "context drift in src/util.c hunk #1 (@@ -17,7 +17,7 @@)" in result.stderr
    assert tree_files(tree) == before and git.rev_parse(tree, "HEAD") == head


def test_already_applied_patch_is_classified(project: Project, upstream: Repo, cli) -> None:
    base = upstream.head
    util = upstream.read("src/util.c")
    change = {"src/util.c": edit_line(util, "util 3\n", "util three\n")}
    project.add_patch("0001-util.patch", make_patch(upstream, base, change, "Util three"))
    upstream.commit(change, "upstream took it")
    project.write_config(upstream.head)
    result = cli("-C", project.path, "apply", "--json")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["results"][0]["patches"][0]["status"] == "already-applied"
    assert "already applied" in result.stderr


def test_malformed_patch_is_classified(project: Project, cli) -> None:
    project.add_patch(
        "0001-bad.patch",
        "Subject: [PATCH] bad\n\nwhy\n---\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n garbage\n",
    )
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 1
    assert "0001-bad.patch: malformed patch" in result.stderr


@pytest.mark.parametrize(
    "path, reason",
    [
        ("../outside.txt", "escapes the tree"),
        ("/tmp/patchctl-abs-target.txt", "absolute path"),
        ("linkdir/evil.txt", "through a symlink"),
    ],
)
def test_patch_never_writes_outside_the_tree(tmp_path: Path, upstream: Repo, path: str, reason: str, cli) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, upstream.path / "linkdir")
    upstream.commit({}, "add a symlink to a directory outside")
    project = Project(tmp_path / "proj", upstream, upstream.head)
    header_path = path.lstrip("/") if path.startswith("/") else path
    text = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: Evil <e@x>\n"
        "Subject: [PATCH] escape\n\nTry to escape.\n---\n"
        f"diff --git a/{header_path} b/{header_path}\nnew file mode 100644\n--- /dev/null\n+++ "
        f"{'' if path.startswith('/') else 'b/'}{path}\n"
        "@@ -0,0 +1 @@\n+pwned\n"
    )
    project.add_patch("0001-escape.patch", text)
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 1, result.output
    assert reason in result.stderr
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "outside.txt").exists() and not Path("/tmp/patchctl-abs-target.txt").exists()
    assert not tree_of(project).exists()


def test_symlink_pointing_outside_is_refused(project: Project, upstream: Repo, cli) -> None:
    def add_link(clone: Path) -> None:
        os.symlink("../../etc", clone / "src" / "etc")

    project.add_patch("0001-link.patch", make_patch(upstream, upstream.head, {}, "Link out", edit=add_link))
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 1 and "symlink pointing outside" in result.stderr


def test_local_changes_are_never_discarded_without_force(two_patches: Project, cli) -> None:
    assert cli("-C", two_patches.path, "apply").exit_code == 0
    tree = tree_of(two_patches)
    (tree / "src/main.c").write_text("my work\n")
    (two_patches.series_dir / "0002-add-paged.patch").unlink()
    result = cli("-C", two_patches.path, "apply")
    assert result.exit_code == 2 and "uncommitted changes" in result.stderr
    assert (tree / "src/main.c").read_text() == "my work\n"
    forced = cli("-C", two_patches.path, "apply", "--force")
    assert forced.exit_code == 0
    assert "main five" in (tree / "src/main.c").read_text() and not (tree / "src/paged.c").exists()


def test_refuses_to_replace_a_directory_it_did_not_make(two_patches: Project, tmp_path: Path, cli) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    result = cli("-C", two_patches.path, "apply", "--into", target)
    assert result.exit_code == 2 and "not made by patchctl" in result.stderr
    assert (target / "keep.txt").read_text() == "precious"


def test_apply_inside_a_parent_repository_really_applies(two_patches: Project, tmp_path: Path, cli) -> None:
    # The default tree lives inside the project's own git repository (a parent repo):
    # git must not resolve the patch's paths against that parent and skip it.
    parent = Repo(tmp_path / "parent")
    parent.commit({"unrelated.txt": "x\n"}, "parent")
    target = parent.path / "third_party" / "up"
    result = cli("-C", two_patches.path, "apply", "--into", target)
    assert result.exit_code == 0, result.output
    assert "main five" in (target / "src/main.c").read_text()
    assert git.run(["status", "--porcelain"], parent.path).stdout.strip() == "?? third_party/"


def test_hostile_git_environment_changes_nothing(two_patches: Project, tmp_path: Path, monkeypatch, cli) -> None:
    hostile = tmp_path / "hostile.gitconfig"
    hostile.write_text(
        "[apply]\n\twhitespace = error-all\n[core]\n\tautocrlf = true\n[diff]\n\tnoprefix = true\n[user]\n\tname = "
        "Someone Else\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(hostile))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2001-01-01T00:00:00")
    assert cli("-C", two_patches.path, "apply").exit_code == 0
    head_hostile = git.rev_parse(tree_of(two_patches), "HEAD")
    monkeypatch.undo()
    other = cli("-C", two_patches.path, "apply", "--into", tmp_path / "clean")
    assert other.exit_code == 0
    assert git.rev_parse(tmp_path / "clean", "HEAD") == head_hostile


def test_apply_at_another_rev(project: Project, upstream: Repo, cli) -> None:
    old = upstream.head
    new = upstream.commit({"src/new.c": "x\n"}, "more")
    project.add_patch(
        "0001-hdr.patch", make_patch(upstream, old, {"include/util.h": numbered(11, "decl")}, "Grow header")
    )
    result = cli("-C", project.path, "apply", "--rev", new, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["results"][0]["rev"] == new
    assert (tree_of(project) / "src/new.c").exists()


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["apply", "nosuch"], 2, "unknown series 'nosuch'"),
        (["--upstream-url", "up=/does/not/exist", "apply"], 3, "upstream path does not exist"),
        (["apply", "--rev", "deadbeef"], 2, "--rev 'deadbeef': no such revision in upstream up"),
    ],
)
def test_errors_are_one_line_with_exit_codes(two_patches: Project, args, code, message, cli) -> None:
    result = cli("-C", two_patches.path, *args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_config_errors_name_file_key_and_line(two_patches: Project, cli) -> None:
    config = two_patches.path / "matrix.yaml"
    config.write_text(config.read_text().replace("pin: ", "pin: abc  # "))
    result = cli("-C", two_patches.path, "apply")
    assert result.exit_code == 2
    assert f"{config}:7: upstreams.up.pin: pin must be a full 40-hex" in result.stderr
