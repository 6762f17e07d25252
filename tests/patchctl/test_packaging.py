"""The distributions: `python -m build` makes an sdist and a wheel (the wheel built from the
sdist, so a file the sdist forgets is caught), `twine check` passes, and the wheel installed
into a clean virtualenv runs patchctl and carries the engine's conformance vectors.

No network: setuptools is the one already installed (`--no-isolation`), and the virtualenv
sees the already-installed dependencies (`--system-site-packages`) while patchctl itself
comes only from the wheel (`--no-deps --no-index`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from .conftest import Project, Repo, make_patch
from .matrix_fixtures import REPO


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True, text=True)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel of the working tree's files (tracked and new, not ignored), built out of tree."""
    root = tmp_path_factory.mktemp("packaging")
    source = root / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in (n.decode() for n in listed if n):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = root / "dist"
    result = run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source, cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == ["patchctl-0.1.0-py3-none-any.whl", "patchctl-0.1.0.tar.gz"]
    check = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()), cwd=dist)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("PASSED") == 2


def test_wheel_carries_the_code_and_the_conformance_vectors(dist: Path) -> None:
    names = zipfile.ZipFile(dist / "patchctl-0.1.0-py3-none-any.whl").namelist()
    checked_in = sorted(p.name for p in (REPO / "engine/conformance/vectors").iterdir() if p.is_file())
    assert sorted(n.split("/")[-1] for n in names if n.startswith("engine/conformance/vectors/")) == checked_in
    for module in ("patchctl/cli.py", "patchctl/matrix/actions.py", "engine/__main__.py"):
        assert module in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert (
        "patchctl = patchctl.cli:main"
        in zipfile.ZipFile(dist / "patchctl-0.1.0-py3-none-any.whl").read(entry_points).decode()
    )
    assert not any(n.startswith(("tests/", "templates/", "patches/")) for n in names)


def test_installed_wheel_runs_patchctl_and_the_engine(dist: Path, tmp_path: Path, upstream: Repo) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = dist / "patchctl-0.1.0-py3-none-any.whl"
    install = run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel, cwd=tmp_path
    )
    assert install.returncode == 0, install.stdout + install.stderr

    where = run(python, "-c", "import patchctl, engine; print(patchctl.__file__); print(engine.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(env_dir)) for line in where.stdout.splitlines()), where.stdout

    patchctl = env_dir / "bin" / "patchctl"
    help_text = run(patchctl, "--help", cwd=tmp_path)
    assert help_text.returncode == 0 and "lint" in help_text.stdout and "matrix" in help_text.stdout

    project = Project(tmp_path / "downstream", upstream, upstream.head)
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(
            upstream,
            upstream.head,
            {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main five\n")},
            "Tune main",
            "The fifth line is spelled out so that readers find it.",
        ),
    )
    lint = run(patchctl, "-C", project.path, "lint", cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    project.add_patch("0001-again.patch", (project.series_dir / "0001-tune-main.patch").read_text())
    lint = run(patchctl, "-C", project.path, "lint", "--no-apply", cwd=tmp_path)
    assert lint.returncode == 1 and "PC001" in lint.stdout + lint.stderr, lint.stdout + lint.stderr

    installed = run(python, "-c", "from engine.conformance.files import CHECKED_IN_DIR as d; print(d)", cwd=tmp_path)
    conformance = Path(installed.stdout.strip())
    assert conformance.is_relative_to(env_dir)
    vectors = run(python, "-m", "engine", "vectors", "--check", conformance, cwd=tmp_path)
    assert vectors.returncode == 0 and "match" in vectors.stdout, vectors.stdout + vectors.stderr
