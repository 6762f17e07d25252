"""Benchmarks: what bisect adds to a red canary, as a ratio of the same canary with `--no-bisect`.

**apply** (the default): the series is rsync's 53 Debian `git format-patch` patches (see
tests/patchctl/realseries.py; fetched from deb.debian.org into the test cache on first use,
sha256-checked). The upstream is rsync 3.2.7 plus Debian's earlier patches, then four
commits; the second changes a context line of patch 0041 (stacked on earlier patches' changes
to util1.c), so the canary is red and bisect has a first-parent line of four commits to
search. The baseline, measured in the same run, is the same canary with `--no-bisect` (target:
at most 2x). Both run on a warm cache (a first, untimed canary fills it).

    python bench/canary_bisect_bench.py [--repeat 3]

**--compile**: the compile bisect on real llama.cpp in a real Docker engine. The upstream is
llama.cpp as llama-cpp-python's sdists vendor it (`pypi-sdist:`, one commit per version:
0.3.34 the pin, 0.3.35, 0.3.36 the tip by default). The series is one patch that adds a
translation unit to libllama (`src/models/`, which libllama's CMake globs, so the patch
touches no build file and applies at every version) reading `llama_model_params::use_mmap`:
it compiles at 0.3.34, and 0.3.35's `llama.h` drops the field (for `load_mode`). The
toolchain is the shipped `cpu-amd64` row's CMake configuration building `--target llama`,
in the CMake toolchain image the Docker tests build (no registry here; no ccache in it).
In one run, one after the other: `canary --compile --no-bisect` (the baseline), then the
full-build bisect (`--compile-bisect full`), then the probe bisect (the default). It prints
each time, the ratio to the baseline (target for the probe bisect: at most 3x) and the commit
each bisect named; they must be the same, 0.3.35's. The machine's load moves a libllama build
by 2x between canaries, so each bisect's cost is also given in builds of the tip measured in
the same canary. On the sdists' line (two commits since the pin) both bisects make the same
two full builds (the probe bisect's confirmations); probes replace full builds on longer
lines. Tens of minutes: each canary builds libllama from a clean tree, each bisect twice more.

    python bench/canary_bisect_bench.py --compile [--versions 0.3.34,0.3.35,0.3.36] [--json-out FILE]
    python bench/canary_bisect_bench.py --summary-of FILE   # that summary again, from --json-out
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchctl import git  # noqa: E402
from tests.patchctl import realseries  # noqa: E402
from tests.patchctl.conftest import real_cache_dir, run_cli  # noqa: E402
from tests.patchctl.test_real_series import make_project, red_upstream  # noqa: E402


def timed_canary(project: Path, out: Path, *args: str) -> tuple[float, dict]:
    start = time.perf_counter()
    result = run_cli("-C", project, "canary", "--json-file", out, *args)
    elapsed = time.perf_counter() - start
    if result.exit_code != 1:
        raise SystemExit(f"expected a red canary (exit 1), got {result.exit_code}: {result.output[-2000:]}")
    return elapsed, json.loads(out.read_text())


def apply_bench(repeat: int) -> None:
    series = realseries.rsync_series()
    with tempfile.TemporaryDirectory(prefix="canary-bench-") as scratch:
        work = Path(scratch)
        os.environ["PATCHCTL_CACHE"] = str(work / "cache")
        upstream, breaking = red_upstream(series, work / "up")
        project = make_project(work / "proj", upstream, series.pin, series.patches, naming="format-patch")
        timed_canary(project, work / "warmup.json", "--no-bisect")  # clone the mirror: not timed
        with_bisect: list[float] = []
        without: list[float] = []
        payload: dict = {}
        for _ in range(repeat):
            elapsed, _ = timed_canary(project, work / "plain.json", "--no-bisect")
            without.append(elapsed)
            elapsed, payload = timed_canary(project, work / "bisect.json")
            with_bisect.append(elapsed)
        failing = [p for s in payload["series"] for p in s["patches"] if p["verdict"] != "ok"]
        named = [p["breaking_commit"]["sha"] for p in failing if p.get("breaking_commit")]
        baseline, measured = statistics.median(without), statistics.median(with_bisect)
        print(f"series: rsync, {len(series.patches)} patches; failing: {', '.join(p['patch'] for p in failing)}")
        print(f"bisect named {named[0][:12] if named else 'nothing'} (the breaking commit is {breaking[:12]})")
        print(f"canary --no-bisect (baseline): median {baseline:.2f} s of {repeat}")
        print(f"canary with bisect:            median {measured:.2f} s of {repeat}")
        print(f"ratio bisect / no-bisect: {measured / baseline:.2f}x (target: at most 2x)")


# ---------------------------------------------------------------- --compile

SDIST = "pypi-sdist:llama-cpp-python?versions={versions}&subdir=vendor/llama.cpp"
DOWNSTREAM_UNIT = "src/models/downstream-default-mmap.cpp"
DOWNSTREAM_SOURCE = """\
// A downstream's addition to libllama: whether models are memory-mapped by default.
#include "llama.h"

extern "C" LLAMA_API bool llama_downstream_default_mmap(void);

bool llama_downstream_default_mmap(void) {
    return llama_model_default_params().use_mmap;
}
"""
# The shipped cpu-amd64 toolchain's configuration (matrix.yaml), building libllama alone.
TOOLCHAIN_COMMAND = (
    "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF "
    "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF "
    "&& cmake --build build -j 4 --target llama"
)


def compile_project(path: Path, url: str, pin: str, patch: str, image: str, command: str) -> Path:
    git.init_repo(path)
    (path / "patches" / "llama.cpp").mkdir(parents=True)
    (path / "patches" / "llama.cpp" / "0001-Add-llama_downstream_default_mmap.patch").write_text(patch)
    (path / "matrix.yaml").write_text(
        "version: 1\n"
        "upstreams:\n"
        f"  llama.cpp: {{url: '{url}', branch: main, pin: '{pin}'}}\n"
        "series:\n"
        "  llama.cpp: {upstream: llama.cpp, dir: patches/llama.cpp}\n"
        "canary:\n"
        "  upstream: llama.cpp\n"
        "  toolchains:\n"
        "    - name: cpu-amd64\n"
        "      tag-suffix: -cpu-llama-cpp\n"
        "      cuda-major-version: ''\n"
        f"      image: {image}\n"
        f"      command: {json.dumps(command)}\n"
    )
    git.commit_all(path, "downstream")
    return path


def downstream_patch(repo: Path, pin: str, scratch: Path) -> str:
    """The series' one patch, made by git at the pin."""
    git.run(["clone", "-q", "--no-checkout", str(repo), str(scratch)], repo)
    git.run(["checkout", "-q", "--detach", pin], scratch)
    (scratch / DOWNSTREAM_UNIT).write_text(DOWNSTREAM_SOURCE)
    git.commit_all(scratch, "Add llama_downstream_default_mmap\n\nDownstream callers ask whether models are mapped.")
    patch = git.run(["format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "HEAD"], scratch).stdout
    shutil.rmtree(scratch)
    return patch


def compile_canary(project: Path, work: Path, label: str, *args: str) -> tuple[float, dict]:
    out = work / f"{label}.json"
    load = os.getloadavg()[0]
    start = time.perf_counter()
    result = run_cli("-C", project, "canary", "--compile", "--json-file", out, "--work-dir", work / label, *args)
    elapsed = time.perf_counter() - start
    if result.exit_code != 1 or not out.exists():
        raise SystemExit(f"{label}: expected a red canary (exit 1), got {result.exit_code}: {result.output[-3000:]}")
    payload = json.loads(out.read_text())
    print(f"  {label}: {elapsed:.1f} s (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)", flush=True)
    return elapsed, payload


def compile_bench(versions: list[str], command: str, json_out: Path | None) -> dict:
    import docker

    from tests.patchctl.docker_image import CMAKE_TOOLCHAIN_IMAGE, ensure_toolchain_image

    client = docker.from_env()
    try:
        image = ensure_toolchain_image(client, CMAKE_TOOLCHAIN_IMAGE)
    finally:
        client.close()
    url = SDIST.format(versions=",".join(versions))
    repo, commits = sdist_commits(versions)
    with tempfile.TemporaryDirectory(prefix="canary-compile-bench-") as scratch:
        work = Path(scratch)
        patch = downstream_patch(repo, commits[versions[0]], work / "patch")
        project = compile_project(work / "proj", url, commits[versions[0]], patch, image, command)
        print(f"upstream: llama.cpp from llama-cpp-python sdists {', '.join(versions)} (pin {versions[0]})")
        print(f"series: one patch adding {DOWNSTREAM_UNIT} (reads llama_model_params::use_mmap)")
        print(f"toolchain: {image}: {command}", flush=True)
        run_cli("-C", project, "canary", "--no-bisect", "--json-file", work / "warmup.json")  # the mirror: untimed
        baseline, plain = compile_canary(project, work, "no-bisect", "--no-bisect")
        full_s, full = compile_canary(project, work, "full-bisect", "--compile-bisect", "full")
        probe_s, probe = compile_canary(project, work, "probe-bisect")
    results = {
        "versions": versions,
        "command": command,
        "baseline_s": baseline,
        "baseline_tip_build_s": plain["compiles"][0]["steps"][0]["duration_s"],
        "full": full,
        "probe": probe,
        "full_s": full_s,
        "probe_s": probe_s,
    }
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))
    return results


def sdist_commits(versions: list[str]) -> tuple[Path, dict[str, str]]:
    from patchctl.upstream import sdist

    os.environ.setdefault("PATCHCTL_CACHE", str(real_cache_dir()))  # the sdists are large: the suite's cache
    os.environ["PATCHCTL_QUIET"] = "1"
    repo = sdist.materialize(SDIST.format(versions=",".join(versions)))
    return repo, {v: git.rev_parse(repo, f"v{v}") for v in versions}


def compile_summary(results: dict) -> bool:
    """Print what a --compile run measured; whether both bisects named 0.3.35's commit.

    Builds dominate, and the machine's load moves them by 2x from one canary to the next, so
    beside each ratio to --no-bisect stands what the bisect cost in builds of the tip measured
    in the same canary (its full builds and probes over its own tip build)."""
    _, commits = sdist_commits(results["versions"])
    breaking = commits["0.3.35"]
    baseline = results["baseline_s"]
    named = {}
    for label, key in (("full-build bisect", "full"), ("probe bisect", "probe")):
        elapsed, payload = results[f"{key}_s"], results[key]
        [record] = payload["compiles"]
        commit = (record.get("breaking_commit") or {}).get("sha")
        named[label] = commit
        version = next((v for v, c in commits.items() if c == commit), "?")
        bisect = record.get("bisect", {})
        tip_build = record["steps"][0]["duration_s"]
        spent = bisect.get("full_builds_s", 0.0) + bisect.get("probes_s", 0.0)
        print(f"{label}: {elapsed:.1f} s, {elapsed / baseline:.2f}x --no-bisect; named {str(commit)[:12]} ({version})")
        print(
            f"  its tip build {tip_build:.1f} s; the bisect's builds {spent:.1f} s = {spent / tip_build:.2f} tip "
            f"builds (1 + that = {1 + spent / tip_build:.2f}x at an even load)"
        )
        print(f"  full builds {bisect.get('full_builds')} ({bisect.get('full_builds_s')} s)", end="")
        if bisect.get("units"):
            print(
                f"; probes {bisect['probes']} ({bisect['probes_s']} s) of {', '.join(bisect['units'])}; "
                f"commands derived again {bisect['derived_again']}; compiler cache: {bisect['compiler_cache']}",
                end="",
            )
        print()
        print(f"  {record.get('bisect_note')}")
    print(
        f"canary --compile --no-bisect (baseline): {baseline:.1f} s (its tip build {results['baseline_tip_build_s']} s)"
    )
    probe_s, full_s = results["probe_s"], results["full_s"]
    print(
        f"probe bisect / full-build bisect: {probe_s / full_s:.2f}x; probe bisect {probe_s / baseline:.2f}x "
        "--no-bisect (target: at most 3x)"
    )
    same = named["full-build bisect"] == named["probe bisect"] == breaking
    print(f"both named {breaking[:12]} (0.3.35): {'yes' if same else 'NO'}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="apply: canaries per kind (median)")
    parser.add_argument("--compile", action="store_true", help="the compile bisect on llama.cpp in Docker")
    parser.add_argument("--versions", default="0.3.34,0.3.35,0.3.36", help="--compile: sdist versions, pin first")
    parser.add_argument("--command", default=TOOLCHAIN_COMMAND, help="--compile: the toolchain's build command")
    parser.add_argument("--json-out", type=Path, help="--compile: also write the three reports and times here")
    parser.add_argument("--summary-of", type=Path, help="--compile: print the summary of a --json-out file again")
    args = parser.parse_args()
    if args.summary_of:
        if not compile_summary(json.loads(args.summary_of.read_text())):
            raise SystemExit(1)
    elif args.compile:
        versions = args.versions.split(",")
        if "0.3.35" not in versions[1:]:
            parser.error("--versions must hold 0.3.35 (the break) after the pin")
        if not compile_summary(compile_bench(versions, args.command, args.json_out)):
            raise SystemExit(1)
    else:
        apply_bench(args.repeat)


if __name__ == "__main__":
    main()
