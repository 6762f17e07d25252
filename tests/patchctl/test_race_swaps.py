"""No check-then-use (issue 44, item 2): while each command runs, every directory patchctl uses
in the work tree is swapped for a link to a sentinel directory outside the repository, and
back, over and over. Whatever the interleaving, nothing outside the repository changes (the
sentinels and the upstream are snapshotted before and after), and every run ends in a verdict
or one `patchctl: error:` line with a documented exit code, never a traceback.

The swaps come at the worst moments, deterministically: an audit hook (`sys.addaudithook`) sees
each operation of patchctl's main thread, and right before each use of a path (a file opened to
write, a directory made, a rename, a delete, a process started: what follows the checks) it
swaps one level of directories for links, which stay until the next operation: the use, or the
whole git process started, meets them, while the checks before it met the real directories.
Each command runs under one schedule per level (every use meets every level in one of them).
A thread that swaps freely, on its own clock, runs the commands once more as a second adversary.

patchctl may refuse (a link where its directory belongs: exit 2 or 3) or fail on a tree that
moved under it; it may never write through the link. Before the fix, `apply` checked
`.patchctl/trees` and then handed the path to `git worktree add`, which wrote the whole
upstream checkout into the sentinel; `gate` and `pin-sync` opened their logs by path.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest

from .conftest import CliResult, Project, Repo, make_patch, numbered, run_cli
from .fixtures_sync import main_c, write_config
from .hostile_tree import snapshot

SERIES = "main"
UPSTREAM = "up"
# Every directory patchctl makes or uses in the work tree. Swapping one redirects every path below it.
LEVELS = (
    (".patchctl", "patches"),
    (".patchctl/trees", ".patchctl/gates", ".patchctl/sync", ".patchctl/logs", f"patches/{SERIES}"),
    (
        f".patchctl/trees/{SERIES}",
        f".patchctl/gates/{SERIES}",
        f".patchctl/sync/{UPSTREAM}",
        f".patchctl/logs/pin-sync/{UPSTREAM}/{SERIES}",
    ),
    (f".patchctl/sync/{UPSTREAM}/{SERIES}",),
)
SWAPPED = tuple(d for level in LEVELS for d in level)
# Run (K, L) of a command swaps level L before each of its uses of a path I with I % PERIOD == K:
# every use meets a swap of the top level (which redirects every path below it) and of the next.
PERIOD = 1
SCHEDULES = tuple((k, level) for level in range(len(LEVELS)) for k in range(PERIOD))
DOCUMENTED = {0, 1, 2, 3}
# A use of a path, after its checks: a file opened to write or create, a directory made, a
# rename, a delete, a link, a change of mode or times; a process started that writes where its
# arguments or working directory say (a gate or build, `git worktree`, `git checkout`, `git clone`,
# `git init`). Reads, listings and the git calls that read (where the checks are) are never met
# by a swap: the command gets past them, deep.
USES = {
    "os.mkdir",
    "os.rename",
    "os.remove",
    "os.rmdir",
    "os.symlink",
    "os.link",
    "os.chmod",
    "os.utime",
    "shutil.rmtree",
}
GIT_WRITERS = {"worktree", "checkout", "clone", "init"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _is_use(event: str, args: tuple) -> bool:
    if event == "open":
        return len(args) == 3 and isinstance(args[2], int) and bool(args[2] & _WRITE_FLAGS)
    if event == "subprocess.Popen":
        argv = [str(a) for a in args[1]] if isinstance(args[1], (list, tuple)) else [str(args[1])]
        if Path(argv[0]).name != "git":
            return True
        words = [w for i, w in enumerate(argv[1:], 1) if w != "-c" and argv[i - 1] != "-c"]
        return bool(words) and words[0] in GIT_WRITERS
    return event in USES


class Swaps:
    """Swapping a directory of the project for a link to its sentinel twin, and back. The real
    directory waits beside it (`NAME.away`); what patchctl made at the name meanwhile (never
    through the link) is moved aside inside the repository, so the tree is whole after each."""

    def __init__(self, project: Path, sentinels: Path):
        self.project, self.sentinels = project, sentinels
        self.count = 0
        self.lock = threading.Lock()

    def twin(self, relative: str) -> Path:
        return self.sentinels / relative.replace("/", "__")

    def swap(self, relative: str) -> Path | None:
        """Swap RELATIVE for its link (when it is a real directory now); the path, to put it back."""
        path = self.project / relative
        with self.lock:
            try:
                if path.is_symlink() or not path.is_dir() or any(p.is_symlink() for p in path.parents):
                    return None
                os.rename(path, path.with_name(path.name + ".away"))
                os.symlink(self.twin(relative), path)
            except OSError:
                return None
            self.count += 1
            return path

    def restore(self, path: Path) -> None:
        away = path.with_name(path.name + ".away")
        with self.lock:
            if not os.path.lexists(away):  # patchctl deleted the directory holding it: nothing to put back
                if path.is_symlink():
                    os.unlink(path)
                return
            for attempt in range(100):  # patchctl may make something at the name again meanwhile
                if path.is_symlink():
                    os.unlink(path)
                elif os.path.lexists(path):
                    aside = self.project / ".swap-aside" / f"{path.name}-{self.count}-{attempt}"
                    aside.parent.mkdir(exist_ok=True)
                    os.rename(path, aside)
                try:
                    os.rename(away, path)
                    return
                except OSError:
                    continue
            raise RuntimeError(f"cannot put {away} back at {path}")


class AtOperations:
    """The audit-hook adversary: while armed, before every audited operation of the main thread it
    puts back what it swapped before; then, before the uses of a path (`_is_use`) its SCHEDULE
    picks, it swaps every directory of one level of LEVELS, which stays swapped until the next
    operation: the use, or the whole process started, meets the links. (An audit hook
    cannot be removed: disarmed, it returns at once.)"""

    armed: AtOperations | None = None

    def __init__(self, swaps: Swaps, schedule: tuple[int, int]):
        self.swaps, self.schedule = swaps, schedule
        self.main = threading.main_thread().ident
        self.operations = 0
        self.swapped: list[Path] = []
        self.busy = False

    @staticmethod
    def hook(event: str, args: tuple) -> None:
        self = AtOperations.armed
        if self is None or self.busy or threading.get_ident() != self.main:
            return
        self.busy = True  # the swaps' own file operations are audited too
        try:
            for path in reversed(self.swapped):  # whatever comes next, a check or a use, meets the real ones
                self.swaps.restore(path)
            self.swapped = []
            if _is_use(event, args):
                self.operations += 1
                phase, level = self.schedule
                if self.operations % PERIOD == phase:
                    self.swapped = [p for p in (self.swaps.swap(d) for d in LEVELS[level]) if p is not None]
        finally:
            self.busy = False

    def __enter__(self) -> AtOperations:
        AtOperations.armed = self
        return self

    def __exit__(self, *_exc: object) -> None:
        AtOperations.armed = None
        for path in reversed(self.swapped):
            self.swaps.restore(path)


_HOOKED = False


def _install_hook() -> None:
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(AtOperations.hook)
        _HOOKED = True


class Freely(threading.Thread):
    """The thread adversary: swaps each directory of SWAPPED for a moment, in turn, on its own clock."""

    def __init__(self, swaps: Swaps):
        super().__init__(daemon=True)
        self.swaps = swaps
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for relative in SWAPPED:
                    path = self.swaps.swap(relative)
                    time.sleep(0.002)
                    if path is not None:
                        self.swaps.restore(path)
                    time.sleep(0.004)
        except BaseException as exc:  # noqa: BLE001 - reported by the test, not lost in a thread
            self.failure = exc


def _project(tmp_path: Path) -> tuple[Project, Repo, Path]:
    """A downstream with a one-patch series, a gate that writes in its working directory, a pin
    file, a tree applied and an upstream that moved (pin-sync has work); sentinel twins of every
    swapped directory beside it."""
    upstream = Repo(tmp_path / "upstream")
    pin = upstream.commit({"src/main.c": main_c(), "src/util.c": numbered(30, "util")}, "initial")
    project = Project(tmp_path / "project", upstream, pin)
    project.add_patch(
        "0001-line-20.patch", make_patch(upstream, pin, {"src/main.c": main_c({20: "main 20 patched"})}, "Line 20")
    )
    write_config(
        project,
        pin,
        up_extra="""\
        pin_files:
          - path: Makefile
            pattern: 'UP_PIN = (?P<pin>[0-9a-f]{40})'
        """,
        series_extra="""\
        gates:
          - name: writes-here
            command: echo gate > gate-output.txt
            timeout: 30
        """,
    )
    (project.path / "Makefile").write_text(f"UP_PIN = {pin}\n")
    (project.path / ".gitignore").write_text(".patchctl/\n.swap-aside/\n")
    project.git("add", "-A")
    project.git("commit", "-q", "-m", "downstream")
    assert run_cli("-C", project.path, "apply").exit_code == 0
    upstream.commit({"src/util.c": numbered(31, "util")}, "upstream moves")
    sentinels = tmp_path / "outside"
    for relative in SWAPPED:
        twin = sentinels / relative.replace("/", "__")
        (twin / SERIES).mkdir(parents=True)
        (twin / "keep.txt").write_text("sentinel\n")
    return project, upstream, sentinels


# Each command under attack, after what puts the project where the command has work (run without
# swaps): the series' files and the pin as committed, no stopped sync, a tree applied.
APPLIED = (("pin-sync", "--abort"), ("apply", "--force"))
COMMANDS: tuple[tuple[tuple[tuple[str, ...], ...], tuple[str, ...]], ...] = (
    ((), ("lint",)),
    (APPLIED, ("apply", "--force")),
    (APPLIED, ("gate", SERIES)),
    (APPLIED, ("export", SERIES)),
    (APPLIED, ("pin-sync", UPSTREAM, "--latest")),
)


def _prepare(project: Project, steps: tuple[tuple[str, ...], ...]) -> None:
    project.git("checkout", "-q", "HEAD", "--", ".")  # what an earlier command wrote (the pin, patches)
    for args in steps:
        run_cli("-C", project.path, *args)


def _run(project: Project, args: tuple[str, ...]):
    """`patchctl -C PROJECT ARGS`, or what it raised out of main (a traceback: a problem, not the end)."""
    try:
        return run_cli("-C", project.path, *args)
    except Exception:  # noqa: BLE001 - judged, with the rest
        return CliResult(-1, "", f"raised out of main:\n{traceback.format_exc()}")


def _problems(args: tuple[str, ...], result) -> list[str]:
    errors = [line for line in result.stderr.splitlines() if line.startswith("patchctl: error:")]
    if result.exit_code not in DOCUMENTED or "Traceback" in result.output or len(errors) > 1:
        return [f"{' '.join(args)}: exit {result.exit_code}: {result.output[-1500:]}"]
    return []


def _changed(before: dict, after: dict) -> list[str]:
    return [
        f"{area}/{path}"
        for area in before
        for path in sorted(set(before[area]) | set(after[area]))
        if before[area].get(path) != after[area].get(path)
    ]


def test_swapping_every_directory_for_a_link_while_commands_run_changes_nothing_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHCTL_LOCK_TIMEOUT", "1")
    project, upstream, sentinels = _project(tmp_path)
    before = {"outside": snapshot(sentinels, ()), "upstream": snapshot(upstream.path, ())}
    swaps = Swaps(project.path, sentinels)
    _install_hook()
    problems, outcomes = [], []
    for schedule in SCHEDULES:
        for prepare, args in COMMANDS:
            _prepare(project, prepare)
            with AtOperations(swaps, schedule) as adversary:
                result = _run(project, args)
            outcomes.append((" ".join(args), schedule, adversary.operations, result.exit_code))
            if os.environ.get("RACE_VERBOSE"):
                print(outcomes[-1], result.stderr[-200:])
            problems += _problems(args, result)
    failures = []
    for prepare, args in COMMANDS:
        _prepare(project, prepare)
        freely = Freely(swaps)  # racing the command alone, not what puts the project in place for it
        freely.start()
        try:
            result = _run(project, args)
        finally:
            freely.stop.set()
            freely.join(timeout=30)
        failures += [freely.failure] if freely.failure else []
        outcomes.append((" ".join(args), "thread", 0, result.exit_code))
        problems += _problems(args, result)
    after = {"outside": snapshot(sentinels, ()), "upstream": snapshot(upstream.path, ())}
    assert failures == [], f"the swapping thread failed: {failures!r}"
    assert swaps.count > 100, f"few swaps ({swaps.count})"
    assert _changed(before, after) == [], f"written outside through a swapped link: {_changed(before, after)[:20]}"
    assert problems == [], "\n".join(problems)
    # Deep enough: with the swaps, each command still got far (and some ended as they do without them).
    assert {o[3] for o in outcomes} & {0, 1}, outcomes
    shutil.rmtree(project.path / ".swap-aside", ignore_errors=True)
