"""The one journal behind every multi-file write, and its recovery before any command reads
the repository (issue 13, items 5 and 6). Kills are real: a separate interpreter dies with
os._exit at a chosen file operation (tests/patchctl/faultinject_runner.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from patchctl import git
from patchctl.confined import Refused
from patchctl.state import journal

from .faultinject import (
    SCENARIOS,
    Scenario,
    project_files,
    run_patchctl,
    runner_env,
    stray_files,
    warm_parsed_yaml,
)


def _prepared(name: str, tmp_path: Path) -> tuple[Scenario, dict, Path, list[str], dict]:
    """Scenario NAME, its old and new files, and a clean run's trace of operations."""
    env = runner_env(tmp_path / "cache")
    scenario = SCENARIOS[name](tmp_path / "setup", env)
    warm_parsed_yaml(scenario, tmp_path / "warm", env)
    clean = scenario.fresh(tmp_path / "clean")
    old = project_files(clean)
    counted = run_patchctl(scenario.args(clean), env, report=tmp_path / "count.json")
    assert counted.exit_code == 0, counted.output
    return scenario, env, clean, counted.trace, {"old": old, "new": project_files(clean)}


def _point_after(trace: list[str], predicate) -> int:
    """The operation right after the first one PREDICATE accepts: killing there leaves that one done."""
    return next(i for i, op in enumerate(trace, 1) if predicate(op)) + 1


def test_a_pin_sync_killed_mid_write_is_rolled_back_before_the_next_run_reads(tmp_path: Path) -> None:
    """Item 5: killed after matrix.yaml's rename but before the pin file's, the next pin-sync
    used to read the new pin, say "already at the target", exit 0 and leave the pin file old."""
    scenario, env, _clean, trace, states = _prepared("pin-sync", tmp_path)
    point = _point_after(trace, lambda op: op.startswith("os.rename") and op.endswith("/matrix.yaml"))
    assert trace[point - 1].startswith("os.rename") and trace[point - 1].endswith("/Makefile")
    project = scenario.fresh(tmp_path / "killed")
    assert run_patchctl(scenario.args(project), env, kill_at=point).exit_code == 137
    torn = project_files(project)
    assert torn["matrix.yaml"] == states["new"]["matrix.yaml"] and torn["Makefile"] == states["old"]["Makefile"]

    # Any command reads the repository only after recovery: apply sees the old pin with the old series.
    applied = run_patchctl(["-C", project, "apply"], env)
    assert applied.exit_code == 0, applied.output
    assert "patchctl: rolled back a write an earlier run did not finish\n" in applied.output
    assert project_files(project) == states["old"]
    assert not journal.journal_path(project).exists()
    assert not stray_files(project)

    again = run_patchctl(scenario.args(project), env)
    assert again.exit_code == 0, again.output
    assert "already at the target" not in again.output
    assert project_files(project) == states["new"]


def test_an_export_killed_mid_write_never_gives_apply_a_mixed_series(tmp_path: Path) -> None:
    """Item 6: a kill between two patches' renames; apply then read a mix of old and new."""
    scenario, env, _clean, trace, states = _prepared("export", tmp_path)
    point = _point_after(trace, lambda op: op.startswith("os.rename") and op.endswith(".patch"))
    project = scenario.fresh(tmp_path / "killed")
    assert run_patchctl(scenario.args(project), env, kill_at=point).exit_code == 137
    assert project_files(project) not in (states["old"], states["new"])  # torn, until the next command

    applied = run_patchctl(["-C", project, "apply"], env)
    assert applied.exit_code == 0, applied.output
    assert "applied 2 patch(es)" in applied.output  # the old series, whole
    assert project_files(project) == states["old"]
    assert not stray_files(project)
    assert run_patchctl(scenario.args(project), env).exit_code == 0
    assert project_files(project) == states["new"]


def test_a_render_killed_after_its_renames_is_completed(tmp_path: Path) -> None:
    """Killed once the journal says committed: recovery finishes (drops the backups), it does not undo."""
    scenario, env, _clean, trace, states = _prepared("render", tmp_path)
    journal_writes = [i for i, op in enumerate(trace, 1) if op.startswith("os.rename") and op.endswith("journal.json")]
    point = journal_writes[-1] + 1  # the committed journal is in place
    project = scenario.fresh(tmp_path / "killed")
    assert run_patchctl(scenario.args(project), env, kill_at=point).exit_code == 137
    assert stray_files(project)  # backups and the journal are still there
    check = run_patchctl(scenario.check_args(project), env)
    assert check.exit_code == 0, check.output
    assert "patchctl: completed a write an earlier run did not finish\n" in check.output
    assert project_files(project) == states["new"]
    assert not stray_files(project)


# ---------------------------------------------------------------- the journal's states, in one process


def _series_repository(root: Path) -> Path:
    """A git repository with a matrix.yaml whose series `main` is in patches/main; its matrix.yaml."""
    git.init_repo(root)
    (root / "matrix.yaml").write_text("version: 1\nupstreams: {}\nseries:\n  main: {upstream: up}\n")
    (root / "patches" / "main").mkdir(parents=True)
    return root / "matrix.yaml"


def _die_while_staging(changes: list[journal.FileChange], config_file: Path) -> None:
    real, written = journal._create_synced, []

    def write_then_die(repository, path: Path, data: bytes, like: Path, mode: int | None = None) -> None:
        real(repository, path, data, like, mode)
        written.append(path)
        if len(written) == 2:
            os._exit(17)

    journal._create_synced = write_then_die
    journal.commit(config_file, changes)
    os._exit(0)


def test_a_kill_while_staging_leaves_the_targets_and_no_staged_file(tmp_path: Path) -> None:
    config = _series_repository(tmp_path)
    series = tmp_path / "patches" / "main"
    files = {series / "0001-a.patch": b"old a\n", series / "0002-b.patch": b"old b\n"}
    for path, data in files.items():
        path.write_bytes(data)
    changes = [journal.FileChange(path, b"new\n") for path in files]
    changes.append(journal.FileChange(series / "0003-c.patch", b"c\n"))
    child = multiprocessing.get_context("fork").Process(target=_die_while_staging, args=(changes, config))
    child.start()
    child.join(30)
    assert child.exitcode == 17
    assert sorted(p.name for p in tmp_path.rglob(".*patchctl-new-*"))  # the staged files are really there
    assert journal.journal_path(tmp_path) == tmp_path / ".git" / "patchctl" / "journal.json"
    assert journal.journal_path(tmp_path).is_file()  # in the git directory, not in the work tree
    assert journal.recover(config) == "rolled-back"
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if ".git" not in p.parts) == [
        "matrix.yaml",
        "patches",
        "patches/main",
        "patches/main/0001-a.patch",
        "patches/main/0002-b.patch",
    ]
    assert not journal.journal_path(tmp_path).exists()


def test_deleting_files_that_do_not_exist_writes_nothing(tmp_path: Path) -> None:
    config = _series_repository(tmp_path)
    journal.commit(config, [journal.FileChange(tmp_path / "patches" / "main" / "gone.patch", None)])
    assert not (tmp_path / ".git" / "patchctl").exists()


def test_an_unreadable_journal_is_one_clear_error(tmp_path: Path, cli) -> None:
    _series_repository(tmp_path)
    journal.journal_path(tmp_path).parent.mkdir()
    journal.journal_path(tmp_path).write_text("{not json")
    result = cli("-C", tmp_path, "lint")
    assert result.exit_code == 3
    assert result.stderr.startswith("patchctl: error: ") and len(result.stderr.splitlines()) == 1
    assert ".git/patchctl/journal.json: unreadable journal of an interrupted write" in result.stderr


def test_a_journal_that_came_with_the_repository_moves_nothing_outside_it(tmp_path: Path, cli) -> None:
    """Recovery renames and deletes what a journal names: one naming files outside the
    repository (a hostile checkout, a damaged file) is refused, and nothing is touched."""
    project, outside = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    outside.mkdir()
    _series_repository(project)
    victim = outside / ".bashrc"
    victim.write_text("mine\n")
    planted = outside / "planted"
    planted.write_text("evil\n")
    state = journal.journal_path(project)
    state.parent.mkdir()
    entries = [{"target": str(victim), "staged": None, "backup": str(planted)}]
    state.write_text(json.dumps({"state": "prepared", "entries": entries}))
    result = cli("-C", project, "lint")
    assert result.exit_code == 3
    assert len(result.stderr.splitlines()) == 1 and "not a journal patchctl wrote" in result.stderr
    assert f"{victim} is outside the repository" in result.stderr
    assert victim.read_text() == "mine\n" and planted.read_text() == "evil\n"

    inside = project / "patches" / "main" / "0001-a.patch"
    inside.write_text("a\n")
    entries = [{"target": str(inside), "staged": str(outside / "x"), "backup": None}]
    state.write_text(json.dumps({"state": "prepared", "entries": entries}))
    result = cli("-C", project, "lint")
    assert result.exit_code == 3 and "is not beside" in result.stderr
    assert inside.read_text() == "a\n"


def test_a_commit_goes_through_no_link_even_one_that_stays_inside(tmp_path: Path) -> None:
    """The journal is the check of every writer: a link on the way to a target (inside the
    repository or not, `.git` or not) refuses the whole commit before its first byte."""
    config = _series_repository(tmp_path)
    series = tmp_path / "patches" / "main"
    (series / "0001-a.patch").write_bytes(b"old a\n")
    (tmp_path / "patches" / "alias").symlink_to("main")
    (tmp_path / "matrix.yaml").write_text(
        "version: 1\nupstreams: {}\nseries:\n  main: {upstream: up}\n  alias: {upstream: up}\n"
    )
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if ".git" not in p.parts)
    changes = [
        journal.FileChange(series / "0002-b.patch", b"b\n"),
        journal.FileChange(tmp_path / "patches" / "alias" / "0001-a.patch", b"new a\n"),
    ]
    with pytest.raises(Refused, match="patches/alias is a symlink to main; patchctl goes through no link"):
        journal.commit(tmp_path / "matrix.yaml", changes)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if ".git" not in p.parts) == before
    assert (series / "0001-a.patch").read_bytes() == b"old a\n"
    assert not journal.journal_path(tmp_path).exists()
    with pytest.raises(Refused, match="refusing to delete patches/alias/0001-a.patch: patches/alias is a symlink"):
        journal.commit(config, [journal.FileChange(tmp_path / "patches" / "alias" / "0001-a.patch", None)])
    assert (series / "0001-a.patch").read_bytes() == b"old a\n"


def _die_after_prepared(changes: list[journal.FileChange], config_file: Path) -> None:
    real = journal._rename_in

    def rename_then_die(repository, entry: dict) -> None:
        real(repository, entry)
        os._exit(17)

    journal._rename_in = rename_then_die
    journal.commit(config_file, changes)
    os._exit(0)


def test_recovery_replays_nothing_through_a_directory_swapped_for_a_link(tmp_path: Path, cli) -> None:
    """A prepared journal (a real kill after the first rename) whose series directory was then
    replaced by a link to elsewhere in the repository: the roll-back would rename the backups
    through it. Refused whole in one line (exit 3); nothing moves, in the link's target or the directory."""
    config = _series_repository(tmp_path)
    series = tmp_path / "patches" / "main"
    files = {series / "0001-a.patch": b"old a\n", series / "0002-b.patch": b"old b\n"}
    for path, data in files.items():
        path.write_bytes(data)
    child = multiprocessing.get_context("fork").Process(
        target=_die_after_prepared, args=([journal.FileChange(path, b"new\n") for path in files], config)
    )
    child.start()
    child.join(30)
    assert child.exitcode == 17
    series.rename(tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "0001-a.patch").write_bytes(b"bystander\n")
    series.symlink_to("../elsewhere")

    def state() -> dict[str, object]:
        return {
            str(p.relative_to(tmp_path)): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
            for p in sorted(tmp_path.rglob("*"))
            if ".git" not in p.parts
        } | {"journal": journal.journal_path(tmp_path).read_bytes()}

    before = state()
    result = cli("-C", tmp_path, "lint", "--no-apply")
    assert result.exit_code == 3, result.output
    line = result.stderr.strip()
    assert len(result.stderr.splitlines()) == 1 and line.startswith("patchctl: error: .git/patchctl/journal.json: ")
    assert "not a journal patchctl wrote (refusing to write patches/main/0001-a.patch: patches/main is a" in line
    assert "patches/main is a symlink to ../elsewhere; patchctl goes through no link" in line
    assert "nothing was changed" in line
    assert state() == before
