"""Benchmark: `patchctl apply` of a 30-patch series on the real llama.cpp tree, warm cache,
against the shell recipe real canaries use on the same local upstream:

    git init; git fetch --depth 1 <upstream> <pin>; git checkout FETCH_HEAD; for p: git apply p

Prints both medians and their ratio (target: patchctl at most one third of the recipe).

    python bench/apply_bench.py [--patches 30] [--runs 3]

The upstream is the embedded default (llama.cpp from llama-cpp-python 0.3.30 on PyPI),
built into $PATCHCTL_CACHE (or the user cache) on first use; the build is not timed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from patchctl import apply_job, exporter, git
from patchctl import config as config_mod
from patchctl.store import Store

URL = "pypi-sdist:llama-cpp-python?versions=0.3.30,0.3.33&subdir=vendor/llama.cpp"
PIN = "296d9b60b97f6eeb1df161fefb921a44c04a1122"


def make_project(root: Path, store: Store, count: int) -> config_mod.Config:
    """A downstream project whose series has COUNT patches, each editing a different source file."""
    (root / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              llama.cpp: {{url: "{URL}", branch: main, pin: {PIN}}}
            series:
              bench: {{upstream: llama.cpp, dir: patches/bench}}
            """
        )
    )
    config = config_mod.load(root / "matrix.yaml")
    mirror = store.mirror(URL)
    work = root / "work"
    store.add_worktree(mirror, PIN, work)
    sources = sorted(p for p in (work / "src").glob("*.cpp"))
    sources = (sources + sorted((work / "src").glob("*.h")))[:count]
    for index, source in enumerate(sources):
        lines = source.read_text().splitlines(keepends=True)
        middle = len(lines) // 2
        lines.insert(middle, f"// bench patch {index}: downstream change\n")
        source.write_text("".join(lines))
        git.commit_all(work, f"Bench patch {index}\n\nEdits {source.name}.")
    exporter.export(config, "bench", work)
    store.remove_worktree(mirror, work)
    return config


def time_patchctl(config: config_mod.Config, store: Store, target: Path) -> float:
    start = time.perf_counter()
    apply_job.apply(config, store, ("bench",), into=target)
    return time.perf_counter() - start


def time_recipe(mirror_path: Path, patches: list[Path], target: Path) -> float:
    def sh(*args: str) -> None:
        subprocess.run(["git", *args], cwd=target, check=True, capture_output=True, env=git.isolated_env(target))

    start = time.perf_counter()
    target.mkdir()
    sh("init", "-q")
    sh("fetch", "-q", "--depth", "1", f"file://{mirror_path}", PIN)
    sh("checkout", "-q", "FETCH_HEAD")
    for patch in patches:
        sh("apply", str(patch))
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    store = Store()
    with tempfile.TemporaryDirectory(prefix="patchctl-bench-") as tmp:
        root = Path(tmp)
        config = make_project(root, store, args.patches)
        patches = sorted((root / "patches" / "bench").glob("*.patch"))
        mirror = store.mirror(URL)
        time_patchctl(config, store, root / "warmup")  # warm the cache's object access paths
        ours, recipe = [], []
        for run in range(args.runs):
            ours.append(time_patchctl(config, store, root / f"ours-{run}"))
            recipe.append(time_recipe(mirror.path, patches, root / f"recipe-{run}"))
            for path in (root / f"ours-{run}",):
                store.remove_worktree(mirror, path)
            shutil.rmtree(root / f"recipe-{run}")
        store.remove_worktree(mirror, root / "warmup")
    a, b = statistics.median(ours), statistics.median(recipe)
    print(f"series: {len(patches)} patches on llama.cpp {PIN[:12]} ({args.runs} runs, median)")
    print(f"patchctl apply (warm cache):            {a:7.3f} s")
    print(f"shell recipe (init, fetch --depth 1, checkout, git apply loop): {b:7.3f} s")
    print(f"ratio patchctl / recipe: {a / b:.3f}  (target <= 0.333)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
