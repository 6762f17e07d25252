"""The bump: pin-sync moves the pin, the user commits as told (the exact printed command,
the pre-commit hooks running on it), and every check is green afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.patchctl.conftest import Repo, make_patch
from tests.patchctl.fixtures_sync import main_c

from .shell import downstream, hook_results, passed_hooks, tune_main_patch

pytestmark = pytest.mark.journey

HOOKS = ["patchctl lint", "patchctl export --check"]


def line20_patch(upstream: Repo, base: str) -> str:
    return make_patch(
        upstream,
        base,
        {"src/main.c": main_c({5: "main five", 20: "MAIN 20 patched"})},
        "Patch line twenty",
        "Downstream needs line 20 changed.",
    )


def test_bump_then_commit_as_told_with_the_hooks_green(tmp_path: Path, upstream: Repo, user_in) -> None:
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Patch-line-twenty.patch": line20_patch(upstream, pin)}
    )
    user = user_in(project.path)
    user.ok("pre-commit install")
    user.ok("patchctl apply")  # the tree a user has from the day before
    # Upstream rewrites line 18: the patch's context drifts, a 3-way merge takes it, the patch is re-exported.
    tip = upstream.commit({"src/main.c": main_c({18: "main 18 rewritten upstream"})}, "Upstream rewrites line 18")

    seen = user.ok("patchctl pin-sync up --latest")
    assert "0001-Patch-line-twenty.patch" in seen.stdout and "merged 3-way" in seen.stdout
    commit = user.advice(seen, "git commit")
    assert commit == (
        "git add -- patches/main/0001-Patch-line-twenty.patch matrix.yaml && "
        f"git commit -m 'pin-sync: move up to {tip[:12]}'"
    )
    committed = user.follow(seen, "git commit")  # the hooks run on this commit, and pass
    assert passed_hooks(committed) == HOOKS, str(committed)
    assert user.ok("git status --porcelain").stdout == ""
    assert tip in (project.path / "matrix.yaml").read_text()

    assert passed_hooks(user.ok("pre-commit run --all-files")) == HOOKS
    assert user.ok("patchctl export --check main").stdout == "main: up to date (1 patches)\n"
    assert user.ok("patchctl lint").stdout == "lint: no findings\n"
    assert user.ok("patchctl apply").stdout == (
        f"main: already applied at {tip[:12]} in .patchctl/trees/main (nothing to do)\n"
    )
    assert "main 18 rewritten upstream" in (project.path / ".patchctl/trees/main/src/main.c").read_text()


def test_work_in_progress_in_the_tree_moves_onto_the_new_pin(tmp_path: Path, upstream: Repo, user_in) -> None:
    """Commits made in the applied tree and not exported yet when the pin moves: the hook stops
    the commit pin-sync told the user to make (patches/ would not hold them), sends the user to
    apply, apply prints the rebase that moves them onto pin + series, and the loop goes on."""
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Patch-line-twenty.patch": line20_patch(upstream, pin)}
    )
    user = user_in(project.path)
    tree = project.path / ".patchctl" / "trees" / "main"
    user.ok("pre-commit install")
    user.ok("patchctl apply")
    user.edit(tree / "src/util.c", "util 3\n", "util three\n")
    user.ok('git commit -qam "Spell out util three" -m "Grep finds the word."', cwd=tree)
    tip = upstream.commit({"src/main.c": main_c({18: "main 18 rewritten upstream"})}, "Upstream rewrites line 18")

    stopped = user.follow(user.ok("patchctl pin-sync up --latest"), "git commit", exit_code=1)
    assert hook_results(stopped) == {"patchctl lint": "Passed", "patchctl export --check": "Failed"}
    assert f"is not on top of {tip[:12]}: the tree was applied at another pin" in stopped.output
    refused = user.follow(stopped, "patchctl apply", exit_code=2)
    assert "the pin or patches/ changed since it was applied: move them onto pin + series" in refused.stderr
    assert refused.advice[-1] == "patchctl apply main --force"
    user.follow(refused, "rebase --onto")
    seen = user.follow(refused, "patchctl export")
    assert "wrote   0002-Spell-out-util-three.patch" in seen.stdout
    assert "(nothing to do)" in user.ok("patchctl apply").stdout
    committed = user.ok(f'git add -A && git commit -qm "pin-sync: move up to {tip[:12]}, and spell out util three"')
    assert passed_hooks(committed) == HOOKS, str(committed)
    assert project.patch_names() == ["0001-Patch-line-twenty.patch", "0002-Spell-out-util-three.patch"]


def test_a_bump_of_a_tree_untouched_since_apply_needs_no_apply(tmp_path: Path, upstream: Repo, user_in) -> None:
    """The hook after someone else's pin-sync (a pull): the applied tree holds no work, export
    --check re-applies it at the new pin first and says so."""
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Tune-main.patch": tune_main_patch(upstream, pin)}
    )
    user = user_in(project.path)
    user.ok("patchctl apply")
    tip = upstream.commit({"src/util.c": "util moved upstream\n"}, "Unrelated upstream work")
    text = (project.path / "matrix.yaml").read_text()
    (project.path / "matrix.yaml").write_text(text.replace(pin, tip))  # what the pull brings
    seen = user.ok("patchctl export --check main")
    assert seen.stdout == "main: up to date (1 patches)\n"
    assert seen.stderr == (
        "patchctl: .patchctl/trees/main held no work of yours and was not pin + series: "
        f"re-applied at {tip[:12]} first\n"
    )
