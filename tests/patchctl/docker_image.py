"""A local C++ toolchain image for the docker-runner tests, built without any registry.

No image registry is reachable from the test machines, so the image is made from a
Debian rootfs: `debootstrap --variant=minbase --include=g++` into a scratch directory,
packed with tar and loaded with `docker import`. That takes a few minutes, so it happens
once per Docker engine: the image is reused whenever the engine already has the tag, and
the build runs under a file lock so that parallel pytest-xdist workers wait for one build
instead of racing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import NoReturn

import docker
import pytest
from docker.errors import DockerException, ImageNotFound
from filelock import FileLock

# `.ci/run` starts an engine and sets this: there a test that finds none fails instead of skipping.
REQUIRE_ENV = "PATCHCTL_REQUIRE_DOCKER"

TOOLCHAIN_IMAGE = "patchctl-toolchain:bookworm"
# The same with CMake and make: what the canary's compile tests build CMake projects with.
CMAKE_TOOLCHAIN_IMAGE = "patchctl-toolchain-cmake:bookworm"
PACKAGES = {TOOLCHAIN_IMAGE: ("g++",), CMAKE_TOOLCHAIN_IMAGE: ("g++", "cmake", "make")}
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("PATCHCTL_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# Shared by every worker and every run on the machine (tests point PATCHCTL_CACHE at tmp dirs).
LOCK_PATH = Path(tempfile.gettempdir()) / "patchctl-toolchain-image.lock"
BUILD_TIMEOUT_S = 1800
# Nothing the compiler needs lives here; dropping it makes the image a third smaller.
PRUNED = ("var/cache/apt/archives", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info")


class ToolchainUnavailable(Exception):
    """The image cannot be built here; the message says why (used as a skip reason)."""


def engine_problem() -> str | None:
    """Why no Docker engine is reachable, or None when one answers a ping."""
    try:
        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except DockerException as exc:
        return f"no reachable Docker engine ({str(exc).splitlines()[0][:160]})"
    return None


def unavailable(reason: str) -> NoReturn:
    """Skip with REASON on a machine without Docker (the README's test command there); fail
    where PATCHCTL_REQUIRE_DOCKER=1 (CI, whose `.ci/run` starts an engine): the one place every
    Docker test decides."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


def require_engine(what: str) -> None:
    """`unavailable` unless a Docker engine answers; WHAT names the tests that need it."""
    problem = engine_problem()
    if problem:
        unavailable(f"{what} need a Docker engine: {problem}")


def has_image(client: docker.DockerClient, tag: str = TOOLCHAIN_IMAGE) -> bool:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def ensure_toolchain_image(client: docker.DockerClient, tag: str = TOOLCHAIN_IMAGE) -> str:
    """TAG in the engine, building it first when it is missing. Returns TAG."""
    if has_image(client, tag):
        return tag
    with FileLock(str(LOCK_PATH), timeout=BUILD_TIMEOUT_S):  # one lock for every tag: one debootstrap at a time
        if not has_image(client, tag):  # another worker may have built it while we waited
            _build(client, tag)
    return tag


def _build(client: docker.DockerClient, tag: str) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ToolchainUnavailable(f"{tag} is not built and debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise ToolchainUnavailable(f"{tag} is not built and debootstrap needs root to build it")
    with tempfile.TemporaryDirectory(prefix="patchctl-rootfs-", dir="/var/tmp") as scratch:
        rootfs = Path(scratch) / "rootfs"
        proc = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                "--include=" + ",".join(PACKAGES.get(tag, ("g++",))),
                DEBIAN_SUITE,
                str(rootfs),
                DEBIAN_MIRROR,
            ],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-5:])
            raise ToolchainUnavailable(f"debootstrap of {DEBIAN_SUITE} failed (exit {proc.returncode}): {tail}")
        for pruned in PRUNED:
            target = rootfs / pruned
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
        archive = Path(scratch) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            for entry in sorted(rootfs.iterdir()):
                tar.add(entry, arcname=entry.name)
        repository, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(archive),
            repository=repository,
            tag=version or "latest",
            changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "WORKDIR /"],
        )
    if not has_image(client, tag):
        raise ToolchainUnavailable(f"docker import did not produce {tag}")
