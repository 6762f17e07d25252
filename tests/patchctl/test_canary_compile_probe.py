"""The compile bisect builds only what broke: `canary --compile` on a tiny real CMake project
(runner: local), whose upstream history breaks the series' own translation unit with a
header change. Every compiler call goes through a logging wrapper, so the test sees what
each probe compiled: only the unit that failed at the tip, with ccache in front when the
machine has it; then two full builds confirm the commit named. A link-only break, which a
compile probe cannot see, makes the full builds disagree: the bisect falls back to full
builds and says so; a tip whose build fails only at the link is bisected with full builds."""

from __future__ import annotations

import json
import shlex
import shutil
import textwrap
from pathlib import Path

import pytest

from patchctl.loop import compile_bisect, probe_build

from .conftest import Project, Repo, make_patch

needs_cmake = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("cc")), reason="needs cmake and a C compiler"
)

CMAKE = textwrap.dedent(
    """\
    cmake_minimum_required(VERSION 3.16)
    project(toy C)
    add_library(core STATIC src/core.c src/other.c{extra})
    target_include_directories(core PUBLIC include)
    add_executable(app src/main.c)
    target_link_libraries(app core)
    """
)
CORE_H = "int core_value(int x);\nint core_extra(void);\n"
CORE_C = '#include "core.h"\nint core_value(int x) {{ return x; }}\n{extra}'
EXTRA = "int core_extra(void) { return 2; }\n"
TWO_ARGS = '#include "core.h"\nint core_value(int x, int y) { return x + y; }\n'


def toy_upstream(path: Path) -> Repo:
    repo = Repo(path)
    repo.commit(
        {
            "CMakeLists.txt": CMAKE.format(extra=""),
            "include/core.h": CORE_H,
            "src/core.c": CORE_C.format(extra=EXTRA),
            "src/other.c": "int other(void) { return 0; }\n",
            "src/main.c": "int main(void) { return 0; }\n",
        },
        "initial",
    )
    return repo


def compiler_wrapper(directory: Path) -> tuple[Path, Path]:
    """A `gcc` that logs each call (its directory and arguments, one JSON line) and runs cc."""
    directory.mkdir()
    calls = directory / "calls.jsonl"
    wrapper = directory / "gcc"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"python3 -c 'import json, os, sys; print(json.dumps([os.getcwd(), sys.argv[1:]]))' \"$@\" >> {calls}\n"
        f'exec {shutil.which("cc")} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, calls


def compiles(calls: Path) -> list[tuple[list[str], str]]:
    """(arguments, object) of each real compile the wrapper saw (ccache's preprocessing runs left
    out); the arguments end with the source (ccache may move -c away from it)."""
    seen = []
    for line in calls.read_text().splitlines() if calls.exists() else []:
        _, args = json.loads(line)
        if "-c" in args and "-E" not in args and "-o" in args:
            sources = [a for a in args if a.endswith(".c")]
            seen.append(([*args, sources[-1]], args[args.index("-o") + 1]))
    return seen


def series_project(tmp_path: Path, upstream: Repo, build: str) -> Project:
    """A series adding src/patched.c (which calls core_value(1) and core_extra()) to the library,
    called from main: built by BUILD (runner: local)."""
    pin = upstream.head
    project = Project(tmp_path / "project", upstream, pin)
    project.add_patch(
        "0001-add-patched.patch",
        make_patch(
            upstream,
            pin,
            {
                "CMakeLists.txt": CMAKE.format(extra=" src/patched.c"),
                "src/patched.c": '#include "core.h"\nint patched(void) { return core_value(1) + core_extra(); }\n',
                "src/main.c": "int patched(void);\nint main(void) { return patched() == 3 ? 0 : 1; }\n",
            },
            "Add patched",
        ),
    )
    project.write_config(pin)
    with (project.path / "matrix.yaml").open("a") as config:
        config.write(f"    build:\n      - name: toy\n        command: {json.dumps(build)}\n")
    return project


def canary(cli, project: Project, work: Path, *args: str) -> tuple[int, dict, str]:
    out = work.parent / f"{work.name}.json"
    result = cli("-C", project.path, "canary", "--compile", "--json-file", out, "--work-dir", work, *args)
    assert out.exists(), result.output
    return result.exit_code, json.loads(out.read_text()), result.stdout


def build_command(wrapper: Path, generator: str) -> str:
    return f"cmake -S . -B build -G {shlex.quote(generator)} -DCMAKE_C_COMPILER={wrapper} && cmake --build build"


def full_builds(work: Path) -> set[str]:
    """The commits (12 hex digits) the bisect built in full: its log directories."""
    bisect = work / "logs" / "declared" / "main" / "bisect"
    return {p.name for p in bisect.iterdir() if not p.name.endswith("-probe")}


@needs_cmake
@pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")
def test_probes_compile_only_the_failed_unit_and_two_full_builds_confirm(cli, tmp_path: Path) -> None:
    upstream = toy_upstream(tmp_path / "upstream")
    wrapper, calls = compiler_wrapper(tmp_path / "wrap")
    project = series_project(tmp_path, upstream, build_command(wrapper, "Ninja"))
    upstream.commit({"src/other.c": "int other(void) { return 1; }\n"}, "Unrelated one")
    good = upstream.commit({"src/other.c": "int other(void) { return 2; }\n"}, "Unrelated two")
    breaking = upstream.commit(
        {
            "include/core.h": "int core_value(int x, int y);\nint core_extra(void);\n",
            "src/core.c": TWO_ARGS + EXTRA,
        },
        "core_value takes two numbers",
    )
    # After the break, upstream's CMake adds a definition: a probe at an older commit derives its commands again.
    upstream.commit({"CMakeLists.txt": CMAKE.format(extra="") + "add_compile_definitions(TOY_LEVEL=4)\n"}, "Level 4")
    work = tmp_path / "w"

    code, payload, stdout = canary(cli, project, work)

    assert code == 1
    [record] = payload["compiles"]
    assert record["state"] == "failed" and "too few arguments to function" in record["log_tail"]
    assert record["breaking_commit"] == {"sha": breaking, "subject": "core_value takes two numbers"}
    bisect = record["bisect"]
    assert bisect["method"] == "probe" and "fallback" not in bisect, record
    assert bisect["units"] == ["src/patched.c"]
    assert bisect["probes"] == 3  # the pin, then two of the four commits
    assert bisect["full_builds"] == 2 and full_builds(work) == {breaking[:12], good[:12]}
    assert (
        f"confirmed by full builds at {breaking[:12]} (fails) and its parent {good[:12]} (builds)"
        in (record["bisect_note"])
    )
    # What the probes compiled: the failed unit alone, into the probe directory, never the build's objects.
    probed = [(args, obj) for args, obj in compiles(calls) if f"/{probe_build.PROBE_DIR}/" in obj]
    assert probed and {Path(args[-1]).name for args, _ in probed} == {"patched.c"}
    assert bisect["derived_again"] == 1  # at the pin, whose CMakeLists.txt has no TOY_LEVEL; then unchanged
    assert not any("-DTOY_LEVEL=4" in args for args, _ in probed)
    if shutil.which("ccache"):  # the pin and "Unrelated two" compile patched.c from the same inputs: one hit
        assert (
            bisect["compiler_cache"].startswith("ccache version")
            and ": 1 of 3 probe compile(s) from the cache" in (bisect["compiler_cache"])
        )
        assert len(probed) == 2  # ccache answered the third probe: no compiler ran
    else:
        assert bisect["compiler_cache"].startswith("none: the build environment has no ccache")
        assert len(probed) == 3
    assert "confirmed by full builds" in stdout  # the report says how the commit was found


@needs_cmake
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_link_break_the_probes_cannot_see_falls_back_to_full_builds(cli, tmp_path: Path) -> None:
    upstream = toy_upstream(tmp_path / "upstream")
    wrapper, _ = compiler_wrapper(tmp_path / "wrap")
    project = series_project(tmp_path, upstream, build_command(wrapper, "Unix Makefiles"))
    upstream.commit({"src/other.c": "int other(void) { return 1; }\n"}, "Unrelated one")
    link_break = upstream.commit({"src/core.c": CORE_C.format(extra="")}, "Drop core_extra's definition")
    upstream.commit(
        {"include/core.h": "int core_value(int x, int y);\nint core_extra(void);\n", "src/core.c": TWO_ARGS},
        "core_value takes two numbers",
    )
    upstream.commit({"src/other.c": "int other(void) { return 3; }\n"}, "Unrelated three")

    # At the tip the series' unit fails to compile (make stops there): the probes name the
    # header change, the full build at its parent fails to link, so the full-build bisect runs.
    code, payload, _ = canary(cli, project, tmp_path / "w")
    assert code == 1
    [record] = payload["compiles"]
    assert record["breaking_commit"]["sha"] == link_break, record
    bisect = record["bisect"]
    assert bisect["method"] == "full" and bisect["units"] == ["src/patched.c"]
    assert "but the full build there fails and at its parent" in bisect["fallback"]
    assert "it fails: fell back to the full-build bisect" in record["bisect_note"]

    # A tip that fails only at the link: nothing to probe, full builds from the start.
    code, payload, _ = canary(cli, project, tmp_path / "w2", "--rev", link_break)
    [record] = payload["compiles"]
    assert code == 1 and record["breaking_commit"]["sha"] == link_break, record
    assert record["bisect"]["method"] == "full" and "units" not in record["bisect"]
    assert record["bisect"]["fallback"].startswith("no probe compiles: the build failed at app, which is not")
    assert "undefined reference to `core_extra'" in record["log_tail"]


@needs_cmake
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_unity_build_is_probed_by_the_source_the_errors_name(cli, tmp_path: Path) -> None:
    """As llama.cpp 0.3.36 builds its models: upstream turns on UNITY_BUILD, so at the tip the
    failed object is a batch; the probes compile the series' source alone, with the batch's
    command where the upstream builds batches and with its own where it does not."""
    upstream = toy_upstream(tmp_path / "upstream")
    wrapper, calls = compiler_wrapper(tmp_path / "wrap")
    project = series_project(tmp_path, upstream, build_command(wrapper, "Unix Makefiles"))
    unity = "set_target_properties(core PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)\n"
    with_unity = upstream.commit({"CMakeLists.txt": CMAKE.format(extra="") + unity}, "Unity builds")
    breaking = upstream.commit(
        {"include/core.h": "int core_value(int x, int y);\nint core_extra(void);\n", "src/core.c": TWO_ARGS + EXTRA},
        "core_value takes two numbers",
    )
    upstream.commit({"src/other.c": "int other(void) { return 3; }\n"}, "Unrelated")
    code, payload, _ = canary(cli, project, tmp_path / "w")
    [record] = payload["compiles"]
    assert code == 1 and "Unity/unity_0_c.c.o] Error" in record["log_tail"]
    assert record["breaking_commit"]["sha"] == breaking and record["bisect"]["method"] == "probe", record
    assert record["bisect"]["units"] == ["src/patched.c"] and record["bisect"]["full_builds"] == 2
    probed = [args for args, obj in compiles(calls) if f"/{probe_build.PROBE_DIR}/" in obj]
    # the pin (its own command), the break and "Unity builds" (the batch's command: the same flags, so
    # ccache, where installed, answers the last one)
    assert record["bisect"]["probes"] == 3 and {Path(args[-1]).name for args in probed} == {"patched.c"}
    assert full_builds(tmp_path / "w") == {breaking[:12], with_unity[:12]}


@needs_cmake
def test_full_builds_when_asked(cli, tmp_path: Path) -> None:
    upstream = toy_upstream(tmp_path / "upstream")
    project = series_project(tmp_path, upstream, "cmake -S . -B build && cmake --build build")
    breaking = upstream.commit(
        {"include/core.h": "int core_value(int x, int y);\nint core_extra(void);\n", "src/core.c": TWO_ARGS + EXTRA},
        "Break",
    )
    code, payload, _ = canary(cli, project, tmp_path / "w", "--compile-bisect", "full")
    [record] = payload["compiles"]
    assert code == 1 and record["breaking_commit"]["sha"] == breaking
    bisect = record["bisect"]
    assert set(bisect) == {"method", "full_builds", "full_builds_s"}, bisect  # no probe, no fallback: as asked
    assert bisect["method"] == "full" and bisect["full_builds"] == 1  # the pin; the tip's verdict is known


# ---------------------------------------------------------------- the build's own record


NINJA_LOG = """\
[1/5] Building C object CMakeFiles/core.dir/src/patched.c.o
FAILED: CMakeFiles/core.dir/src/patched.c.o
/usr/bin/cc -Iinclude -o CMakeFiles/core.dir/src/patched.c.o -c /t/src/patched.c
/t/src/patched.c:2:28: error: too few arguments to function 'core_value'
ninja: build stopped: subcommand failed.
"""
MAKE_LOG = """\
/t/src/patched.c:2:28: error: too few arguments to function 'core_value'
gmake[2]: *** [CMakeFiles/core.dir/build.make:90: CMakeFiles/core.dir/src/patched.c.o] Error 1
gmake[1]: *** [CMakeFiles/Makefile2:85: CMakeFiles/core.dir/all] Error 2
gmake: *** [Makefile:91: all] Error 2
"""
MAKE_LINK_LOG = """\
collect2: error: ld returned 1 exit status
make[2]: *** [CMakeFiles/app.dir/build.make:98: app] Error 1
make[1]: *** [CMakeFiles/Makefile2:111: CMakeFiles/app.dir/all] Error 2
make: *** [Makefile:182: app] Error 2
"""
PLAIN_LOG = """\
In file included from /t/src/patched.c:1:
/t/include/core.h:1:5: error: conflicting types for 'core_value'
"""


@pytest.mark.parametrize(
    ("log", "edges", "diagnosed"),
    [
        (NINJA_LOG, ["CMakeFiles/core.dir/src/patched.c.o"], ["/t/src/patched.c"]),
        (MAKE_LOG, ["CMakeFiles/core.dir/src/patched.c.o"], ["/t/src/patched.c"]),  # the recursion is no edge
        (MAKE_LINK_LOG, ["app"], []),
        (PLAIN_LOG, [], ["/t/src/patched.c", "/t/include/core.h"]),  # no build tool's record: the errors' files
    ],
)
def test_failed_edges_are_read_from_ninja_and_make_logs(log: str, edges: list[str], diagnosed: list[str]) -> None:
    found = probe_build.failed_edges(log)
    assert (found.edges, found.diagnosed) == (edges, diagnosed)


def test_probe_commands_write_their_objects_aside() -> None:
    unit = probe_build.Unit(
        "src/a.c", "/src/build", ("cc", "-DX", "-MD", "-MF", "a.d", "-o", "CMakeFiles/a.o", "-c", "/src/src/a.c")
    )
    assert unit.output() == "/src/build/CMakeFiles/a.o"
    assert unit.probe_arguments("/p/0") == ["cc", "-DX", "-MD", "-MF", "/p/0.d", "-o", "/p/0.o", "-c", "/src/src/a.c"]


@pytest.mark.parametrize(
    ("probes", "fulls", "named", "method"),
    [
        ("GGBB", {"c2": True, "c1": False}, "c2", "probe"),  # confirmed
        ("GGBB", {"c2": True, "c1": True, "pin": False, "c0": False}, "c1", "full"),  # the parent fails: fall back
        ("GGBB", {"c2": False, "c1": False, "pin": False}, "c3", "full"),  # it builds where the probes fail
        ("GSBB", {"c2": True, "c0": False}, "c2", "probe"),  # the parent is untestable: its ancestor confirms
        ("GFBB", {"c1": True, "c0": False}, "c1", "probe"),  # c1's units cannot be compiled alone: a full build
    ],
)
def test_probe_search_confirms_or_falls_back(probes: str, fulls: dict, named: str, method: str) -> None:
    line = [f"c{i}" for i in range(len(probes))]
    verdicts = {"G": False, "B": True, "S": None, "F": compile_bisect.IN_FULL}
    probe_verdicts = {"pin": False} | {c: verdicts[v] for c, v in zip(line, probes, strict=True)}
    result = compile_bisect.search(
        line, "pin", line[-1], fulls.__getitem__, probe_verdicts.__getitem__, units=["src/a.c"]
    )
    assert (result.first_bad, result.method) == (named, method), result
    assert bool(result.fallback) == (method == "full")
