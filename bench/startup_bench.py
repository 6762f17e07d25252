"""Benchmark: what a patchctl command costs before it does anything, and the warm pin bump
as a user runs it (the `patchctl` command, start-up included), each against baselines
measured in the same run.

  start-up       every command's `--help` (the nested groups' subcommands too: `matrix render
                 --help`), `patchctl --help`, `--version`, and `lint --no-apply` on a small
                 project (this repository's upstream and series sections and its 4 patches,
                 committed); `lint --no-apply` and `matrix check` on this repository's whole
                 matrix.yaml too (its build-matrix sections), as separate processes. Baseline:
                 `python -c pass` (the interpreter alone), run just before or after each of them
                 (a pair), and `python -c "import click"` (what any Click program pays).
                 CPU seconds (user + system of the process and its children); the ratio is the
                 median of the pairs' ratios. Bar: every `--help` and the small project's
                 `lint --no-apply` at most 3x the interpreter.
  warm pin bump  the pin in matrix.yaml moves (0.3.30 <-> 0.3.33, both directions) and
                 `patchctl apply` runs on the existing tree; against the two recipes users run
                 today on an existing clone, each bumped the same way in the same run:
                   git apply loop   `git checkout -f REV`, then `git apply` for each patch;
                   git am -3 loop   Ollama's Makefile.sync: `git checkout -f REV`, then
                                    `git -c user.name=nobody -c user.email=<> am -3 PATCH` for each patch.
                 Bar: ratio <= 1.3 against the `git apply` loop. The same apply in-process (no
                 start-up) is printed too, so the remainder is start-up; then a per-step table:
                 processes spawned and time per bump, for patchctl (per git subcommand) and for
                 each recipe step.

Prints medians and ratios.

    python bench/startup_bench.py [--runs 7] [--bump-runs 5] [--patches 30] [--bump-only | --startup-only]

The upstream is the embedded default (llama.cpp from llama-cpp-python 0.3.30 and 0.3.33 on
PyPI), built into $PATCHCTL_CACHE (or the user cache) on first use; the build is not timed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from apply_bench import BUMP, PIN, URL, make_project, time_patchctl  # bench/ is on sys.path when this script runs

from patchctl import git
from patchctl.project import config as config_mod
from patchctl.upstream.store import Store

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


def time_process(argv: list[str], cwd: Path, expect: tuple[int, ...] = (0,), pythonpath: Path | None = None) -> float:
    return run_process(argv, cwd, expect, pythonpath)[0]


def run_process(
    argv: list[str], cwd: Path, expect: tuple[int, ...] = (0,), pythonpath: Path | None = None
) -> tuple[float, float]:
    """Run ARGV in CWD; (wall seconds, CPU seconds: user + system of it and of its children)."""
    env = clean_env()
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


BARE = "python -c pass"
BUILD_MATRIX_SECTIONS = "# ---------------------------------------------------------------- CI build matrix"
CLICK = "python -c 'import click'"


@dataclasses.dataclass
class StartupCase:
    name: str
    argv: list[str]
    expect: tuple[int, ...] = (0,)
    bar: bool = True  # held to the bar (at most 3x the interpreter)
    cpu: list[float] = dataclasses.field(default_factory=list)
    wall: list[float] = dataclasses.field(default_factory=list)
    ratios: list[float] = dataclasses.field(default_factory=list)  # CPU / the paired interpreter's CPU
    other_ratios: list[float] = dataclasses.field(default_factory=list)  # the same, --compare-with's checkout

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


def help_commands() -> list[list[str]]:
    """Every command path `--help` can be asked of: each command, each nested group's subcommands."""
    import click

    from patchctl.cli import cli

    paths: list[list[str]] = []

    def walk(group: click.Group, prefix: list[str]) -> None:
        for name in group.list_commands(click.Context(group)):
            command = group.get_command(click.Context(group), name)
            assert command is not None, name
            paths.append([*prefix, name])
            if isinstance(command, click.Group):
                walk(command, [*prefix, name])

    walk(cli, [])
    return paths


STARTUP_BAR = 3.0


def _paired(
    case: StartupCase, bare: list[str], cwd: Path, bare_first: bool, pythonpath: Path | None = None
) -> tuple[float, float, float]:
    """CASE once and the bare interpreter once, in that order or the other: (wall s, CPU s,
    CPU / the interpreter's CPU)."""
    if bare_first:
        _, bare_cpu = run_process(bare, cwd)
    wall, cpu = run_process(case.argv, cwd, case.expect, pythonpath)
    if not bare_first:
        _, bare_cpu = run_process(bare, cwd)
    return wall, cpu, cpu / bare_cpu


def startup(runs: int, root: Path, compare_with: Path | None = None) -> list[StartupCase]:
    """The interpreter alone, `import click`, and each patchctl command, each paired with a
    `python -c pass` run just before or after it (the order alternating from round to round);
    with COMPARE_WITH, each patchctl command of that source tree too (PYTHONPATH), paired alike."""
    # The small project: this repository's upstream and series sections (its build-matrix
    # sections left out) and its 4-patch series; this repository's whole matrix.yaml beside it.
    # Each committed in a git repository of its own, as a downstream keeps them.
    matrix = (REPO / "matrix.yaml").read_text()
    small = root / "small-project"
    whole = root / "this-repository"
    for project, text in ((small, matrix[: matrix.index(BUILD_MATRIX_SECTIONS)]), (whole, matrix)):
        project.mkdir()
        (project / "matrix.yaml").write_text(text)
        shutil.copytree(REPO / "patches", project / "patches")  # lint fails closed on a series without patches
        git.init_repo(project)
        git.commit_all(project, "project")
    patchctl = patchctl_command()
    bare = [sys.executable, "-c", "pass"]
    cases = [
        StartupCase(BARE, bare, bar=False),
        StartupCase(CLICK, [sys.executable, "-c", "import click"], bar=False),
        StartupCase("patchctl --help", [*patchctl, "--help"]),
        StartupCase("patchctl --version", [*patchctl, "--version"], bar=False),
        *(StartupCase(f"patchctl {' '.join(path)} --help", [*patchctl, *path, "--help"]) for path in help_commands()),
        StartupCase("patchctl lint --no-apply", [*patchctl, "-C", str(small), "lint", "--no-apply"], (0, 1)),
        StartupCase(
            "  the same, this repository",
            [*patchctl, "-C", str(whole), "lint", "--no-apply"],
            (0, 1),
            bar=False,
        ),
        StartupCase("patchctl matrix check", [*patchctl, "-C", str(whole), "matrix", "check"], (0, 1), bar=False),
    ]
    for case in cases:  # warm the file system cache and the .pyc files, untimed
        run_process(case.argv, small, case.expect)
        if compare_with is not None and case.argv[0] != sys.executable:
            run_process(case.argv, small, case.expect, compare_with)
    for round_ in range(runs):
        for case in cases:  # interleaved, so a noisy moment hits every case alike
            wall, cpu, ratio = _paired(case, bare, small, round_ % 2 == 0)
            case.cpu.append(cpu)
            case.wall.append(wall)
            case.ratios.append(ratio)
            if compare_with is not None and case.argv[0] != sys.executable:
                case.other_ratios.append(_paired(case, bare, small, round_ % 2 == 1, compare_with)[2])
    return cases


def set_pin(matrix: Path, old: str, new: str) -> None:
    text = matrix.read_text()
    assert text.count(old) == 1, f"{matrix}: pin {old} not found once"
    matrix.write_text(text.replace(old, new))


def _recipe_git(clone: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True, env=git.isolated_env(clone))


def recipe_bump(clone: Path, rev: str, patches: list[Path], steps: StepTimes | None = None) -> float:
    """The existing clone's pin bump: git checkout -f REV, then git apply each patch (seconds)."""
    start = time.perf_counter()
    _recipe_git(clone, "checkout", "-q", "-f", rev)
    checked_out = time.perf_counter()
    for patch in patches:
        _recipe_git(clone, "apply", str(patch))
    end = time.perf_counter()
    if steps is not None:
        steps.add("git checkout -f", 1, checked_out - start)
        steps.add("git apply (a patch each)", len(patches), end - checked_out)
    return end - start


def am_bump(clone: Path, rev: str, patches: list[Path], steps: StepTimes | None = None) -> float:
    """Ollama's pin bump (Makefile.sync): git checkout -f REV, then `git am -3` each patch, one
    process a patch as its make rule runs it (seconds)."""
    start = time.perf_counter()
    _recipe_git(clone, "checkout", "-q", "-f", rev)
    checked_out = time.perf_counter()
    for patch in patches:
        _recipe_git(clone, "-c", "user.name=nobody", "-c", "user.email=<>", "am", "-3", str(patch))
    end = time.perf_counter()
    if steps is not None:
        steps.add("git checkout -f", 1, checked_out - start)
        steps.add("git am -3 (a patch each)", len(patches), end - checked_out)
    return end - start


class StepTimes:
    """Processes spawned and seconds spent per step, summed over the bumps."""

    def __init__(self) -> None:
        self.processes: collections.Counter = collections.Counter()
        self.seconds: collections.Counter = collections.Counter()

    def add(self, step: str, processes: int, seconds: float) -> None:
        self.processes[step] += processes
        self.seconds[step] += seconds


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


@dataclasses.dataclass
class BumpRun:
    times: dict[str, list[float]]
    calls: collections.Counter  # git subcommand -> calls, in-process apply
    seconds: collections.Counter  # git subcommand -> seconds, in-process apply
    recipes: dict[str, StepTimes]  # recipe -> its steps
    bump: str
    count: int


def warm_pin_bump(runs: int, count: int, root: Path, compare_with: Path | None = None) -> BumpRun:
    store = Store()
    project = root / "bump-project"
    project.mkdir()
    make_project(project, store, count)
    matrix = project / "matrix.yaml"
    other = root / "bump-project-other"  # the same project, for the other checkout's command
    shutil.copytree(project, other)
    patches = sorted((project / "patches" / "bench").glob("*.patch"))
    mirror = store.mirror(URL)
    bump = store.resolve(mirror, BUMP)
    patchctl = patchctl_command()
    apply = [*patchctl, "-C", str(project), "apply", "bench"]
    apply_other = [*patchctl, "-C", str(other), "apply", "bench"]

    # The existing clones: objects shared with the cache's mirror, at the pin, patched.
    clones = {"git apply loop": root / "clone", "git am -3 loop": root / "clone-am"}
    recipes = {"git apply loop": recipe_bump, "git am -3 loop": am_bump}
    for name, clone in clones.items():
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror.path), str(clone)], check=True)
        recipes[name](clone, PIN, patches)
    time_process(apply, root)  # the existing tree, at the pin
    if compare_with is not None:
        time_process(apply_other, root, pythonpath=compare_with)
    inprocess_target = root / "inprocess"
    config = config_mod.load(matrix)
    time_patchctl(config, store, inprocess_target)

    times: dict[str, list[float]] = {"patchctl apply": [], "in-process apply": [], **{name: [] for name in recipes}}
    if compare_with is not None:
        times["other checkout"] = []
    steps = {name: StepTimes() for name in recipes}
    current = PIN
    with git_tally() as (calls, seconds):  # the in-process apply's git calls: the others are processes of their own
        for _ in range(runs):
            for new in (bump, PIN):  # both directions
                set_pin(matrix, current, new)
                times["patchctl apply"].append(time_process(apply, root))
                if compare_with is not None:
                    set_pin(other / "matrix.yaml", current, new)
                    times["other checkout"].append(time_process(apply_other, root, pythonpath=compare_with))
                current = new
                times["in-process apply"].append(time_patchctl(config, store, inprocess_target, new))
                for name, recipe in recipes.items():
                    times[name].append(recipe(clones[name], new, patches, steps[name]))
    store.remove_worktree(mirror, inprocess_target)
    store.remove_worktree(mirror, project / ".patchctl" / "trees" / "bench")
    if compare_with is not None:
        store.remove_worktree(mirror, other / ".patchctl" / "trees" / "bench")
    return BumpRun(times, calls, seconds, steps, bump, len(patches))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="start-up runs (pairs) per command")
    parser.add_argument("--bump-runs", type=int, default=5, help="pin bumps each way")
    parser.add_argument("--patches", type=int, default=30)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--bump-only", action="store_true", help="the warm pin bump alone (no start-up section)")
    which.add_argument("--startup-only", action="store_true", help="the start-up section alone (exit 1 over the bar)")
    parser.add_argument(
        "--compare-with",
        type=Path,
        default=None,
        help="another patchctl source tree (an older commit): its `patchctl apply` is timed too, interleaved, "
        "and in the start-up part each of its commands, paired with the interpreter alike",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="patchctl-bench-") as tmp:
        root = Path(tmp)
        started = [] if args.bump_only else startup(args.runs, root, args.compare_with)
        if args.startup_only:
            print_startup(started, args.runs, args.compare_with)
            return 0 if all(case.ratio <= STARTUP_BAR for case in started if case.bar) else 1
        bumps = warm_pin_bump(args.bump_runs, args.patches, root, args.compare_with)

    if started:
        print_startup(started, args.runs, args.compare_with)
        print()
    print_bump(bumps, args.bump_runs, args.compare_with)
    return 0


def print_startup(cases: list[StartupCase], runs: int, compare_with: Path | None = None) -> None:
    """Each case's CPU and wall medians, and its CPU against the interpreter run beside it."""
    print(f"start-up ({runs} pairs each, interleaved; {' '.join(patchctl_command())}; CPU = user + system)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    other = f"x python, {compare_with.name}" if compare_with is not None else ""
    print(f"{'command':<36} {'CPU ms':>7} {'wall ms':>8} {'x python':>9} {'bar':>8} {other:>20}")
    for case in cases:
        verdict = ("met" if case.ratio <= STARTUP_BAR else "NOT met") if case.bar else ""
        cpu, wall = statistics.median(case.cpu) * 1000, statistics.median(case.wall) * 1000
        before = f"{statistics.median(case.other_ratios):19.2f}x" if case.other_ratios else ""
        print(f"{case.name:<36} {cpu:7.1f} {wall:8.1f} {case.ratio:8.2f}x {verdict:>8} {before:>20}")
    held = [case for case in cases if case.bar]
    worst = max(held, key=lambda case: case.ratio)
    met = all(case.ratio <= STARTUP_BAR for case in held)
    print(
        f"bar: every --help and lint --no-apply <= {STARTUP_BAR:g}x `python -c pass` (CPU, median of {runs} pairs): "
        f"{'met' if met else 'NOT met'} (worst: {worst.name}, {worst.ratio:.2f}x)"
    )


def print_bump(run: BumpRun, bump_runs: int, compare_with: Path | None = None) -> None:
    count, times = run.count, run.times
    print(f"warm pin bump: {count} patches, {PIN[:12]} <-> {run.bump[:12]} ({bump_runs} runs each way, median)")
    print(f"{'case':<40} {'median s':>8} {'vs apply':>8} {'vs am -3':>8} {'min s':>7}")
    apply_loop = statistics.median(times["git apply loop"])
    am_loop = statistics.median(times["git am -3 loop"])
    labels = {
        "patchctl apply": "patchctl apply (the command)",
        "in-process apply": "apply_job.apply (no start-up)",
        "git apply loop": "git checkout -f + git apply loop",
        "git am -3 loop": "git checkout -f + git am -3 loop (Ollama)",
    }
    if compare_with is not None:
        labels["other checkout"] = f"patchctl apply ({compare_with.name})"
    for name, label in labels.items():
        median = statistics.median(times[name])
        print(f"{label:<40} {median:8.3f} {median / apply_loop:8.2f} {median / am_loop:8.2f} {min(times[name]):7.3f}")
    bumped = 2 * bump_runs
    print()
    print("per step, per bump (mean): processes spawned and time")
    print(f"{'what':<18} {'step':<30} {'processes':>9} {'ms':>9}")
    for subcommand, n in run.calls.most_common():
        ms = run.seconds[subcommand] / bumped * 1000
        print(f"{'patchctl':<18} {'git ' + subcommand:<30} {n / bumped:9.0f} {ms:9.1f}")
    rest = statistics.mean(times["in-process apply"]) - sum(run.seconds.values()) / bumped
    print(f"{'patchctl':<18} {'python (no process)':<30} {0:9d} {rest * 1000:9.1f}")
    startup_s = statistics.median(times["patchctl apply"]) - statistics.median(times["in-process apply"])
    print(f"{'patchctl':<18} {'start-up, the rest (median)':<30} {1:9d} {startup_s * 1000:9.1f}")
    print(f"{'patchctl':<18} {'in all':<30} {sum(run.calls.values()) / bumped + 1:9.0f}")
    for name, steps in run.recipes.items():
        for step, n in steps.processes.items():
            print(f"{name:<18} {step:<30} {n / bumped:9.0f} {steps.seconds[step] / bumped * 1000:9.1f}")
        print(f"{name:<18} {'in all':<30} {sum(steps.processes.values()) / bumped:9.0f}")
    ratio = statistics.median(times["patchctl apply"]) / apply_loop
    am_ratio = statistics.median(times["patchctl apply"]) / am_loop
    print()
    print(f"patchctl apply against the git am -3 loop: {am_ratio:.2f}x")
    print(f"bar: patchctl apply <= 1.3x the git apply loop: {ratio:.2f}x ({'met' if ratio <= 1.3 else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
