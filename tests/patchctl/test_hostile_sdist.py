"""`pypi-sdist:` upstreams fetch archives only: never pip, never package code, always sha256.

A local PEP 503 simple index (file:// URLs in a temporary directory) serves a hostile sdist
whose setup.py writes a marker file; the marker must never appear, on success or on any
failure path, and nothing may be written outside the sandbox's cache and project.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import textwrap
from pathlib import Path

import pytest

from patchctl import git
from patchctl.upstream import sdist

from .conftest import Project, Repo

PACKAGE = "hostile-pkg"
VERSION = "1.0"
URL = f"pypi-sdist:{PACKAGE}?versions={VERSION}&subdir=vendor/lib"


def build_sdist(marker: Path, extra: list[tuple[tarfile.TarInfo, bytes | None]] = ()) -> bytes:
    top = f"hostile_pkg-{VERSION}"
    setup_py = textwrap.dedent(
        f"""\
        open({str(marker)!r}, "w").write("package code ran")
        from setuptools import setup
        setup(name={PACKAGE!r}, version={VERSION!r})
        """
    ).encode()
    files = {
        f"{top}/setup.py": setup_py,
        f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n".encode(),
        f"{top}/vendor/lib/src/main.c": b"int main(void) { return 0; }\n",
        f"{top}/vendor/lib/tools/run.sh": b"#!/bin/sh\n",
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
        for info, data in extra:
            info.name = f"{top}/vendor/lib/{info.name}" if not info.name.startswith(("/", "..")) else info.name
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


class Index:
    """A PEP 503 simple index (and a JSON API beside it) in a directory, served as file:// URLs."""

    def __init__(self, root: Path):
        self.root = root
        self.simple = root / "simple" / PACKAGE
        self.simple.mkdir(parents=True)
        self.files = root / "files"
        self.files.mkdir()

    @property
    def url(self) -> str:
        return (self.root / "simple").as_uri() + "/"

    def publish(self, data: bytes, *, digest: str | None = "auto", json_digest: str | None = None) -> None:
        name = f"hostile_pkg-{VERSION}.tar.gz"
        (self.files / name).write_bytes(data)
        sha = hashlib.sha256(data).hexdigest() if digest == "auto" else digest
        fragment = f"#sha256={sha}" if sha else ""
        (self.simple / "index.html").write_text(f'<a href="{(self.files / name).as_uri()}{fragment}">{name}</a>\n')
        if json_digest is not None:
            api = self.root / "pypi" / PACKAGE / VERSION
            api.mkdir(parents=True, exist_ok=True)
            entry = {"filename": name, "url": (self.files / name).as_uri(), "digests": {"sha256": json_digest}}
            (api / "json").write_text(json.dumps({"urls": [entry]}))


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATCHCTL_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def index(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> Index:
    index = Index(sandbox / "index")
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    return index


def snapshot(root: Path, skip: tuple[str, ...] = ("cache",)) -> set[str]:
    """Every path under ROOT but SKIP, .git and the project lock (`apply` takes it before anything else)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.relative_to(root).parts[0] not in skip
        and ".git" not in p.relative_to(root).parts
        and p.relative_to(root).parts[-1] != ".patchctl"
        and p.relative_to(root).parts[-2:] != (".patchctl", "lock")
    }


def project_on_sdist(sandbox: Path, pin: str) -> Project:
    upstream = Repo(sandbox / "unused-upstream")
    project = Project(sandbox / "project", upstream, pin)
    text = (project.path / "matrix.yaml").read_text().replace(f"url: {upstream.path}", f'url: "{URL}"')
    # No patches: the upstream is what these tests are about (fail closed needs the empty series declared).
    text = text.replace("dir: patches/main\n", "dir: patches/main\n    allow_empty: true\n")
    (project.path / "matrix.yaml").write_text(text)
    return project


def test_sdist_is_fetched_verified_and_unpacked_without_running_package_code(sandbox: Path, index: Index) -> None:
    marker = sandbox / "marker"
    index.publish(build_sdist(marker))
    repo = sdist.materialize(URL)
    listing = git.run(["ls-tree", "-r", "--name-only", f"v{VERSION}"], repo).stdout.split()
    assert listing == ["src/main.c", "tools/run.sh"]
    mode = git.run(["ls-tree", f"v{VERSION}", "tools/run.sh"], repo).stdout.split()[0]
    assert mode == "100755"
    assert not marker.exists()


def test_apply_on_an_sdist_upstream_end_to_end(sandbox: Path, index: Index, cli) -> None:
    marker = sandbox / "marker"
    index.publish(build_sdist(marker))
    pin = git.rev_parse(sdist.materialize(URL), f"v{VERSION}")
    project = project_on_sdist(sandbox, pin)
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 0, result.output
    assert (project.path / ".patchctl/trees/main/src/main.c").exists()
    assert not marker.exists()


def _hostile(name: str, kind: bytes, **fields) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    data = None
    if kind == tarfile.REGTYPE:
        data = b"owned\n"
        info.size = len(data)
    return info, data


def _chain(climb: int = 4) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """s1 first, while d0..d3 do not exist yet (its target then reads as inside), then the links
    d0..d3 -> `.` that make it climb CLIMB levels."""
    target = "d0/d1/d2/d3/" + "../" * climb
    return [_hostile("s1", tarfile.SYMTYPE, linkname=target)] + [
        _hostile(f"d{k}", tarfile.SYMTYPE, linkname=".") for k in range(4)
    ]


FAILURES = {
    "no file on the index": dict(publish=False),
    "no digest": dict(digest=None),
    "wrong digest": dict(digest="0" * 64),
    "wrong JSON digest after a digest-less simple index": dict(digest=None, json_digest="1" * 64),
    "symlink out of the tree": dict(extra=[_hostile("evil", tarfile.SYMTYPE, linkname="../../../../../../etc")]),
    "absolute symlink": dict(extra=[_hostile("evil", tarfile.SYMTYPE, linkname="/etc/passwd")]),
    "write through a symlink": dict(
        extra=[_hostile("up", tarfile.SYMTYPE, linkname="."), _hostile("up/../../../escaped", tarfile.REGTYPE)]
    ),
    "dir symlink then file below it": dict(
        extra=[_hostile("d", tarfile.SYMTYPE, linkname="src/.."), _hostile("d/../x", tarfile.REGTYPE)]
    ),
    # Each link stays inside read alone; through one another s1 climbs four levels, to the sandbox.
    "chain of links out of the tree": dict(extra=_chain() + [_hostile("s1/made-outside/f", tarfile.REGTYPE)]),
    "chain of links, no file below it": dict(extra=_chain()),
    "symlink loop": dict(
        extra=[
            _hostile("a", tarfile.SYMTYPE, linkname="b"),
            _hostile("b", tarfile.SYMTYPE, linkname="a"),
            _hostile("a/x", tarfile.REGTYPE),
        ]
    ),
    "link to the root": dict(extra=[_hostile("root", tarfile.SYMTYPE, linkname="/")]),
    "link to the root by dots": dict(extra=_chain(climb=40)),
    "link into .git": dict(extra=[_hostile("hooks", tarfile.SYMTYPE, linkname="src/../.git/hooks")]),
    "a .GIT directory": dict(extra=[_hostile(".GIT/hooks/pre-commit", tarfile.REGTYPE)]),
    "device file": dict(extra=[_hostile("dev", tarfile.CHRTYPE, devmajor=1, devminor=3)]),
    "hard link": dict(extra=[_hostile("hard", tarfile.LNKTYPE, linkname="/etc/passwd")]),
    "fifo": dict(extra=[_hostile("fifo", tarfile.FIFOTYPE)]),
    "corrupt archive": dict(corrupt=True),
}


@pytest.mark.parametrize("case", list(FAILURES), ids=list(FAILURES))
def test_every_failure_is_one_line_exit_3_and_runs_no_package_code(case: str, sandbox: Path, index: Index, cli) -> None:
    spec = FAILURES[case]
    marker = sandbox / "marker"
    data = build_sdist(marker, spec.get("extra", []))
    if spec.get("corrupt"):
        data = data[: len(data) // 2]
    if spec.get("publish", True):
        index.publish(data, digest=spec.get("digest", "auto"), json_digest=spec.get("json_digest"))
    project = project_on_sdist(sandbox, "a" * 40)
    before, project_before = snapshot(sandbox), project.snapshot()
    result = cli("-C", project.path, "apply")
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patchctl: error:"), result.output
    assert "Traceback" not in result.output
    assert not marker.exists()
    assert snapshot(sandbox) == before and project.snapshot() == project_before
    assert not list((sandbox / "cache").glob("sdist-repos/*/HEAD"))  # no half-built repository kept
