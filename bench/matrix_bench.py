"""Benchmark: `patchctl matrix render` plus `patchctl matrix check` of a generated 256-row
matrix, the most GitHub runs in one job matrix (64 backends x CPU amd64/arm64 pair, CUDA 12,
CUDA 13; 384 index variants, 64 meta backends, a canary, backend paths; each row's Dockerfile
exists, as `matrix check` requires), against plain `yaml.safe_load` of the same file measured
in the same run. Target: render + check well under one second.

    python bench/matrix_bench.py [--backends 64] [--runs 5]

Phases: load (config.load: located YAML + schema of every section), check (all
invariants), render (every template, YAML-validated, nothing written).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from patchctl.matrix import from_config
from patchctl.matrix.checks import run_checks
from patchctl.matrix.render import render
from patchctl.project import config as config_mod

REPO = Path(__file__).resolve().parents[1]
HEADER = """version: 1
upstreams:
  llama.cpp:
    url: https://example.invalid/llama.cpp.git
    pin: 0123456789abcdef0123456789abcdef01234567
"""
FLAVOURS = [  # (tag prefix, build-type, cuda major, platform, runner, platform-tag, variant name prefix)
    ("-cpu-", "''", "''", "linux/amd64", "ubuntu-latest", "amd64", "cpu"),
    ("-cpu-", "''", "''", "linux/arm64", "ubuntu-24.04-arm", "arm64", None),
    ("-gpu-nvidia-cuda-12-", "cublas", "'12'", "linux/amd64", "ubuntu-latest", None, "cuda12"),
    ("-gpu-nvidia-cuda-13-", "cublas", "'13'", "linux/amd64", "ubuntu-latest", None, "cuda13"),
]


def generate(backends: int) -> str:
    rows, metas, variants, paths = ["include:"], ["index:", "  metas:"], ["  variants:"], ["backends:"]
    for b in range(backends):
        name = f"engine-{b:03d}"
        for prefix, build_type, cuda, platform, runner, platform_tag, _ in FLAVOURS:
            rows += [
                f"  - build-type: {build_type}",
                f"    cuda-major-version: {cuda}",
                "    cuda-minor-version: ''",
                f"    platforms: {platform}",
                *([f"    platform-tag: {platform_tag}"] if platform_tag else []),
                "    tag-latest: auto",
                f"    tag-suffix: {prefix}{name}",
                f"    runs-on: {runner}",
                "    base-image: ubuntu:24.04",
                *(["    builder-base-image: nvidia/cuda:13.0.0-devel-ubuntu24.04"] if cuda == "'13'" else []),
                "    skip-drivers: 'false'",
                f"    backend: {name}",
                f"    dockerfile: ./backend/Dockerfile.{name}",
                "    context: ./",
                "    ubuntu-version: '2404'",
            ]
        metas += [
            f"    - name: {name}",
            "      capabilities:",
            f"        default: cpu-{name}",
            f"        nvidia-cuda-12: cuda12-{name}",
            f"        nvidia-cuda-13: cuda13-{name}",
        ]
        for prefix, *_, variant_prefix in FLAVOURS:
            if variant_prefix is None:
                continue
            for tag, suffix in (("latest", ""), ("master", "-development")):
                variants.append(
                    f"    - {{name: {variant_prefix}-{name}{suffix},"
                    f" uri: 'quay.io/example/backends:{tag}{prefix}{name}',"
                    f" mirrors: ['docker.io/example/backends:{tag}{prefix}{name}']}}"
                )
        paths += [f"  {name}:", f"    paths: ['backend/{name}/**']", "    shared: ['backend/backend.proto']"]
    canary = [
        "canary:",
        "  upstream: llama.cpp",
        "  toolchains:",
        "    - {name: cuda-13, tag-suffix: -gpu-nvidia-cuda-13-engine-000, cuda-major-version: '13',"
        " image: 'nvidia/cuda:13.0.0-devel-ubuntu24.04'}",
    ]
    return "\n".join([HEADER, *rows, *metas, *variants, *canary, *paths]) + "\n"


def timed(function, runs: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends", type=int, default=64, help="backends to generate (4 rows each; at most 64: 256 jobs)"
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "matrix.yaml"
        path.write_text(generate(args.backends))
        shutil.copytree(REPO / "templates", root / "templates")
        (root / "backend").mkdir()
        for index in range(args.backends):  # matrix check (MX701) wants every row's Dockerfile to exist
            (root / "backend" / f"Dockerfile.engine-{index:03d}").write_text("FROM scratch\n")
        text = path.read_text()

        baseline, _ = timed(lambda: yaml.safe_load(text), args.runs)
        baseline_c, _ = (
            timed(lambda: yaml.load(text, Loader=yaml.CSafeLoader), args.runs)
            if yaml.__with_libyaml__
            else (float("nan"), None)
        )
        load_s, config = timed(lambda: config_mod.load(path), args.runs)
        matrix = from_config(config)
        check_s, findings = timed(lambda: run_checks(matrix, config), args.runs)
        render_s, result = timed(lambda: render(config, matrix), args.runs)
        assert not findings, [f.format() for f in findings[:5]]
        assert len(matrix.rows) == 4 * args.backends and len(result.files) == 5

        total = check_s + render_s
        lines = text.count("\n")
        print(
            f"matrix: {len(matrix.rows)} rows, {len(matrix.variants)} variants,"
            f" {len(matrix.metas)} metas, {lines} lines"
        )
        print(f"baseline yaml.safe_load (pure Python): {baseline:.3f} s   (libyaml CSafeLoader: {baseline_c:.3f} s)")
        print(f"load   (config.load, schema)  {load_s:.3f} s  = {load_s / baseline:.2f}x baseline")
        print(f"check  (all invariants)       {check_s:.3f} s  = {check_s / baseline:.2f}x baseline")
        print(f"render (5 files, validated)   {render_s:.3f} s  = {render_s / baseline:.2f}x baseline")
        print(f"render + check                {total:.3f} s  = {total / baseline:.2f}x baseline")
        print(f"load + render + check         {total + load_s:.3f} s  = {(total + load_s) / baseline:.2f}x baseline")
        return 0 if total < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
