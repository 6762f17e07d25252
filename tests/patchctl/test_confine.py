"""Symlinks inside the downstream repository never make patchctl write outside it: every
output path (patches/SERIES, sync trees and logs, pin_files, .github/workflows, the backend
index) is resolved first, and one that leads out is refused with exit 2, naming the symlink
and where it points, before anything is written. patchctl's own `.patchctl`, its `trees` and
`sync` are never followed at all (exit 3, tests/patchctl/test_state_home.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from patchctl import git
from patchctl.confined import Refused as OutsideRepository
from patchctl.confined import confined_path as inside_repository

from .conftest import Project, Repo
from .fixtures_sync import add_line20_patch, main_c, write_config
from .matrix_fixtures import make_project


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the project that nothing may touch."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep.txt").write_text("untouched\n")
    return path


def listing(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def refused(result, link: str, target: Path) -> str:
    """One line, exit 2, naming the symlink and the place it points to."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{link} is a symlink to {target}" in lines[0] and "outside the repository" in lines[0], lines[0]
    return lines[0]


def refused_state_link(result, link: str) -> str:
    """patchctl's own directories (`.patchctl`, its `trees` and `sync`) are never followed, even
    inside the repository: one line, exit 3, saying what to remove."""
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"patchctl: error: {link} is a symlink, not the directory of " in lines[0], lines[0]
    assert "remove it (`rm " in lines[0], lines[0]
    return lines[0]


def replace_with_link(path: Path, target: Path) -> None:
    """PATH (a directory or file) becomes a symlink to TARGET."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def edited_tree(project: Project, upstream: Repo, cli) -> Path:
    """An applied tree with one new commit on top, ready to export."""
    add_line20_patch(project, upstream, upstream.head)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = project.path / ".patchctl/trees/main"
    (tree / "src/util.c").write_text("util changed\n")
    git.commit_all(tree, "Change util\n\nWhy it changes.")
    return tree


# ---------------------------------------------------------------- the helper


def test_helper_refuses_every_link_on_the_way_naming_it_and_where_it_leads(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "repo"
    (root / "real").mkdir(parents=True)
    assert inside_repository(root, root / "real" / "x") == root / "real" / "x"  # absent: it will be created
    (root / "inside").symlink_to("real")  # a link that stays inside is refused too: patchctl follows none
    with pytest.raises(OutsideRepository, match="refusing to write inside/x: inside is a symlink to real;"):
        inside_repository(root, root / "inside" / "x")
    (root / "real" / "out").symlink_to(outside)
    with pytest.raises(OutsideRepository, match=f"real/out is a symlink to {outside}, outside the repository"):
        inside_repository(root, root / "real" / "out" / "file")
    (root / "dangling").symlink_to("nowhere/deep")
    with pytest.raises(OutsideRepository, match="dangling is a symlink to nowhere/deep, which does not exist"):
        inside_repository(root, Path("dangling/file"))
    (root / "loop").symlink_to("loop")
    with pytest.raises(OutsideRepository, match="loop is a symlink to loop, a symlink loop"):
        inside_repository(root, root / "loop" / "file")
    (root / ".git").mkdir()
    (root / "git-link").symlink_to(".git")
    with pytest.raises(OutsideRepository, match="git-link is a symlink to .*, inside .git"):
        inside_repository(root, root / "git-link" / "hooks" / "pre-commit")
    for spelled in ("../elsewhere", "real/../../elsewhere", ".git/x", ".GIT/x", "real/git~1/x", "real/.git. /x"):
        with pytest.raises(OutsideRepository, match="refusing to write"):
            inside_repository(root, Path(spelled))
    with pytest.raises(OutsideRepository, match="outside the repository"):
        inside_repository(root, tmp_path / "elsewhere")


# ---------------------------------------------------------------- export


def test_export_refuses_a_series_dir_linked_outside(project: Project, upstream: Repo, outside: Path, cli) -> None:
    edited_tree(project, upstream, cli)
    shutil.copytree(project.series_dir, outside / "series")
    replace_with_link(project.series_dir, outside / "series")
    before = listing(outside)
    refused(cli("-C", project.path, "export", "main"), "patches/main", outside / "series")
    assert listing(outside) == before


def test_export_refuses_a_patches_dir_linked_outside(project: Project, upstream: Repo, outside: Path, cli) -> None:
    edited_tree(project, upstream, cli)
    shutil.copytree(project.path / "patches", outside / "patches")
    replace_with_link(project.path / "patches", outside / "patches")
    before = listing(outside)
    refused(cli("-C", project.path, "export", "main"), "patches", outside / "patches")
    assert listing(outside) == before


def test_export_through_a_link_that_stays_inside_is_refused_too(project: Project, upstream: Repo, cli) -> None:
    """A link inside the repository can be retargeted by the next commit (into .git, say):
    patchctl writes through none, and says which."""
    edited_tree(project, upstream, cli)
    real = project.path / "vendor-patches" / "main"
    real.parent.mkdir()
    shutil.copytree(project.series_dir, real)
    replace_with_link(project.series_dir, Path("../vendor-patches/main"))
    before = sorted(p.name for p in real.iterdir())
    result = cli("-C", project.path, "export", "main")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "patches/main is a symlink to ../vendor-patches/main; patchctl goes through no link" in lines[0]
    assert sorted(p.name for p in real.iterdir()) == before


# ---------------------------------------------------------------- apply and gate


@pytest.mark.parametrize("link", [".patchctl", ".patchctl/trees", ".patchctl/trees/main"])
def test_apply_refuses_state_dirs_linked_outside(
    project: Project, upstream: Repo, outside: Path, cli, link: str
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    replace_with_link(project.path / link, outside)
    result = cli("-C", project.path, "apply")
    if link == ".patchctl/trees/main":
        refused(result, link, outside)
    else:
        refused_state_link(result, link)
    assert listing(outside) == {"keep.txt": b"untouched\n"}


def test_apply_into_an_explicit_directory_outside_is_the_users_choice(
    project: Project, upstream: Repo, outside: Path, cli
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    result = cli("-C", project.path, "apply", "--into", outside / "tree")
    assert result.exit_code == 0, result.output
    assert "MAIN 20 patched" in (outside / "tree" / "src/main.c").read_text()


def test_gate_refuses_a_log_dir_linked_outside(project: Project, upstream: Repo, outside: Path, cli) -> None:
    add_line20_patch(project, upstream, upstream.head)
    write_config(project, upstream.head, series_extra="gates:\n  - name: noop\n    command: 'true'\n")
    assert cli("-C", project.path, "apply").exit_code == 0
    replace_with_link(project.path / ".patchctl/gates", outside)
    refused(cli("-C", project.path, "gate", "main"), ".patchctl/gates", outside)
    assert listing(outside) == {"keep.txt": b"untouched\n"}


# ---------------------------------------------------------------- pin-sync and canary


def drifted(project: Project, upstream: Repo) -> str:
    """The project's pin, with a patch on it and two upstream commits past it."""
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    upstream.commit({"src/main.c": main_c(prepend=2)}, "Shift lines")
    upstream.commit({"src/util.c": "util rewritten\n"}, "Rewrite util")
    return pin


@pytest.mark.parametrize("link", [".patchctl", ".patchctl/sync", "patches/main"])
def test_pin_sync_refuses_outputs_linked_outside_before_writing(
    project: Project, upstream: Repo, outside: Path, cli, link: str
) -> None:
    write_config(project, drifted(project, upstream))
    if link == "patches/main":
        shutil.copytree(project.series_dir, outside / "series")
        target = outside / "series"
    else:
        target = outside
    replace_with_link(project.path / link, target)
    before_outside, before_config = listing(outside), (project.path / "matrix.yaml").read_bytes()
    judge = (lambda result: refused(result, link, target)) if link == "patches/main" else None
    judge = judge or (lambda result: refused_state_link(result, link))
    for args in (["up", "--latest"], ["up", "--latest", "--dry-run"]):
        judge(cli("-C", project.path, "pin-sync", *args))
    assert listing(outside) == before_outside
    assert (project.path / "matrix.yaml").read_bytes() == before_config
    judge(cli("-C", project.path, "pin-sync", "--abort"))


def test_pin_sync_refuses_a_pin_file_linked_outside(project: Project, upstream: Repo, outside: Path, cli) -> None:
    pin = drifted(project, upstream)
    (outside / "Makefile").write_text(f"UP_VERSION={pin}\n")
    (project.path / "Makefile").symlink_to(outside / "Makefile")
    write_config(
        project, pin, up_extra="pin_files:\n  - {path: Makefile, pattern: 'UP_VERSION=(?P<pin>[0-9a-f]{40})'}\n"
    )
    before = listing(outside)
    refused(cli("-C", project.path, "pin-sync", "up", "--latest"), "Makefile", outside / "Makefile")
    assert listing(outside) == before
    assert not (project.path / ".patchctl/sync").exists()


def test_canary_refuses_a_log_dir_linked_outside(project: Project, upstream: Repo, outside: Path, cli) -> None:
    drifted(project, upstream)
    replace_with_link(project.path / ".patchctl", outside)
    refused_state_link(cli("-C", project.path, "canary"), ".patchctl")
    assert listing(outside) == {"keep.txt": b"untouched\n"}


# ---------------------------------------------------------------- matrix render


def test_render_refuses_a_workflows_dir_linked_outside(tmp_path: Path, outside: Path, cli) -> None:
    project = make_project(tmp_path)
    (project / ".github").mkdir()
    (project / ".github" / "workflows").symlink_to(outside)
    for args in (["matrix", "render"], ["matrix", "render", "--check"]):
        refused(cli("-C", project, *args), ".github/workflows", outside)
    assert listing(outside) == {"keep.txt": b"untouched\n"}
    assert not (project / "backend").exists()  # all or none: the index was not written either


def test_render_refuses_an_index_dir_linked_outside(tmp_path: Path, outside: Path, cli) -> None:
    project = make_project(tmp_path)
    (project / "backend").symlink_to(outside)
    refused(cli("-C", project, "matrix", "render"), "backend", outside)
    assert listing(outside) == {"keep.txt": b"untouched\n"}
    assert not (project / ".github").exists()


def test_render_refuses_an_output_file_linked_outside(tmp_path: Path, outside: Path, cli) -> None:
    project = make_project(tmp_path)
    (project / ".github" / "workflows").mkdir(parents=True)
    os.symlink(outside / "ci.yml", project / ".github" / "workflows" / "ci.yml")  # dangling: would be created
    refused(cli("-C", project, "matrix", "render"), ".github/workflows/ci.yml", outside / "ci.yml")
    assert listing(outside) == {"keep.txt": b"untouched\n"}
