"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit against a downstream
repository: pre-commit builds its own virtualenv and installs patchctl from this checkout
(its dependencies come from PyPI), so these tests need PyPI and take about a minute."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl import git

from .conftest import Project, Repo, make_patch, run_cli
from .matrix_fixtures import REPO
from .test_vendor import vendored_project
from .tools import installed_tool

pytestmark = pytest.mark.slow

HOOKS = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    executable = installed_tool("pre-commit")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never", "PYTHONPATH": ""}
    env.update(
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e.i"
    )
    return subprocess.run([executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by the module's tests: pre-commit builds patchctl's virtualenv once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def downstream(tmp_path: Path, upstream: Repo, cli) -> Project:
    """A downstream repository with a one-patch series, applied, and its workflows rendered; all committed."""
    project = Project(tmp_path / "downstream", upstream, upstream.head)
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(
            upstream,
            upstream.head,
            {"src/main.c": main_c.replace("main 5\n", "main five\n")},
            "Tune main",
            "The fifth line is spelled out so that readers find it.",
        ),
    )
    shutil.copytree(REPO / "templates", project.path / "templates")
    (project.path / ".gitignore").write_text(".patchctl/\n")
    config = project.path / "matrix.yaml"  # a downstream names the patchctl action its workflows call
    config.write_text(config.read_text() + "workflows:\n  action: acme/patchctl@" + "ab" * 20 + "\n")
    assert cli("-C", project.path, "matrix", "render").exit_code == 0
    assert cli("-C", project.path, "apply").exit_code == 0
    git.commit_all(project.path, "downstream")
    return project


def test_hooks_are_declared_for_whole_repository_checks() -> None:
    assert set(HOOKS) == {
        "patchctl-lint",
        "patchctl-export-check",
        "patchctl-matrix-render-check",
        "patchctl-vendor-check",
    }
    assert {hook["entry"] for hook in HOOKS.values()} == {
        "patchctl lint",
        "patchctl export --check",
        "patchctl matrix render --check",
        "patchctl vendor --check",
    }
    assert all(hook["pass_filenames"] is False and hook["language"] == "python" for hook in HOOKS.values())


def test_try_repo_lint_and_render_check(tmp_path: Path, upstream: Repo, cli, pre_commit_home: Path) -> None:
    project = downstream(tmp_path, upstream, cli)
    for hook in ("patchctl-lint", "patchctl-matrix-render-check"):
        result = pre_commit("try-repo", str(REPO), hook, "--all-files", cwd=project.path, home=pre_commit_home)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Passed" in result.stdout

    # A patch without a description: lint fails and says why.
    patch = project.series_dir / "0001-tune-main.patch"
    patch.write_text(patch.read_text().replace("The fifth line is spelled out so that readers find it.\n", ""))
    # A rendered workflow edited by hand: the render check fails with the diff.
    workflow = next((project.path / ".github/workflows").glob("*.yml"))
    workflow.write_text(workflow.read_text() + "# edited\n")
    git.commit_all(project.path, "break both")
    lint = pre_commit("try-repo", str(REPO), "patchctl-lint", "--all-files", cwd=project.path, home=pre_commit_home)
    assert lint.returncode == 1 and "PC008" in lint.stdout, lint.stdout + lint.stderr
    render = pre_commit(
        "try-repo", str(REPO), "patchctl-matrix-render-check", "--all-files", cwd=project.path, home=pre_commit_home
    )
    assert render.returncode == 1 and "-# edited" in render.stdout, render.stdout + render.stderr


def test_export_check_with_the_series_as_argument(tmp_path: Path, upstream: Repo, cli, pre_commit_home: Path) -> None:
    project = downstream(tmp_path, upstream, cli)
    rev = git.rev_parse(REPO, "HEAD")
    config = {"repos": [{"repo": str(REPO), "rev": rev, "hooks": [{"id": "patchctl-export-check", "args": ["main"]}]}]}
    (project.path / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git.commit_all(project.path, "pre-commit config")
    shutil.rmtree(project.path / ".patchctl")  # a fresh clone: the hook applies the series itself
    result = pre_commit("run", "--all-files", cwd=project.path, home=pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (project.path / ".patchctl/trees/main").is_dir()

    # A commit in the applied tree that patches/ does not have yet: the hook fails and names it.
    Repo(project.path / ".patchctl/trees/main").commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    result = pre_commit("run", "--all-files", cwd=project.path, home=pre_commit_home)
    # The name git format-patch gives it (the series uses the default naming).
    assert result.returncode == 1 and "0002-Shrink-util.patch" in result.stdout, result.stdout + result.stderr


def test_vendor_check_names_an_edited_vendored_file(tmp_path: Path, upstream: Repo, pre_commit_home: Path) -> None:
    project = vendored_project(tmp_path, upstream)
    (project.path / ".gitignore").write_text(".patchctl/\n")
    assert run_cli("-C", project.path, "vendor").exit_code == 0
    git.commit_all(project.path, "vendored")
    hook = ("try-repo", str(REPO), "patchctl-vendor-check", "--all-files")
    result = pre_commit(*hook, cwd=project.path, home=pre_commit_home)
    assert result.returncode == 0 and "Passed" in result.stdout, result.stdout + result.stderr

    (project.path / "third_party/up/src/util.c").write_text("edited\n")
    git.commit_all(project.path, "an edit in the vendored copy")
    result = pre_commit(*hook, cwd=project.path, home=pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "third_party/up/src/util.c: differs from pin + series" in result.stdout
