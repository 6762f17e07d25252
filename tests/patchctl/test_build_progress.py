"""Long builds say what they are doing: a real CMake build (ninja, and CMake's Makefiles) whose
status lines reach patchctl's progress output as "compiling 3/9 (33%)", with the log's path;
the engine's libllama build says the same on its own."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from patchctl.loop.runners import run_build
from patchctl.output import progress
from patchctl.project.config import BuildStep

from .conftest import Project, Repo, make_patch

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("make") and shutil.which("cc")),
    reason="needs cmake, ninja, make and a C compiler",
)

STAMP = r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] patchctl: "

# Two real compiles and six steps that each take a moment, so that a heartbeat falls inside the build.
CMAKELISTS = """\
cmake_minimum_required(VERSION 3.12)
project(small C)
foreach(i RANGE 1 6)
  add_custom_command(OUTPUT step${i}.txt
    COMMAND ${CMAKE_COMMAND} -E sleep 0.4
    COMMAND ${CMAKE_COMMAND} -E touch step${i}.txt)
  list(APPEND outputs step${i}.txt)
endforeach()
add_custom_target(steps ALL DEPENDS ${outputs})
add_library(small STATIC a.c b.c)
add_dependencies(small steps)
"""


def cmake_project(path: Path) -> Repo:
    repo = Repo(path)
    repo.commit(
        {"CMakeLists.txt": CMAKELISTS, "a.c": "int a(void) { return 1; }\n", "b.c": "int b(void) { return 2; }\n"},
        "a small CMake project",
    )
    return repo


@pytest.fixture
def reported(monkeypatch: pytest.MonkeyPatch):
    """patchctl's progress reporter, as off a terminal (CI logs), with a heartbeat every 0.2 s."""
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.2")
    stream = io.StringIO()
    progress.install(stream)
    try:
        yield stream
    finally:
        progress.uninstall()


def lines_of(output: io.StringIO | str) -> list[str]:
    text = output if isinstance(output, str) else output.getvalue()
    return [re.sub(STAMP, "", line) for line in text.splitlines()]


def test_build_status_lines_read_as_how_far_a_build_has_come() -> None:
    ninja = progress.build_progress("[12/340] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o")
    assert ninja is not None and ninja[0].describe() == "compiling 12/340 (3%)"
    assert ninja[1] == "Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o"
    make = progress.build_progress("[ 35%] Building C object CMakeFiles/small.dir/a.c.o")
    assert make is not None and make[0].describe() == "compiling (35%)" and make[1].startswith("Building C")
    assert progress.build_progress("[340/340] Linking CXX shared library bin/libllama.so")[0].finished
    for other in ("a[1/2] b", "[1/0] x", "[5/3] x", "[ 200%] x", "-- Configuring done", ""):
        assert progress.build_progress(other) is None, other


@pytest.mark.parametrize(("generator", "status"), [("Ninja", r"compiling \d/\d+ \(\d+%\)"), ("Unix Makefiles", None)])
def test_a_build_step_says_it_is_compiling_how_far_and_where_its_log_is(
    tmp_path: Path, reported: io.StringIO, generator: str, status: str | None
) -> None:
    tree = cmake_project(tmp_path / "tree").path
    log = tmp_path / "logs" / "build-01-small.log"
    step = BuildStep(
        "small", f'cmake -S . -B build -G "{generator}" >/dev/null && cmake --build build -j 1', timeout=300
    )
    result = run_build(step, tree, log)
    assert result.ok, log.read_text()
    lines = lines_of(reported)
    assert lines[0] == f"build small (log: {log})", lines
    beats = [line for line in lines if line.startswith("still build small (")]
    assert beats and all(f"; log: {log})" in beat for beat in beats), lines
    # ninja counts its steps; CMake's Makefiles give a percentage
    pattern = status or r"compiling \(\d+%\)"
    during = [beat for beat in beats if re.search(rf"\): {pattern}: ", beat)]
    assert during, lines
    assert re.fullmatch(r"build small: done in \d+\.\ds", lines[-1]), lines


def test_a_gate_that_builds_shows_the_builds_progress_from_its_log(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's output goes to its log; the heartbeat reads the build's last status line there."""
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.2")
    upstream = cmake_project(tmp_path / "upstream")
    project = Project(tmp_path / "project", upstream, upstream.head)
    project.add_patch(
        "0001-change-b.patch", make_patch(upstream, upstream.head, {"b.c": "int b(void) { return 3; }\n"}, "Change b")
    )
    build = 'cmake -S . -B "$PATCHCTL_OUT/b" -G Ninja >/dev/null && cmake --build "$PATCHCTL_OUT/b" -j 1'
    project.write_config(upstream.head, f"    gates:\n      - name: build\n        command: {build}\n")
    assert cli("-q", "-C", project.path, "apply").exit_code == 0
    monkeypatch.chdir(project.path)  # the log is shown relative to where the user is
    result = cli("gate")
    assert result.exit_code == 0, result.output
    lines = lines_of(result.stderr)
    log = ".patchctl/gates/main/01-build.log"
    assert (project.path / log).is_file() and lines[0] == f"gate build (main) (log: {log})", lines
    running = rf"still gate build \(main\) \([\d.]+s; log: {re.escape(log)}\): compiling \d/\d+ \(\d+%\): "
    assert any(re.match(running, line) for line in lines), lines


def test_the_engine_build_says_it_is_compiling_how_far_and_where_its_log_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.llamacpp.build import build_targets

    monkeypatch.setenv("PATCHCTL_CACHE", str(tmp_path / "cache"))
    tree = cmake_project(tmp_path / "tree").path
    said: list[str] = []
    built = build_targets(tree, ["small"], "0123456789abcdef", jobs=1, progress=said.append)
    log = built.build_dir.parent / "build.log"
    assert built.configured and (built.build_dir / "libsmall.a").is_file()
    assert said[0] == f"configuring the build of small (cmake; log: {log})", said
    assert said[1] == f"compiling small (log: {log})", said
    counts = [
        line
        for line in said[2:]
        if re.fullmatch(rf"compiling small: \[\d+/\d+\] \d+% \(log: {re.escape(str(log))}\)", line)
    ]
    assert counts and counts[-1].startswith("compiling small: [") and " 100% " in counts[-1], said
    assert "Building C object" in log.read_text()  # the whole output is in the log
    said.clear()
    again = build_targets(tree, ["small"], "0123456789abcdef", jobs=1, progress=said.append)
    assert not again.configured and said[0] == f"compiling small (log: {log})", said


def test_the_engine_build_estimates_what_is_left_once_it_has_run_a_while(tmp_path: Path) -> None:
    """The model gate's libllama build: 29 minutes under load against 4.5 quiet (issue 45); the
    progress line says what is left at the pace this machine is going, where it can."""
    from engine.llamacpp.build import _Reporter

    now = [0.0]
    said: list[str] = []
    reporter = _Reporter("compiling llama", tmp_path / "build.log", said.append, clock=lambda: now[0])
    for done, at in ((10, 5.0), (20, 60.0), (100, 300.0), (199, 600.0)):
        now[0] = at
        reporter.line(f"[{done}/199] Building CXX object src/x.o".encode())
    log = tmp_path / "build.log"
    assert said == [
        f"compiling llama: [10/199] 5% (log: {log})",  # 5 s in: too early to tell
        f"compiling llama: [20/199] 10%, about 9 min left at this pace (log: {log})",
        f"compiling llama: [100/199] 50%, about 5 min left at this pace (log: {log})",
        f"compiling llama: [199/199] 100% (log: {log})",
    ]
