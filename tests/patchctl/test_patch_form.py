"""Every patch keeps its own form, or the one the downstream declares (issue 42, items 2, 3, 6).

* An OpenWrt-style package (`NNN-slug.patch` in bands, no list file, header-less diffs: a URL
  line then an embedded mail, a bare URL line then `---`/`+++`): `init` chooses `naming:
  openwrt` and writes no list; lint accepts every name; a no-op export is byte-identical; a
  one-line edit of a header-less patch changes only that hunk's lines and adds no header; a new
  patch takes the next free number in its band; a pin-sync rewrites a moved patch in its form.
* A declared canonical form: export writes exactly what `git format-patch` with those options
  writes (compared with git itself, run with no config of patchctl's), renames and Objective-C
  function names included; the `electron` preset agrees with Electron's own exporter.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from patchctl import git

from . import electron_check
from .conftest import Repo, ok, run_cli

URL_AND_MAIL = """\
https://github.com/example/up/pull/20

From cb1e3b34c353fe4a8c717b673359a1d1bfcb83af Mon Sep 17 00:00:00 2001
From: "Sergey V. Lobanov" <sergey@example.org>
Date: Sat, 15 Jan 2022 02:24:13 +0300
Subject: [PATCH] allow to redefine ar and ranlib

Makefiles call 'ar r' and 'ranlib' directly.

Signed-off-by: Sergey V. Lobanov <sergey@example.org>
---
 src/util.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

--- a/src/util.c
+++ b/src/util.c
@@ -4,7 +4,7 @@
 util 4
 util 5
 util 6
-util 7
+util 7 redefined
 util 8
 util 9
 util 10
"""
URL_ONLY = """\
https://github.com/void-linux/void-packages/commit/0d9556b8593d6e67027fb1c83d176b7f899547e5
--- a/src/main.c
+++ b/src/main.c
@@ -9,6 +9,8 @@
 main 9
 main 10
 main 11
+#if defined(__GLIBC__)
+main 11.5
 main 12
 main 13
 main 14
"""


@pytest.fixture
def package(tmp_path: Path, upstream: Repo) -> Path:
    """An OpenWrt-style package: patches/ with three-digit names, two of them header-less."""
    root = tmp_path / "package"
    (root / "patches").mkdir(parents=True)
    (root / "patches" / "010-musl.patch").write_text(URL_ONLY)
    (root / "patches" / "100-allow-redefine.patch").write_text(URL_AND_MAIL)
    (root / "Makefile").write_text("PKG_NAME:=up\n")
    git.init_repo(root)
    git.commit_all(root, "package")
    out = ok(
        "-C", root, "init", "--from", "git-dir", "patches", "--upstream-url", upstream.path, "--pin", upstream.head
    )
    assert "found: naming: openwrt" in out and "no list file is written" in out
    assert not (root / "patches" / "series").exists()
    git.commit_all(root, "adopt patchctl")
    return root


def patch_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "patches").iterdir())}


def test_adoption_leaves_every_byte_and_lint_and_export_check_pass(package: Path) -> None:
    before = patch_files(package)
    assert "lint: no findings" in ok("-C", package, "lint")
    ok("-C", package, "export", "--check", "upstream")
    ok("-C", package, "export", "upstream")
    assert patch_files(package) == before  # the URL and the embedded mail stay, no header is made up


def test_a_one_line_edit_of_a_header_less_patch_changes_that_line_and_adds_no_header(package: Path) -> None:
    ok("-C", package, "apply")
    tree = Repo(package / ".patchctl" / "trees" / "upstream")
    # Edit the change of 010 (the first commit) and squash it into it, as a maintainer does.
    tree.write({"src/main.c": tree.read("src/main.c").replace("main 11.5\n", "main 11.75\n")})
    tree.git("commit", "-q", "-a", "--fixup", "HEAD~1")
    subprocess.run(
        ["git", "rebase", "-q", "-i", "--autosquash", "HEAD~3"],
        cwd=tree.path,
        env={**os.environ, "GIT_SEQUENCE_EDITOR": "true", "GIT_CONFIG_GLOBAL": os.devnull}
        | {"GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@example.org"},
        check=True,
    )
    out = ok("-C", package, "export", "upstream")
    assert "wrote   010-musl.patch" in out and "100-allow-redefine.patch" not in out.split("wrote")[-1]
    assert (package / "patches" / "010-musl.patch").read_text() == URL_ONLY.replace("+main 11.5\n", "+main 11.75\n")
    changed = git.run(["diff", "--numstat", "--", "patches"], package).stdout.split()
    assert changed[:2] == ["1", "1"]  # one line out, one in: nothing else of the file moved


def test_new_patches_take_the_next_free_number_in_their_band(package: Path) -> None:
    ok("-C", package, "apply")
    tree = Repo(package / ".patchctl" / "trees" / "upstream")
    first, second = tree.git("rev-list", "--reverse", "HEAD~2..HEAD").split()
    tree.git("reset", "-q", "--hard", first)
    tree.commit({"include/util.h": "fixed\n"}, "Fix the musl build\n\nmusl lacks it.")
    tree.git("cherry-pick", second)
    tree.commit({"CMakeLists.txt": "project(up2)\n"}, "Build up2\n\nRenamed upstream.")
    out = ok("-C", package, "export", "upstream")
    assert "wrote   011-fix-the-musl-build.patch" in out and "wrote   101-build-up2.patch" in out
    assert sorted(patch_files(package)) == [
        "010-musl.patch",
        "011-fix-the-musl-build.patch",
        "100-allow-redefine.patch",
        "101-build-up2.patch",
    ]
    assert not (package / "patches" / "series").exists()  # still no list: the names are the order
    assert "lint: no findings" in ok("-C", package, "lint", "--no-apply")


def test_a_pin_sync_rewrites_a_moved_header_less_patch_in_its_own_form(package: Path, upstream: Repo) -> None:
    # Upstream adds a line above the hunk and rewords one of its context lines. A diff without
    # index lines cannot be merged 3-way (no preimage blob: `git am -3` cannot either): the sync
    # stops for a hand; the change made by hand, --continue rewrites the patch in its own form:
    # its URL, its embedded mail and its plain header stay, only the hunk moves.
    text = "util 0\n" + upstream.read("src/util.c").replace("util 5\n", "util five\n")
    upstream.commit({"src/util.c": text}, "upstream moves util.c")
    result = run_cli("-C", package, "pin-sync", "--to", upstream.head)
    assert result.exit_code == 1 and "100-allow-redefine.patch | needs a hand" in result.stdout, result.output
    tree = package / ".patchctl" / "sync" / "upstream" / "upstream"
    (tree / "src/util.c").write_text((tree / "src/util.c").read_text().replace("util 7\n", "util 7 redefined\n"))
    git.run(["add", "src/util.c"], tree)
    result = run_cli("-C", package, "pin-sync", "upstream", "--continue")
    assert result.exit_code == 0, result.output
    text = (package / "patches" / "100-allow-redefine.patch").read_text()
    assert text == URL_AND_MAIL.replace("@@ -4,7 +4,7 @@", "@@ -5,7 +5,7 @@").replace(" util 5\n", " util five\n")
    assert (package / "patches" / "010-musl.patch").read_text() == URL_ONLY


# ---------------------------------------------------------------- canonical forms

FLAGS = ["--keep-subject", "--no-stat", "--no-signature", "--zero-commit", "--full-index"]


def canonical_project(tmp_path: Path, upstream: Repo, form: str) -> Path:
    root = tmp_path / "canon"
    (root / "patches" / "up").mkdir(parents=True)
    (root / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up: {{url: {upstream.path}, branch: main, pin: {upstream.head}}}\n"
        f"series:\n  up:\n    upstream: up\n    naming: electron\n    exclude: []\n    allow_empty: true\n"
        f"    form: {form}\n"
    )
    git.init_repo(root)
    git.commit_all(root, "project")
    ok("-C", root, "apply")
    return root


def plain_git(args: list[str], cwd: Path) -> bytes:
    """git as a user without any config runs it (not through patchctl's wrapper)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=True).stdout


def make_commits(tree: Repo) -> list[str]:
    tree.commit({"src/Updater.m": "@implementation Updater\n- (void)check {\n" + "  x;\n" * 12 + "}\n@end\n"}, "a\n\nb")
    tree.commit(
        {
            "src/Updater.m": tree.read("src/Updater.m").replace(
                "  x;\n  x;\n  x;\n  x;\n  x;\n  x;\n  x;\n", "  x;\n" * 6 + "  y;\n"
            )
        },
        "fix: check updates only once\n\nThe second check raced the first.",
    )
    tree.git("mv", "src/util.c", "src/utilities.c")
    tree.commit({"src/utilities.c": tree.read("src/utilities.c") + "util 31\n"}, "refactor: rename util.c\n\nClearer.")
    return tree.git("rev-list", "--reverse", "HEAD~3..HEAD").split()


def test_a_declared_format_patch_form_is_what_git_format_patch_writes(tmp_path: Path, upstream: Repo) -> None:
    form = "{format_patch: [" + ", ".join(FLAGS) + "], renames: true, attributes: ['*.m diff=objc']}"
    root = canonical_project(tmp_path, upstream, form)
    tree = Repo(root / ".patchctl" / "trees" / "up")
    commits = make_commits(tree)
    ok("-C", root, "export", "up")
    attributes = tmp_path / "attributes"
    attributes.write_text("*.m diff=objc\n")
    names = (root / "patches" / "up" / ".patches").read_text().split()
    assert names == ["a.patch", "fix_check_updates_only_once.patch", "refactor_rename_util_c.patch"]
    for name, commit in zip(names, commits, strict=True):
        expected = plain_git(
            [
                "-c",
                f"core.attributesFile={attributes}",
                "-c",
                "diff.renames=true",
                "format-patch",
                "-1",
                "--stdout",
                *FLAGS,
                commit,
            ],
            tree.path,
        )
        assert (root / "patches" / "up" / name).read_bytes() == expected, name
    text = (root / "patches" / "up" / "refactor_rename_util_c.patch").read_text()
    assert "rename from src/util.c" in text and "@@ - (void)check {" in (root / "patches" / "up" / names[1]).read_text()
    ok("-C", root, "export", "--check", "up")


def test_the_electron_preset_agrees_with_electrons_exporter(tmp_path: Path, upstream: Repo) -> None:
    root = canonical_project(tmp_path, upstream, "electron")
    tree = Repo(root / ".patchctl" / "trees" / "up")
    make_commits(tree)
    ok("-C", root, "export", "up")
    check = tmp_path / "check"
    git.run(["clone", "-q", str(upstream.path), str(check)], tmp_path)
    assert electron_check.stale(check, upstream.head, root / "patches" / "up", tmp_path) == []


def test_where_the_names_are_the_order_a_new_patch_never_sorts_out_of_place(package: Path) -> None:
    """No number is free between 010 and 011: the new patch shares 011, and the old 011 is
    renumbered only when its name would sort before the new one (the names are the order)."""
    ok("-C", package, "apply")
    tree = Repo(package / ".patchctl" / "trees" / "upstream")
    first, second = tree.git("rev-list", "--reverse", "HEAD~2..HEAD").split()
    tree.git("reset", "-q", "--hard", first)
    tree.commit({"include/util.h": "fixed\n"}, "Fix the musl build\n\nmusl lacks it.")
    tree.git("cherry-pick", second)
    ok("-C", package, "export", "upstream")
    git.commit_all(package, "a new patch")
    ok("-C", package, "apply")
    commits = tree.git("rev-list", "--reverse", "HEAD~3..HEAD").split()
    tree.git("reset", "-q", "--hard", commits[0])
    tree.commit({"CMakeLists.txt": "project(up2)\n"}, "Zap the cache\n\nIt goes stale.")
    tree.git("cherry-pick", *commits[1:])
    out = ok("-C", package, "export", "upstream")
    assert "wrote   011-zap-the-cache.patch" in out
    assert "renamed 011-fix-the-musl-build.patch -> 012-fix-the-musl-build.patch" in out
    names = sorted(patch_files(package))
    assert names == [
        "010-musl.patch",
        "011-zap-the-cache.patch",
        "012-fix-the-musl-build.patch",
        "100-allow-redefine.patch",
    ]
    ok("-C", package, "apply", "--force")  # name order is the commits' order: the series applies as exported
    subjects = tree.git("log", "--reverse", "--format=%s", "HEAD~4..HEAD").splitlines()
    assert subjects == ["musl", "Zap the cache", "Fix the musl build", "allow redefine"]
