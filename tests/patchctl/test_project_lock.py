"""The per-project lock: writing commands hold `.git/patchctl/lock`; a second run waits, then
refuses with one line naming the holder (exit 3); concurrent runs serialize."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchctl.state import statehome, worktree
from patchctl.state.lock import ProjectLock

from .conftest import Project, Repo
from .faultinject import RUNNER, SCENARIOS, project_files, runner_env, stray_files
from .fixtures_sync import add_line20_patch

WRITING = [
    ["apply"],
    ["export", "main"],
    ["gate"],
    ["pin-sync", "up", "--latest"],
    ["canary", "up", "--compile"],
    ["matrix", "render"],
]


@pytest.fixture
def held(project: Project, upstream: Repo, monkeypatch: pytest.MonkeyPatch):
    add_line20_patch(project, upstream, upstream.head)
    monkeypatch.setenv("PATCHCTL_LOCK_TIMEOUT", "0.3")
    lock = ProjectLock(project.path, "pin-sync")
    lock.acquire()
    yield lock
    lock.release()


@pytest.mark.parametrize("args", WRITING, ids=lambda a: " ".join(a[:2]))
def test_a_held_lock_refuses_every_writing_command(project: Project, held: ProjectLock, cli, args) -> None:
    before = project.snapshot()
    result = cli("-C", project.path, *args)
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines() == [
        f"patchctl: error: another patchctl run holds .git/patchctl/lock (pid {os.getpid()}, command pin-sync); "
        "waited 0.3 s ($PATCHCTL_LOCK_TIMEOUT); try again when it has finished"
    ]
    assert project.snapshot() == before
    assert not worktree.applied_tree(project.path, "main").exists()


def test_reading_commands_do_not_wait_for_the_lock(project: Project, held: ProjectLock, cli) -> None:
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 0, result.output


def test_the_lock_is_released_when_the_command_ends(project: Project, upstream: Repo, cli, monkeypatch) -> None:
    add_line20_patch(project, upstream, upstream.head)
    monkeypatch.setenv("PATCHCTL_LOCK_TIMEOUT", "0")
    assert cli("-C", project.path, "apply").exit_code == 0
    assert cli("-C", project.path, "apply").exit_code == 0  # in the same process: the first released it
    with ProjectLock(project.path, "test", timeout_s=0):
        pass


def test_a_bad_lock_timeout_is_a_usage_error(project: Project, cli, monkeypatch) -> None:
    monkeypatch.setenv("PATCHCTL_LOCK_TIMEOUT", "soon")
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 2
    assert result.stderr == "patchctl: error: $PATCHCTL_LOCK_TIMEOUT: expected a number of seconds, got 'soon'\n"


def test_a_killed_holder_leaves_no_stale_lock(project: Project, upstream: Repo, cli, monkeypatch) -> None:
    add_line20_patch(project, upstream, upstream.head)
    code = (
        "import os, sys; from pathlib import Path; from patchctl.state.lock import ProjectLock; "
        f"ProjectLock(Path({str(project.path)!r}), 'apply').acquire(); os._exit(137)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 137
    monkeypatch.setenv("PATCHCTL_LOCK_TIMEOUT", "0")
    assert cli("-C", project.path, "apply").exit_code == 0


# ---------------------------------------------------------------- two runs at once


@pytest.mark.parametrize("name", ["apply", "export", "pin-sync", "render"])
@pytest.mark.parametrize("timeout", ["30", "0"])
def test_two_runs_at_once_serialize_or_one_refuses_clearly(name: str, timeout: str, tmp_path: Path) -> None:
    """Both runs succeed one after the other (the second waits), or with no time to wait
    one refuses with the lock's one line; never a wrong message, a mix or a nested tree."""
    env = runner_env(tmp_path / "cache")
    scenario = SCENARIOS[name](tmp_path / "setup", env)
    clean = scenario.fresh(tmp_path / "clean")
    subprocess.run([sys.executable, str(RUNNER), *map(str, scenario.args(clean))], env=env, check=True)
    expected = scenario.observe(clean)

    project = scenario.fresh(tmp_path / "project")
    run_env = {**env, "PATCHCTL_LOCK_TIMEOUT": timeout}
    command = [sys.executable, str(RUNNER), *map(str, scenario.args(project))]
    runs = [subprocess.Popen(command, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    runs.append(subprocess.Popen(command, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outcomes = [(run.wait(120), run.stderr.read()) for run in runs]
    for code, stderr in outcomes:
        if code == 3:
            assert timeout == "0", stderr
            # In .git/patchctl, or for the render scenario's plain directory in the user's state directory.
            lock = statehome.display(project, statehome.home(project) / "lock")
            assert stderr.startswith(f"patchctl: error: another patchctl run holds {lock} (pid "), stderr
            assert len(stderr.splitlines()) == 1, stderr
        else:
            assert code == 0, stderr
    assert any(code == 0 for code, _ in outcomes)
    assert scenario.observe(project) == expected
    assert not stray_files(project, sync_trees=True)
    if name == "apply":
        trees = worktree.state_dir(project) / "trees"
        assert sorted(p.name for p in trees.iterdir()) == ["main"]
        assert not [p for p in (trees / "main").rglob("*patchctl*") if ".git" not in p.parts]
    else:
        assert project_files(project) == project_files(clean)


def test_a_state_directory_leading_outside_the_repository_is_refused(project: Project, tmp_path: Path, cli) -> None:
    """`.patchctl` (trees and logs) and `.git/patchctl` (journal, lock, sync states) are never
    followed when they are links: one line, exit 3, nothing written where they lead."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project.path / ".patchctl").symlink_to(elsewhere)
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 3
    assert result.stderr == (
        "patchctl: error: .patchctl is a symlink, not the directory of trees and logs patchctl keeps there; "
        f"remove it (`rm {project.path / '.patchctl'}`)\n"
    )
    assert list(elsewhere.iterdir()) == []

    (project.path / ".patchctl").unlink()
    shutil.rmtree(project.path / ".git" / "patchctl")  # the lock the first run took
    (project.path / ".git" / "patchctl").symlink_to(elsewhere)
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 3
    assert result.stderr == (
        "patchctl: error: .git/patchctl is a symlink, not the state directory patchctl keeps there; "
        f"remove it (`rm {project.path / '.git' / 'patchctl'}`)\n"
    )
    assert list(elsewhere.iterdir()) == []
