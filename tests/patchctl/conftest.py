"""Fixtures for patchctl tests: real temporary git upstreams and downstream projects.

`upstream` makes a real git repository with commits; `project` makes a downstream
repository with a matrix.yaml pinned to it and a patch series; `cli` runs patchctl's real
entry point (`patchctl.cli.main`) in-process and captures what it prints and returns.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchctl import git
from patchctl.cli import main

REAL_PIN = "296d9b60b97f6eeb1df161fefb921a44c04a1122"  # llama-cpp-python 0.3.30
REAL_TIP = "aa601ae300d05a804f5f68940ab6fa75fc9653d3"  # llama-cpp-python 0.3.33
REAL_URL = "pypi-sdist:llama-cpp-python?versions=0.3.30,0.3.33&subdir=vendor/llama.cpp"
# The upstream source the session was started under: CI's test job follows `ci` as its other
# jobs do (a pin-sync branch's new pin may exist there only), and this repository's own series
# are checked at that source's pin (test_own_series.py). Every test runs with the variable cleared.
SESSION_UPSTREAM_SOURCE = os.environ.get("PATCHCTL_UPSTREAM_SOURCE") or "default"


def real_cache_dir() -> Path:
    """Shared across tests and runs: the sdist download and the repo build happen once."""
    return Path(os.environ.get("PATCHCTL_TEST_CACHE") or Path.home() / ".cache" / "patchctl")


@pytest.fixture(autouse=True)
def _isolated_cache(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own cache, except the real-upstream tier, which shares one."""
    monkeypatch.delenv("PATCHCTL_UPSTREAM_URL", raising=False)
    monkeypatch.delenv("PATCHCTL_UPSTREAM_SOURCE", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("PATCHCTL_QUIET", "1")  # progress lines on stderr: tests/patchctl/test_newcomer.py covers them
    # A project in a plain directory keeps its state in the user's state directory (patchctl.state.statehome).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    if request.node.get_closest_marker("realupstream"):
        monkeypatch.setenv("PATCHCTL_CACHE", str(real_cache_dir()))
    else:
        monkeypatch.setenv("PATCHCTL_CACHE", str(tmp_path_factory.mktemp("cache")))


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str | Path) -> CliResult:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return CliResult(code, out.getvalue(), err.getvalue())


def ok(*args: str | Path) -> str:
    """The stdout of `patchctl ARGS`, which must exit 0."""
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def replayed_exports(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every export a pin-sync plans from what its replay knows of its commits is planned again
    as `patchctl export` plans it (every commit formatted and asked): the two must agree, byte
    for byte and name for name. Returns what each replay knew, for the test to see it used."""
    from patchctl.series import exporter

    real = exporter.plan_export
    seen: list[dict] = []

    def planned_both_ways(series, tree, base, *, check=False, replayed=None):
        planned, result = real(series, tree, base, check=check, replayed=replayed)
        if replayed:
            assert (planned, result) == real(series, tree, base, check=check)
            seen.append(dict(replayed))
        return planned, result

    monkeypatch.setattr(exporter, "plan_export", planned_both_ways)
    return seen


class Repo:
    """A real non-bare git repository driven through patchctl's isolated git."""

    def __init__(self, path: Path):
        self.path = path
        if not (path / ".git").exists():
            git.init_repo(path)

    def write(self, files: dict[str, str | bytes | None]) -> None:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)

    def commit(
        self, files: dict[str, str | bytes | None], message: str = "change", *, date: str = git.FIXED_DATE
    ) -> str:
        self.write(files)
        return git.commit_all(self.path, message, date=date)

    def git(self, *args: str) -> str:
        return git.run(list(args), self.path).stdout

    @property
    def head(self) -> str:
        return git.rev_parse(self.path, "HEAD")

    def read(self, name: str) -> str:
        return (self.path / name).read_text()


def numbered(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


@pytest.fixture
def upstream(tmp_path: Path) -> Repo:
    """An upstream with a few source files, a doc and a nested directory."""
    return make_upstream(tmp_path / "upstream")


def make_upstream(path: Path) -> Repo:
    """The `upstream` fixture's repository, at PATH (a test that needs several copies makes each)."""
    repo = Repo(path)
    repo.commit(
        {
            "src/main.c": numbered(40, "main"),
            "src/util.c": numbered(30, "util"),
            "include/util.h": numbered(10, "decl"),
            "README.md": "# upstream\n",
            "CMakeLists.txt": "project(up)\nadd_library(up src/main.c src/util.c)\n",
        },
        "initial",
    )
    return repo


def make_patch(
    upstream: Repo,
    base: str,
    files: dict[str, str | bytes | None],
    subject: str,
    body: str = "Why this change.",
    *,
    edit=None,
) -> str:
    """A mail-format patch taking BASE to BASE+FILES, made by git itself in a scratch clone.
    EDIT, when given, is called with the clone's path to make arbitrary changes."""
    scratch = upstream.path.parent / f"scratch-{abs(hash((base, subject)))}"
    shutil.rmtree(scratch, ignore_errors=True)
    git.run(["clone", "-q", str(upstream.path), str(scratch)], upstream.path.parent)
    try:
        repo = Repo(scratch)
        git.run(["checkout", "-q", "--detach", base], scratch)
        repo.write(files)
        if edit:
            edit(scratch)
        git.commit_all(scratch, f"{subject}\n\n{body}")
        return git.run(
            ["format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "--full-index", "HEAD"], scratch
        ).stdout
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Project(Repo):
    """A downstream repository: matrix.yaml pinned to an upstream plus a patch series."""

    def __init__(self, path: Path, upstream: Repo, pin: str, *, series: str = "main", extra_yaml: str = ""):
        path.mkdir(parents=True, exist_ok=True)
        super().__init__(path)
        self.upstream = upstream
        self.series_name = series
        self.series_dir = path / "patches" / series
        self.series_dir.mkdir(parents=True, exist_ok=True)
        self.write_config(pin, extra_yaml)

    def write_config(self, pin: str, extra_yaml: str = "") -> None:
        text = textwrap.dedent(
            f"""\
            # downstream project
            version: 1
            upstreams:
              up:
                url: {self.upstream.path}
                branch: main
                pin: {pin}  # the pin
            series:
              {self.series_name}:
                upstream: up
                dir: patches/{self.series_name}
            """
        )
        (self.path / "matrix.yaml").write_text(text + extra_yaml)

    def add_patch(self, name: str, text: str) -> Path:
        target = self.series_dir / name
        target.write_text(text)
        return target

    def patch_names(self) -> list[str]:
        return sorted(p.name for p in self.series_dir.glob("*.patch"))

    def snapshot(self) -> dict[str, bytes]:
        """Every file under the project except .git and patchctl's own state."""
        return {
            str(p.relative_to(self.path)): p.read_bytes()
            for p in sorted(self.path.rglob("*"))
            if p.is_file()
            and ".git" not in p.relative_to(self.path).parts
            and ".patchctl" not in p.relative_to(self.path).parts
        }


@pytest.fixture
def project(tmp_path: Path, upstream: Repo) -> Project:
    return Project(tmp_path / "project", upstream, upstream.head)


def tree_files(tree: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(tree)): p.read_bytes()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(tree).parts
    }


def disk_snapshot(path: Path, skip: tuple[str, ...] = (".patchctl", ".git/patchctl")) -> dict[str, tuple]:
    """Everything under PATH as it is on disk, `.git` included, no link followed, but the
    directories SKIP, relative to PATH (patchctl's own state: the trees, and the lock and
    journal in the git directory): relative path -> ("dir",), ("file", bytes, mode),
    ("link", target) or (the kind,)."""
    found: dict[str, tuple] = {}
    for current, dirs, files in os.walk(path):
        here = Path(current).relative_to(path)
        dirs[:] = [d for d in dirs if (here / d).as_posix() not in skip]
        for name in dirs + files:
            full = Path(current) / name
            relative = full.relative_to(path).as_posix()
            info = full.lstat()
            if full.is_symlink():
                found[relative] = ("link", os.readlink(full))
            elif full.is_dir():
                found[relative] = ("dir",)
            elif full.is_file():
                found[relative] = ("file", full.read_bytes(), info.st_mode & 0o7777)
            else:
                found[relative] = (oct(info.st_mode),)
    return found


def one_line_error(result: CliResult, code: int) -> str:
    """The one `patchctl: error:` line of RESULT, which exited CODE without a traceback."""
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patchctl: error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]
