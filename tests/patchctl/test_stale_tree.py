"""`gate` runs on pin + series only, and what `export` and `apply` know about a tree's commits
(issue 45, items 3 and 4). Real repositories; a gate that leaves a file behind when it runs, so
that a refusal is seen to gate nothing."""

from __future__ import annotations

import json
from pathlib import Path

from patchctl import git
from patchctl.state import worktree

from .conftest import Project, Repo, make_patch, numbered, one_line_error
from .fixtures_sync import main_c

# The gate checks the patched line is there, and says it ran (a file in the project root).
GATES = """\
    gates:
      - name: line-twenty
        command: touch "$PATCHCTL_ROOT/gated" && grep -q 'MAIN 20 patched' src/main.c
"""


def patch_line(upstream: Repo, base: str, line: int, text: str, subject: str) -> str:
    return make_patch(upstream, base, {"src/main.c": main_c({line: text})}, subject, "Downstream needs it.")


def gated_project(project: Project, upstream: Repo) -> Project:
    pin = upstream.head
    project.add_patch("0001-Tune-main.patch", patch_line(upstream, pin, 5, "main five", "Tune main"))
    project.add_patch("0002-Patch-line-twenty.patch", patch_line(upstream, pin, 20, "MAIN 20 patched", "Twenty"))
    project.write_config(pin, GATES)
    return project


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / "main"


def gated(project: Project) -> bool:
    ran = (project.path / "gated").exists()
    (project.path / "gated").unlink(missing_ok=True)
    return ran


def test_a_patch_removed_after_apply_is_not_gated(project: Project, upstream: Repo, cli) -> None:
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    assert cli("-C", project.path, "gate").exit_code == 0 and gated(project)
    (project.series_dir / "0002-Patch-line-twenty.patch").unlink()

    error = one_line_error(cli("-C", project.path, "gate"), 2)
    assert "is not pin + series (0002-Patch-line-twenty.patch removed from patches/ since it was applied)" in error
    assert error.endswith("it holds no work of yours: re-apply it (`patchctl apply main`)")
    assert not gated(project)  # the dropped patch was never gated as if it were the series
    assert cli("-C", project.path, "apply").exit_code == 0
    # Re-applied: the series is 0001 alone, and the gate says so by failing on it.
    assert cli("-C", project.path, "gate").exit_code == 1 and gated(project)


def test_a_moved_pin_where_apply_refused_leaves_nothing_to_gate(project: Project, upstream: Repo, cli) -> None:
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    old = upstream.head
    tip = upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    project.write_config(tip, GATES)  # a pin moved by hand (or pulled) where the series no longer applies
    assert cli("-C", project.path, "apply").exit_code == 1  # refused: the old tree stays
    assert json.loads((worktree.git_dir(tree_of(project)) / worktree.MARKER_NAME).read_text())["rev"] == old

    error = one_line_error(cli("-C", project.path, "gate"), 1)
    assert f"is not pin + series, and none can be made: the series does not apply to {tip[:12]}" in error
    assert "0002-Patch-line-twenty.patch" in error and error.endswith("gate runs on pin + series only")
    assert not gated(project)


def test_a_moved_pin_is_re_applied_as_said(project: Project, upstream: Repo, cli) -> None:
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    old = upstream.head
    tip = upstream.commit({"src/util.c": numbered(30, "util moved")}, "Unrelated upstream work")
    project.write_config(tip, GATES)
    error = one_line_error(cli("-C", project.path, "gate"), 2)
    assert f"(it was applied at {old[:12]}, and the pin is {tip[:12]})" in error
    assert error.endswith("re-apply it (`patchctl apply main`)") and not gated(project)
    assert cli("-C", project.path, "apply").exit_code == 0
    assert cli("-C", project.path, "gate").exit_code == 0 and gated(project)


def test_a_tree_named_with_tree_is_held_to_its_own_revision(project: Project, upstream: Repo, cli, tmp_path) -> None:
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    other = tmp_path / "other"
    assert cli("-C", project.path, "apply", "--into", other).exit_code == 0
    assert cli("-C", project.path, "gate", "main", "--tree", other).exit_code == 0 and gated(project)
    (project.series_dir / "0001-Tune-main.patch").unlink()
    error = one_line_error(cli("-C", project.path, "gate", "main", "--tree", other), 2)
    assert error.endswith(f"re-apply it (`patchctl apply main --into {other}`)") and not gated(project)


def test_the_edit_loop_order_gates_the_exported_tree(project: Project, upstream: Repo, cli) -> None:
    """apply, commit in the tree, export, gate: the tree is pin + series, exported."""
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    Repo(tree_of(project)).commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    assert one_line_error(cli("-C", project.path, "gate"), 2)  # not exported yet: not the series
    assert not gated(project)
    assert cli("-C", project.path, "export", "main").exit_code == 0
    assert cli("-C", project.path, "gate").exit_code == 0 and gated(project)


def test_an_exported_tree_keeps_its_commits_when_patches_lose_them(project: Project, upstream: Repo, cli) -> None:
    """export records the tree as the series; a patch file deleted afterwards at the same pin is
    not taken as a reason to re-apply the tree (that would drop the commit nothing else holds)."""
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    Repo(tree_of(project)).commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    assert cli("-C", project.path, "export", "main").exit_code == 0
    written = project.series_dir / "0003-Shrink-util.patch"
    data = written.read_bytes()
    written.unlink()

    check = cli("-C", project.path, "export", "--check", "main")
    assert check.exit_code == 1 and "0003-Shrink-util.patch" in check.stderr, check.output
    refused = one_line_error(cli("-C", project.path, "apply"), 2)
    assert "1 commit(s) not in the series" in refused and "Shrink util" in refused
    assert "to keep the tree's version, export it again (`patchctl export main`)" in refused
    assert cli("-C", project.path, "export", "main").exit_code == 0
    assert written.read_bytes() == data


def test_commits_all_in_the_series_are_re_applied_without_advice(project: Project, upstream: Repo, cli) -> None:
    """A tree whose marker was not re-recorded at export (an older patchctl did not), whose
    commits a later pin carries unchanged: they are in the series by patch id, nothing is lost."""
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = tree_of(project)
    marker = (worktree.git_dir(tree) / worktree.MARKER_NAME).read_text()
    Repo(tree).commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    assert cli("-C", project.path, "export", "main").exit_code == 0
    (worktree.git_dir(tree) / worktree.MARKER_NAME).write_text(marker)  # as apply left it
    tip = upstream.commit({"include/util.h": numbered(12, "decl")}, "Unrelated upstream work")
    project.write_config(tip, GATES)

    applied = cli("-C", project.path, "apply")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.startswith(f"main: applied 3 patch(es) to {tip[:12]}")
    assert Repo(tree).read("src/util.c") == "util\n"


def test_apply_at_another_rev_right_after_an_export_needs_no_export_base(project: Project, upstream: Repo, cli) -> None:
    upstream.commit({"src/main.c": main_c()}, "main.c as the patches know it")
    gated_project(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    Repo(tree_of(project)).commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    assert cli("-C", project.path, "export", "main").exit_code == 0
    other = upstream.commit({"include/util.h": numbered(12, "decl")}, "Unrelated upstream work")
    applied = cli("-C", project.path, "apply", "--rev", other)
    assert applied.exit_code == 0, applied.output
    assert "--base" not in applied.output
    assert git.rev_parse(tree_of(project), "HEAD~3") == other
