"""Source archives rebuilt from the upstream's git repository, to remake a checksum that a
downstream's manifest records (`patchctl.project.manifests.Archive`):

    github       GitHub's /archive/REF.tar.gz and codeload.github.com/O/R/tar.gz/REF: `git archive`
                 of the commit under PREFIX/, through `gzip -n`; GitHub has served these bytes
                 unchanged (btop 1.4.6 and 1.4.7, snappy 1.2.1 and 1.2.2 rebuilt here digest for digest)
    openwrt-git  OpenWrt's tarball of a git checkout (include/download.mk, DownloadMethod/rawgit and
                 dl_tar_pack): the `git archive` tree (core.abbrev 8) extracted under SUBDIR as a
                 user does (modes 644/755), packed with GNU tar `--numeric-owner --owner=0 --group=0
                 --mode=a-s --sort=name --mtime=@COMMIT-TIME`, through `gzip -nc`, `xz -zc -7e`,
                 `zstd -T0 --ultra -20 -c` or `bzip2 -c`

The bytes of a compressor's output can change between its versions (zstd's do), so a digest is
only trusted when this machine remakes the downstream's current one first (`remakes`): see
`patchctl.loop.versionpin`. Nothing here is written to the repository.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from .. import git
from ..confined import Root, scratch
from ..project.manifests import Archive
from ..upstream.store import prefetch_blobs

_COMPRESSORS = {
    "gz": ["gzip", "-nc"],
    "xz": ["xz", "-zc", "-7e"],
    "zst": ["zstd", "-T0", "--ultra", "-20", "-c", "-q"],
    "bz2": ["bzip2", "-c"],
}
MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024  # an uncompressed source tree patchctl is willing to pack


class CannotRebuild(Exception):  # noqa: N818 - a reason, said in the report's "to refresh" line
    """This machine cannot rebuild the archive (a tool is missing, the tree holds submodules)."""


def digest(repo: Path, commit: str, archive: Archive) -> str:
    """The sha256 of ARCHIVE of COMMIT, rebuilt from the git repository REPO."""
    tar = _git_archive(repo, commit, archive.prefix if archive.kind == "github" else None)
    if archive.kind == "github":
        return hashlib.sha256(_compress(tar, "gz")).hexdigest()
    if archive.kind == "openwrt-git":
        packed = _openwrt_tar(repo, commit, tar, archive.prefix)
        return hashlib.sha256(_compress(packed, archive.compression)).hexdigest()
    raise CannotRebuild(f"unknown archive kind {archive.kind!r}")


def _git_archive(repo: Path, commit: str, prefix: str | None) -> bytes:
    files = git.run(["ls-tree", "-r", "-z", "--name-only", commit], repo).stdout.split("\0")
    prefetch_blobs(repo, commit, [f for f in files if f])
    if ".gitmodules" in files and prefix is None:
        raise CannotRebuild("the tree has git submodules, which OpenWrt's tarball includes")
    args = ["-c", "core.abbrev=8", "archive", "--format=tar"] + ([f"--prefix={prefix}/"] if prefix else []) + [commit]
    return git.run(args, repo, binary=True).stdout  # type: ignore[return-value]


def _openwrt_tar(repo: Path, commit: str, tar: bytes, subdir: str) -> bytes:
    """OpenWrt's dl_tar_pack of the checkout of COMMIT (TAR: its `git archive`), under SUBDIR."""
    gnu_tar = shutil.which("tar")
    if gnu_tar is None or "GNU tar" not in _run([gnu_tar, "--version"], b"", None).decode(errors="replace"):
        raise CannotRebuild("OpenWrt packs with GNU tar, which this machine lacks")
    if not subdir or "/" in subdir or subdir in (".", ".."):
        raise CannotRebuild(f"not a directory name: {subdir!r}")
    seconds = git.run(["show", "-s", "--format=%ct", commit], repo).stdout.strip()
    import tarfile  # here: only a manifest's checksum needs it (start-up, tests/patchctl/test_startup.py)

    from ..confined import tar as confined_tar

    with scratch.directory("patchctl-archive-") as work:
        root = Root(work, "a scratch directory")
        root.mkdirs(subdir)
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            # Files and links through the layer's extraction (644, or 755 for what git records as
            # executable); git archive's directories are made on the way.
            entries = [confined_tar.Entry(m, f"{subdir}/{m.name}") for m in archive.getmembers() if not m.isdir()]
            try:
                confined_tar.extract(archive, entries, work)
            except confined_tar.UnsafeMember as exc:
                raise CannotRebuild(f"the tree holds what a safe extraction refuses ({exc})") from None
        # Directories 755, as a user's `tar -x` under umask 022 makes them, whatever this umask.
        top = PurePosixPath(".")
        directories = {parent for entry in entries for parent in PurePosixPath(entry.name).parents if parent != top}
        for directory in sorted(directories | {PurePosixPath(subdir)}):
            with root.directory(directory, "write") as opened:
                os.fchmod(opened.fd, 0o755)
        command = [gnu_tar, "--numeric-owner", "--owner=0", "--group=0", "--mode=a-s", "--sort=name"]
        return _run([*command, f"--mtime=@{seconds}", "-c", subdir], b"", str(work))


def _compress(data: bytes, compression: str) -> bytes:
    command = _COMPRESSORS.get(compression)
    if command is None or shutil.which(command[0]) is None:
        raise CannotRebuild(f"no {command[0] if command else compression} on this machine")
    return _run(command, data, None)


def _run(command: list[str], data: bytes, cwd: str | None) -> bytes:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
    try:
        proc = subprocess.run(command, input=data, capture_output=True, cwd=cwd, env=env, check=False)
    except OSError as exc:
        raise CannotRebuild(f"{command[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        raise CannotRebuild(f"{command[0]} failed: {proc.stderr.decode(errors='replace').strip()[:200]}")
    if len(proc.stdout) > MAX_ARCHIVE_BYTES:
        raise CannotRebuild(f"the archive is larger than {MAX_ARCHIVE_BYTES // 2**30} GiB")
    return proc.stdout
