"""The edit loop, twice round, as a user runs it: apply, edit in the applied tree, commit
there, export, apply (a no-op that says so), lint, `export --check`, the pre-commit hooks
`patchctl init` writes, and the commit in the downstream repository. No `--force` anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.patchctl.conftest import Repo

from .shell import downstream, passed_hooks, pre_commit_hooks, tune_main_patch

pytestmark = pytest.mark.journey


def test_edit_loop_twice_round_without_force(tmp_path: Path, upstream: Repo, user_in) -> None:
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Tune-main.patch": tune_main_patch(upstream, pin)}
    )
    user = user_in(project.path)
    tree = project.path / ".patchctl" / "trees" / "main"
    user.ok("pre-commit install")
    assert pre_commit_hooks(project) == ["patchctl-lint", "patchctl-export-check"]

    seen = user.ok("patchctl apply")
    assert seen.stdout == (
        f"main: applied 1 patch(es) to {pin[:12]} in .patchctl/trees/main\n  0001-Tune-main.patch: applied cleanly\n"
    )

    # First turn: a new commit becomes a new patch.
    user.edit(tree / "src/util.c", "util 3\n", "util three\n")
    user.ok('git commit -qam "Spell out util three" -m "Grep finds the word, not the digit."', cwd=tree)
    seen = user.ok("patchctl export main")
    assert seen.stdout.splitlines() == [
        "wrote   0002-Spell-out-util-three.patch",
        f"main: 1 written, 0 renamed, 0 deleted, 1 unchanged; verified against {pin[:12]}",
    ]
    head = Repo(tree).head
    seen = user.ok("patchctl apply")
    assert seen.stdout == f"main: already applied at {pin[:12]} in .patchctl/trees/main (nothing to do)\n"
    assert Repo(tree).head == head  # the user's commits stay what they are
    assert user.ok("patchctl apply").stdout == seen.stdout  # and again: still nothing to do
    assert user.ok("patchctl lint").stdout == "lint: no findings\n"
    assert user.ok("patchctl export --check main").stdout == "main: up to date (2 patches)\n"
    hooks = user.ok("pre-commit run --all-files")
    assert passed_hooks(hooks) == ["patchctl lint", "patchctl export --check"], str(hooks)
    seen = user.ok('git add -A && git commit -qm "Spell out util three"')
    assert passed_hooks(seen) == ["patchctl lint", "patchctl export --check"], str(seen)  # on the commit
    assert user.ok("git status --porcelain").stdout == ""  # .patchctl/ is ignored: nothing left behind

    # Second turn: another change to the same file, on top of the first.
    user.edit(tree / "src/main.c", "main five\n", "main FIVE\n")
    user.ok('git commit -qam "Tune main harder" -m "Capitals stand out more."', cwd=tree)
    seen = user.ok("patchctl export main")
    assert "wrote   0003-Tune-main-harder.patch" in seen.stdout
    assert "main: 1 written, 0 renamed, 0 deleted, 2 unchanged" in seen.stdout
    assert "(nothing to do)" in user.ok("patchctl apply").stdout
    assert user.ok("patchctl export --check main").stdout == "main: up to date (3 patches)\n"
    assert user.ok("patchctl lint").stdout == "lint: no findings\n"
    seen = user.ok('git add -A && git commit -qm "Tune main harder"')
    assert passed_hooks(seen) == ["patchctl lint", "patchctl export --check"], str(seen)
    assert project.patch_names() == [
        "0001-Tune-main.patch",
        "0002-Spell-out-util-three.patch",
        "0003-Tune-main-harder.patch",
    ]


def test_uncommitted_edits_are_refused_with_the_way_on(tmp_path: Path, upstream: Repo, user_in) -> None:
    """apply and export refuse an edit that is not committed yet; their advice, followed as
    printed, leads through the loop instead of from one command to the other."""
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Tune-main.patch": tune_main_patch(upstream, pin)}
    )
    user = user_in(project.path)
    tree = project.path / ".patchctl" / "trees" / "main"
    user.ok("patchctl apply")
    user.edit(tree / "src/util.c", "util 3\n", "util three\n")

    refused = user.fails("patchctl apply", 2)
    assert refused.stderr.startswith(f"patchctl: error: {tree} has uncommitted changes: commit them there")
    assert refused.advice == [f"git -C {tree} commit -a", "patchctl export main", "patchctl apply main --force"]
    refused_too = user.fails("patchctl export main", 2)
    assert refused_too.advice == [f"git -C {tree} commit -a", "patchctl export main", "patchctl apply main --force"]

    user.follow(refused, "commit -a")  # the editor writes the message: a subject and a description
    seen = user.follow(refused, "patchctl export")
    assert "wrote   0002-Edit-made-in-the-tree.patch" in seen.stdout
    assert "(nothing to do)" in user.ok("patchctl apply").stdout
    assert user.ok("patchctl lint").stdout == "lint: no findings\n"


def test_a_commit_that_only_touches_excluded_paths_is_said_so(tmp_path: Path, upstream: Repo, user_in) -> None:
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Tune-main.patch": tune_main_patch(upstream, pin)}
    )
    user = user_in(project.path)
    tree = project.path / ".patchctl" / "trees" / "main"
    user.ok("patchctl apply")
    user.edit(tree / "README.md", "# upstream\n", "# upstream, patched\n")
    user.ok('git commit -qam "Say it is patched" -m "Readers should know."', cwd=tree)
    seen = user.ok("patchctl export main")
    assert "dropped commit 'Say it is patched': it only touches excluded paths" in seen.stdout
    refused = user.fails("patchctl apply", 2)
    assert "differ from pin + series only in paths the series excludes (README.md)" in refused.stderr
    assert refused.advice == ["patchctl apply main --force"]
    user.follow(refused, "--force")
    assert "(nothing to do)" in user.ok("patchctl apply").stdout
