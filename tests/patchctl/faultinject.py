"""Fault injection: kill each writing command at every file operation it performs.

For each scenario (export, matrix render, pin-sync, apply) a real project is built once;
a clean run through `faultinject_runner.py` counts its write-ish operations (N) and
records the repository's state after it (the new state; the old one is the state before).
Then, for each kill point K in 1..N (every one, or every k-th for the CI subset), a fresh
copy of the project is run and killed just before operation K, and the judge checks:

  mixed state       after the next command (a reading one: lint, --check), the
                    repository is neither entirely old nor entirely new (nor a tree
                    marked as cut off, which the next apply rebuilds);
  lost tree         (apply) the applied tree is missing, has no marker, or is broken;
  failed recovery   the reading command or the re-run of the writing command fails, or
                    the re-run does not end in the new state;
  stray temp file   a temporary, staged or backup file left behind after the reading
                    command (and, after the re-run, a leftover sync tree as well);
  traceback         any run printed a Python traceback.

bench/fault_injection.py runs every point and prints the counts; the CI test runs a subset.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchctl import git
from patchctl.state import statehome, worktree

from .conftest import Project, Repo, tree_files
from .fixtures_sync import add_hello_patch, add_line20_patch, main_c, write_config
from .matrix_fixtures import make_project

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().parent / "faultinject_runner.py"
KILLED = 137
_STRAY = re.compile(r"(\.tmp|\.partial|\.restore|\.patchctl-(new|old)(-\d+)?|\.patchctl-\d+|journal\.json)$")


@dataclass
class Run:
    exit_code: int
    output: str
    operations: int | None = None
    trace: list[str] = field(default_factory=list)

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.output


def run_patchctl(args: list[str | Path], env: dict[str, str], kill_at: int = 0, report: Path | None = None) -> Run:
    """`patchctl ARGS` in a fresh interpreter, killed before operation KILL_AT (0: never)."""
    run_env = {**env, "FAULTINJECT_KILL_AT": str(kill_at)}
    if report is not None:
        report.unlink(missing_ok=True)
        run_env["FAULTINJECT_REPORT"] = str(report)
    proc = subprocess.run(
        [sys.executable, str(RUNNER), *[str(a) for a in args]], env=run_env, capture_output=True, text=True, timeout=300
    )
    result = Run(proc.returncode, proc.stdout + proc.stderr)
    if report is not None and report.exists():
        data = json.loads(report.read_text())
        result.operations, result.trace = data["operations"], data["trace"]
    return result


def runner_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAULTINJECT_", "PATCHCTL_", "GITHUB_"))}
    env.update(
        PYTHONPATH=str(REPO),
        PYTHONDONTWRITEBYTECODE="1",
        PATCHCTL_CACHE=str(cache),
        PATCHCTL_LOCK_TIMEOUT="30",
    )
    return env


def warm_parsed_yaml(scenario: Scenario, where: Path, env: dict[str, str]) -> None:
    """Run SCENARIO's command once on a copy at WHERE, so that the cache holds what PyYAML made of
    the files it reads (`patchctl.project.parsed_cache`): a first run writes that entry, later runs
    read it, and the kill points counted on a clean run must be those of every run after it."""
    run_patchctl(scenario.args(scenario.fresh(where)), env)


# ---------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    """One writing command on one project. `fresh` makes a project ready for the command at
    DEST (the old state); `observe` says what state it is in; `check_args` is the reading
    command run after a kill (it must recover whatever the kill left)."""

    name: str
    fresh: Callable[[Path], Path]
    args: Callable[[Path], list[str | Path]]
    check_args: Callable[[Path], list[str | Path]]
    check_codes: tuple[int, ...]
    observe: Callable[[Path], object]


def _copier(template: Path) -> Callable[[Path], Path]:
    def fresh(dest: Path) -> Path:
        shutil.copytree(template, dest, symlinks=True)
        return dest

    return fresh


def project_files(project: Path) -> dict[str, bytes]:
    """Every file of the project except .git and patchctl's own state."""
    return {
        str(p.relative_to(project)): p.read_bytes()
        for p in sorted(project.rglob("*"))
        if p.is_file() and not {".git", worktree.STATE_DIR} & set(p.relative_to(project).parts)
    }


def _series_project(base: Path) -> tuple[Repo, Project]:
    upstream = Repo(base / "upstream")
    upstream.commit({"src/main.c": main_c(), "src/util.c": "util\n", "README.md": "# up\n"}, "initial")
    project = Project(base / "template", upstream, upstream.head)
    add_line20_patch(project, upstream, upstream.head)
    add_hello_patch(project, upstream, upstream.head)
    git.commit_all(project.path, "downstream")
    return upstream, project


def export_scenario(base: Path, env: dict[str, str]) -> Scenario:
    """export rewrites one patch, keeps one, adds one."""
    upstream, project = _series_project(base)
    work = base / "work"
    git.run(["clone", "-q", str(upstream.path), str(work)], base)
    git.run(["checkout", "-q", "--detach", upstream.head], work)
    for patch in sorted(project.series_dir.glob("*.patch")):
        git.run(["am", "-q", "--committer-date-is-author-date", str(patch)], work)
    clone = Repo(work)
    git.run(["reset", "-q", "--hard", "HEAD~2"], work)
    clone.commit({"src/main.c": main_c({20: "MAIN 20 patched differently"})}, "Patch line twenty\n\nChanged.")
    git.run(["am", "-q", str(project.series_dir / "0002-add-hello.patch")], work)
    clone.commit({"src/extra.c": "int extra;\n"}, "Add extra\n\nA third patch.")
    return Scenario(
        "export",
        _copier(project.path),
        lambda p: ["-C", p, "export", "main", "--from", work],
        lambda p: ["-C", p, "export", "main", "--from", work, "--check"],
        (0, 1),
        project_files,
    )


def render_scenario(base: Path, env: dict[str, str]) -> Scenario:
    """matrix render rewrites several workflows and the backend index at once."""
    base.mkdir(parents=True, exist_ok=True)
    template = make_project(base)
    first = run_patchctl(["-C", template, "matrix", "render"], env)
    assert first.exit_code == 0, first.output
    shutil.rmtree(template / worktree.STATE_DIR, ignore_errors=True)
    matrix = template / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace("'0 5 * * 2'", "'0 7 * * 3'").replace("alias: llama-cpp", "alias: llama")
    )
    return Scenario(
        "render",
        _copier(template),
        lambda p: ["-C", p, "matrix", "render"],
        lambda p: ["-C", p, "matrix", "render", "--check"],
        (0, 1),
        project_files,
    )


def pin_sync_scenario(base: Path, env: dict[str, str]) -> Scenario:
    """pin-sync moves the pin in matrix.yaml and a pin file and re-exports both patches."""
    upstream, project = _series_project(base)
    pin = upstream.head
    write_config(
        project, pin, up_extra="pin_files:\n  - {path: Makefile, pattern: 'UP_VERSION \\?= (?P<pin>[0-9a-f]{40})'}\n"
    )
    (project.path / "Makefile").write_text(f"UP_VERSION ?= {pin}\nall:\n\t@true\n")
    target = upstream.commit({"src/main.c": main_c(prepend=3)}, "Upstream adds lines on top")
    warm = run_patchctl(["-C", project.path, "lint"], env)  # the mirror exists before counting
    assert warm.exit_code == 0, warm.output
    shutil.rmtree(project.path / worktree.STATE_DIR, ignore_errors=True)
    return Scenario(
        "pin-sync",
        _copier(project.path),
        lambda p: ["-C", p, "pin-sync", "up", "--to", target],
        lambda p: ["-C", p, "lint", "--no-apply"],
        (0, 1),
        project_files,
    )


def apply_scenario(base: Path, env: dict[str, str], *, local_change: bool = False) -> Scenario:
    """apply replaces a tree applied with one patch by one with two. With LOCAL_CHANGE the
    old tree has an uncommitted edit and the command is `apply --force`: the tree is then
    always rebuilt beside and swapped, never updated in place."""
    upstream, project = _series_project(base)
    second = project.series_dir / "0002-add-hello.patch"
    second_text = second.read_bytes()
    second.unlink()
    warm = run_patchctl(["-C", project.path, "lint"], env)
    assert warm.exit_code == 0, warm.output
    shutil.rmtree(project.path / worktree.STATE_DIR, ignore_errors=True)

    def fresh(dest: Path) -> Path:
        shutil.copytree(project.path, dest, symlinks=True)
        old = run_patchctl(["-C", dest, "apply"], env)
        assert old.exit_code == 0, old.output
        if local_change:
            (worktree.applied_tree(dest, "main") / "README.md").write_text("# a local edit\n")
        (dest / "patches" / "main" / second.name).write_bytes(second_text)
        return dest

    return Scenario(
        "apply --force" if local_change else "apply",
        fresh,
        lambda p: ["-C", p, "apply", *(["--force"] if local_change else [])],
        lambda p: ["-C", p, "lint", "--no-apply"],
        (0, 1),
        applied_tree_state,
    )


def vendor_scenario(base: Path, env: dict[str, str]) -> Scenario:
    """vendor rewrites a stale vendored copy: one file changed, one missing, one stale to delete."""
    upstream, project = _series_project(base)
    project.write_config(upstream.head, "    vendor:\n      - {from: src, to: vendored/src}\n")
    copy = project.path / "vendored" / "src"
    copy.mkdir(parents=True)
    (copy / "main.c").write_text(main_c())  # without the series' change
    (copy / "gone.c").write_text("stale\n")
    git.commit_all(project.path, "a stale vendored copy")
    warm = run_patchctl(["-C", project.path, "lint"], env)  # the mirror exists before counting
    assert warm.exit_code == 0, warm.output
    shutil.rmtree(project.path / worktree.STATE_DIR, ignore_errors=True)
    return Scenario(
        "vendor",
        _copier(project.path),
        lambda p: ["-C", p, "vendor"],
        lambda p: ["-C", p, "vendor", "--check"],
        (0, 1),
        project_files,
    )


RECOVERABLE = "recoverable"


def applied_tree_state(project: Path) -> object:
    """The applied tree as (HEAD in its marker, HEAD, its files, local edits included);
    RECOVERABLE for a tree whose marker says an in-place update was cut off (the next apply
    rebuilds it); None when the tree is lost (missing, no marker, or git cannot read it)."""
    tree = worktree.applied_tree(project, "main")
    marker = worktree.read_marker(tree) if tree.is_dir() else None
    if marker is None:
        return None
    if getattr(marker, "updating", ""):
        return RECOVERABLE
    head = git.run(["rev-parse", "HEAD"], tree, check=False)
    if not head.ok or not git.run(["status", "--porcelain"], tree, check=False).ok:
        return None
    return (marker.head, head.stdout.strip(), tree_files(tree))


SCENARIOS: dict[str, Callable[[Path, dict[str, str]], Scenario]] = {
    "export": export_scenario,
    "render": render_scenario,
    "pin-sync": pin_sync_scenario,
    "apply": apply_scenario,
    "apply-force": lambda base, env: apply_scenario(base, env, local_change=True),
    "vendor": vendor_scenario,
}


# ---------------------------------------------------------------- the judge


@dataclass
class Tally:
    scenario: str
    operations: int = 0
    points: int = 0
    killed: int = 0
    mixed: int = 0
    lost_trees: int = 0
    failed_recoveries: int = 0
    stray_temp_files: int = 0
    tracebacks: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.mixed or self.lost_trees or self.failed_recoveries or self.stray_temp_files or self.tracebacks)

    def summary(self) -> str:
        return (
            f"{self.scenario}: operations={self.operations} points={self.points} killed={self.killed} "
            f"mixed={self.mixed} lost_trees={self.lost_trees} failed_recoveries={self.failed_recoveries} "
            f"stray_temp_files={self.stray_temp_files} tracebacks={self.tracebacks}"
        )

    def problem(self, kind: str, point: int, operation: str, detail: str = "") -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 10:
            self.examples.append(f"{kind} at {point} ({operation}){': ' + detail[-300:] if detail else ''}")


def stray_files(project: Path, *, sync_trees: bool = False) -> list[str]:
    """Temporary, staged and backup files anywhere in the project (not inside .git) and a
    journal or temporary file in its state directory (.git/patchctl); with SYNC_TREES also a
    pin-sync's trees left without a state file."""
    found = []
    for dirpath, dirnames, filenames in os.walk(project):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + dirnames:
            if _STRAY.search(name):
                found.append(str(Path(dirpath, name).relative_to(project)))
    # The state directory in the git directory: a journal or a temporary file left there is stray too.
    home = statehome.home(project)
    for dirpath, _dirnames, filenames in os.walk(home):
        for name in filenames:
            if _STRAY.search(name):
                found.append(statehome.display(project, Path(dirpath, name)))
    sync = worktree.state_dir(project) / "sync"
    if sync_trees and sync.is_dir() and any(sync.iterdir()):
        found += [str(p.relative_to(project)) for p in sync.iterdir()]
    return sorted(found)


def ci_points(trace: list[str], renames: int = 6, spread: int = 2) -> list[int]:
    """A fast subset of the kill points: up to RENAMES of the renames (where a set of files
    or a tree changes hands), spread over the run, and SPREAD other points spread evenly."""
    renamed = [i for i, op in enumerate(trace, 1) if op.startswith("os.rename")]
    step = max(1, len(renamed) // renames)
    chosen = set(renamed[::step][:renames])
    chosen.update(1 + (len(trace) - 1) * k // max(1, spread) for k in range(spread))
    return sorted(chosen)


def _kinds(trace: list[str]) -> list[str]:
    """The operations without their paths (which name each run's own copy and temporary files)."""
    return [" ".join(op.split()[:3]) if op.startswith("exec") else op.split()[0] for op in trace]


def run_scenario(
    name: str,
    base: Path,
    *,
    every: int = 1,
    points: list[int] | None = None,
    pick: Callable[[list[str]], list[int]] | None = None,
) -> Tally:
    """Build scenario NAME under BASE and kill its command at every EVERY-th operation
    (or at POINTS, or at the points PICK chooses from the clean run's trace), judging each kill."""
    base.mkdir(parents=True, exist_ok=True)
    env = runner_env(base / "cache")
    scenario = SCENARIOS[name](base / "setup", env)
    tally = Tally(name)

    warm_parsed_yaml(scenario, base / "warm", env)
    clean = scenario.fresh(base / "clean")
    old_state = scenario.observe(clean)
    counted = run_patchctl(scenario.args(clean), env, report=base / "count.json")
    assert counted.exit_code == 0 and counted.operations, counted.output
    new_state = scenario.observe(clean)
    assert new_state is not None and new_state != old_state, "the command changed nothing: a vacuous scenario"
    again = run_patchctl(scenario.args(scenario.fresh(base / "again")), env, report=base / "again.json")
    assert _kinds(again.trace) == _kinds(counted.trace), "two clean runs differ: the kill points would drift"
    tally.operations = counted.operations
    if points is not None:
        chosen = points
    elif pick is not None:
        chosen = pick(counted.trace)
    else:
        chosen = list(range(1, counted.operations + 1, every))
    for point in chosen:
        _judge_point(
            scenario, base / f"k{point:05d}", point, counted.trace[point - 1], env, old_state, new_state, tally
        )
    return tally


def _judge_point(
    scenario: Scenario,
    dest: Path,
    point: int,
    operation: str,
    env: dict[str, str],
    old_state: object,
    new_state: object,
    tally: Tally,
) -> None:
    project = scenario.fresh(dest)
    tally.points += 1
    killed = run_patchctl(scenario.args(project), env, kill_at=point)
    if killed.exit_code == KILLED:
        tally.killed += 1
    elif killed.exit_code != 0:
        tally.problem("failed_recoveries", point, operation, f"exit {killed.exit_code} without a kill: {killed.output}")
    check = run_patchctl(scenario.check_args(project), env)
    for run in (killed, check):
        if run.traceback:
            tally.problem("tracebacks", point, operation, run.output)
    if check.exit_code not in scenario.check_codes:
        tally.problem("failed_recoveries", point, operation, f"reading command exit {check.exit_code}: {check.output}")
    state = scenario.observe(project)
    if state is None:
        tally.problem("lost_trees", point, operation)
    elif state not in (old_state, new_state, RECOVERABLE):
        tally.problem("mixed", point, operation)
    if strays := stray_files(project):
        tally.problem("stray_temp_files", point, operation, ", ".join(strays))
    rerun = run_patchctl(scenario.args(project), env)
    if rerun.traceback:
        tally.problem("tracebacks", point, operation, rerun.output)
    if rerun.exit_code != 0 or scenario.observe(project) != new_state:
        tally.problem("failed_recoveries", point, operation, f"re-run exit {rerun.exit_code}: {rerun.output}")
    elif strays := stray_files(project, sync_trees=True):
        tally.problem("stray_temp_files", point, operation, "after the re-run: " + ", ".join(strays))
    shutil.rmtree(dest, ignore_errors=True)
