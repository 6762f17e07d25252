"""Benchmark: what bisect adds to a red canary on a real series.

The series is rsync's 53 Debian `git format-patch` patches (see tests/patchctl/realseries.py;
fetched from deb.debian.org into the test cache on first use, sha256-checked). The upstream
is rsync 3.2.7 plus Debian's earlier patches, then four commits; the second changes a
context line of patch 0041 (stacked on earlier patches' changes to util1.c), so the canary
is red and bisect has a first-parent line of four commits to search.

The baseline, measured in the same run, is the same canary with `--no-bisect`; the result is
the ratio canary / canary --no-bisect (the target: at most 2x). Both run on a warm cache (a
first, untimed canary fills it).

    python bench/canary_bisect_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.patchctl import realseries  # noqa: E402
from tests.patchctl.conftest import run_cli  # noqa: E402
from tests.patchctl.test_real_series import make_project, red_upstream  # noqa: E402


def timed_canary(project: Path, out: Path, *args: str) -> tuple[float, dict]:
    start = time.perf_counter()
    result = run_cli("-C", project, "canary", "--json-file", out, *args)
    elapsed = time.perf_counter() - start
    if result.exit_code != 1:
        raise SystemExit(f"expected a red canary (exit 1), got {result.exit_code}: {result.output[-2000:]}")
    return elapsed, json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
        for _ in range(args.repeat):
            elapsed, _ = timed_canary(project, work / "plain.json", "--no-bisect")
            without.append(elapsed)
            elapsed, payload = timed_canary(project, work / "bisect.json")
            with_bisect.append(elapsed)
        failing = [p for s in payload["series"] for p in s["patches"] if p["verdict"] != "ok"]
        named = [p["breaking_commit"]["sha"] for p in failing if p.get("breaking_commit")]
        baseline, measured = statistics.median(without), statistics.median(with_bisect)
        print(f"series: rsync, {len(series.patches)} patches; failing: {', '.join(p['patch'] for p in failing)}")
        print(f"bisect named {named[0][:12] if named else 'nothing'} (the breaking commit is {breaking[:12]})")
        print(f"canary --no-bisect (baseline): median {baseline:.2f} s of {args.repeat}")
        print(f"canary with bisect:            median {measured:.2f} s of {args.repeat}")
        print(f"ratio bisect / no-bisect: {measured / baseline:.2f}x (target: at most 2x)")


if __name__ == "__main__":
    main()
