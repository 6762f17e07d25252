"""Real patch series from Debian's archive, fetched at test time and never committed.

* rsync 3.2.7 (GPL-3): `rsync_3.2.7.orig.tar.gz` and `rsync_3.2.7-1+deb12u6.debian.tar.xz` from
  https://deb.debian.org/debian/pool/main/r/rsync/. Its `debian/patches/series` lists 7 quilt
  patches, then 53 `git format-patch` patches under `2026-05-20/` with numbering gaps (0051 and
  0054 are missing), capitals and format-patch slugs in their names.
* tar 1.34 (GPL-3): `tar_1.34+dfsg.orig.tar.xz` and `tar_1.34+dfsg-1.2+deb12u1.debian.tar.xz`
  from https://deb.debian.org/debian/pool/main/t/tar/: 7 patches in quilt `series` order:
  `Index:` diffs, a plain `---`/`+++` diff without any header, DEP-3 headers and mails.

Downloads are sha256-checked and cached under `$PATCHCTL_TEST_CACHE/test-data` (default
`~/.cache/patchctl/test-data`) behind a lock, so parallel workers fetch once. Without the
network and without a cached copy the tests skip, unless PATCHCTL_REQUIRE_NETWORK=1 (CI),
where they fail.

The upstream repositories are built from the orig tarballs with a fixed identity and fixed
dates, so their commit ids are the same on every machine.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchctl import git

from .conftest import real_cache_dir

POOL = "https://deb.debian.org/debian/pool/main"
RSYNC_ORIG = ("r/rsync/rsync_3.2.7.orig.tar.gz", "4e7d9d3f6ed10878c58c5fb724a67dacf4b6aac7340b13e488fb2dc41346f2bb")
RSYNC_DEBIAN = (
    "r/rsync/rsync_3.2.7-1+deb12u6.debian.tar.xz",
    "ebd4fc9d52a4638dd48316a9efed6fbf2b9014588fa07aa6f90bf17527cb8e1b",
)
TAR_ORIG = ("t/tar/tar_1.34+dfsg.orig.tar.xz", "7d57029540cb928394defb3b377b3531237c947e795b51aa8acac0c5ba0e4844")
TAR_DEBIAN = (
    "t/tar/tar_1.34+dfsg-1.2+deb12u1.debian.tar.xz",
    "e7cdc112e6810a0827b6081f6a4115eb630679a5f3d7cceffbc236d6b8d46d69",
)
RSYNC_SERIES_DIR = "2026-05-20"
TIMEOUT_S = 30


def data_dir() -> Path:
    return real_cache_dir() / "test-data"


@contextmanager
def _locked(name: str) -> Iterator[Path]:
    directory = data_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield directory


def _unreachable(reason: str) -> None:
    if os.environ.get("PATCHCTL_REQUIRE_NETWORK") == "1":
        pytest.fail(f"Debian's archive is unreachable and PATCHCTL_REQUIRE_NETWORK=1: {reason}")
    pytest.skip(f"Debian's archive is unreachable and nothing is cached: {reason}")


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        return response.read()


def fetch(pool_path: str, sha256: str, *, fallback: re.Pattern[str] | None = None) -> Path:
    """The archive file at POOL_PATH, sha256-checked and cached. With FALLBACK, a pinned file
    Debian has since removed from the pool is replaced by the newest file of the pool's
    directory listing whose name matches (unpinned: the tests using it must hold for any)."""
    name = pool_path.rsplit("/", 1)[1]
    with _locked(name) as directory:
        target = directory / name
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
            return target
        try:
            data = _get(f"{POOL}/{pool_path}")
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or fallback is None:
                _unreachable(f"{pool_path}: HTTP {exc.code}")
            return _fetch_newest(pool_path.rsplit("/", 1)[0], fallback, directory)
        except (urllib.error.URLError, OSError) as exc:
            _unreachable(f"{pool_path}: {exc}")
        if hashlib.sha256(data).hexdigest() != sha256:
            pytest.fail(f"{pool_path}: sha256 mismatch (expected {sha256})")
        tmp = target.with_suffix(target.suffix + ".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        return target


def _fetch_newest(pool_dir: str, pattern: re.Pattern[str], directory: Path) -> Path:
    cached = sorted(directory.glob("fallback-*"))
    try:
        listing = _get(f"{POOL}/{pool_dir}/").decode(errors="replace")
        names = sorted(set(pattern.findall(listing)), key=_debian_version_key)
        if not names:
            _unreachable(f"no file like {pattern.pattern} in {POOL}/{pool_dir}/")
        target = directory / f"fallback-{names[-1]}"
        if not target.is_file():
            target.write_bytes(_get(f"{POOL}/{pool_dir}/{names[-1]}"))
        return target
    except (urllib.error.URLError, OSError) as exc:
        if cached:
            return cached[-1]
        _unreachable(f"{pool_dir}: {exc}")
        raise


def _debian_version_key(name: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", name)]


def _extract(archive: Path, into: Path, *, strip: bool) -> None:
    """Extract ARCHIVE into INTO, dropping the top directory when STRIP (orig tarballs)."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if strip:
                parts = parts[1:]
            if not parts or member.issym() or member.islnk() or ".." in parts:
                continue
            target = into.joinpath(*parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                target.write_bytes(source.read())
                target.chmod(0o755 if member.mode & 0o100 else 0o644)


@dataclass(frozen=True)
class RealSeries:
    upstream: Path  # a git repository; its HEAD is the pin
    pin: str
    patches: dict[str, bytes]  # file name -> content, in series order
    quilt_names: list[str]  # the order as the series file gives it


def _build_upstream(repo: Path, orig: Path, pre_patches: list[tuple[str, bytes]]) -> str:
    """ORIG's tree as one commit, then each of PRE_PATCHES applied as one commit each."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git.init_repo(repo)
    _extract(orig, repo, strip=True)
    git.commit_all(repo, f"import {orig.name}")
    for name, data in pre_patches:
        git.run(["apply", "--index", "-"], repo, input=data)
        git.commit_all(repo, f"debian patch {name}")
    return git.rev_parse(repo, "HEAD")


def _debian_patches(archive: Path) -> tuple[list[str], dict[str, bytes]]:
    files: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith("debian/patches/"):
                source = tar.extractfile(member)
                assert source is not None
                files[member.name.removeprefix("debian/patches/")] = source.read()
    order = [line.split("#", 1)[0].strip() for line in files["series"].decode().splitlines()]
    return [name for name in order if name], files


def _cached_upstream(name: str, build) -> tuple[Path, str]:
    with _locked(f"{name}-repo") as directory:
        repo = directory / f"{name}-upstream"
        done = repo / ".git" / "patchctl-test-built"
        if done.is_file():
            return repo, done.read_text().strip()
        pin = build(repo)
        done.write_text(pin + "\n")
        return repo, pin


def rsync_series() -> RealSeries:
    """rsync's upstream (orig + Debian's 7 quilt patches) and its 53 format-patch patches."""
    orig = fetch(*RSYNC_ORIG)
    debian = fetch(*RSYNC_DEBIAN, fallback=re.compile(r"rsync_3\.2\.7-[0-9A-Za-z.+~]+\.debian\.tar\.xz"))
    order, files = _debian_patches(debian)
    first = next(i for i, n in enumerate(order) if n.startswith(f"{RSYNC_SERIES_DIR}/"))
    pre = order[:first]  # the patches after the numbered ones build on them: not part of the upstream
    numbered = [n for n in order if n.startswith(f"{RSYNC_SERIES_DIR}/")]
    tag = hashlib.sha256(debian.read_bytes()).hexdigest()[:12]
    repo, pin = _cached_upstream(f"rsync-{tag}", lambda r: _build_upstream(r, orig, [(n, files[n]) for n in pre]))
    patches = {n.removeprefix(f"{RSYNC_SERIES_DIR}/"): files[n] for n in numbered}
    return RealSeries(repo, pin, patches, list(patches))


def tar_series() -> RealSeries:
    """tar's upstream (the orig tree) and Debian's 7 patches in quilt order."""
    orig = fetch(*TAR_ORIG)
    debian = fetch(*TAR_DEBIAN)
    order, files = _debian_patches(debian)
    repo, pin = _cached_upstream("tar-1.34", lambda r: _build_upstream(r, orig, []))
    return RealSeries(repo, pin, {n: files[n] for n in order}, order)


def clone_upstream(series: RealSeries, into: Path) -> Path:
    """A private clone of the cached upstream that a test may add commits to."""
    git.run(["clone", "-q", "--no-hardlinks", str(series.upstream), str(into)], into.parent)
    git.run(["checkout", "-q", "-B", "main", series.pin], into)
    return into
