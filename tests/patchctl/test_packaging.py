"""The distributions: `python -m build` makes an sdist and a wheel (the wheel built from the
sdist, so a file the sdist forgets is caught), `twine check` passes, the wheel carries every
module, the default templates, the LICENSE and the project's metadata, and the wheel installed
into a clean virtualenv runs patchctl, renders a matrix from its installed templates and
carries the engine's conformance vectors.

No network, and the same whether the suite runs in a virtualenv or a system install:
setuptools is the one already installed (`--no-isolation`); the clean virtualenv has no
system site-packages, and sees the dependencies through a `.pth` file naming the site
directories of the interpreter running the tests (the `.pth` files there, an editable
install's finder among them, are not processed), while patchctl itself comes only from the
wheel (`--no-deps --no-index`)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import patchctl

from .conftest import Project, Repo, make_patch
from .matrix_fixtures import GOLDEN, GOOD, REPO

VERSION = patchctl.__version__
WHEEL = f"patchctl-{VERSION}-py3-none-any.whl"
SDIST = f"patchctl-{VERSION}.tar.gz"


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


def running_site_dirs() -> list[str]:
    """Where the interpreter running the tests finds its dependencies: its site directories
    (a virtualenv's site-packages, or the system's, Debian's dist-packages included)."""
    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return list(dict.fromkeys(d for d in dirs if Path(d).is_dir()))


def clean_venv(env_dir: Path) -> Path:
    """A virtualenv without system site-packages whose only view of the running environment
    is a .pth file listing its site directories (after the virtualenv's own); its python."""
    venv.EnvBuilder(system_site_packages=False, with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=env_dir)
    assert purelib.returncode == 0, purelib.stderr
    (Path(purelib.stdout.strip()) / "zz_running_environment.pth").write_text("\n".join(running_site_dirs()) + "\n")
    return python


def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == [WHEEL, SDIST]
    check = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()), cwd=dist)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("PASSED") == 2


def test_wheel_carries_the_code_the_templates_and_the_conformance_vectors(dist: Path) -> None:
    wheel = zipfile.ZipFile(dist / WHEEL)
    names = wheel.namelist()
    checked_in = sorted(p.name for p in (REPO / "engine/conformance/vectors").iterdir() if p.is_file())
    assert sorted(n.split("/")[-1] for n in names if n.startswith("engine/conformance/vectors/")) == checked_in
    modules = sorted(str(p.relative_to(REPO)) for top in ("patchctl", "engine") for p in (REPO / top).rglob("*.py"))
    missing = [m for m in modules if "__pycache__" not in m and m not in names]
    assert not missing, f"modules missing from the wheel (a package setup.py does not find?): {missing}"
    # The default templates are the repository's templates/, byte for byte.
    templates = sorted(p.name for p in (REPO / "templates").glob("*.j2"))
    assert sorted(n.removeprefix("patchctl/templates/") for n in names if n.startswith("patchctl/templates/")) == (
        templates
    )
    for name in templates:
        assert wheel.read(f"patchctl/templates/{name}") == (REPO / "templates" / name).read_bytes()
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "patchctl = patchctl.cli:run" in wheel.read(entry_points).decode()
    assert not any(n.startswith(("tests/", "templates/", "patches/", "bench/")) for n in names)
    assert wheel.read(f"patchctl-{VERSION}.dist-info/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()


def test_wheel_metadata_names_the_license_urls_and_classifiers(dist: Path) -> None:
    license_text = (REPO / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "Copyright (c) patchctl contributors" in license_text
    metadata = Parser().parsestr(zipfile.ZipFile(dist / WHEEL).read(f"patchctl-{VERSION}.dist-info/METADATA").decode())
    assert metadata["Version"] == VERSION
    assert metadata["License-Expression"] == "MIT" and metadata.get_all("License-File") == ["LICENSE"]
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert {"Homepage", "Source", "Issues"} <= set(urls), urls
    classifiers = metadata.get_all("Classifier")
    assert "Programming Language :: Python :: 3.10" in classifiers and "Environment :: Console" in classifiers
    assert metadata["Requires-Python"] == ">=3.10"


# The module each runtime dependency provides (where the two names differ, the distribution's).
IMPORT_NAMES = {"pyyaml": "yaml"}


def test_every_runtime_dependency_is_imported_by_patchctl(dist: Path) -> None:
    metadata = Parser().parsestr(zipfile.ZipFile(dist / WHEEL).read(f"patchctl-{VERSION}.dist-info/METADATA").decode())
    required = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    imported: set[str] = set()
    for path in (REPO / "patchctl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    names = [re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in required]
    assert names and [n for n in names if IMPORT_NAMES.get(n, n) not in imported] == []


def test_installed_wheel_runs_patchctl_and_the_engine(dist: Path, tmp_path: Path, upstream: Repo) -> None:
    env_dir = tmp_path / "venv"
    python = clean_venv(env_dir)
    wheel = dist / WHEEL
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
    version = run(patchctl, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"patchctl, version {VERSION}", version.stdout

    # A repository without templates/ renders from the installed templates: the golden files.
    renders = tmp_path / "renders"
    renders.mkdir()
    shutil.copy(GOOD, renders / "matrix.yaml")
    assert run("git", "init", "-q", renders, cwd=tmp_path).returncode == 0
    where = run(python, "-c", "import patchctl; print(patchctl.templates_dir())", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(env_dir), where.stdout + where.stderr
    render = run(patchctl, "-C", renders, "matrix", "render", cwd=tmp_path)
    assert render.returncode == 0, render.stdout + render.stderr
    golden = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*") if p.is_file())
    assert golden and all((renders / name).read_text() == (GOLDEN / name).read_text() for name in golden), golden
    check = run(patchctl, "-C", renders, "matrix", "render", "--check", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr

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
