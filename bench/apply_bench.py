"""Benchmark: `patchctl apply` of a 30-patch series on the real llama.cpp tree, warm cache,
against the shell recipe real canaries use on the same local upstream:

    git init; git fetch --depth 1 <upstream> <rev>; git checkout FETCH_HEAD; for p: git apply p

Three patchctl cases, each against the recipe for the same rev, in one run:
  into a new directory    a full checkout (as on a fresh runner with a warm cache)
  warm, pin bump          the tree exists, applied at 0.3.30; apply at 0.3.33 (597 of 2977
                          files differ): only the difference is written
  warm, series edit       the tree exists; one line that one patch adds changed

Prints medians and ratios (target for warm apply: at most one third of the recipe).

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

from patchctl import git
from patchctl.project import config as config_mod
from patchctl.series import apply_job, exporter
from patchctl.upstream.store import Store

URL = "pypi-sdist:llama-cpp-python?versions=0.3.30,0.3.33&subdir=vendor/llama.cpp"
PIN = "296d9b60b97f6eeb1df161fefb921a44c04a1122"  # 0.3.30
BUMP = "v0.3.33"


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
    # Files equal at both revs, so the same series applies before and after the pin bump.
    bumped = set(git.run(["diff", "--name-only", PIN, store.resolve(mirror, BUMP)], mirror.path).stdout.split())
    sources = sorted(p for p in (work / "src").glob("*.cpp")) + sorted((work / "src").glob("*.h"))
    sources = [p for p in sources if str(p.relative_to(work)) not in bumped][:count]
    for index, source in enumerate(sources):
        lines = source.read_text().splitlines(keepends=True)
        middle = len(lines) // 2
        lines.insert(middle, f"// bench patch {index}: downstream change\n")
        source.write_text("".join(lines))
        git.commit_all(work, f"Bench patch {index}\n\nEdits {source.name}.")
    (root / "patches" / "bench").mkdir(parents=True)  # export fills it (a missing series dir fails closed)
    exporter.export(config, "bench", work)
    store.remove_worktree(mirror, work)
    return config


def time_patchctl(config: config_mod.Config, store: Store, target: Path, rev: str = PIN) -> float:
    start = time.perf_counter()
    [result] = apply_job.apply(config, store, ("bench",), rev=rev, into=target)
    elapsed = time.perf_counter() - start
    assert result.state == "applied", result.state
    return elapsed


def edit_first_patch(patches: list[Path], run: int) -> None:
    """Change what the first patch adds (one line of one file), as a downstream edit does."""
    text = patches[0].read_text()
    patches[0].write_text(text.replace("downstream change", f"downstream change {run}", 1))


def time_recipe(source: str, patches: list[Path], target: Path, rev: str = PIN) -> float:
    """The shell recipe: init, fetch --depth 1 SOURCE REV, checkout, git apply each patch (seconds)."""

    def sh(*args: str) -> None:
        subprocess.run(["git", *args], cwd=target, check=True, capture_output=True, env=git.isolated_env(target))

    start = time.perf_counter()
    target.mkdir()
    sh("init", "-q")
    sh("fetch", "-q", "--depth", "1", source, rev)
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
    cases: dict[str, tuple[list[float], list[float]]] = {
        "into a new directory": ([], []),
        "warm, pin bump": ([], []),
        "warm, series edit": ([], []),
    }
    with tempfile.TemporaryDirectory(prefix="patchctl-bench-") as tmp:
        root = Path(tmp)
        config = make_project(root, store, args.patches)
        patches = sorted((root / "patches" / "bench").glob("*.patch"))
        mirror = store.mirror(URL)
        bump = store.resolve(mirror, BUMP)
        source = f"file://{mirror.path}"
        warm = root / "warm"
        time_patchctl(config, store, warm)  # the existing tree; also warms the cache's object access paths
        for run in range(args.runs):
            ours, recipe = cases["into a new directory"]
            ours.append(time_patchctl(config, store, root / f"ours-{run}"))
            recipe.append(time_recipe(source, patches, root / f"recipe-{run}"))
            store.remove_worktree(mirror, root / f"ours-{run}")
            shutil.rmtree(root / f"recipe-{run}")

            ours, recipe = cases["warm, pin bump"]
            ours.append(time_patchctl(config, store, warm, bump))
            recipe.append(time_recipe(source, patches, root / f"recipe-bump-{run}", bump))
            shutil.rmtree(root / f"recipe-bump-{run}")
            time_patchctl(config, store, warm)  # back to the pin, untimed

            ours, recipe = cases["warm, series edit"]
            edit_first_patch(patches, run)
            ours.append(time_patchctl(config, store, warm))
            recipe.append(time_recipe(source, patches, root / f"recipe-edit-{run}"))
            shutil.rmtree(root / f"recipe-edit-{run}")
        store.remove_worktree(mirror, warm)
    print(f"series: {len(patches)} patches on llama.cpp {PIN[:12]} ({args.runs} runs, median; recipe: git init,")
    print(f"fetch --depth 1, checkout, git apply loop, for the same rev; pin bump: {PIN[:12]} -> {bump[:12]})")
    print(f"{'case':<22} {'patchctl s':>10} {'recipe s':>10} {'ratio':>7}")
    for name, (ours, recipe) in cases.items():
        a, b = statistics.median(ours), statistics.median(recipe)
        print(f"{name:<22} {a:10.3f} {b:10.3f} {a / b:7.3f}")
    print("target for warm apply: ratio <= 0.333")
    return 0


if __name__ == "__main__":
    sys.exit(main())
