"""The build runners compile real C++ files: locally, and in a Docker container."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from patchctl.errors import EnvironmentFailure
from patchctl.loop.runners import CONTAINER_LABEL, run_build
from patchctl.project.config import BuildStep

from .docker_image import ToolchainUnavailable, ensure_toolchain_image, require_engine, unavailable
from .fixtures_sync import add_hello_patch, load_json, write_config

HELLO_CPP = """\
#include <iostream>
#include <vector>
#include <numeric>
int main() {
    std::vector<int> v(10);
    std::iota(v.begin(), v.end(), 1);
    std::cout << "sum=" << std::accumulate(v.begin(), v.end(), 0) << std::endl;
    return 0;
}
"""
BROKEN_CPP = "int main() { return undeclared_name; }\n"
COMPILE_AND_RUN = "g++ -O0 -o hello hello.cpp && ./hello"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "hello.cpp").write_text(HELLO_CPP)
    return tree


# ---------------------------------------------------------------- local


def test_local_runner_compiles_and_streams_the_log(tree: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "logs" / "build.log"
    result = run_build(BuildStep("hello", COMPILE_AND_RUN, env=(("EXTRA", "x"),)), tree, log, progress=lines.append)
    assert result.ok, log.read_text()
    assert result.returncode == 0 and not result.timed_out and result.runner == "local"
    assert (tree / "hello").is_file() and os.access(tree / "hello", os.X_OK)
    assert "sum=55" in log.read_text()
    assert "sum=55" in lines
    assert result.log_path == log


def test_local_runner_reports_a_compile_error_and_keeps_the_log(tree: Path, tmp_path: Path) -> None:
    (tree / "hello.cpp").write_text(BROKEN_CPP)
    log = tmp_path / "build.log"
    result = run_build(BuildStep("broken", "g++ -c hello.cpp -o hello.o"), tree, log)
    assert not result.ok and result.returncode not in (0, None) and not result.timed_out
    assert "undeclared_name" in log.read_text()
    assert f"exit {result.returncode}" in result.reason


def test_local_runner_timeout_kills_the_whole_process_group(tree: Path, tmp_path: Path) -> None:
    # A child that outlives its shell would keep a real build running after the timeout.
    command = "sleep 60 & echo $! > child.pid; echo started; wait"
    start = time.monotonic()
    result = run_build(BuildStep("hang", command, timeout=1), tree, tmp_path / "hang.log")
    assert time.monotonic() - start < 15
    assert result.timed_out and not result.ok and result.returncode is None
    assert "started" in result.log_path.read_text()
    assert "timed out after 1 s" in result.log_path.read_text()
    child = int((tree / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the build's child process survived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


# ---------------------------------------------------------------- docker


@pytest.fixture(scope="session")
def toolchain_image() -> str:
    require_engine("docker runner tests")
    import docker

    client = docker.from_env()
    try:
        return ensure_toolchain_image(client)
    except ToolchainUnavailable as exc:
        unavailable(f"cannot build the toolchain image: {exc}")
    finally:
        client.close()


def _containers_named(name: str) -> list:
    import docker

    client = docker.from_env()
    try:
        return [c for c in client.containers.list(all=True, filters={"name": name}) if c.name == name]
    finally:
        client.close()


@pytest.mark.docker
def test_docker_runner_compiles_in_the_image_as_the_invoking_user(
    toolchain_image: str, tree: Path, tmp_path: Path
) -> None:
    lines: list[str] = []
    step = BuildStep(
        "hello",
        f"{COMPILE_AND_RUN} && id -u > uid.txt && g++ --version | head -n 1",
        runner="docker",
        image=toolchain_image,
    )
    result = run_build(step, tree, tmp_path / "docker.log", progress=lines.append)
    log = result.log_path.read_text()
    assert result.ok, log
    assert result.runner == "docker" and result.returncode == 0
    assert "sum=55" in log and "sum=55" in lines
    assert "(Debian 12" in log  # the image's compiler ran, from bookworm
    assert (tree / "uid.txt").read_text().strip() == str(os.getuid())
    assert (tree / "hello").stat().st_uid == os.getuid()
    assert result.container and _containers_named(result.container) == []


@pytest.mark.docker
def test_docker_runner_reports_a_compile_error(toolchain_image: str, tree: Path, tmp_path: Path) -> None:
    (tree / "hello.cpp").write_text(BROKEN_CPP)
    result = run_build(
        BuildStep("broken", "g++ -c hello.cpp", runner="docker", image=toolchain_image), tree, tmp_path / "b.log"
    )
    assert not result.ok and result.returncode not in (0, None)
    assert "undeclared_name" in result.log_path.read_text()
    assert _containers_named(result.container) == []


@pytest.mark.docker
def test_docker_runner_timeout_removes_the_container(toolchain_image: str, tree: Path, tmp_path: Path) -> None:
    step = BuildStep("hang", "echo started; sleep 120", runner="docker", image=toolchain_image, timeout=2)
    start = time.monotonic()
    result = run_build(step, tree, tmp_path / "hang.log")
    assert time.monotonic() - start < 30
    assert result.timed_out and not result.ok
    assert "started" in result.log_path.read_text()
    assert result.container and _containers_named(result.container) == []


@pytest.mark.docker
def test_docker_runner_names_a_missing_image(toolchain_image: str, tree: Path, tmp_path: Path) -> None:
    step = BuildStep("hello", COMPILE_AND_RUN, runner="docker", image="patchctl-no-such-image:1")
    with pytest.raises(EnvironmentFailure, match="patchctl-no-such-image:1"):
        run_build(step, tree, tmp_path / "x.log")


def test_docker_runner_without_an_engine_is_an_environment_failure(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    step = BuildStep("hello", COMPILE_AND_RUN, runner="docker", image="anything:1")
    with pytest.raises(EnvironmentFailure, match=r"no reachable Docker engine at tcp://127\.0\.0\.1:9") as info:
        run_build(step, tree, tmp_path / "x.log")
    assert info.value.exit_code == 3


@pytest.fixture(autouse=True)
def _sigint_raises_keyboard_interrupt():
    """A process started in the background (CI harnesses, `cmd &`) inherits SIGINT ignored;
    restore what an interactive run has, so Ctrl-C behaves as at a terminal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_after(seconds: float) -> threading.Timer:
    """Ctrl-C as the terminal sends it: SIGINT to this process, raised in the main thread."""
    timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_local_runner_ctrl_c_kills_the_build(tree: Path, tmp_path: Path) -> None:
    timer = _interrupt_after(1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_build(BuildStep("hang", "sleep 60 & echo $! > child.pid; wait", timeout=60), tree, tmp_path / "i.log")
    finally:
        timer.cancel()
    child = int((tree / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.docker
def test_docker_runner_ctrl_c_removes_the_container(toolchain_image: str, tree: Path, tmp_path: Path) -> None:
    import docker

    step = BuildStep("hang-ctrl-c", "echo started; sleep 120", runner="docker", image=toolchain_image, timeout=120)
    timer = _interrupt_after(2.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_build(step, tree, tmp_path / "i.log")
    finally:
        timer.cancel()
    client = docker.from_env()
    try:
        left = client.containers.list(all=True, filters={"label": f"{CONTAINER_LABEL}=hang-ctrl-c"})
    finally:
        client.close()
    assert "started" in (tmp_path / "i.log").read_text()  # the container really ran before Ctrl-C
    assert left == []


# ---------------------------------------------------------------- through the CLI

CANARY_TOOLCHAIN = """\
canary:
  upstream: up
  toolchains:
    - name: bookworm
      tag-suffix: -cpu-test
      cuda-major-version: ''
      image: {image}
    - name: other
      tag-suffix: -cpu-other
      cuda-major-version: ''
      image: patchctl-never-pulled:1
"""


def _canary_project(project, upstream, image: str) -> None:
    add_hello_patch(project, upstream, upstream.head, name="0001-add-hello.patch")
    write_config(
        project,
        upstream.head,
        series_extra="build:\n  - name: cc\n    command: g++ -x c++ -o hello-bin src/hello.c && ./hello-bin\n",
        tail=CANARY_TOOLCHAIN.format(image=image),
    )


def test_cli_without_a_docker_engine_exits_3_with_one_line(
    project, upstream, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _canary_project(project, upstream, "patchctl-toolchain:bookworm")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    result = cli("-C", project.path, "canary", "--compile", "--work-dir", project.path.parent / "work")
    assert result.exit_code == 3
    assert result.stderr.startswith("patchctl: error: no reachable Docker engine at tcp://127.0.0.1:9: ")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


@pytest.mark.docker
def test_canary_compiles_once_per_toolchain_in_its_image(
    toolchain_image: str, project, upstream, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _canary_project(project, upstream, toolchain_image)
    upstream.commit({"src/util.c": "x\n"}, "Drift")
    out = project.path.parent / "canary.json"
    monkeypatch.setenv("PATCHCTL_CANARY_TOOLCHAIN", "bookworm")  # as the per-toolchain CI job sets it
    result = cli(
        "-C", project.path, "canary", "--compile", "--json-file", out, "--work-dir", project.path.parent / "work"
    )
    assert result.exit_code == 0, result.output
    [record] = load_json(out)["compiles"]
    assert record["toolchain"] == "bookworm" and record["image"] == toolchain_image and record["state"] == "passed"
    assert record["steps"][0]["runner"] == "docker"
    assert "hello 42" in Path(record["steps"][0]["log"]).read_text()


@pytest.mark.docker
def test_canary_names_a_missing_toolchain_image(toolchain_image: str, project, upstream, cli) -> None:
    _canary_project(project, upstream, toolchain_image)
    result = cli("-C", project.path, "canary", "--compile", "--work-dir", project.path.parent / "work")
    assert result.exit_code == 3
    assert "docker image 'patchctl-never-pulled:1' is not in the engine" in result.stderr


def test_unknown_canary_toolchain_is_a_usage_error(project, upstream, cli) -> None:
    _canary_project(project, upstream, "patchctl-toolchain:bookworm")
    result = cli(
        "-C", project.path, "canary", "--compile", "--toolchain", "nope", "--work-dir", project.path.parent / "work"
    )
    assert result.exit_code == 2
    assert "unknown canary toolchain 'nope' (matrix.yaml declares: bookworm, other)" in result.stderr
