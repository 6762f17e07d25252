"""Fail closed: a check that found nothing to check fails, and the series directory and
`.patchctl/` are untrusted input (one line and a non-zero exit, never a hang or a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Project, Repo, make_patch

HANG_LIMIT_S = 60  # a refusal takes well under a second; a hang is what this catches


def seeded(project: Project, upstream: Repo) -> Project:
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(upstream, upstream.head, {"src/main.c": main_c.replace("main 5\n", "main five\n")}, "Tune main"),
    )
    return project


def set_series_keys(project: Project, text: str) -> None:
    """Replace the series' `dir:` line with TEXT (YAML lines at the series' indentation)."""
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace("    dir: patches/main\n", text))


def run_patchctl(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """The real entry point in a child process, under a time limit: a hang fails the test."""
    env = {**os.environ, "PATCHCTL_LOCK_TIMEOUT": "2"}
    return subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project.path), *args],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("patchctl: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


# ---------------------------------------------------------------- a series that checks nothing


@pytest.mark.parametrize(
    "args",
    [
        ("lint", "--no-apply"),
        ("lint",),
        ("apply",),
        ("gate", "main"),
        ("export", "main"),
        ("export", "main", "--check"),
        ("pin-sync", "up", "--latest", "--dry-run"),
        ("canary", "up", "--no-bisect"),
    ],
)
def test_a_misspelled_series_dir_fails_every_command_naming_the_line(
    project: Project, upstream: Repo, cli, args: tuple[str, ...]
) -> None:
    seeded(project, upstream)
    set_series_keys(project, "    dir: patches/mian\n    gates:\n      - {name: g, command: 'true'}\n")
    result = cli("-C", project.path, *args)
    assert result.exit_code == 2, result.output
    line = one_line_error(result.stderr)
    assert f"{project.path / 'matrix.yaml'}:11: series.main.dir: patches/mian: no such directory" in line
    assert "did you mean patches/main?" in line


def test_an_empty_series_fails_unless_allow_empty_says_it_is_intended(project: Project, cli) -> None:
    for args in (("lint", "--no-apply"), ("apply",)):
        result = cli("-C", project.path, *args)
        assert result.exit_code == 2, result.output
        line = one_line_error(result.stderr)
        assert "matrix.yaml:11: series.main.dir: patches/main holds no *.patch file" in line
        assert "allow_empty: true" in line
    set_series_keys(project, "    dir: patches/main\n    allow_empty: true\n")
    lint = cli("-C", project.path, "lint", "--no-apply")
    assert lint.exit_code == 0 and "no findings" in lint.stdout
    applied = cli("-C", project.path, "apply")
    assert applied.exit_code == 0 and "applied 0 patch(es)" in applied.stdout


def test_allow_empty_is_validated(project: Project, cli) -> None:
    set_series_keys(project, "    dir: patches/main\n    allow_empty: maybe\n")
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2 and "allow_empty" in one_line_error(result.stderr)


def test_a_series_dir_that_is_a_file_or_an_empty_quilt_series_fails(project: Project, cli) -> None:
    (project.path / "patches" / "file").write_text("not a directory\n")
    set_series_keys(project, "    dir: patches/file\n")
    line = one_line_error(cli("-C", project.path, "lint", "--no-apply").stderr)
    assert "series.main.dir: patches/file is not a directory (regular file)" in line
    set_series_keys(project, "    dir: patches/file\n")
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace("dir: patches/file", "dir: patches/main\n    naming: quilt"))
    (project.series_dir / "series").write_text("# nothing listed\n")
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2 and "no patch listed in its series file" in one_line_error(result.stderr)


def test_export_fills_an_existing_empty_directory_but_not_a_missing_one(
    project: Project, upstream: Repo, cli, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    Repo(work).git  # noqa: B018 - a fresh repository
    import shutil

    shutil.rmtree(work)
    from patchctl import git

    git.run(["clone", "-q", str(upstream.path), str(work)], tmp_path)
    Repo(work).commit({"src/new.c": "int fresh;\n"}, "Add the new thing\n\nIt is needed.")
    written = cli("-C", project.path, "export", "main", "--from", work)
    assert written.exit_code == 0, written.output
    assert project.patch_names() == ["0001-Add-the-new-thing.patch"]
    set_series_keys(project, "    dir: patches/other\n")
    missing = cli("-C", project.path, "export", "main", "--from", work)
    assert missing.exit_code == 2 and "patches/other: no such directory" in one_line_error(missing.stderr)


def test_export_refuses_to_write_an_empty_series(project: Project, upstream: Repo, cli, tmp_path: Path) -> None:
    from patchctl import git

    work = tmp_path / "work"
    git.run(["clone", "-q", str(upstream.path), str(work)], tmp_path)
    result = cli("-C", project.path, "export", "main", "--from", work)
    assert result.exit_code == 1
    assert "export would leave series main with no patch" in one_line_error(result.stderr)
    assert project.patch_names() == []


def test_an_upstream_no_series_uses_fails_pin_sync_and_canary(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    config = project.path / "matrix.yaml"
    text = config.read_text()
    other = f"  lone:\n    url: {upstream.path}\n    branch: main\n    pin: {upstream.head}\nseries:\n"
    config.write_text(text.replace("series:\n", other))
    for args in (("pin-sync", "lone", "--latest", "--dry-run"), ("canary", "lone")):
        result = cli("-C", project.path, *args)
        assert result.exit_code == 2, result.output
        assert "no series in matrix.yaml is on upstream lone" in one_line_error(result.stderr)


# ---------------------------------------------------------------- the series directory is untrusted


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inner.patch").write_text("x\n")


def _outside(path: Path) -> None:
    path.symlink_to("/etc/passwd")


def _dangling(path: Path) -> None:
    path.symlink_to("gone.patch")


HOSTILE = {
    "fifo": (_fifo, "a FIFO, not a regular file"),
    "dev-zero": (_dev_zero, "a symlink to /dev/zero, outside the repository"),
    "directory": (_directory, "a directory, not a regular file"),
    "outside": (_outside, "a symlink to /etc/passwd, outside the repository"),
    "dangling": (_dangling, "a symlink to gone.patch, which does not exist"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["lint", "apply"])
def test_hostile_series_entries_are_refused_in_one_line(
    project: Project, upstream: Repo, kind: str, command: str
) -> None:
    seeded(project, upstream)
    make, expected = HOSTILE[kind]
    make(project.series_dir / "0002-x.patch")
    result = run_patchctl(project, command, *(("--no-apply",) if command == "lint" else ()))
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line_error(result.stderr)
    assert "patches/main/0002-x.patch: " in line and expected in line
    assert "root:" not in result.stdout + result.stderr, "nothing of /etc/passwd is read"


def test_a_symlink_to_a_patch_inside_the_repository_is_refused_too(project: Project, upstream: Repo, cli) -> None:
    """patchctl follows no link in a checkout (the next commit may retarget it into .git):
    a linked patch is refused in one line saying to replace it with the file."""
    seeded(project, upstream)
    (project.path / "kept").mkdir()
    (project.series_dir / "0001-tune-main.patch").rename(project.path / "kept" / "tune.patch")
    (project.series_dir / "0001-tune-main.patch").symlink_to(Path("..") / ".." / "kept" / "tune.patch")
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 2
    line = one_line_error(result.stderr)
    assert "patches/main/0001-tune-main.patch: a symlink to ../../kept/tune.patch; patchctl reads no patch" in line
    assert "replace it with the file" in line


def test_a_symlinked_device_inside_the_repository_is_refused(project: Project, upstream: Repo) -> None:
    seeded(project, upstream)
    os.mkfifo(project.path / "pipe")
    (project.series_dir / "0002-x.patch").symlink_to(Path("..") / ".." / "pipe")
    result = run_patchctl(project, "lint", "--no-apply")
    assert result.returncode == 2
    assert "a symlink to ../../pipe; patchctl reads no patch through a link" in one_line_error(result.stderr)


# ---------------------------------------------------------------- patchctl's state is patchctl's, not anyone's


@pytest.mark.parametrize(
    "place,name", [(".git/patchctl", "journal.json"), (".git/patchctl", "lock"), (".patchctl", "journal.json")]
)
@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_state_files_that_patchctl_did_not_write_are_refused(
    project: Project, upstream: Repo, place: str, name: str, kind: str
) -> None:
    """In the state directory (.git/patchctl), and in .patchctl where earlier versions kept
    the journal (recovery would move a pending one from there)."""
    seeded(project, upstream)
    state = project.path / place
    state.mkdir()
    target = state / name
    if kind == "directory":
        target.mkdir()
        (target / "x").write_text("x\n")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    # `apply` holds the lock; every command recovers a journal before reading the repository.
    for args in (("apply",),) if name == "lock" else (("lint", "--no-apply"), ("apply",)):
        result = run_patchctl(project, *args)
        assert result.returncode == 3, result.stdout + result.stderr
        line = one_line_error(result.stderr)
        shown = {"directory": "a directory", "fifo": "a FIFO", "symlink": "a symlink"}[kind]
        assert f"{place}/{name} is {shown}, not the {'journal' if name == 'journal.json' else 'lock'}" in line
        assert f"remove it (`rm {'-r ' if kind == 'directory' else ''}{target}`)" in line


@pytest.mark.parametrize(
    "place,what", [(".patchctl", "the directory of trees and logs"), (".git/patchctl", "the state directory")]
)
def test_a_state_directory_that_is_a_file_is_refused(project: Project, upstream: Repo, place: str, what: str) -> None:
    seeded(project, upstream)
    (project.path / place).write_text("not a directory\n")
    result = run_patchctl(project, "apply")
    assert result.returncode == 3
    assert f"{place} is a regular file, not {what}" in one_line_error(result.stderr)


# ---------------------------------------------------------------- right words: an invalid path is an invalid path


def _adding(path: str) -> str:
    return (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: A U Thor <author@example.org>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n"
        f"Subject: [PATCH] Add {path}\n\nWhy.\n---\n"
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    )


@pytest.mark.parametrize("path", [".GIT/hooks/x", ".git./x", "git~1/x", "GIT~1/config", ".git.../x", "a/.Git/x"])
def test_a_path_git_refuses_is_an_invalid_path_with_gits_reason(
    project: Project, upstream: Repo, cli, path: str
) -> None:
    from patchctl import git

    # git itself refuses it (so the verdict is git's, not a guess) ...
    (project.path.parent / "probe.patch").write_text(_adding(path))
    probe = git.run(["apply", "--check", str(project.path.parent / "probe.patch")], upstream.path, check=False)
    assert not probe.ok and "invalid path" in probe.stderr
    # ... and patchctl says why, instead of "context drift".
    project.add_patch("0001-add.patch", _adding(path))
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 1
    line = one_line_error(result.stderr)
    assert f"invalid path {path!r}: git refuses it" in line and "context drift" not in line
    lint = cli("-C", project.path, "lint", "--no-apply")
    assert "PC012" in lint.stdout and "invalid path" in lint.stdout


@pytest.mark.parametrize("path", [".gitignore", ".github/x", "git~2/x", "a.git/x", "src/.gitkeep"])
def test_paths_git_accepts_are_not_refused(path: str) -> None:
    from patchctl.confined.names import invalid_path_reason

    assert invalid_path_reason(path) is None


# ---------------------------------------------------------------- right words: pin-sync


def test_a_conflict_names_only_the_files_left_unmerged(project: Project, upstream: Repo, cli) -> None:
    from patchctl import git

    from .conftest import numbered
    from .fixtures_sync import load_json, main_c, write_config

    pin = upstream.head
    util = numbered(30, "util").replace("util 15\n", "UTIL 15 patched\n")
    project.add_patch(
        "0001-two-files.patch",
        make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"}), "src/util.c": util}, "Two files"),
    )
    write_config(project, pin)
    # Upstream: the same line of main.c (a true conflict), two lines above util.c's (merges cleanly 3-way).
    upstream.commit(
        {
            "src/main.c": main_c({20: "main 20 rewritten upstream"}),
            "src/util.c": numbered(30, "util").replace("util 13\n", "util 13 upstream\n"),
        },
        "Upstream drift",
    )
    report = project.path.parent / "report.json"
    result = cli("-C", project.path, "pin-sync", "up", "--latest", "--json-file", report)
    assert result.exit_code == 1, result.output
    assert "3-way merge conflict in src/main.c" in result.stderr and "src/util.c" not in result.stderr
    record = load_json(report)["patches"][0]
    assert [block.split(":")[0] for block in record["conflicts"]] == ["src/main.c"]
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    unmerged = git.run(["diff", "--name-only", "--diff-filter=U"], tree).stdout.split()
    assert unmerged == ["src/main.c"]


def test_lint_of_a_matrix_without_series_fails(project: Project, cli) -> None:
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().split("series:\n")[0])
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2 and "defines no series: lint would check nothing" in one_line_error(result.stderr)


@pytest.mark.parametrize("place", [".git/patchctl/sync/up", ".patchctl/sync/up"])
def test_a_sync_state_that_is_a_fifo_is_refused(project: Project, upstream: Repo, place: str) -> None:
    """Where pin-sync keeps it (.git/patchctl), and where earlier versions did (.patchctl)."""
    seeded(project, upstream)
    state = project.path / place
    state.mkdir(parents=True)
    os.mkfifo(state / "state.json")
    result = run_patchctl(project, "pin-sync", "--continue")
    assert result.returncode == 3, result.stdout + result.stderr
    line = one_line_error(result.stderr)
    assert f"{place}/state.json is a FIFO, not the pin-sync state patchctl writes there; remove it" in line


def test_a_patch_past_the_size_bound_is_refused_unread(
    project: Project, upstream: Repo, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patchctl.series import seriesdir

    seeded(project, upstream)
    monkeypatch.setattr(seriesdir, "MAX_PATCH_BYTES", 4096)
    (project.series_dir / "0002-huge.patch").write_bytes(b"x" * 5000)
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2
    assert "patches/main/0002-huge.patch: larger than 4,096 bytes" in one_line_error(result.stderr)


def test_a_read_that_hangs_is_cut_off_by_the_time_bound(
    project: Project, upstream: Repo, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from patchctl.series import seriesdir

    seeded(project, upstream)
    release = threading.Event()

    def hung_read(series, path, deadline=None):  # a file system that never answers (released at the end)
        release.wait(30)
        return b""

    monkeypatch.setattr(seriesdir, "READ_TIMEOUT_S", 0.5)
    monkeypatch.setattr(seriesdir, "read_bounded", hung_read)
    start = time.monotonic()
    try:
        result = cli("-C", project.path, "lint", "--no-apply")
    finally:
        release.set()
    assert time.monotonic() - start < 10
    assert result.exit_code == 3
    assert "reading the series took more than 0.5 s" in one_line_error(result.stderr)
