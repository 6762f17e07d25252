"""Warm apply: re-applying into an existing clean tree moves it to the new commit in place,
writing only what changed, and ends exactly where a fresh apply ends."""

from __future__ import annotations

import json
from pathlib import Path

from patchctl import git
from patchctl.state import worktree

from .conftest import Project, Repo, make_patch, numbered, tree_files


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / project.series_name


def applied_tree(project: Project, upstream: Repo, cli) -> Path:
    """The tree of a one-patch series applied at upstream's current head."""
    project.add_patch(
        "0001-hdr.patch",
        make_patch(upstream, upstream.head, {"include/util.h": numbered(11, "decl")}, "Grow header"),
    )
    assert cli("-C", project.path, "apply", "--rev", upstream.head).exit_code == 0
    return tree_of(project)


def fresh_apply(project: Project, rev: str, cli) -> Path:
    into = project.path / "fresh"
    result = cli("-C", project.path, "apply", "--rev", rev, "--into", into)
    assert result.exit_code == 0, result.output
    return into


def test_pin_bump_updates_the_tree_in_place(project: Project, upstream: Repo, cli) -> None:
    tree = applied_tree(project, upstream, cli)
    (tree / "build").mkdir()
    (tree / "build" / "main.o").write_bytes(b"object")  # an untracked build directory
    untouched = (tree / "src/main.c").stat().st_ino

    new = upstream.commit({"src/new.c": "x\n", "README.md": "changed upstream\n"}, "more")
    result = cli("-C", project.path, "apply", "--rev", new, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["state"] == "applied"

    # In place: the build directory survived and a file unchanged between the revs was not rewritten.
    assert (tree / "build" / "main.o").read_bytes() == b"object"
    assert (tree / "src/main.c").stat().st_ino == untouched
    # And the result is exactly a fresh apply's: same commit, same files, a trusted marker.
    fresh = fresh_apply(project, new, cli)
    assert git.rev_parse(tree, "HEAD") == git.rev_parse(fresh, "HEAD")
    ours = {k: v for k, v in tree_files(tree).items() if not k.startswith("build/")}
    assert ours == tree_files(fresh)
    marker = worktree.read_marker(tree)
    assert marker is not None and marker.rev == new and not marker.updating
    assert "nothing to do" in cli("-C", project.path, "apply", "--rev", new).stdout


def test_an_update_cut_off_half_way_is_rebuilt_without_force(project: Project, upstream: Repo, cli) -> None:
    tree = applied_tree(project, upstream, cli)
    new = upstream.commit({"src/new.c": "x\n"}, "more")
    # What a kill during the checkout leaves: the marker says `updating`, files half written.
    marker = worktree.read_marker(tree)
    assert marker is not None
    marker.updating = "0" * 40
    worktree.write_marker(tree, marker)
    (tree / "src/main.c").write_text("half written")

    result = cli("-C", project.path, "apply", "--rev", new)
    assert result.exit_code == 0, result.output
    assert tree_files(tree) == tree_files(fresh_apply(project, new, cli))


def test_an_untracked_file_in_the_way_falls_back_to_a_fresh_tree(project: Project, upstream: Repo, cli) -> None:
    tree = applied_tree(project, upstream, cli)
    (tree / "src/new.c").write_text("mine\n")  # untracked, and the new rev adds the same path
    new = upstream.commit({"src/new.c": "x\n"}, "more")

    result = cli("-C", project.path, "apply", "--rev", new)
    assert result.exit_code == 0, result.output
    assert (tree / "src/new.c").read_text() == "x\n"
    assert tree_files(tree) == tree_files(fresh_apply(project, new, cli))


def test_local_changes_still_block_a_warm_apply(project: Project, upstream: Repo, cli) -> None:
    tree = applied_tree(project, upstream, cli)
    (tree / "src/main.c").write_text("my edit\n")
    new = upstream.commit({"src/new.c": "x\n"}, "more")

    result = cli("-C", project.path, "apply", "--rev", new)
    assert result.exit_code == 2 and "uncommitted changes" in result.output
    assert (tree / "src/main.c").read_text() == "my edit\n"
