"""pin-sync never drops a patch silently.

A patch whose 3-way merge cannot even run (here: git lacks the preimage blob its `index` line
names, and the patch does not apply at the old pin either, so the preimage cannot be rebuilt
there) stops the sync without conflict markers: the report says what git said and that
nothing was applied, `--continue` refuses while nothing was done, and only `--continue
--drop` drops it, loudly. A conflict resolved to nothing is a drop on purpose, said loudly too.
"""

from __future__ import annotations

import re

from patchctl import git

from .conftest import Project, Repo, make_patch
from .fixtures_sync import add_hello_patch, add_line20_patch, load_json, main_c, write_config

MISSING_BLOB = "1234567890abcdef1234567890abcdef12345678"


def sync(cli, project: Project, *args: str):
    report = project.path.parent / "report.json"
    report.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", *args, "--json-file", report)
    return result, (load_json(report) if report.exists() else None)


def unmergeable(project: Project, upstream: Repo) -> str:
    """0001 was cut against a tree holding a cherry-pick: it names a preimage blob no repository
    has, and its context holds the cherry-picked line, so it applies at neither pin."""
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    path = project.series_dir / "0001-patch-line-twenty.patch"
    text = re.sub(r"^index [0-9a-f]+\.\.", f"index {MISSING_BLOB}..", path.read_text(), flags=re.M)
    path.write_text(text.replace("\n main 18\n", "\n main 18 cherry-picked\n"))
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    return upstream.commit({"src/main.c": main_c({19: "main 19 rewritten upstream"})}, "Upstream rewrites line 19")


def test_three_way_failure_without_markers_is_not_a_conflict_and_continue_refuses(
    project: Project, upstream: Repo, cli
) -> None:
    unmergeable(project, upstream)
    before = project.snapshot()
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1
    assert "stops at a patch that needs a hand (nothing applied)" in result.stderr
    assert "conflict" not in result.stderr.split(":", 2)[-1].split(";")[0]
    assert payload["state"] == "needs-hand"
    record = payload["patches"][0]
    assert record["conflicts"] == []
    assert "repository lacks the necessary blob" in record["detail"]  # git's own reason
    assert "src/main.c hunk #1" in record["detail"] and "nothing was applied" in record["detail"]
    assert "it does not apply at the old pin either, so the preimage cannot be rebuilt" in record["detail"]
    assert len(payload["patches"]) == 1  # 0002 touches other files: not blocked by 0001
    assert not any("remove the markers" in step for step in payload["next_steps"])
    assert any("--continue --drop" in step for step in payload["next_steps"])
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    assert git.run(["status", "--porcelain", "--untracked-files=no"], tree).stdout == ""

    refused, _ = sync(cli, project, "--continue")
    assert refused.exit_code == 2 and "nothing was done for 0001-patch-line-twenty.patch" in refused.stderr
    assert project.snapshot() == before  # the patch is still there, the pin did not move

    # Applied by hand: kept, and the sync finishes.
    (tree / "src" / "main.c").write_text(main_c({19: "main 19 rewritten upstream", 20: "MAIN 20 patched"}))
    git.run(["add", "src/main.c"], tree)
    resumed, payload = sync(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert payload["warnings"] == [] and "warning" not in resumed.stderr
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "resolved by hand"),
        ("0002-add-hello.patch", "clean"),
    ]
    assert project.patch_names() == ["0001-patch-line-twenty.patch", "0002-add-hello.patch"]


def test_drop_on_purpose_is_said_loudly(project: Project, upstream: Repo, cli) -> None:
    tip = unmergeable(project, upstream)
    assert sync(cli, project, "up", "--latest")[0].exit_code == 1
    not_with_abort = cli("-C", project.path, "pin-sync", "--drop")
    assert not_with_abort.exit_code == 2 and "--drop goes with --continue" in not_with_abort.stderr
    dropped, payload = sync(cli, project, "--continue", "--drop")
    assert dropped.exit_code == 0, dropped.output
    assert payload["patches"][0]["classification"] == "dropped by hand (--drop)"
    assert payload["warnings"] == [
        "main/0001-patch-line-twenty.patch was DROPPED from the series (dropped by hand (--drop)): its file was deleted"
    ]
    assert "patchctl: warning: main/0001-patch-line-twenty.patch was DROPPED" in dropped.stderr
    assert "⚠️ **warning**" in dropped.stdout
    assert project.patch_names() == ["0002-add-hello.patch"]
    assert f"pin: '{tip}'" in (project.path / "matrix.yaml").read_text()


def test_conflict_resolved_to_nothing_is_a_loud_drop(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict"
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    git.run(["checkout", "HEAD", "--", "src/main.c"], tree)  # the user resolves to upstream's side
    resumed, payload = sync(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert payload["patches"][0]["classification"] == "dropped by hand (its conflict was resolved to nothing)"
    assert len(payload["warnings"]) == 1 and "DROPPED" in resumed.stderr


def test_later_patches_on_the_same_files_are_blocked_not_broken(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    later = make_patch(upstream, pin, {"src/main.c": main_c({30: "MAIN 30 patched"})}, "Patch line thirty")
    project.add_patch("0004-Patch-line-thirty.patch", later)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict"
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "conflict"),
        ("0004-Patch-line-thirty.patch", "blocked by 0001-patch-line-twenty.patch"),
    ]
    assert "not replayed yet: it touches src/main.c" in payload["patches"][1]["detail"]
