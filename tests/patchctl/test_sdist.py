"""sdist: a local upstream git repository built from package-index sdists (here: tarballs
built by the test, served from the cache or from a local simple index over HTTP)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchctl import git
from patchctl.errors import EnvironmentFailure, UsageError
from patchctl.matrix.sources import load_project
from patchctl.project import upstream_checks
from patchctl.upstream import sdist

from .conftest import run_cli

PACKAGE = "demo-pkg"


def make_sdist(
    path: Path, version: str, files: dict[str, str], *, links: dict[str, str] | None = None, mtime: int | None = None
) -> Path:
    """A real .tar.gz laid out like an sdist: everything under `demo_pkg-VERSION/`, each
    version's files stamped with their own time (MTIME) unless told otherwise."""
    stamp = int(float(version) * 86400) if mtime is None else mtime
    top = f"demo_pkg-{version}"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {"setup.py": "# not used\n", **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o755 if name.endswith(".sh") else 0o644, stamp
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return path


def seed_cache(version: str, files: dict[str, str], **kwargs: Any) -> Path:
    directory = Path(os.environ["PATCHCTL_CACHE"]) / "sdists"
    directory.mkdir(parents=True, exist_ok=True)
    return make_sdist(directory / sdist.sdist_filename(PACKAGE, version), version, files, **kwargs)


V1 = {"vendor/up/main.c": "int main(void) { return 0; }\n", "vendor/up/run.sh": "#!/bin/sh\n", "README": "pkg\n"}
V2 = {"vendor/up/main.c": "int main(void) { return 1; }\n", "vendor/up/.git": "gitdir: ../../.git/modules/up\n"}
URL = f"pypi-sdist:{PACKAGE}?versions=1.0,2.0&subdir=vendor/up"


def test_parse_url_reads_package_versions_and_subdir() -> None:
    spec = upstream_checks.parse_url(URL)
    assert (spec.package, spec.versions, spec.subdir) == (PACKAGE, ("1.0", "2.0"), "vendor/up")
    assert upstream_checks.parse_url(spec.url) == spec
    assert upstream_checks.parse_url(f"pypi-sdist:{PACKAGE}?versions=1.0").subdir == "vendor/llama.cpp"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://example.com/x", "not a pypi-sdist: URL"),
        ("pypi-sdist:-bad?versions=1", "bad package name"),
        (f"pypi-sdist:{PACKAGE}", "lists no versions"),
        (f"pypi-sdist:{PACKAGE}?versions=1;rm", "bad version"),
        (f"pypi-sdist:{PACKAGE}?versions=1&subdir=../etc", "bad subdir"),
    ],
)
def test_parse_url_rejects_bad_urls(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        upstream_checks.parse_url(url)


def test_materialize_makes_one_commit_per_version_with_the_subdir_only() -> None:
    seed_cache("1.0", V1)
    seed_cache("2.0", V2)
    repo = sdist.materialize(URL)
    log = git.run(["log", "--format=%s", "main"], repo).stdout.splitlines()
    assert log == [f"{PACKAGE} 2.0: vendor/up", f"{PACKAGE} 1.0: vendor/up"]
    assert git.run(["ls-tree", "-r", "--name-only", "v1.0"], repo).stdout.split() == ["main.c", "run.sh"]
    # the submodule's .git link is never upstream content; a file gone in 2.0 is gone from its tree
    assert git.run(["ls-tree", "-r", "--name-only", "v2.0"], repo).stdout.split() == ["main.c"]
    modes = git.run(["ls-tree", "-r", "v1.0"], repo).stdout
    assert "100755 blob" in modes.split("run.sh")[0].splitlines()[-1]
    assert git.run(["show", "v2.0:main.c"], repo).stdout == V2["vendor/up/main.c"]
    assert sdist.materialize(URL) == repo  # built once


def test_init_on_a_sdist_upstream_follows_the_branch_its_commits_are_on(tmp_path: Path) -> None:
    """`init --upstream-url pypi-sdist:...` writes the branch materialize builds (not git's
    `master` default), so that status and the canary find the tip."""
    seed_cache("1.0", V1)
    seed_cache("2.0", V2)
    pin = git.run(["rev-parse", "v1.0"], sdist.materialize(URL)).stdout.strip()
    root = tmp_path / "project"
    git.init_repo(root)
    assert run_cli("-C", root, "init", "--upstream-url", URL, "--pin", pin, "--name", "up").exit_code == 0
    config = load_project(root / "matrix.yaml")
    assert config.upstreams["up"].branch == upstream_checks.SDIST_BRANCH == "main"
    status = run_cli("-C", root, "status", "--no-trial", "--json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["series"][0]["commits_since_pin"] == 1


def test_a_changed_file_with_the_same_size_and_mtime_is_still_committed() -> None:
    seed_cache("1.0", V1, mtime=0)
    seed_cache("2.0", V2, mtime=0)
    repo = sdist.materialize(URL)
    assert git.run(["show", "v2.0:main.c"], repo).stdout == V2["vendor/up/main.c"]


def test_commit_ids_do_not_depend_on_the_machine_or_the_cache(tmp_path: Path, monkeypatch) -> None:
    seed_cache("1.0", V1)
    seed_cache("2.0", V2)
    first = git.run(["rev-parse", "main"], sdist.materialize(URL)).stdout
    monkeypatch.setenv("PATCHCTL_CACHE", str(tmp_path / "other-cache"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    seed_cache("1.0", V1)
    seed_cache("2.0", V2)
    assert git.run(["rev-parse", "main"], sdist.materialize(URL)).stdout == first


def test_an_archive_without_the_subdir_is_an_environment_failure() -> None:
    seed_cache("1.0", {"other/x": "x\n"})
    with pytest.raises(EnvironmentFailure, match="has no vendor/up/ directory"):
        sdist.materialize(f"pypi-sdist:{PACKAGE}?versions=1.0&subdir=vendor/up")


def test_a_link_escaping_the_tree_is_refused(tmp_path: Path) -> None:
    archive = make_sdist(tmp_path / "evil.tar.gz", "1.0", V1, links={"vendor/up/escape": "../../../../etc/passwd"})
    with pytest.raises(EnvironmentFailure, match="unsafe member refused"):
        sdist._extract_subdir(archive, "vendor/up", tmp_path / "out")
    assert not (tmp_path / "out" / "escape").exists()


@pytest.fixture
def simple_index(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """A PEP 503 simple index served over HTTP from tmp_path/index; PIP_INDEX_URL points at it."""
    root = tmp_path / "index"
    (root / "simple" / PACKAGE).mkdir(parents=True)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple/")
    try:
        yield root
    finally:
        server.shutdown()
        server.server_close()


def publish(root: Path, version: str, files: dict[str, str], *, sha256: str | None = None) -> bytes:
    name = sdist.sdist_filename(PACKAGE, version)
    data = make_sdist(root / name, version, files).read_bytes()
    digest = sha256 or hashlib.sha256(data).hexdigest()
    (root / "simple" / PACKAGE / "index.html").write_text(f'<a href="../../{name}#sha256={digest}">{name}</a>\n')
    return data


def test_fetch_downloads_from_the_simple_index_and_caches(simple_index: Path) -> None:
    data = publish(simple_index, "1.0", V1)
    path = sdist.fetch_sdist(PACKAGE, "1.0")
    assert path.read_bytes() == data and path.parent == Path(os.environ["PATCHCTL_CACHE"]) / "sdists"
    (simple_index / sdist.sdist_filename(PACKAGE, "1.0")).unlink()
    assert sdist.fetch_sdist(PACKAGE, "1.0").read_bytes() == data  # from the cache now


def test_a_download_with_the_wrong_sha256_is_never_cached(simple_index: Path) -> None:
    publish(simple_index, "1.0", V1, sha256="0" * 64)
    with pytest.raises(EnvironmentFailure):
        sdist.fetch_sdist(PACKAGE, "1.0")
    assert not (Path(os.environ["PATCHCTL_CACHE"]) / "sdists" / sdist.sdist_filename(PACKAGE, "1.0")).exists()
