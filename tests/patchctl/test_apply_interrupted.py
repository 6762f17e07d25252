"""A Ctrl-C'd `apply` leaves nothing beside the tree: not the staging tree it was checking out
(`.NAME.patchctl-new`), not the old one it was moving aside (issue 45, item 7). Ctrl-C arrives
as a KeyboardInterrupt in patchctl's main thread; here it is raised at each step of the swap."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchctl import git
from patchctl.confined.root import Root
from patchctl.state import worktree

from .conftest import Project, Repo, make_patch, numbered


def seeded(project: Project, upstream: Repo) -> None:
    project.add_patch(
        "0001-tune-util.patch",
        make_patch(upstream, upstream.head, {"src/util.c": numbered(30, "util").replace("util 7\n", "UTIL 7\n")}, "U"),
    )


def beside(tree: Path) -> list[str]:
    return sorted(p.name for p in tree.parent.iterdir() if p.name != tree.name)


@pytest.mark.parametrize("step", ["worktree lock", "marker", "rename aside"])
def test_ctrl_c_during_the_swap_leaves_no_staging_tree(
    project: Project, upstream: Repo, cli, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = project.path / ".patchctl" / "trees" / "main"
    # An untracked file where the new pin adds one: git refuses the in-place update, the tree is swapped.
    (tree / "src" / "new.c").write_text("mine\n")
    old_head = git.rev_parse(tree, "HEAD")
    tip = upstream.commit({"src/new.c": "upstream's\n"}, "upstream adds a file")
    project.write_config(tip)

    real_run, real_rename = git.run, Root.rename

    def ctrl_c_at_lock(args, *rest, **kwargs):
        if args[:2] == ["worktree", "lock"]:
            raise KeyboardInterrupt
        return real_run(args, *rest, **kwargs)

    def ctrl_c_at_marker(path, marker):
        raise KeyboardInterrupt  # the new tree's, while it is staged: the only marker this apply writes

    def ctrl_c_after_moving_aside(root, source, target):
        real_rename(root, source, target)
        if str(target).endswith(".patchctl-old"):
            raise KeyboardInterrupt

    if step == "worktree lock":
        monkeypatch.setattr(git, "run", ctrl_c_at_lock)
    elif step == "marker":
        monkeypatch.setattr(worktree, "write_marker", ctrl_c_at_marker)
    else:
        monkeypatch.setattr(Root, "rename", ctrl_c_after_moving_aside)
    interrupted = cli("-C", project.path, "apply")
    monkeypatch.undo()
    assert interrupted.exit_code == 130, interrupted.output
    assert beside(tree) == [], f"left beside the tree: {beside(tree)}"
    head = git.rev_parse(tree, "HEAD")
    if step == "rename aside":  # the new tree was complete: rolled forward, as recovery does
        assert head != old_head and git.rev_parse(tree, "HEAD~1") == tip
    else:
        assert head == old_head and (tree / "src" / "new.c").read_text() == "mine\n"
    assert cli("-C", project.path, "apply").exit_code == 0
    assert git.rev_parse(tree, "HEAD~1") == tip and beside(tree) == []
