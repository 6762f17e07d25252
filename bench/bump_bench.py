"""Benchmark: a whole vendor bump with its `--continue` rounds, against Ollama's `git am -3`
recipe on the same bump, in one run.

The bump is synthetic but shaped like Ollama's llama.cpp bumps (issue 32), in a local git
upstream so that it runs without network: 300 source files; a 30-patch series cut with
Ollama's `git format-patch --no-signature --no-numbered --zero-commit` (abbreviated index
lines, a diffstat), some patches stacked on files an earlier patch changed; 50 upstream
commits between the pins that insert lines above the patches (offsets), edit their context
(3-way merges) and, for 3 patches, rewrite the very line they change (conflicts). Each
conflict is resolved as a maintainer would: by writing the resolved file.

    patchctl   `pin-sync --to TARGET` (stops at the first conflict); per conflict: write the
               file, `git add`, `pin-sync --continue` (the last one runs the gates and writes
               patches/ and matrix.yaml). Each command is its own process, as typed.
    recipe     Ollama's Makefile.sync on a work clone left at the old pin plus the series (the
               previous sync): `git checkout -f TARGET`; per patch `git am -3`, and on a stop:
               write the file, `git add`, `git am --continue`; then `git format-patch` into the
               series directory. The upstream is fetched already on both sides (warm).

Prints the medians per step (patchctl's own split by phase: replay, range-diff, gates =
export and strict apply, write; other = start-up, checkout, history, report) and the ratio
of the whole bump, with how much of it is starting patchctl once per command. Target: at
most 2x.
Both results are checked to be the same tree before anything is printed. patchctl runs with
its .pyc files, as an installed wheel (compiled at install) or a checkout (written on its first
run) has them: PYTHONDONTWRITEBYTECODE is dropped from its environment and one untimed start
writes them first (as bench/startup_bench.py does); otherwise every command would compile
patchctl's sources again.

`--compare-with DIR` takes the same bump through another checkout's patchctl in every run too
(e.g. the commit before a change), and prints its total and ratio against the same recipe.

    python bench/bump_bench.py [--runs 3] [--files 300] [--patches 30] [--upstream-commits 50] [--compare-with DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from patchctl import git  # noqa: E402
from patchctl.upstream.store import Store  # noqa: E402

DIRS = ["ggml/src/ggml-cpu", "ggml/src/ggml-cuda", "ggml/include", "src", "tools/mtmd", "common"]
LINES = 240
SLOTS = [20, 60, 100, 140, 180, 220]  # where patches edit a file (1-based lines), far enough apart to stack
CONFLICTS = 3
SERIES = "ggml"
FORMAT_PATCH = ["format-patch", "--no-signature", "--no-numbered", "--zero-commit"]  # Ollama's Makefile.sync


def file_text(path: str) -> list[str]:
    stem = path.rsplit("/", 1)[-1].split(".")[0]
    return [f"/* {path} */"] + [
        f"static int {stem}_fn_{i}(int x) {{ return x * {i} + {len(path)}; }}" for i in range(2, LINES + 1)
    ]


def write_lines(root: Path, path: str, lines: list[str]) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")


def read_lines(root: Path, path: str) -> list[str]:
    return (root / path).read_text().splitlines()


def sh(cwd: Path, *args: str, check: bool = True, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=check, capture_output=True, input=stdin, env=git.isolated_env(cwd)
    )


@dataclass
class PatchPlan:
    number: int
    edits: list[tuple[str, int]]  # (file, slot)
    conflicts: bool = False


@dataclass
class Bump:
    upstream: Path
    pin: str
    target: str
    series_dir: Path  # the 30 patches as Ollama keeps them
    resolutions: dict[str, dict[str, str]] = field(default_factory=dict)  # patch file name -> {path: resolved text}
    conflicting: list[str] = field(default_factory=list)


def downstream_line(path: str, slot: int, number: int) -> list[str]:
    stem = path.rsplit("/", 1)[-1].split(".")[0]
    return [
        f"static int {stem}_fn_{slot}(int x) {{ return downstream_{number}(x) * {slot}; }}",
        f"/* downstream patch {number}: {path} at {slot} */",
        f"static int downstream_{number}_{slot}(int x) {{ return x; }}",
    ]


def plan_series(rng: random.Random, files: list[str], patches: int) -> list[PatchPlan]:
    """PATCHES patches over a pool of files, some sharing a file (stacked), each (file, slot) used once.
    The conflicting patches have a file to themselves, so that their resolution is the whole file."""
    pool = rng.sample(files, 45)
    conflicting = dict(zip(sorted(rng.sample(range(3, patches + 1), CONFLICTS)), pool[:CONFLICTS]))
    free = {path: list(SLOTS) for path in pool[CONFLICTS:]}
    plans = []
    for number in range(1, patches + 1):
        if number in conflicting:
            plans.append(PatchPlan(number, [(conflicting[number], SLOTS[2])], conflicts=True))
            continue
        edits = []
        for path in rng.sample([p for p in free if free[p]], rng.choice([1, 1, 2, 3])):
            edits.append((path, free[path].pop(rng.randrange(len(free[path])))))
        plans.append(PatchPlan(number, edits))
    return plans


def build_bump(root: Path, *, files: int, patches: int, commits: int, seed: int = 32) -> Bump:
    rng = random.Random(seed)
    upstream = root / "upstream"
    upstream.mkdir()
    sh(upstream, "init", "-q", "-b", "main")
    paths = [
        f"{DIRS[i % len(DIRS)]}/unit_{i:03d}.{'cu' if 'cuda' in DIRS[i % len(DIRS)] else 'c'}" for i in range(files)
    ]
    for path in paths:
        write_lines(upstream, path, file_text(path))
    sh(upstream, "add", "-A")
    sh(upstream, "commit", "-q", "-m", "llama.cpp at the old pin")
    pin = sh(upstream, "rev-parse", "HEAD").stdout.decode().strip()

    # The series, cut on the old pin by the maintainers' own format-patch.
    plans = plan_series(rng, paths, patches)
    cut = root / "cut"
    sh(root, "clone", "-q", str(upstream), str(cut))
    for plan in plans:
        for path, slot in plan.edits:
            lines = read_lines(cut, path)
            # Replace the slot's line and add two after it (slots only ever grow downwards: later
            # slots are found by content, so stacked patches never need line arithmetic).
            at = next(
                i
                for i, line in enumerate(lines)
                if line.startswith(f"static int {path.rsplit('/', 1)[-1].split('.')[0]}_fn_{slot}(")
            )
            lines[at : at + 1] = downstream_line(path, slot, plan.number)
            write_lines(cut, path, lines)
        sh(cut, "add", "-A")
        sh(cut, "commit", "-q", "-m", f"downstream change {plan.number}\n\nWhy patch {plan.number} is needed.")
    series_dir = root / "series"
    sh(cut, *FORMAT_PATCH, "-q", "-o", str(series_dir), pin)
    shutil.rmtree(cut)

    # Upstream's history between the pins: offsets above the patches, edits of their context
    # (two lines away: 3-way merges), unrelated work, and the conflicting rewrites.
    touched = {(path, slot) for plan in plans for path, slot in plan.edits}
    conflict_edits = [(plan.edits[0], plan.number) for plan in plans if plan.conflicts]
    for number in range(1, commits + 1):
        for path in rng.sample(paths, 6):
            lines = read_lines(upstream, path)
            kind = rng.choice(["offset", "context", "elsewhere"])
            if kind == "offset":
                lines[1:1] = [f"/* upstream commit {number} adds a line */"]
            elif kind == "context":
                slot = rng.choice([s for s in SLOTS if (path, s) in touched] or SLOTS)
                at = _slot_index(lines, path, slot) - 2
                lines[at] = lines[at] + f" /* upstream {number} */"
            else:
                at = _slot_index(lines, path, rng.choice(SLOTS)) + 19
                lines[at] = lines[at] + f" /* upstream {number} */"
            write_lines(upstream, path, lines)
        if number in (commits // 4, commits // 2, 3 * commits // 4):
            (path, slot), _ = conflict_edits.pop()
            lines = read_lines(upstream, path)
            at = _slot_index(lines, path, slot)
            lines[at] = lines[at].replace("return x", "return upstream_rewrite(x)", 1)
            write_lines(upstream, path, lines)
        sh(upstream, "add", "-A")
        sh(upstream, "commit", "-q", "-m", f"upstream commit {number}")
    target = sh(upstream, "rev-parse", "HEAD").stdout.decode().strip()

    bump = Bump(upstream, pin, target, series_dir)
    names = sorted(p.name for p in series_dir.glob("*.patch"))
    for plan in plans:
        if plan.conflicts:
            # The maintainers' resolution: upstream's rewritten line kept, the patch's lines after it.
            (path, slot), name = plan.edits[0], names[plan.number - 1]
            lines = read_lines_at(upstream, target, path)
            at = _slot_index(lines, path, slot)
            lines[at + 1 : at + 1] = downstream_line(path, slot, plan.number)[1:]
            bump.resolutions[name] = {path: "\n".join(lines) + "\n"}
            bump.conflicting.append(name)
    return bump


def _slot_index(lines: list[str], path: str, slot: int) -> int:
    stem = path.rsplit("/", 1)[-1].split(".")[0]
    return next(i for i, line in enumerate(lines) if line.startswith(f"static int {stem}_fn_{slot}("))


def read_lines_at(repo: Path, rev: str, path: str) -> list[str]:
    return sh(repo, "show", f"{rev}:{path}").stdout.decode().splitlines()


# ---------------------------------------------------------------- the two ways through the bump


def make_project(root: Path, bump: Bump) -> Path:
    project = root / "project"
    (project / "patches").mkdir(parents=True)
    shutil.copytree(bump.series_dir, project / "patches" / SERIES)
    (project / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  llama.cpp:\n    url: {bump.upstream}\n    branch: main\n    pin: {bump.pin}\n"
        f"series:\n  {SERIES}:\n    upstream: llama.cpp\n    dir: patches/{SERIES}\n"
    )
    sh(project, "init", "-q")
    sh(project, "add", "-A")
    sh(project, "commit", "-q", "-m", "downstream project")
    return project


def patchctl_env() -> dict[str, str]:
    """This environment, quiet, with .pyc files used and written (see the module's docstring)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME")
    }
    return {**env, "PATCHCTL_QUIET": "1"}


def patchctl(project: Path, *args: str, checkout: Path = REPO) -> tuple[float, dict]:
    """One patchctl command as a user types it (its own process), CHECKOUT's patchctl; seconds
    and its JSON report."""
    report = project.parent / f"report-{time.monotonic_ns()}.json"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project), "pin-sync", *args, "--json-file", str(report)],
        capture_output=True,
        cwd=checkout,
        env={**patchctl_env(), "PYTHONPATH": str(checkout)},
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"patchctl pin-sync {' '.join(args)} failed ({done.returncode}): {done.stderr.decode()}")
    return elapsed, json.loads(report.read_text())


def startup(checkout: Path = REPO) -> float:
    """Seconds of a command that does nothing but start: `pin-sync --help` imports what pin-sync does."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "patchctl", "pin-sync", "--help"],
        capture_output=True,
        check=True,
        cwd=checkout,
        env={**patchctl_env(), "PYTHONPATH": str(checkout)},
    )
    return time.perf_counter() - start


def run_patchctl(root: Path, bump: Bump, checkout: Path = REPO) -> tuple[list[tuple[str, float, dict]], Path]:
    """The bump with CHECKOUT's pin-sync: (step, seconds, report) per command, and the project."""
    project = make_project(root, bump)
    steps = []
    seconds, report = patchctl(project, "llama.cpp", "--to", bump.target, checkout=checkout)
    steps.append(("pin-sync --to", seconds, report))
    rounds = 0
    while report["state"] == "conflict":
        stopped = report["patches"][-1]["patch"]
        tree = project / ".patchctl" / "sync" / "llama.cpp" / SERIES
        for path, text in bump.resolutions[stopped].items():
            (tree / path).write_text(text)
            sh(tree, "add", "--", path)
        rounds += 1
        seconds, report = patchctl(project, "--continue", checkout=checkout)
        steps.append((f"--continue #{rounds}", seconds, report))
    if report["state"] != "synced":
        raise SystemExit(f"pin-sync ended {report['state']}: {report.get('next_steps')}")
    return steps, project


def run_recipe(root: Path, bump: Bump) -> tuple[list[tuple[str, float]], Path]:
    """Ollama's recipe: (step, seconds) per step, and the work clone."""
    work = root / "vendor"
    sh(root, "clone", "-q", "--no-checkout", str(bump.upstream), str(work))
    sh(work, "checkout", "-q", "--detach", bump.pin)
    patches = sorted(bump.series_dir.glob("*.patch"))
    for patch in patches:  # the previous sync left the series applied (untimed)
        sh(work, "am", "-q", "-3", str(patch))
    out = root / "formatted"
    steps = []
    start = time.perf_counter()
    sh(work, "checkout", "-q", "-f", bump.target)
    steps.append(("checkout -f", time.perf_counter() - start))
    start = time.perf_counter()
    for patch in patches:
        if sh(work, "am", "-q", "-3", str(patch), check=False).returncode != 0:
            for path, text in bump.resolutions[patch.name].items():
                (work / path).write_text(text)
                sh(work, "add", "--", path)
            sh(work, "am", "--continue")
    steps.append(("am -3 (+ --continue)", time.perf_counter() - start))
    start = time.perf_counter()
    sh(work, *FORMAT_PATCH, "-q", "-o", str(out), bump.target)
    steps.append(("format-patch", time.perf_counter() - start))
    return steps, work


def same_tree(project: Path, work: Path, bump: Bump) -> None:
    """The series pin-sync wrote, applied at the target, is the tree the recipe made."""
    into = project.parent / "applied"
    done = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project), "apply", SERIES, "--into", str(into)],
        capture_output=True,
        env=patchctl_env(),
    )
    if done.returncode != 0:
        raise SystemExit(f"the synced series does not apply: {done.stderr.decode()}")
    ours, recipe = tree_files(into), tree_files(work)
    if ours != recipe:
        differ = sorted(name for name in ours.keys() | recipe.keys() if ours.get(name) != recipe.get(name))
        raise SystemExit(f"pin-sync and the recipe disagree on {len(differ)} file(s): {', '.join(differ[:10])}")


def tree_files(tree: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(tree)): p.read_bytes()
        for p in tree.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(tree).parts
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--patches", type=int, default=30)
    parser.add_argument("--upstream-commits", type=int, default=50)
    parser.add_argument(
        "--compare-with",
        type=Path,
        metavar="DIR",
        help="also take the bump through DIR's patchctl (another checkout) in every run, after this one's",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="patchctl-bump-bench-") as tmp:
        root = Path(tmp)
        os.environ["PATCHCTL_CACHE"] = str(root / "cache")
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        bump = build_bump(root, files=args.files, patches=args.patches, commits=args.upstream_commits)
        Store().mirror(str(bump.upstream))  # the cache's mirror (untimed): both sides start warm
        startup()  # writes the .pyc files of what pin-sync imports (untimed)
        if args.compare_with is not None:
            startup(args.compare_with.resolve())
        others: list[float] = []
        ours: list[list[tuple[str, float, dict]]] = []
        theirs: list[list[tuple[str, float]]] = []
        starts: list[float] = []
        for run in range(args.runs):
            scratch = root / f"run-{run}"
            (scratch / "patchctl").mkdir(parents=True)
            (scratch / "recipe").mkdir()
            steps, project = run_patchctl(scratch / "patchctl", bump)
            if args.compare_with is not None:
                (scratch / "other").mkdir()
                other, _ = run_patchctl(scratch / "other", bump, args.compare_with.resolve())
                others.append(sum(seconds for _, seconds, _ in other))
            recipe, work = run_recipe(scratch / "recipe", bump)
            same_tree(project, work, bump)
            ours.append(steps)
            theirs.append(recipe)
            starts.append(startup())
            shutil.rmtree(scratch)
    report(args, bump, ours, theirs, statistics.median(starts))
    if others:
        recipe = statistics.median(sum(seconds for _, seconds in steps) for steps in theirs)
        print(
            f"  {args.compare_with}'s pin-sync, same runs: {statistics.median(others):.2f} s, "
            f"ratio {statistics.median(others) / recipe:.2f}x"
        )
    return 0


def report(args: argparse.Namespace, bump: Bump, ours: list, theirs: list, start: float) -> None:
    totals = [sum(seconds for _, seconds, _ in steps) for steps in ours]
    recipe_totals = [sum(seconds for _, seconds in steps) for steps in theirs]
    median_run = ours[totals.index(sorted(totals)[len(totals) // 2])]
    final = median_run[-1][2]
    classes: dict[str, int] = {}
    for record in final["patches"]:
        classes[record["classification"]] = classes.get(record["classification"], 0) + 1
    print(
        f"bump benchmark: {args.patches} patches over {args.files} files, {args.upstream_commits} upstream commits, "
        f"{len(bump.conflicting)} conflicts resolved by writing the file; median of {args.runs} runs"
    )
    print(f"  patch results at the end: {classes}")
    print("  patchctl pin-sync (each command its own process; the run with the median total):")
    print(f"    {'step':<16} {'total s':>8} {'replay':>8} {'rangediff':>9} {'gates':>8} {'write':>8} {'other':>8}")
    for step, seconds, payload in median_run:
        phases = payload.get("phase_seconds", {})
        gates = sum(phases.get(name, 0.0) for name in ("export", "strict-apply", "build", "gates"))
        other = seconds - phases.get("replay", 0.0) - phases.get("range-diff", 0.0) - gates - phases.get("write", 0.0)
        print(
            f"    {step:<16} {seconds:8.2f} {phases.get('replay', 0.0):8.2f} {phases.get('range-diff', 0.0):9.2f} "
            f"{gates:8.2f} {phases.get('write', 0.0):8.2f} {other:8.2f}"
        )
    recipe_run = theirs[recipe_totals.index(sorted(recipe_totals)[len(recipe_totals) // 2])]
    print("  Ollama's recipe (the run with the median total):")
    for step, seconds in recipe_run:
        print(f"    {step:<22} {seconds:8.2f}")
    ours_median, theirs_median = statistics.median(totals), statistics.median(recipe_totals)
    print(f"  whole bump: pin-sync {ours_median:.2f} s, git am -3 recipe {theirs_median:.2f} s")
    commands = len(median_run)
    print(
        f"  of which starting patchctl ({commands} commands x {start:.2f} s, the time of `pin-sync --help`): "
        f"{commands * start:.2f} s"
    )
    print(f"  ratio: {ours_median / theirs_median:.2f}x (target: at most 2x)")


if __name__ == "__main__":
    sys.exit(main())
