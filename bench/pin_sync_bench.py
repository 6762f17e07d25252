"""Benchmark: pin-sync of a 30-patch series on the real llama.cpp tree (0.3.30 -> 0.3.33),
with a warm cache and no compile, in seconds split by phase.

The series is generated on the fly at the pin: one commit per source file, each inserting
a line in the middle of the file, files that upstream changed between the two versions
first (so offsets and 3-way merges are exercised), exported with `patchctl export`.
The baseline, measured in the same run, is `patchctl apply` of the same series at its
pin (a checkout plus 30 strict applies): pin-sync is reported as a ratio of it.

    python bench/pin_sync_bench.py [--patches 30] [--repeat 3]

Uses the shared cache ($PATCHCTL_CACHE or ~/.cache/patchctl); the first run ever builds
the sdist upstream (about 25 s), which is not timed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchctl import git
from patchctl.loop import sync
from patchctl.project import config as config_mod  # noqa: E402
from patchctl.series import apply_job, exporter
from patchctl.upstream.store import Store  # noqa: E402

URL = "pypi-sdist:llama-cpp-python?versions=0.3.30,0.3.33&subdir=vendor/llama.cpp"
PIN = "296d9b60b97f6eeb1df161fefb921a44c04a1122"
TIP = "aa601ae300d05a804f5f68940ab6fa75fc9653d3"
PHASES = ("resolve", "checkout", "replay", "export", "strict-apply", "write")

CONFIG = f"""\
version: 1
upstreams:
  up:
    url: '{URL}'
    branch: main
    pin: {PIN}  # benchmark pin
series:
  bench:
    upstream: up
    dir: patches/bench
"""


def pick_files(mirror: Path, count: int) -> list[str]:
    at_pin = set(git.run(["ls-tree", "-r", "--name-only", PIN], mirror).stdout.split())
    at_tip = set(git.run(["ls-tree", "-r", "--name-only", TIP], mirror).stdout.split())
    sources = sorted(p for p in at_pin & at_tip if p.startswith(("src/", "ggml/src/")) and p.endswith((".cpp", ".c")))
    changed = set(git.run(["diff", "--name-only", PIN, TIP], mirror).stdout.split())
    ordered = [p for p in sources if p in changed] + [p for p in sources if p not in changed]
    return ordered[:count]


def changed_ranges(mirror: Path, path: str) -> list[tuple[int, int]]:
    """Line ranges (1-based, inclusive) of PATH at the pin that upstream changed by the tip."""
    out = git.run(["diff", "-U0", PIN, TIP, "--", path], mirror).stdout
    ranges = []
    for match in re.finditer(r"^@@ -(\d+)(?:,(\d+))? ", out, re.MULTILINE):
        start, length = int(match[1]), int(match[2] or 1)
        ranges.append((start, start + max(length, 1) - 1))
    return ranges


def insertion_line(mirror: Path, path: str, count: int, *, near: bool) -> int:
    """Where to insert (0-based index): 3 lines from a changed range when NEAR, else the
    line closest to the middle that is at least 8 lines from every changed range."""
    ranges = changed_ranges(mirror, path)
    if near:
        for start, _ in ranges:
            # Inserted before line start-2: its trailing context reaches the changed line
            # (a strict failure), yet two unchanged lines separate the edits (3-way merges).
            candidate = start - 3
            if candidate >= 8 and all(e < candidate - 8 or s >= start for s, e in ranges):
                return candidate
    middle = count // 2
    for offset in range(count):
        for candidate in (middle - offset, middle + offset):
            if 0 <= candidate <= count and all(candidate + 8 < s or candidate - 8 > e for s, e in ranges):
                return candidate
    return 0


def make_project(root: Path, store: Store, count: int) -> Path:
    project = root / "project"
    (project / "patches" / "bench").mkdir(parents=True)
    (project / "matrix.yaml").write_text(CONFIG)
    mirror = store.mirror(URL)
    work = root / "work"
    store.add_worktree(mirror, PIN, work)
    try:
        for number, path in enumerate(pick_files(mirror.path, count), 1):
            target = work / path
            lines = target.read_text(errors="surrogateescape").splitlines(keepends=True)
            # Every fifth patch sits close to an upstream change (a 3-way merge); the rest
            # keep clear of them (clean or offset). None conflicts.
            at = insertion_line(mirror.path, path, len(lines), near=number % 5 == 0)
            lines.insert(at, f"// downstream change {number}\n")
            target.write_text("".join(lines), errors="surrogateescape")
            git.commit_all(work, f"Downstream change {number} in {path}\n\nBenchmark patch.")
        exporter.export(config_mod.load(project / "matrix.yaml"), "bench", work)
    finally:
        store.remove_worktree(mirror, work)
    return project


def time_apply(project: Path, store: Store, into: Path) -> float:
    config = config_mod.load(project / "matrix.yaml")
    start = time.perf_counter()
    apply_job.apply(config, store, ("bench",), into=into)
    elapsed = time.perf_counter() - start
    shutil.rmtree(into, ignore_errors=True)
    git.run(["worktree", "prune"], store.mirror(URL).path)
    return elapsed


def time_sync(template: Path, scratch: Path, store: Store) -> tuple[float, dict[str, float], Counter]:
    project = scratch / "sync-project"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(template, project)
    config = config_mod.load(project / "matrix.yaml")
    start = time.perf_counter()
    report = sync.pin_sync(config, store, "up", to=TIP)
    elapsed = time.perf_counter() - start
    assert report.state == "synced", report.state
    return elapsed, dict(report.phase_seconds), Counter(p.classification for p in report.patches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    store = Store()
    store.mirror(URL)  # warm the cache (untimed)
    with tempfile.TemporaryDirectory(prefix="patchctl-bench-") as tmp:
        root = Path(tmp)
        project = make_project(root, store, args.patches)
        patches = len(list((project / "patches" / "bench").glob("*.patch")))
        applies, syncs, phases = [], [], []
        classes: Counter = Counter()
        for _ in range(args.repeat):
            applies.append(time_apply(project, store, root / "applied"))
            total, split, classes = time_sync(project, root, store)
            syncs.append(total)
            phases.append(split)
        base, sync = statistics.median(applies), statistics.median(syncs)
        split = phases[syncs.index(sync)] if sync in syncs else phases[0]  # the median run's own split
        print(
            f"pin-sync benchmark: {patches} patches, llama.cpp {PIN[:12]} -> {TIP[:12]},"
            f" warm cache, no compile, median of {args.repeat}"
        )
        print(f"  classifications: {dict(classes)}")
        print(f"  baseline `patchctl apply` at the pin: {base:7.2f} s")
        print(f"  pin-sync total:                       {sync:7.2f} s   ({sync / base:.2f}x the baseline)")
        for phase in PHASES:
            value = split.get(phase, 0.0)
            print(f"    {phase:<13} {value:7.2f} s   ({value / sync:5.1%})")
        other = sync - sum(split.get(ph, 0.0) for ph in PHASES)
        print(f"    {'other':<13} {other:7.2f} s   (gates bookkeeping, history listing, cleanup)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
