"""The confined layer is the only way to the file system (issue 44, items 1 and 6): what a checkout
or an upstream can put where patchctl writes its logs or reads its pin files is refused in one
line or harmless, a tree of any depth git accepts is walked without recursion, and long paths
reach git on stdin, never the command line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from patchctl import git
from patchctl.confined import Refused, Root
from patchctl.confined import walk as tree_walk
from patchctl.loop import health

from .conftest import Project, Repo, make_patch, numbered, one_line_error
from .fixtures_sync import add_line20_patch, main_c, write_config
from .hostile_tree import time_bound

GATE = """\
gates:
  - name: g
    command: echo gate ran
    timeout: 30
"""


@pytest.fixture
def gated(project: Project, upstream: Repo, cli) -> Project:
    add_line20_patch(project, upstream, upstream.head)
    write_config(project, upstream.head, series_extra=GATE)
    git.commit_all(project.path, "downstream")
    assert cli("-C", project.path, "apply").exit_code == 0
    return project


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "victim.txt").write_text("do not touch\n")
    return path


def _log(project: Project) -> Path:
    log = project.path / ".patchctl" / "gates" / "main" / "01-g.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return log


def test_a_link_at_a_gate_log_is_refused_and_never_written_through(gated: Project, outside: Path, cli) -> None:
    _log(gated).symlink_to(outside / "victim.txt")
    line = one_line_error(cli("-C", gated.path, "gate", "main"), 2)
    assert ".patchctl/gates/main/01-g.log is a symlink to " in line and "outside the repository" in line, line
    assert (outside / "victim.txt").read_text() == "do not touch\n"


def test_a_fifo_at_a_gate_log_is_refused_at_once(gated: Project, cli) -> None:
    """The open itself never waits for a reader: a FIFO made `gate` hang for good."""
    os.mkfifo(_log(gated))
    started = time.monotonic()
    with time_bound(20):  # (a hang is cut off there, and fails the test)
        line = one_line_error(cli("-C", gated.path, "gate", "main"), 2)
    assert "01-g.log is a FIFO, not a log file" in line, line
    assert time.monotonic() - started < 20


def test_a_hard_link_at_a_gate_log_loses_a_name_never_its_content(gated: Project, outside: Path, cli) -> None:
    os.link(outside / "victim.txt", _log(gated))
    result = cli("-C", gated.path, "gate", "main")
    assert result.exit_code == 0, result.output
    assert (outside / "victim.txt").read_text() == "do not touch\n"
    assert "gate ran" in _log(gated).read_text() and os.stat(_log(gated)).st_nlink == 1


def test_a_link_on_the_way_to_the_logs_of_a_pin_sync_is_refused(
    gated: Project, upstream: Repo, outside: Path, cli
) -> None:
    upstream.commit({"src/util.c": numbered(31, "util")}, "moves")
    logs = gated.path / ".patchctl" / "logs" / "pin-sync"
    logs.mkdir(parents=True)
    (logs / "up").symlink_to(outside)
    result = cli("-C", gated.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert ".patchctl/logs/pin-sync/up is a symlink to " in result.stderr, result.output
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


def test_a_pin_file_that_is_a_link_is_never_read_by_lint(project: Project, upstream: Repo, outside: Path, cli) -> None:
    """PC010 read the file a linked pin file points to and printed what it found there as a finding."""
    add_line20_patch(project, upstream, upstream.head)
    (outside / "victim.txt").write_text(f"TOKEN=ghp_secret UP_PIN = {'f' * 40}\n")
    (project.path / "Makefile").symlink_to(outside / "victim.txt")
    write_config(
        project,
        upstream.head,
        up_extra="""\
        pin_files:
          - path: Makefile
            pattern: 'UP_PIN = (?P<pin>[0-9a-f]{40})'
        """,
    )
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "PC010" in result.output and "Makefile is a symlink to" in result.output, result.output
    assert "ghp_secret" not in result.output and "f" * 40 not in result.output


# ---------------------------------------------------------------- trees of any depth


def _deep(root: Path, depth: int) -> None:
    """DEPTH nested directories `d` under ROOT with a file at the bottom, made a level at a time
    by descriptor (a path this long is past what one system call takes)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"deep\n")
    os.close(leaf)
    os.close(fd)


@pytest.fixture
def deep_cleanup():
    """Roots whose `d` is removed after the test by `Root.remove_tree` (pytest's own clean-up of
    its temporary directories recurses, and dies on a tree this deep)."""
    roots: list[Path] = []
    yield roots
    for root in roots:
        Root(root).remove_tree("d")


def test_a_walk_past_its_depth_bound_is_one_line_and_within_it_never_recurses(tmp_path: Path, deep_cleanup) -> None:
    deep_cleanup.append(tmp_path)
    _deep(tmp_path, 1500)  # deeper than Python's recursion limit
    root = Root(tmp_path)
    assert [name.count("/") for name, _ in root.walk("")] == [1500]
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    with pytest.raises(tree_walk.TooDeep):
        list(tree_walk.entries(fd, max_depth=1000))
    assert root.remove_tree("d") and os.listdir(tmp_path) == []


def test_the_walk_refuses_a_tree_deeper_than_gits_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _deep(tmp_path, 40)
    monkeypatch.setattr(tree_walk, "MAX_DEPTH", 30)
    with pytest.raises(Refused, match=r"refusing to read d: deeper than 30 directories"):
        list(Root(tmp_path).walk("d"))


def test_pin_sync_to_an_upstream_1100_directories_deep(project: Project, upstream: Repo, cli, deep_cleanup) -> None:
    """Root._walk_fd recursed: the sync tree's walk (dating its files) died with RecursionError."""
    deep_cleanup.append(upstream.path)
    add_line20_patch(project, upstream, upstream.head)
    git.commit_all(project.path, "downstream")
    _deep(upstream.path, 1100)
    upstream.commit({}, "a directory 1,100 levels deep")
    result = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert not (project.path / ".patchctl" / "sync" / "up").exists()  # removed, every level of it


# ---------------------------------------------------------------- long paths


def test_long_paths_reach_git_on_stdin_and_count_as_on_the_command_line(upstream: Repo) -> None:
    pin = upstream.head
    long_dir = "/".join(["l" * 200] * 8)
    tip = upstream.commit({"src/main.c": main_c({3: "x"}), f"{long_dir}/a.c": "a\n"}, "touch")
    paths = ["src/main.c", f"{long_dir}/a.c", *(f"{long_dir}/n{i}.c" for i in range(20))]
    assert not git.paths_fit_argv(paths)  # 32 KiB of paths: the stdin route
    assert health.drift(upstream.path, pin, tip, paths) == 1
    assert health.drift(upstream.path, pin, tip, paths[:1]) == 1  # as the command line counts it


def test_a_patch_with_long_paths_past_the_argument_limit_makes_a_red_canary(
    project: Project, upstream: Repo, cli
) -> None:
    """560 new files with 4,020-character paths: 2.2 MB of paths, past the kernel's limit on a
    command line. They went to git as arguments ("argument list too long", a traceback)."""
    pin = upstream.head
    patch = make_patch(upstream, pin, {"src/main.c": main_c({3: "main 3 p"})}, "Long")
    block = (
        "diff --git a/X b/X\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/X\n@@ -0,0 +1 @@\n+x\n"
    )
    paths = ["/".join([f"{i:04d}" + "d" * 196, *["e" * 200] * 19]) for i in range(560)]
    extra = "".join(block.replace("X", path) for path in paths)
    project.add_patch("0001-long.patch", patch + extra)
    upstream.commit({"src/util.c": "moved\n"}, "tip")
    assert sum(len(p) for p in paths) > os.sysconf("SC_ARG_MAX")
    result = cli("-C", project.path, "canary", "--no-compile", "--no-bisect")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "canary is red" in result.stderr and "path too long for a file system" in result.stdout
