"""`canary --compile` for real: a CMake upstream, toolchain images in a real Docker engine
(one used as it is, one built from a toolchain Dockerfile), and one upstream commit that
breaks the build: the report names that commit per toolchain and quotes the log's tail."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from .conftest import Project, Repo, make_patch
from .docker_image import (
    CMAKE_TOOLCHAIN_IMAGE,
    ToolchainUnavailable,
    ensure_toolchain_image,
    require_engine,
    unavailable,
)

pytestmark = pytest.mark.docker

BUILD = "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build"
CMAKE = "cmake_minimum_required(VERSION 3.16)\nproject(up C)\nadd_library(up src/a.c src/b.c{extra})\n"


@pytest.fixture(scope="session")
def cmake_image() -> str:
    require_engine("canary compile tests")
    import docker

    client = docker.from_env()
    try:
        return ensure_toolchain_image(client, CMAKE_TOOLCHAIN_IMAGE)
    except ToolchainUnavailable as exc:
        unavailable(f"cannot build the CMake toolchain image: {exc}")
    finally:
        client.close()


def write_project(project: Project, upstream: Repo, pin: str, toolchains: str, *, empty_series: bool = False) -> None:
    (project.path / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              up: {{url: {upstream.path}, branch: main, pin: '{pin}'}}
            series:
              main: {{upstream: up, dir: patches/main{", allow_empty: true" if empty_series else ""}}}
            canary:
              upstream: up
              toolchains:
            """
        )
        + textwrap.indent(textwrap.dedent(toolchains), "    ")
    )


@pytest.fixture
def cmake_upstream(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "cmake-upstream")
    repo.commit(
        {
            "CMakeLists.txt": CMAKE.format(extra=""),
            "src/a.c": "int a(void) { return 1; }\n",
            "src/b.c": "int b(void) { return 2; }\n",
        },
        "initial",
    )
    return repo


def test_compile_break_is_bisected_per_toolchain_to_the_commit_that_breaks_the_build(
    project: Project, cmake_upstream: Repo, cli, cmake_image: str, tmp_path: Path
) -> None:
    upstream = cmake_upstream
    pin = upstream.head
    project.add_patch(
        "0001-add-hello.patch",
        make_patch(
            upstream,
            pin,
            {"CMakeLists.txt": CMAKE.format(extra=" src/hello.c"), "src/hello.c": "int hello(void) { return 42; }\n"},
            "Add hello",
        ),
    )
    (project.path / "toolchain").mkdir()
    (project.path / "toolchain" / "Dockerfile").write_text(
        "ARG BASE_IMAGE=scratch\nFROM ${BASE_IMAGE}\nRUN mkdir -p /opt/canary && echo built > /opt/canary/marker\n"
    )
    write_project(
        project,
        upstream,
        pin,
        f"""\
        - name: plain
          tag-suffix: -cpu-up
          cuda-major-version: ''
          image: {cmake_image}
          command: {BUILD}
        - name: built
          tag-suffix: -cpu-up
          cuda-major-version: ''
          image: {cmake_image}
          dockerfile: toolchain/Dockerfile
          command: test -s /opt/canary/marker && {BUILD}
        """,
    )
    upstream.commit({"src/a.c": "int a(void) { return 1; }\nint a2(void) { return 3; }\n"}, "Unrelated one")
    breaking = upstream.commit({"src/b.c": "int b(void) { return no_such_symbol; }\n"}, "Break b")
    upstream.commit({"src/a.c": "int a(void) { return 4; }\n"}, "Unrelated two")
    upstream.commit({"src/a.c": "int a(void) { return 5; }\n"}, "Unrelated three")
    out, issues_file = tmp_path / "canary.json", tmp_path / "issues.json"

    result = cli(
        "-C",
        project.path,
        "canary",
        "--compile",
        "--json-file",
        out,
        "--issues",
        issues_file,
        "--work-dir",
        tmp_path / "w",
    )
    assert result.exit_code == 1, result.output
    payload = json.loads(out.read_text())
    assert all(p["verdict"] == "ok" for p in payload["series"][0]["patches"])  # an apply-clean, compile-only break
    records = {r["toolchain"]: r for r in payload["compiles"]}
    assert set(records) == {"plain", "built"}
    for name, record in records.items():
        assert record["state"] == "failed", (name, record)
        assert record["breaking_commit"] == {"sha": breaking, "subject": "Break b"}, (name, record)
        assert "no_such_symbol" in record["log_tail"] and "error" in record["log_tail"]
    assert records["built"]["image"] == "patchctl-canary-built:local"
    # The bisect compiled only b.c at each probe, in the image (no ccache there), then two full builds confirmed.
    for record in records.values():
        bisect = record["bisect"]
        assert bisect["method"] == "probe" and bisect["units"] == ["src/b.c"] and bisect["full_builds"] == 2, record
        assert bisect["compiler_cache"].startswith("none: the build environment has no ccache")
    probe_log = tmp_path / "w" / "logs" / "plain" / "main" / "bisect" / f"{breaking[:12]}-probe" / "probe.log"
    assert "patchctl probe: src/b.c" in probe_log.read_text() and "no_such_symbol" in probe_log.read_text()
    # bisect rebuilt incrementally in the tip's tree: CMake identified the compiler only once
    probes = sorted((tmp_path / "w" / "logs" / "plain" / "main" / "bisect").rglob("*.log"))
    assert probes and not any("The C compiler identification" in p.read_text() for p in probes)
    assert f"`{breaking[:12]}` `Break b`" in result.stdout and "tail of the failing build log" in result.stdout
    issues = json.loads(issues_file.read_text())
    assert [i["key"] for i in issues] == [f"up/compile/plain/main/{breaking}", f"up/compile/built/main/{breaking}"]
    assert (
        "no_such_symbol" in issues[0]["body"]
        and "<!-- patchctl-canary-key: up/compile/plain/main/" in issues[0]["body"]
    )


def test_a_toolchain_image_that_cannot_be_pulled_is_exit_3(
    project: Project, cmake_upstream: Repo, cli, cmake_image: str, tmp_path: Path
) -> None:
    write_project(
        project,
        cmake_upstream,
        cmake_upstream.head,
        f"""\
        - name: missing
          tag-suffix: -cpu-up
          cuda-major-version: ''
          image: patchctl-no-such-image:1
          command: {BUILD}
        """,
        empty_series=True,  # the toolchain fails before any patch matters
    )
    result = cli("-C", project.path, "canary", "--compile", "--work-dir", tmp_path / "w")
    assert result.exit_code == 3, result.output
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("patchctl: error: docker image 'patchctl-no-such-image:1' is not in the engine and pulling")


def test_a_toolchain_dockerfile_that_fails_to_build_is_exit_3(
    project: Project, cmake_upstream: Repo, cli, cmake_image: str, tmp_path: Path
) -> None:
    (project.path / "toolchain").mkdir()
    (project.path / "toolchain" / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN exit 7\n")
    write_project(
        project,
        cmake_upstream,
        cmake_upstream.head,
        f"""\
        - name: broken-image
          tag-suffix: -cpu-up
          cuda-major-version: ''
          image: {cmake_image}
          dockerfile: toolchain/Dockerfile
          command: {BUILD}
        """,
        empty_series=True,  # the toolchain fails before any patch matters
    )
    result = cli("-C", project.path, "canary", "--compile", "--work-dir", tmp_path / "w")
    assert result.exit_code == 3, result.output
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("patchctl: error: docker build of patchctl-canary-broken-image:local from ")
