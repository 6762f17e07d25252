"""State only where we own it (issue 44, item 3): the state directory is used only when it and
the repository holding it belong to the user running patchctl (git's "dubious ownership" rule,
GIT_CEILING_DIRECTORIES respected, safe.directory honoured); otherwise one line names the
directory and how to allow it (exit 3) and nothing is read or written. Every field of a saved
pin-sync state and apply marker is checked as the journal's are: a revision is a full commit id,
so none reaches git where it could be read as an option.

Foreign ownership is real where the suite runs as root (the directories are given to another
uid); elsewhere the current user is made to look like another one."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from patchctl import git
from patchctl.state import statehome, worktree

from .conftest import Project, Repo, one_line_error
from .fixtures_sync import add_line20_patch, main_c, write_config
from .test_state_home import _stopped_sync, snapshot

STRANGER = 4242


def give_away(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH (and what is below it) belongs to another user from now on."""
    if os.geteuid() == 0:
        for current, dirs, files in os.walk(path):
            for name in [current, *(os.path.join(current, n) for n in dirs + files)]:
                os.lchown(name, STRANGER, STRANGER)
    else:  # not root: patchctl is made to see itself as another user, so everything is foreign
        monkeypatch.setattr(statehome, "current_uid", lambda: STRANGER)


@pytest.fixture
def shared(tmp_path: Path, upstream: Repo) -> Project:
    """A project in a plain directory under a shared one (a group build area, /tmp)."""
    area = tmp_path / "shared"
    project = Project(area / "project", upstream, upstream.head)
    shutil.rmtree(project.path / ".git")  # a plain directory: its state would go to the first .git above
    add_line20_patch(project, upstream, upstream.head)
    return project


def _plant_journal(project: Project, git_dir: Path) -> Path:
    """What another user plants: a `.git` above the project, with a journal under the key patchctl
    would use, whose recovery rolls matrix.yaml and the series back (deletes them)."""
    git_dir.mkdir(parents=True, exist_ok=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    key = statehome._key(project.path.relative_to(git_dir.parent).as_posix(), project.path.name)
    state = git_dir / "patchctl" / "projects" / key
    state.mkdir(parents=True)
    staged = project.path / ".matrix.yaml.patchctl-new-0"
    entries = [{"target": str(project.path / "matrix.yaml"), "staged": str(staged), "backup": None}]
    (state / "journal.json").write_text(json.dumps({"state": "prepared", "entries": entries}))
    return state


def test_a_git_directory_another_user_planted_above_a_plain_project_is_refused(
    shared: Project, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    planted = _plant_journal(shared, shared.path.parent / ".git")
    give_away(shared.path.parent / ".git", monkeypatch)
    before = snapshot(shared.path.parent)
    for args in (("lint", "--no-apply"), ("apply",), ("pin-sync", "--abort")):
        line = one_line_error(cli("-C", shared.path, *args), 3)
        assert f"refusing to keep state in {shared.path.parent / '.git'}" in line, line
        assert "dubious" in line and "safe.directory" in line and "GIT_CEILING_DIRECTORIES" in line, line
    assert snapshot(shared.path.parent) == before  # the journal never ran: matrix.yaml is there
    assert (shared.path / "matrix.yaml").is_file() and (planted / "journal.json").is_file()


def test_the_advice_is_taken_exactly_as_printed(shared: Project, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """Stopping the search above the project (GIT_CEILING_DIRECTORIES, as git does) keeps the state
    in the user's own state directory: the planted journal is never read."""
    _plant_journal(shared, shared.path.parent / ".git")
    give_away(shared.path.parent / ".git", monkeypatch)
    line = one_line_error(cli("-C", shared.path, "lint", "--no-apply"), 3)
    ceiling = line.split("`export ")[1].split("`")[0]
    name, _, value = ceiling.partition("=")
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(statehome, "current_uid", os.geteuid)  # (the stranger's directory is not ours)
    result = cli("-C", shared.path, "lint", "--no-apply")
    assert result.exit_code == 0, result.output
    assert statehome.home(shared.path).is_relative_to(Path(os.environ["XDG_STATE_HOME"]))


def test_safe_directory_in_the_users_git_config_allows_a_foreign_repository(
    shared: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli
) -> None:
    git_dir = shared.path.parent / ".git"
    git_dir.mkdir()
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    give_away(git_dir, monkeypatch)
    line = one_line_error(cli("-C", shared.path, "lint", "--no-apply"), 3)
    allow = line.split("if you trust it, `")[1].split("`")[0]
    config = tmp_path / "gitconfig"
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))  # the user's global config, for this test
    monkeypatch.setattr(statehome, "_SAFE", {})
    # The command as printed, run as the user runs it (patchctl's own git calls never read that config).
    subprocess.run(shlex.split(allow), check=True, cwd=tmp_path)
    assert "[safe]" in config.read_text()
    if os.geteuid() != 0:
        pytest.skip("the stranger's own state directory would be refused too (not root: everything is foreign)")
    result = cli("-C", shared.path, "lint", "--no-apply")
    assert result.exit_code == 0, result.output


def test_a_state_directory_another_user_made_in_our_own_repository_is_refused(
    project: Project, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give one directory of the repository away")
    state = project.path / ".git" / "patchctl"
    state.mkdir()
    (state / "journal.json").write_text("{}")
    give_away(state, monkeypatch)
    line = one_line_error(cli("-C", project.path, "lint", "--no-apply"), 3)
    assert f"refusing to keep state in {state}: it belongs to uid {STRANGER}" in line, line


def test_a_user_state_directory_of_another_user_is_refused(
    shared: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli
) -> None:
    """No repository above the project: the user state directory must be the user's own too."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(shared.path.parent))
    xdg = tmp_path / "xdg-shared"
    (xdg / "patchctl").mkdir(parents=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(xdg))
    give_away(xdg / "patchctl", monkeypatch)
    line = one_line_error(cli("-C", shared.path, "lint", "--no-apply"), 3)
    assert f"refusing to keep state in {xdg / 'patchctl'}" in line and "XDG_STATE_HOME" in line, line


def test_ceiling_directories_are_read_as_git_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", f"{tmp_path / 'link'}:relative/ignored::{tmp_path / 'link'}")
    # Before an empty entry links are resolved; after it, entries are taken as written.
    assert statehome.ceiling_directories() == {real, tmp_path / "link"}


# ---------------------------------------------------------------- every field of saved state


@pytest.fixture
def stopped(project: Project, upstream: Repo, cli) -> Project:
    add_line20_patch(project, upstream, upstream.head)
    git.commit_all(project.path, "downstream")
    _stopped_sync(project, upstream, cli)
    return project


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("target", "--output=/tmp/patchctl-planted", "target '--output=/tmp/patchctl-planted'"),
        ("target", "HEAD", "target 'HEAD'"),
        ("old_pin", "-p", "old pin '-p'"),
        ("phase", "rm -rf", "phase 'rm -rf'"),
        ("target_spec", 7, "target '7'"),
        ("records", [{"series": "main", "patch": "../../x", "classification": "clean"}], "patch '../../x'"),
        ("records", [{"series": "other", "patch": "x.patch", "classification": "clean"}], "record of series 'other'"),
        (
            "records",
            [{"series": "main", "patch": "x.patch", "classification": "c", "taken_upstream": {"commit": "--all"}}],
            "record of 'x.patch': taken upstream by",
        ),
        ("series.digest", "not a digest", "digest 'not a digest'"),
    ],
)
def test_every_field_of_a_pin_sync_state_is_checked(
    stopped: Project, tmp_path: Path, cli, field: str, value: object, named: str
) -> None:
    """A planted `target` used to reach `git log` as a bare argument (`--output=FILE` writes a file)."""
    path = worktree.sync_state_file(stopped.path, "up")
    data = json.loads(path.read_text())
    if field == "series.digest":
        data["series"][0]["digest"] = value
    else:
        data[field] = value
    path.write_text(json.dumps(data))
    for args in (("pin-sync", "--continue"), ("pin-sync", "--abort")):
        line = one_line_error(cli("-C", stopped.path, *args), 3)
        assert f"not a pin-sync state patchctl wrote ({named}" in line, line
    assert not Path("/tmp/patchctl-planted").exists() and not (stopped.path / "patchctl-planted").exists()


@pytest.mark.parametrize(
    ("field", "value"), [("head", "--orphan=x"), ("rev", "HEAD"), ("digest", "x"), ("updating", "--detach")]
)
def test_an_apply_marker_that_patchctl_did_not_write_is_never_trusted(
    project: Project, upstream: Repo, cli, field: str, value: str
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = worktree.applied_tree(project.path, "main")
    marker_file = worktree.git_dir(tree) / worktree.MARKER_NAME
    data = json.loads(marker_file.read_text())
    data[field] = value
    marker_file.write_text(json.dumps(data))
    assert worktree.read_marker(tree) is None
    line = one_line_error(cli("-C", project.path, "apply"), 2)
    assert "was not made by patchctl apply" in line, line
    assert cli("-C", project.path, "apply", "--force").exit_code == 0
    assert worktree.read_marker(tree) is not None


def test_a_revision_named_on_the_command_line_is_never_read_as_an_option(
    project: Project, upstream: Repo, cli, tmp_path: Path
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    planted = tmp_path / "written-by-git"
    for args in (
        ("apply", "--rev", f"--output={planted}"),
        ("canary", "--no-compile", "--rev", f"--output={planted}"),
        ("pin-sync", "up", "--to", f"--output={planted}"),
    ):
        result = cli("-C", project.path, *args)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert "no such revision" in result.stderr, result.output
    assert not planted.exists()
    write_config(project, upstream.head)
    upstream.commit({"src/main.c": main_c({1: "x"})}, "move")
