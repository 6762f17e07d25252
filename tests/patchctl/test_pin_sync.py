"""`patchctl pin-sync` against scripted upstream drift on real temporary repositories."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchctl import git
from patchctl.errors import ConfigError
from patchctl.loop import pinfile
from patchctl.state import journal

from .conftest import Project, Repo, make_patch
from .fixtures_sync import add_hello_patch, add_line20_patch, load_json, main_c, write_config

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

BUILD_AND_GATE = """\
build:
  - name: compile-hello
    command: cc -O1 -o hello-bin src/hello.c && echo compiled
gates:
  - name: run-hello
    command: test "$(./hello-bin)" = "hello 42" && echo PASS hello
"""


def sync(cli, project: Project, *args: str):
    report = project.path.parent / "report.json"
    report.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", *args, "--json-file", report)
    payload = load_json(report) if report.exists() else None
    return result, payload


def expected_config(before: str, old: str, new: str) -> str:
    assert before.count(old) == 1
    return before.replace(old, new)


# ---------------------------------------------------------------- success paths


@needs_cc
def test_additive_patch_survives_builds_passes_gates_and_moves_the_pin(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_hello_patch(project, upstream, pin, name="0001-add-hello.patch")
    write_config(project, pin, series_extra=BUILD_AND_GATE)
    before = project.snapshot()
    unrelated = upstream.commit({"src/util.c": "util rewritten\n"}, "Rewrite util")
    tip = upstream.commit({"include/util.h": "decl only\n"}, "Trim header")

    result, payload = sync(cli, project, "up", "--latest", "--report", project.path.parent / "report.md")
    assert result.exit_code == 0, result.output
    assert payload["state"] == "synced" and payload["old_pin"] == pin and payload["new_pin"] == tip
    assert [c["sha"] for c in payload["commits"]] == [unrelated, tip]
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [("0001-add-hello.patch", "clean")]
    assert [(g["kind"], g["name"], g["ok"]) for g in payload["gates"]] == [
        ("strict-apply", "strict-apply", True),
        ("build", "compile-hello", True),
        ("gate", "run-hello", True),
    ]
    assert all(g["duration_s"] >= 0 for g in payload["gates"])
    assert payload["files_changed"] == ["matrix.yaml"]
    after = project.snapshot()
    assert after["matrix.yaml"].decode() == expected_config(before["matrix.yaml"].decode(), pin, tip)
    assert {k: v for k, v in after.items() if k != "matrix.yaml"} == {
        k: v for k, v in before.items() if k != "matrix.yaml"
    }
    assert not (project.path / ".patchctl" / "sync" / "up").exists()
    markdown = (project.path.parent / "report.md").read_text()
    assert (
        "pin moved" in markdown
        and "| main | 0001-add-hello.patch | clean |" in markdown
        and "compile-hello" in markdown
    )
    assert tip[:12] in markdown and "Trim header" in markdown


def test_offset_and_context_drift_are_replayed_and_the_series_reexported(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    old_patch = (project.series_dir / "0001-patch-line-twenty.patch").read_bytes()
    tip = upstream.commit({"src/main.c": main_c({23: "main 23 changed upstream"}, prepend=3)}, "Drift near line 20")

    result, payload = sync(cli, project, "up", "--to", tip)
    assert result.exit_code == 0, result.output
    assert [p["classification"] for p in payload["patches"]] == ["merged 3-way"]
    assert payload["files_changed"] == ["patches/main/0001-patch-line-twenty.patch", "matrix.yaml"]
    new_patch = (project.series_dir / "0001-patch-line-twenty.patch").read_bytes()
    assert new_patch != old_patch and b"main 23 changed upstream" in new_patch
    # The rewritten series applies strictly at the new pin, and gives the merged result.
    applied = cli("-C", project.path, "apply", "--json")
    assert applied.exit_code == 0, applied.output
    text = (project.path / ".patchctl" / "trees" / "main" / "src" / "main.c").read_text()
    assert text == main_c({20: "MAIN 20 patched", 23: "main 23 changed upstream"}, prepend=3)


def test_pure_offset_is_reported_and_leaves_the_patch_bytes_alone(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    old_patch = (project.series_dir / "0001-patch-line-twenty.patch").read_bytes()
    upstream.commit({"src/main.c": main_c(prepend=5)}, "Insert lines at the top")
    result, payload = sync(cli, project, "--latest")  # the only upstream is picked
    assert result.exit_code == 0, result.output
    assert payload["patches"][0]["classification"] == "applied with offset"
    assert "src/main.c hunk #1 +5" in payload["patches"][0]["detail"]
    assert (project.series_dir / "0001-patch-line-twenty.patch").read_bytes() == old_patch  # offsets are no churn
    assert payload["files_changed"] == ["matrix.yaml"]


def test_patch_taken_upstream_is_dropped_and_reported(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "MAIN 20 patched"})}, "Upstream takes our line-20 fix")

    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 0, result.output
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "already upstream (dropped)"),
        ("0002-add-hello.patch", "clean"),
    ]
    assert "already in the upstream tree" in payload["patches"][0]["detail"]
    assert project.patch_names() == ["0002-add-hello.patch"]  # kept its name: no renumbering
    assert set(payload["files_changed"]) == {"patches/main/0001-patch-line-twenty.patch", "matrix.yaml"}
    assert payload["warnings"] == [
        "main/0001-patch-line-twenty.patch was DROPPED from the series (already upstream (dropped)): its file was "
        "deleted"
    ]
    assert "patchctl: warning: main/0001-patch-line-twenty.patch was DROPPED" in result.stderr


def test_only_upstream_commits_changing_the_patchs_files_are_hashed_for_its_patch_id(upstream: Repo) -> None:
    """A patch-id hashes each changed file's `---`/`+++` lines: an upstream commit that changes a
    file the patch does not cannot have the patch's, and is never shown to `git patch-id` (on a
    real bump, most commits touching a patched file). One that adds only a mode change may, by
    git's version, and is asked."""
    from patchctl.loop import carry
    from patchctl.series.patchset import PatchFile

    pin = upstream.head
    text = make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty")
    patch = PatchFile(upstream.path.parent / "0001-patch-line-twenty.patch", text.encode())
    wider = upstream.commit({"src/main.c": main_c({5: "main five"}), "src/other.c": "int other;\n"}, "Wider")
    upstream.write({"src/main.c": main_c({5: "main five", 30: "main thirty"})})
    os.chmod(upstream.path / "src/other.c", 0o755)
    mode_too = git.commit_all(upstream.path, "Line thirty and a mode")
    took = upstream.commit({"src/main.c": main_c({5: "main five", 20: "MAIN 20 patched", 30: "main thirty"})}, "Took")
    move = carry.PinMove(upstream.path, pin, took, [patch])

    taken = carry.taken_upstream(move, patch)
    assert taken is not None and (taken.commit, taken.how) == (took, carry.TAKEN_SAME_PATCH_ID)
    assert wider not in move.patch_ids  # never shown
    assert mode_too in move.patch_ids and move.patch_ids[mode_too] != move.patch_ids[took]


def test_dry_run_runs_everything_and_writes_nothing(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    before = project.snapshot()
    upstream.commit({"src/main.c": main_c({23: "drift"})}, "Drift")
    result, payload = sync(cli, project, "up", "--latest", "--dry-run")
    assert result.exit_code == 0, result.output
    assert payload["state"] == "dry-run" and payload["files_changed"] == [
        "patches/main/0001-patch-line-twenty.patch",
        "matrix.yaml",
    ]
    assert project.snapshot() == before
    assert not (project.path / ".patchctl" / "sync" / "up").exists()


def test_already_at_the_target_is_a_no_op(project: Project, upstream: Repo, cli) -> None:
    add_line20_patch(project, upstream, upstream.head)
    write_config(project, upstream.head)
    before = project.snapshot()
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 0 and payload["state"] == "up-to-date"
    assert project.snapshot() == before


# ---------------------------------------------------------------- conflicts


def conflicted(project: Project, upstream: Repo) -> str:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    return upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")


def test_true_conflict_stops_with_a_report_and_leaves_the_repository_unchanged(
    project: Project, upstream: Repo, cli
) -> None:
    conflicted(project, upstream)
    before = project.snapshot()
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1
    assert "stops at a conflict: main/0001-patch-line-twenty.patch: conflict" in result.stderr
    assert payload["state"] == "conflict"
    record = payload["patches"][0]
    # zdiff3 markers: ours (upstream's line), the base the patch was written against, theirs (the patch)
    assert record["classification"] == "conflict" and record["conflicts"] == ["src/main.c:20-26"]
    assert "src/main.c hunk #1 @@ -17,7 +17,7 @@ (line " in record["detail"]
    assert any("--continue" in step for step in payload["next_steps"]) and any(
        "--abort" in step for step in payload["next_steps"]
    )
    assert "markers at src/main.c:20-26" in result.stdout
    assert project.snapshot() == before
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    lines = (tree / "src" / "main.c").read_text().splitlines()
    assert lines[19:26] == [
        "<<<<<<< ours",
        "main 20 rewritten upstream",
        "||||||| base",
        "main 20",
        "=======",
        "MAIN 20 patched",
        ">>>>>>> theirs",
    ]
    # The range-diff is computed once, at the end: a stop says so in its place.
    assert "range_diffs" not in payload and payload["range_diff_note"].startswith("at the end")
    assert "git range-diff: at the end: computed once, when every patch is carried" in result.stdout
    assert "git range-diff: series main" not in result.stdout
    # A second start is refused while this one is pending.
    again, _ = sync(cli, project, "up", "--latest")
    assert again.exit_code == 2 and "in progress" in again.stderr

    aborted, payload = sync(cli, project, "--abort")
    assert aborted.exit_code == 0 and payload["state"] == "aborted"
    assert not (project.path / ".patchctl" / "sync" / "up").exists()
    assert project.snapshot() == before
    assert not any("sync" in line for line in git.run(["worktree", "list"], _mirror(project)).stdout.splitlines())


def test_continue_after_resolving_finishes_the_sync(project: Project, upstream: Repo, cli) -> None:
    tip = conflicted(project, upstream)
    result, _ = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    early, _ = sync(cli, project, "--continue")
    assert early.exit_code == 2 and "still unmerged in .patchctl/sync/up/main: src/main.c" in early.stderr

    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 patched, on top of upstream's rewrite"}))
    git.run(["add", "src/main.c"], tree)
    resumed, payload = sync(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert payload["state"] == "synced" and payload["new_pin"] == tip
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "resolved by hand"),
        ("0002-add-hello.patch", "clean"),
    ]
    # The range-diff, at the end: the resolved patch changed (`!`), the other one did not (`=`).
    range_diff = payload["range_diffs"]["main"]
    assert "range_diff_note" not in payload
    assert [line.split()[2] for line in range_diff.splitlines() if line[:1].isdigit()] == ["!", "="]
    assert "+MAIN 20 patched, on top of upstream's rewrite" in range_diff
    assert "git range-diff: series main" in resumed.stdout
    assert f"pin: '{tip}'" in (project.path / "matrix.yaml").read_text()
    assert (
        b"+MAIN 20 patched, on top of upstream's rewrite"
        in (project.series_dir / "0001-patch-line-twenty.patch").read_bytes()
    )
    assert not tree.exists()
    applied = cli("-C", project.path, "apply")
    assert applied.exit_code == 0, applied.output


def test_continue_commits_what_the_resolution_left_unstaged_too(project: Project, upstream: Repo, cli) -> None:
    """`git add` ends the conflict; an edit to a tracked file made after it, not staged, is still
    the user's resolution, and --continue commits it with the rest (as `git add -u` would stage it)."""
    conflicted(project, upstream)
    assert sync(cli, project, "up", "--latest")[0].exit_code == 1
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 staged"}))
    git.run(["add", "src/main.c"], tree)
    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 staged, then edited again"}))

    resumed, payload = sync(cli, project, "--continue")

    assert resumed.exit_code == 0, resumed.output
    assert payload["patches"][0]["classification"] == "resolved by hand"
    written = (project.series_dir / "0001-patch-line-twenty.patch").read_bytes()
    assert b"+MAIN 20 staged, then edited again" in written and b"+MAIN 20 staged\n" not in written


def test_continue_accepts_a_commit_made_by_the_user(project: Project, upstream: Repo, cli) -> None:
    conflicted(project, upstream)
    assert sync(cli, project, "up", "--latest")[0].exit_code == 1
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 by hand"}))
    git.run(["add", "src/main.c"], tree)
    git.run(["commit", "-q", "-m", "Patch line twenty\n\nDownstream needs line 20 changed."], tree)
    resumed, payload = sync(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert project.patch_names() == ["0001-patch-line-twenty.patch", "0002-add-hello.patch"]
    assert b"+MAIN 20 by hand" in (project.series_dir / "0001-patch-line-twenty.patch").read_bytes()


def _mirror(project: Project) -> Path:
    mirrors = list(Path(os.environ["PATCHCTL_CACHE"]).glob("mirrors/*.git"))
    assert len(mirrors) == 1
    return mirrors[0]


# ---------------------------------------------------------------- gates


@needs_cc
def test_failing_build_leaves_everything_unchanged_and_names_the_gate(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.commit({"include/answer.h": "#define ANSWER 42\n"}, "Add answer")
    uses_it = (
        '#include <stdio.h>\n#include "../include/answer.h"\n'
        'int main(void) { printf("hello %d\\n", ANSWER); return 0; }\n'
    )
    project.add_patch(
        "0001-add-hello.patch",
        make_patch(upstream, pin, {"src/hello.c": uses_it}, "Add hello", "Uses upstream's answer."),
    )
    write_config(project, pin, series_extra=BUILD_AND_GATE)
    # Applies cleanly at the new rev, but no longer compiles: only the build gate can tell.
    upstream.commit({"include/answer.h": "#define THE_ANSWER 42\n"}, "Rename ANSWER")
    before = project.snapshot()
    result, payload = sync(cli, project, "up", "--latest", "--report", project.path.parent / "r.md")
    assert result.exit_code == 1
    assert payload["state"] == "gate-failed"
    assert [(g["name"], g["ok"]) for g in payload["gates"]] == [("strict-apply", True), ("compile-hello", False)]
    assert "exit 1" in payload["gates"][1]["detail"] and Path(payload["gates"][1]["log"]).is_file()
    assert "gate compile-hello of series main failed" in result.stderr and "nothing written" in result.stderr
    assert project.snapshot() == before
    assert "**FAIL**" in (project.path.parent / "r.md").read_text()
    assert sync(cli, project, "--abort")[0].exit_code == 0
    assert project.snapshot() == before


def test_failing_gate_command_leaves_everything_unchanged_and_continue_reruns_gates(
    project: Project, upstream: Repo, cli
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin, series_extra="gates:\n  - name: needs-marker\n    command: test -f src/marker\n")
    tip = upstream.commit({"src/util.c": "moved\n"}, "Unrelated")
    before = project.snapshot()
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "gate-failed"
    assert payload["gates"][-1]["name"] == "needs-marker" and not payload["gates"][-1]["ok"]
    assert project.snapshot() == before
    # Fix the series in the sync tree (a new commit becomes a new patch), then continue.
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    (tree / "src" / "marker").write_text("x\n")
    git.run(["add", "src/marker"], tree)
    git.run(["commit", "-q", "-m", "Add marker\n\nThe gate needs it."], tree)
    resumed, payload = sync(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert project.patch_names() == ["0001-patch-line-twenty.patch", "0002-Add-marker.patch"]
    assert f"pin: '{tip}'" in (project.path / "matrix.yaml").read_text()


# ---------------------------------------------------------------- tracks and pin_files


TRACKING = """\
fork:
  url: {url}
  branch: main
  pin: {pin}
  tracks: up
  pin_files:
    - {{path: Makefile, pattern: 'FORK_VERSION \\?= (?P<pin>[0-9a-f]{{40}})'}}
"""


def tracking_project(project: Project, upstream: Repo) -> str:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(
        project,
        pin,
        up_extra="pin_files:\n  - {path: Makefile, pattern: 'UP_VERSION \\?= (?P<pin>[0-9a-f]{40})'}\n",
        upstreams_extra=TRACKING.format(url=upstream.path, pin=pin),
    )
    (project.path / "Makefile").write_text(
        f"# versions\nUP_VERSION ?= {pin}\nFORK_VERSION ?= {pin}\nall:\n\t@echo {pin[:7]}\n"
    )
    return pin


def test_moving_a_tracking_pin_on_its_own_is_refused(project: Project, upstream: Repo, cli) -> None:
    tracking_project(project, upstream)
    upstream.commit({"src/util.c": "x\n"}, "Drift")
    before = project.snapshot()
    result, _ = sync(cli, project, "fork", "--latest")
    assert result.exit_code == 2
    assert (
        "upstream fork tracks up: its pin must equal up's" in result.stderr and "patchctl pin-sync up" in result.stderr
    )
    assert project.snapshot() == before


def test_pin_files_and_tracking_pins_move_together(project: Project, upstream: Repo, cli) -> None:
    pin = tracking_project(project, upstream)
    tip = upstream.commit({"src/util.c": "x\n"}, "Drift")
    before = project.snapshot()
    result, payload = sync(cli, project, "--latest")  # `fork` tracks `up`: `up` is the one to sync
    assert result.exit_code == 0, result.output
    assert payload["moved_upstreams"] == ["up", "fork"]
    assert sorted(payload["files_changed"]) == ["Makefile", "matrix.yaml"]
    after = project.snapshot()
    assert after["matrix.yaml"] == before["matrix.yaml"].replace(pin.encode(), tip.encode())
    assert (
        after["Makefile"]
        == f"# versions\nUP_VERSION ?= {tip}\nFORK_VERSION ?= {tip}\nall:\n\t@echo {pin[:7]}\n".encode()
    )
    lint = cli("-C", project.path, "lint", "--no-apply")
    assert lint.exit_code == 0, lint.output


# ---------------------------------------------------------------- all or nothing


def _crash_after_first_rename(changes: list[journal.FileChange], config_file: Path) -> None:
    real = journal._rename_in
    calls = []

    def rename_then_die(repository, entry: dict) -> None:
        real(repository, entry)
        calls.append(entry)
        if len(calls) == 1:
            os._exit(17)  # the machine dies: no cleanup, no finally

    journal._rename_in = rename_then_die
    journal.commit(config_file, changes)
    os._exit(0)


def test_crash_between_renames_leaves_the_old_set_after_recovery(project: Project, upstream: Repo, cli) -> None:
    pin = tracking_project(project, upstream)
    tip = upstream.commit({"src/util.c": "x\n"}, "Drift")
    from patchctl.project import config as config_mod

    config = config_mod.load(project.path / "matrix.yaml")
    changes = pinfile.pin_changes(config, "up", tip)
    changes.append(journal.FileChange(project.series_dir / "0002-new.patch", b"new\n"))
    before = project.snapshot()
    config_file = project.path / "matrix.yaml"
    child = multiprocessing.get_context("fork").Process(target=_crash_after_first_rename, args=(changes, config_file))
    child.start()
    child.join(30)
    assert child.exitcode == 17
    torn = project.snapshot()
    assert torn != before  # the crash really left a half-written set behind
    assert journal.journal_path(project.path).exists()

    # The next pin-sync recovers first: the old set is back, then it syncs normally.
    result, payload = sync(cli, project, "up", "--latest", "--dry-run")
    assert result.exit_code == 0, result.output
    assert project.snapshot() == before
    assert not journal.journal_path(project.path).exists()
    assert not [p for p in project.path.rglob(".*patchctl-*") if p.is_file()]
    assert pin in (project.path / "Makefile").read_text()


def _series_repository(root: Path) -> tuple[Path, Path]:
    """A git repository whose matrix.yaml has the series `main` in patches/main: (matrix.yaml, patches/main)."""
    git.init_repo(root)
    (root / "matrix.yaml").write_text("version: 1\nupstreams: {}\nseries:\n  main: {upstream: up}\n")
    (root / "patches" / "main").mkdir(parents=True)
    return root / "matrix.yaml", root / "patches" / "main"


def test_committed_journal_is_completed_not_rolled_back(tmp_path: Path) -> None:
    config, series = _series_repository(tmp_path)
    target = series / "a.patch"
    target.write_text("old\n")
    journal.commit(config, [journal.FileChange(target, b"new\n"), journal.FileChange(series / "b.patch", b"b\n")])
    assert target.read_text() == "new\n" and (series / "b.patch").read_text() == "b\n"
    assert journal.recover(config) is None
    assert sorted(p.name for p in series.iterdir()) == ["a.patch", "b.patch"]
    assert not journal.journal_path(tmp_path).exists()


def test_error_half_way_through_the_renames_rolls_back_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, series = _series_repository(tmp_path)
    first, second = series / "first.patch", series / "second.patch"
    first.write_text("old 1\n")
    second.write_text("old 2\n")
    real, calls = journal._rename_in, []

    def rename_then_fail(repository, entry: dict) -> None:
        if calls:
            raise OSError("disk full")
        calls.append(real(repository, entry))

    monkeypatch.setattr(journal, "_rename_in", rename_then_fail)
    changes = [
        journal.FileChange(first, b"new 1\n"),
        journal.FileChange(second, b"new 2\n"),
        journal.FileChange(series / "third.patch", b"3\n"),
    ]
    with pytest.raises(OSError, match="disk full"):
        journal.commit(config, changes)
    assert first.read_text() == "old 1\n" and second.read_text() == "old 2\n"
    assert sorted(p.name for p in series.iterdir()) == ["first.patch", "second.patch"]
    assert not journal.journal_path(tmp_path).exists()


def test_a_commit_refuses_what_recovery_would_refuse(tmp_path: Path) -> None:
    """A file patchctl does not manage, or one inside .git, is never journaled."""
    config, series = _series_repository(tmp_path)
    with pytest.raises(ConfigError, match="README.md is not a file patchctl writes"):
        journal.commit(config, [journal.FileChange(tmp_path / "README.md", b"x\n")])
    with pytest.raises(ConfigError, match="refusing to write .git/x: a path inside .git"):
        journal.commit(config, [journal.FileChange(tmp_path / ".git" / "x", b"x\n")])
    assert not (tmp_path / "README.md").exists() and not journal.journal_path(tmp_path).exists()


def test_unreachable_docker_engine_in_a_build_gate_exits_3_and_cleans_up(
    project: Project, upstream: Repo, cli, monkeypatch
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(
        project, pin, series_extra="build:\n  - {name: in-docker, runner: docker, image: 'any:1', command: make}\n"
    )
    upstream.commit({"src/util.c": "x\n"}, "Drift")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    before = project.snapshot()
    result, _ = sync(cli, project, "up", "--latest")
    assert result.exit_code == 3
    assert result.stderr.startswith("patchctl: error: no reachable Docker engine at tcp://127.0.0.1:9")
    assert project.snapshot() == before and not (project.path / ".patchctl" / "sync" / "up").exists()


def test_the_report_lists_the_upstream_commits_and_says_when_history_was_rewritten(upstream: Repo) -> None:
    """upstream_commits: the commits between the pins, oldest first, from one git log; a note
    where the new pin does not descend from the old one or the old one is gone."""
    from patchctl.loop.sync_history import upstream_commits

    old = upstream.head
    first = upstream.commit({"a.c": "a\n"}, "first upstream change")
    second = upstream.commit({"b.c": "b\n"}, "second upstream change")
    commits, note = upstream_commits(upstream.path, old, second)
    assert commits == [
        {"sha": first, "subject": "first upstream change"},
        {"sha": second, "subject": "second upstream change"},
    ]
    assert note == ""
    upstream.git("reset", "-q", "--hard", old)
    rewritten = upstream.commit({"c.c": "c\n"}, "rewritten")
    commits, note = upstream_commits(upstream.path, second, rewritten)
    assert commits == [{"sha": rewritten, "subject": "rewritten"}]
    assert note.startswith(f"the new rev does not descend from {second[:12]} (history was rewritten)")
    commits, note = upstream_commits(upstream.path, "1" * 40, rewritten)
    assert commits is None and note == f"the old pin {'1' * 12} is not in the upstream's history"


def _conflict_blocks_line_by_line(tree: Path, files: list[str]) -> list[str]:
    """The plain reference: every line read, markers matched at its start."""
    blocks = []
    for name in files:
        if not (tree / name).is_file():
            blocks.append(f"{name} (deleted on one side)")
            continue
        start = None
        for number, line in enumerate((tree / name).read_bytes().split(b"\n"), 1):
            if line.startswith(b"<<<<<<< "):
                start = number
            elif line.startswith(b">>>>>>> ") and start is not None:
                blocks.append(f"{name}:{start}-{number}")
                start = None
    return blocks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(
        st.sampled_from(
            [b"<<<<<<< ours\n", b">>>>>>> theirs\n", b"=======\n", b"x\n", b"<<<<<<<x\n", b" >>>>>>> y\n", b"\n"]
            + [b">>>>>>> \n", b"<<<<<<< ", b"||||||| base\n", b"<<<<<<<< eight\n", b"\r\n", b"\xff\n"]
        ),
        max_size=25,
    )
)
def test_conflict_blocks_are_found_where_reading_every_line_finds_them(tmp_path: Path, pieces: list[bytes]) -> None:
    """The report's FILE:START-END of each marker block is found by a search over the file, not
    by reading it line by line (on a real conflict, a file of thousands of lines): the same blocks."""
    from patchctl.loop.sync_records import conflict_blocks

    (tmp_path / "f.c").write_bytes(b"".join(pieces))
    assert conflict_blocks(tmp_path, ["f.c", "gone.c"]) == _conflict_blocks_line_by_line(tmp_path, ["f.c", "gone.c"])
