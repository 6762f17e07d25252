"""A bump that stops, and the ways on from it, each followed as patchctl prints it: a conflict
resolved then --continue; a conflicted patch dropped; --abort; a patch that needs a hand; a
gate fixed during the sync, folded into its patch (fixup!) or written as a described patch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.patchctl.conftest import Project, Repo, make_patch
from tests.patchctl.fixtures_sync import main_c

from .shell import User, downstream, passed_hooks, tune_main_patch

pytestmark = pytest.mark.journey

HOOKS = ["patchctl lint", "patchctl export --check"]
SYNC_TREE = ".patchctl/sync/up/main"
NO_TODO_GATE = """\
    gates:
      - name: no-todo
        command: "! grep -n TODO src/main.c"
"""


def bumpable(tmp_path: Path, upstream: Repo, user_in, *, extra_yaml: str = "") -> tuple[Project, User]:
    """A downstream of two patches (line 20, then line 5), applied, hooks installed."""
    pin = upstream.head
    line20 = make_patch(
        upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty", "Downstream needs it."
    )
    project = downstream(
        tmp_path / "project",
        upstream,
        pin,
        patches={"0001-Patch-line-twenty.patch": line20, "0002-Tune-main.patch": tune_main_patch(upstream, pin)},
        extra_yaml=extra_yaml,
    )
    user = user_in(project.path)
    user.ok("pre-commit install")
    user.ok("patchctl apply")
    return project, user


def commit_as_told(user: User, synced) -> None:
    committed = user.follow(synced, "git commit")
    assert passed_hooks(committed) == HOOKS, str(committed)
    assert user.ok("git status --porcelain").stdout == ""
    assert user.ok("patchctl lint").stdout == "lint: no findings\n"
    assert "up to date" in user.ok("patchctl export --check main").stdout


def test_a_conflict_resolved_as_the_report_says(tmp_path: Path, upstream: Repo, user_in) -> None:
    project, user = bumpable(tmp_path, upstream, user_in)
    upstream.commit({"src/main.c": main_c({20: "main 20 changed upstream"})}, "Upstream changes line 20")

    stopped = user.fails("patchctl pin-sync up --latest", 1)
    assert "pin-sync of up stops at a conflict: main/0001-Patch-line-twenty.patch: conflict" in stopped.stderr
    assert f"resolve the conflict in {SYNC_TREE}: edit src/main.c and remove the markers" in stopped.stdout
    assert stopped.advice == [
        f"git -C {SYNC_TREE} add -- src/main.c",
        "patchctl pin-sync up --continue",
        "patchctl pin-sync up --abort",
        "patchctl pin-sync up --continue --drop",
    ]
    conflicted = project.path / SYNC_TREE / "src/main.c"
    assert "<<<<<<< " in conflicted.read_text()
    conflicted.write_text(main_c({20: "MAIN 20 patched, over the upstream change"}))  # the user's resolution
    user.follow(stopped, "add --")
    synced = user.follow(stopped, "patchctl pin-sync up --continue")
    assert "| main | 0001-Patch-line-twenty.patch | resolved by hand |" in synced.stdout
    commit_as_told(user, synced)
    patch = (project.series_dir / "0001-Patch-line-twenty.patch").read_text()
    assert "-main 20 changed upstream\n+MAIN 20 patched, over the upstream change\n" in patch


def test_a_conflicted_patch_dropped_on_purpose(tmp_path: Path, upstream: Repo, user_in) -> None:
    project, user = bumpable(tmp_path, upstream, user_in)
    upstream.commit({"src/main.c": main_c({20: "MAIN 20 fixed upstream"})}, "Upstream takes a different line 20 fix")
    upstream.commit({"src/main.c": main_c({20: "MAIN 20 patched upstream"})}, "Upstream improves on it")
    user.fails("patchctl pin-sync up --latest", 1)

    stopped = user.fails("patchctl pin-sync up --continue", 2)  # markers left: not resolved yet
    synced = user.follow(stopped, "--continue --drop")  # the merge is undone by --drop itself, as git am --skip does
    assert "main/0001-Patch-line-twenty.patch was DROPPED from the series (dropped by hand (--drop))" in synced.stderr
    commit_as_told(user, synced)
    assert project.patch_names() == ["0002-Tune-main.patch"]


def test_abort_leaves_everything_as_it_was(tmp_path: Path, upstream: Repo, user_in) -> None:
    project, user = bumpable(tmp_path, upstream, user_in)
    before = project.snapshot()
    upstream.commit({"src/main.c": main_c({20: "main 20 changed upstream"})}, "Upstream changes line 20")
    stopped = user.fails("patchctl pin-sync up --latest", 1)
    again = user.fails("patchctl pin-sync up --latest", 2)
    assert "a pin-sync of up is in progress" in again.stderr
    assert again.advice == ["patchctl pin-sync up --continue", "patchctl pin-sync up --abort"]

    aborted = user.follow(stopped, "--abort")
    assert "removed .patchctl/sync/up; matrix.yaml and patches/ were never changed" in aborted.stdout
    assert not (project.path / ".patchctl/sync/up").exists()
    assert project.snapshot() == before
    assert user.ok("git status --porcelain").stdout == ""
    assert "up to date" in user.ok("patchctl export --check main").stdout
    assert "(nothing to do)" in user.ok("patchctl apply").stdout


def unmergeable(project: Project) -> None:
    """0001 is a plain diff, without the index lines that let git merge 3-way (as quilt writes
    them): where it does not apply, 3-way cannot even start (needs a hand)."""
    path = project.series_dir / "0001-Patch-line-twenty.patch"
    path.write_text(re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+.*\n", "", path.read_text(), flags=re.M))


def test_a_patch_that_needs_a_hand_applied_as_printed(tmp_path: Path, upstream: Repo, user_in) -> None:
    project, user = bumpable(tmp_path, upstream, user_in)
    unmergeable(project)
    user.ok('git commit -qam "A patch git cannot merge"')
    upstream.commit({"src/main.c": main_c({19: "main 19 rewritten upstream"})}, "Upstream rewrites line 19")

    stopped = user.fails("patchctl pin-sync up --latest", 1)
    assert "stops at a patch that needs a hand (nothing applied)" in stopped.stderr
    # What applies goes in; the rejected hunk lands in src/main.c.rej (exit 1, as the step says).
    user.follow(stopped, "apply --reject", exit_code=1)
    tree = project.path / SYNC_TREE
    assert "+MAIN 20 patched" in (tree / "src/main.c.rej").read_text()
    user.edit(tree / "src/main.c", "main 20\n", "MAIN 20 patched\n")  # the rejected change, made by hand
    user.follow(stopped, "add -A")
    synced = user.follow(stopped, "patchctl pin-sync up --continue")
    assert "| main | 0001-Patch-line-twenty.patch | resolved by hand |" in synced.stdout
    commit_as_told(user, synced)


def test_a_patch_that_needs_a_hand_dropped_on_purpose(tmp_path: Path, upstream: Repo, user_in) -> None:
    project, user = bumpable(tmp_path, upstream, user_in)
    unmergeable(project)
    user.ok('git commit -qam "A patch git cannot merge"')
    upstream.commit({"src/main.c": main_c({19: "main 19 rewritten upstream"})}, "Upstream rewrites line 19")
    stopped = user.fails("patchctl pin-sync up --latest", 1)
    synced = user.follow(stopped, "--drop")
    assert "main/0001-Patch-line-twenty.patch was DROPPED from the series (dropped by hand (--drop))" in synced.stderr
    commit_as_told(user, synced)
    assert project.patch_names() == ["0002-Tune-main.patch"]


def gate_failure(tmp_path: Path, upstream: Repo, user_in):
    """A bump that replays cleanly but fails the series' gate: upstream leaves a TODO in src/main.c."""
    project, user = bumpable(tmp_path, upstream, user_in, extra_yaml=NO_TODO_GATE)
    upstream.commit({"src/main.c": main_c({35: "main 35 TODO"})}, "Upstream leaves a TODO")
    stopped = user.fails("patchctl pin-sync up --latest", 1)
    assert "gate no-todo of series main failed" in stopped.stderr
    assert stopped.advice == [
        f"git -C {SYNC_TREE} log --oneline {upstream.head[:12]}..",
        "patchctl pin-sync up --continue",
        "patchctl pin-sync up --abort",
    ]
    return project, user, stopped


def test_a_gate_fixed_during_the_sync_folds_into_its_patch(tmp_path: Path, upstream: Repo, user_in) -> None:
    project, user, stopped = gate_failure(tmp_path, upstream, user_in)
    listing = user.follow(stopped, "log --oneline")
    (commit,) = [line.split()[0] for line in listing.stdout.splitlines() if line.endswith(" Patch line twenty")]
    user.edit(project.path / SYNC_TREE / "src/main.c", "main 35 TODO\n", "main 35\n")
    user.ok(f"git -C {SYNC_TREE} commit -qa --fixup={commit}")  # git writes the subject `fixup! Patch line twenty`
    synced = user.follow(stopped, "--continue")
    assert "| main | no-todo | gate | pass |" in synced.stdout
    commit_as_told(user, synced)
    assert project.patch_names() == ["0001-Patch-line-twenty.patch", "0002-Tune-main.patch"]
    patch = (project.series_dir / "0001-Patch-line-twenty.patch").read_text()
    assert "-main 35 TODO\n+main 35\n" in patch and "fixup!" not in patch


def test_a_gate_fixed_during_the_sync_as_a_new_patch_needs_a_description(
    tmp_path: Path, upstream: Repo, user_in
) -> None:
    project, user, stopped = gate_failure(tmp_path, upstream, user_in)
    user.edit(project.path / SYNC_TREE / "src/main.c", "main 35 TODO\n", "main 35\n")
    user.ok(f"git -C {SYNC_TREE} commit -qam 'Resolve the TODO'")
    refused = user.fails("patchctl pin-sync up --continue", 2)
    assert "would be a new patch of series main with no description, which lint rejects (PC008)" in refused.stderr
    user.follow(refused, "commit --amend")  # the editor adds the description
    synced = user.follow(refused, "--continue")
    commit_as_told(user, synced)
    assert project.patch_names() == [
        "0001-Patch-line-twenty.patch",
        "0002-Tune-main.patch",
        "0003-Resolve-the-TODO.patch",
    ]
