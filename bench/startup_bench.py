"""Benchmark: what a patchctl command costs before it does anything, and the warm pin bump
as a user runs it (the `patchctl` command, start-up included), each against a baseline
measured in the same run.

  start-up       `patchctl --help`, `--version`, `lint --no-apply` and `matrix check` on this
                 repository's matrix.yaml and series, as separate processes; baseline: `python -c pass` (the
                 interpreter alone). Bar: `patchctl --help` median < 100 ms.
  warm pin bump  the pin in matrix.yaml moves (0.3.30 <-> 0.3.33, both directions) and
                 `patchctl apply` runs on the existing tree; baseline: the same move in an
                 existing clone, `git checkout -f REV` then `git apply` for each patch.
                 Bar: ratio <= 1.3. The same apply in-process (no start-up) is printed too,
                 so the remainder is start-up.

Prints medians and ratios.

    python bench/startup_bench.py [--runs 20] [--bump-runs 5] [--patches 30]

The upstream is the embedded default (llama.cpp from llama-cpp-python 0.3.30 and 0.3.33 on
PyPI), built into $PATCHCTL_CACHE (or the user cache) on first use; the build is not timed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from apply_bench import BUMP, PIN, URL, make_project, time_patchctl  # bench/ is on sys.path when this script runs

from patchctl import config as config_mod
from patchctl import git
from patchctl.store import Store

REPO = Path(__file__).resolve().parents[1]


def patchctl_command() -> list[str]:
    """The `patchctl` console script beside this interpreter (what a user runs), else `-m patchctl`."""
    script = Path(sys.executable).parent / "patchctl"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "patchctl"]


def clean_env() -> dict[str, str]:
    """This environment, except that Python may use and write .pyc files, as an installed wheel
    (compiled at install) or a checkout (written on first run) has them: with
    PYTHONDONTWRITEBYTECODE set in a checkout, every run would compile patchctl's sources again."""
    env = dict(os.environ)
    for name in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


def time_process(argv: list[str], cwd: Path, expect: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def startup(runs: int, root: Path) -> list[tuple[str, float, float]]:
    """(what, median s, min s) for the interpreter alone and each patchctl command."""
    project = root / "startup-project"
    project.mkdir()
    # This repository's matrix.yaml and series: lint fails closed on a matrix without series.
    shutil.copy(REPO / "matrix.yaml", project / "matrix.yaml")
    shutil.copytree(REPO / "patches", project / "patches")
    patchctl = patchctl_command()
    cases: list[tuple[str, list[str], tuple[int, ...]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], (0,)),
        ("patchctl --help", [*patchctl, "--help"], (0,)),
        ("patchctl --version", [*patchctl, "--version"], (0,)),
        ("patchctl lint --no-apply", [*patchctl, "lint", "--no-apply"], (0, 1)),
        ("patchctl matrix check", [*patchctl, "matrix", "check"], (0, 1)),
    ]
    times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _name, argv, expect in cases:  # warm the file system cache and the .pyc files, untimed
        time_process(argv, project, expect)
    for _ in range(runs):  # interleaved, so a noisy moment hits every case alike
        for name, argv, expect in cases:
            times[name].append(time_process(argv, project, expect))
    return [(name, statistics.median(t), min(t)) for name, t in times.items()]


def set_pin(matrix: Path, old: str, new: str) -> None:
    text = matrix.read_text()
    assert text.count(old) == 1, f"{matrix}: pin {old} not found once"
    matrix.write_text(text.replace(old, new))


def recipe_bump(clone: Path, rev: str, patches: list[Path]) -> float:
    """The existing clone's pin bump: git checkout -f REV, then git apply each patch (seconds)."""

    def sh(*args: str) -> None:
        subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True, env=git.isolated_env(clone))

    start = time.perf_counter()
    sh("checkout", "-q", "-f", rev)
    for patch in patches:
        sh("apply", str(patch))
    return time.perf_counter() - start


@contextlib.contextmanager
def git_tally() -> Iterator[tuple[collections.Counter, collections.Counter]]:
    """(calls, seconds) per git subcommand run through patchctl.git.run while in the block."""
    calls: collections.Counter = collections.Counter()
    seconds: collections.Counter = collections.Counter()
    original = git.run

    def counted(args: list[str], *rest: object, **kwargs: object) -> git.GitResult:
        start = time.perf_counter()
        try:
            return original(args, *rest, **kwargs)  # type: ignore[arg-type]
        finally:
            subcommand = next((a for a in args if not a.startswith("-") and "=" not in a), "?")
            calls[subcommand] += 1
            seconds[subcommand] += time.perf_counter() - start

    git.run = counted  # type: ignore[assignment]
    try:
        yield calls, seconds
    finally:
        git.run = original  # type: ignore[assignment]


def warm_pin_bump(
    runs: int, count: int, root: Path
) -> tuple[dict[str, list[float]], collections.Counter, collections.Counter, str, int]:
    store = Store()
    project = root / "bump-project"
    project.mkdir()
    make_project(project, store, count)
    matrix = project / "matrix.yaml"
    patches = sorted((project / "patches" / "bench").glob("*.patch"))
    mirror = store.mirror(URL)
    bump = store.resolve(mirror, BUMP)
    patchctl = patchctl_command()
    apply = [*patchctl, "-C", str(project), "apply", "bench"]

    clone = root / "clone"  # the existing clone: objects shared with the cache's mirror, at the pin, patched
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror.path), str(clone)], check=True)
    recipe_bump(clone, PIN, patches)
    time_process(apply, root)  # the existing tree, at the pin
    inprocess_target = root / "inprocess"
    config = config_mod.load(matrix)
    time_patchctl(config, store, inprocess_target)

    times: dict[str, list[float]] = {"patchctl apply": [], "in-process apply": [], "existing clone": []}
    current = PIN
    with git_tally() as (calls, seconds):
        for _ in range(runs):
            for new in (bump, PIN):  # both directions
                set_pin(matrix, current, new)
                current = new
                times["patchctl apply"].append(time_process(apply, root))
                times["in-process apply"].append(time_patchctl(config, store, inprocess_target, new))
                times["existing clone"].append(recipe_bump(clone, new, patches))
    store.remove_worktree(mirror, inprocess_target)
    store.remove_worktree(mirror, project / ".patchctl" / "trees" / "bench")
    return times, calls, seconds, bump, len(patches)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="start-up runs per command")
    parser.add_argument("--bump-runs", type=int, default=5, help="pin bumps each way")
    parser.add_argument("--patches", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="patchctl-bench-") as tmp:
        root = Path(tmp)
        started = startup(args.runs, root)
        bumps, calls, seconds, bump, count = warm_pin_bump(args.bump_runs, args.patches, root)

    print(f"start-up ({args.runs} runs each, interleaved; {' '.join(patchctl_command())})")
    print(f"{'command':<28} {'median ms':>10} {'min ms':>8} {'minus python':>13}")
    floor = started[0][1]
    for name, median, fastest in started:
        print(f"{name:<28} {median * 1000:10.1f} {fastest * 1000:8.1f} {(median - floor) * 1000:13.1f}")
    help_ms = started[1][1] * 1000
    print(f"bar: patchctl --help median < 100 ms: {help_ms:.1f} ms ({'met' if help_ms < 100 else 'NOT met'})")
    print()
    print(f"warm pin bump: {count} patches, {PIN[:12]} <-> {bump[:12]} ({args.bump_runs} runs each way, median)")
    print(f"{'case':<34} {'median s':>8} {'ratio':>7} {'min s':>7}")
    recipe = statistics.median(bumps["existing clone"])
    labels = {
        "patchctl apply": "patchctl apply (the command)",
        "in-process apply": "apply_job.apply (no start-up)",
        "existing clone": "git checkout -f + git apply loop",
    }
    for name, label in labels.items():
        median = statistics.median(bumps[name])
        print(f"{label:<34} {median:8.3f} {median / recipe:7.3f} {min(bumps[name]):7.3f}")
    ratio = statistics.median(bumps["patchctl apply"]) / recipe
    bumped = 2 * args.bump_runs
    print(f"where apply_job.apply's time goes, per bump (git subprocesses; the recipe runs {count + 1}):")
    for subcommand, n in calls.most_common():
        print(f"  git {subcommand:<14} {n / bumped:5.0f} calls {seconds[subcommand] / bumped * 1000:8.1f} ms")
    rest = statistics.mean(bumps["in-process apply"]) - sum(seconds.values()) / bumped
    print(f"  {'python (no git)':<18} {'':>11} {rest * 1000:8.1f} ms")
    startup_s = statistics.median(bumps["patchctl apply"]) - statistics.median(bumps["in-process apply"])
    print(f"  start-up and the rest of the command (command - in-process): {startup_s * 1000:.0f} ms")
    print(f"bar: patchctl apply <= 1.3x the existing clone: {ratio:.2f}x ({'met' if ratio <= 1.3 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
