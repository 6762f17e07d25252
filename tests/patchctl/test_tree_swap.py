"""apply replaces a tree so that a kill at any point leaves the old tree or the new one, and
the next run finishes the swap and removes staging trees (issue 13, item 7)."""

from __future__ import annotations

import os
from pathlib import Path

from patchctl import git
from patchctl.state import statehome, treeswap, worktree
from patchctl.upstream.store import Store

from .conftest import Project, Repo
from .faultinject import SCENARIOS, applied_tree_state, run_patchctl, runner_env, stray_files, warm_parsed_yaml
from .fixtures_sync import add_line20_patch


def _mirror_worktrees(cache: Path | None = None) -> list[str]:
    """The worktrees the cache's mirror knows, as `git worktree list --porcelain` blocks."""
    (mirror,) = Store(cache).root.joinpath("mirrors").glob("*.git")
    listing = git.run(["worktree", "list", "--porcelain"], mirror).stdout
    return [block for block in listing.split("\n\n") if block.strip() and "bare" not in block]


def _killed_apply(tmp_path: Path, predicate) -> tuple[Path, dict[str, str], object, object]:
    env = runner_env(tmp_path / "cache")
    scenario = SCENARIOS["apply-force"](tmp_path / "setup", env)  # always swapped, never updated in place
    warm_parsed_yaml(scenario, tmp_path / "warm", env)
    clean = scenario.fresh(tmp_path / "clean")
    old = applied_tree_state(clean)
    counted = run_patchctl(scenario.args(clean), env, report=tmp_path / "count.json")
    new = applied_tree_state(clean)
    point = next(i for i, op in enumerate(counted.trace, 1) if predicate(op))
    project = scenario.fresh(tmp_path / "killed")
    assert run_patchctl(scenario.args(project), env, kill_at=point).exit_code == 137
    return project, env, old, new


def test_killed_between_the_two_renames_the_next_command_rolls_the_new_tree_forward(tmp_path: Path) -> None:
    into_place = lambda op: op.startswith("os.rename") and op.endswith("/trees/main")  # noqa: E731
    project, env, _old, new = _killed_apply(tmp_path, into_place)
    tree = worktree.applied_tree(project, "main")
    assert not tree.exists() and treeswap.sibling(tree, "old").is_dir()  # the kill really came in between
    check = run_patchctl(["-C", project, "lint", "--no-apply"], env)
    assert check.exit_code == 0, check.output
    assert "patchctl: finished replacing .patchctl/trees/main, which an earlier run did not\n" in check.output
    assert applied_tree_state(project) == new
    assert not stray_files(project)
    blocks = _mirror_worktrees(Path(env["PATCHCTL_CACHE"]))
    assert [b for b in blocks if str(tree) in b] and not [b for b in blocks if "locked" in b or "prunable" in b]


def test_killed_before_git_learns_the_new_path_the_tree_is_reattached(tmp_path: Path) -> None:
    recording = lambda op: op.startswith("open .gitdir")  # noqa: E731 - the worktree's new path, being written
    project, env, _old, new = _killed_apply(tmp_path, recording)
    tree = worktree.applied_tree(project, "main")
    cache = Path(env["PATCHCTL_CACHE"])
    assert [b for b in _mirror_worktrees(cache) if "locked" in b]  # locked, known by its staging path
    check = run_patchctl(["-C", project, "lint", "--no-apply"], env)
    assert check.exit_code == 0, check.output
    assert applied_tree_state(project) == new
    blocks = _mirror_worktrees(cache)
    assert [b for b in blocks if f"worktree {tree}\n" in b + "\n"]
    assert not [b for b in blocks if "locked" in b or "prunable" in b]


def test_a_kill_before_the_swap_keeps_the_old_tree(tmp_path: Path) -> None:
    """Killed while the new tree is still in the state directory's staging area (checked out and
    locked there, where no checkout reaches): the next command removes it and prunes its entry."""
    project, env, old, _new = _killed_apply(tmp_path, lambda op: op.startswith("exec git worktree lock"))
    staging = statehome.home(project) / treeswap.STAGING
    assert [p.name for p in staging.iterdir()] and [
        b for b in _mirror_worktrees(Path(env["PATCHCTL_CACHE"])) if str(staging) in b
    ]
    assert not treeswap.sibling(worktree.applied_tree(project, "main"), "new").exists()
    check = run_patchctl(["-C", project, "lint", "--no-apply"], env)
    assert check.exit_code == 0, check.output
    assert "a tree an earlier run was checking out" in check.output
    assert applied_tree_state(project) == old
    assert not stray_files(project) and list(staging.iterdir()) == []
    blocks = _mirror_worktrees(Path(env["PATCHCTL_CACHE"]))
    assert not [b for b in blocks if "locked" in b or "prunable" in b or str(staging) in b]


def test_stale_staging_trees_of_earlier_runs_are_removed_and_pruned(
    project: Project, upstream: Repo, cli, tmp_path: Path
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = worktree.applied_tree(project.path, "main")
    store = Store()
    (mirror_path,) = store.root.joinpath("mirrors").glob("*.git")
    stale = tree.with_name(".main.patchctl-4242")  # what a killed apply of an earlier version left
    git.run(["worktree", "add", "-q", "--detach", str(stale), upstream.head], mirror_path)
    assert len(_mirror_worktrees()) == 2

    result = cli("-C", project.path, "apply", "--force")
    assert result.exit_code == 0, result.output
    assert not stale.exists()
    assert sorted(p.name for p in tree.parent.iterdir()) == ["main"]
    assert [b for b in _mirror_worktrees() if str(stale) in b] == []


def test_a_tree_missing_with_only_the_old_one_beside_it_is_put_back(project: Project, upstream: Repo, cli) -> None:
    add_line20_patch(project, upstream, upstream.head)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = worktree.applied_tree(project.path, "main")
    marker = worktree.read_marker(tree)
    os.rename(tree, treeswap.sibling(tree, "old"))
    assert treeswap.recover_tree(tree) == "restored"
    assert worktree.read_marker(tree) == marker
    assert cli("-C", project.path, "apply").stdout.endswith("(nothing to do)\n")


def test_apply_into_a_directory_outside_the_project_recovers_there_too(
    project: Project, upstream: Repo, cli, tmp_path: Path
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    into = tmp_path / "elsewhere" / "tree"
    assert cli("-C", project.path, "apply", "--into", into).exit_code == 0
    leftover = treeswap.sibling(into, "old")
    leftover.mkdir()
    (leftover / "junk.c").write_text("x\n")
    assert cli("-C", project.path, "apply", "--into", into).exit_code == 0
    assert sorted(p.name for p in into.parent.iterdir()) == ["tree"]
