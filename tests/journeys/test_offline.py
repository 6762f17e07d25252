"""Offline after one online run, for every kind of upstream URL: a local path, a file:// URL,
a `pypi-sdist:` URL (its package index) and an https:// git host. Once `patchctl apply` has
run online, the upstream goes away (the path is moved, the servers stop) and the day's work
goes on from the cache: apply, lint (its strict-apply check), export --check, a fresh tree."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchctl import git
from patchctl.upstream import sdist
from tests.patchctl.conftest import Repo, make_patch, numbered
from tests.patchctl.test_sdist import make_sdist

from .servers import GitHost, PackageIndex
from .shell import User, downstream

pytestmark = pytest.mark.journey

KINDS = ["path", "file", "pypi-sdist", "https"]


@dataclass
class Upstream:
    url: str
    pin: str
    source: Repo  # a working repository with the pin, to write the patch against
    go_offline: Callable[[], None]
    env: dict[str, str]
    port: int | None = None  # where a server answered while online


def connection_refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return True
    return False


def local_upstream(kind: str, upstream: Repo, tmp_path: Path) -> Upstream:
    def move_away() -> None:
        upstream.path.rename(tmp_path / "moved-away")

    url = str(upstream.path) if kind == "path" else f"file://{upstream.path}"
    return Upstream(url, upstream.head, upstream, move_away, {})


def https_upstream(upstream: Repo, tmp_path: Path) -> Upstream:
    (tmp_path / "host").mkdir()
    host = GitHost(upstream.path, tmp_path / "host")
    return Upstream(host.url, upstream.head, upstream, host.stop, {"GIT_SSL_CAINFO": str(host.cert)}, host.port)


def sdist_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Upstream:
    files = {"vendor/up/src/main.c": numbered(40, "main"), "vendor/up/README.md": "# up\n"}
    archives = {version: make_sdist(tmp_path / f"demo-{version}.tar.gz", version, files) for version in ("1.0", "2.0")}
    index = PackageIndex(tmp_path / "index", "demo-pkg", archives)
    url = "pypi-sdist:demo-pkg?versions=1.0,2.0&subdir=vendor/up"
    # The commit ids do not depend on the machine or the cache: find the pin in a scratch cache.
    cache = os.environ["PATCHCTL_CACHE"]
    with monkeypatch.context() as scratch:
        scratch.setenv("PATCHCTL_CACHE", str(tmp_path / "scratch-cache"))
        scratch.setenv("PIP_INDEX_URL", index.url)
        built = sdist.materialize(url)
        pin = git.rev_parse(built, "v2.0")
        git.run(["clone", "-q", str(built), str(tmp_path / "sdist-clone")], tmp_path)
    assert os.environ["PATCHCTL_CACHE"] == cache
    source = Repo(tmp_path / "sdist-clone")
    return Upstream(url, pin, source, index.stop, {"PIP_INDEX_URL": index.url}, index.port)


@pytest.mark.parametrize("kind", KINDS)
def test_offline_after_one_online_run(kind: str, tmp_path: Path, upstream: Repo, user_in, monkeypatch) -> None:
    if kind == "https":
        up = https_upstream(upstream, tmp_path)
    elif kind == "pypi-sdist":
        up = sdist_upstream(tmp_path, monkeypatch)
    else:
        up = local_upstream(kind, upstream, tmp_path)
    main_c = git.run(["show", f"{up.pin}:src/main.c"], up.source.path).stdout
    patch = make_patch(up.source, up.pin, {"src/main.c": main_c.replace("main 5\n", "main five\n")}, "Tune main")
    project = downstream(tmp_path / "project", up.source, up.pin, patches={"0001-Tune-main.patch": patch})
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace(f"url: {up.source.path}", f"url: '{up.url}'"))
    git.commit_all(project.path, f"Follow the upstream at {up.url}")
    user: User = user_in(project.path)
    user.env.update(up.env)

    seen = user.ok("patchctl apply")  # the one online run
    assert seen.stdout.startswith(f"main: applied 1 patch(es) to {up.pin[:12]} in .patchctl/trees/main")

    up.go_offline()
    assert up.port is None or connection_refused(up.port)
    assert "(nothing to do)" in user.ok("patchctl apply").stdout
    assert user.ok("patchctl lint").stdout == "lint: no findings\n"  # PC009 applies the series from the cache
    assert user.ok("patchctl export --check main").stdout == "main: up to date (1 patches)\n"
    shutil.rmtree(project.path / ".patchctl" / "trees")  # a fresh tree, from the cache alone
    assert user.ok("patchctl apply").stdout.startswith(f"main: applied 1 patch(es) to {up.pin[:12]}")
    elsewhere = tmp_path / "elsewhere"
    assert user.ok(f"patchctl apply --into {elsewhere}").stdout.startswith("main: applied 1 patch(es)")
    assert "main five" in (elsewhere / "src/main.c").read_text()

    # What needs the network says so in one line, exit 3: a branch tip cannot come from the cache.
    # (A pypi-sdist URL lists its versions: its branch tip is in the cache, and the canary runs.)
    canary = f"patchctl canary --json-file {tmp_path / 'canary.json'}"
    if kind == "pypi-sdist":
        assert "## canary up: ✅ green" in user.ok(canary).stdout
    else:
        refused = user.fails(canary, 3)
        assert refused.stderr.startswith("patchctl: error: ") and len(refused.stderr.splitlines()) == 1
