"""Fault injection, full run: kill pin-sync, export, apply and matrix render at every file
operation they perform, and judge what each kill leaves.

    python bench/fault_injection.py [--scenario NAME ...] [--every K]

For each scenario prints the operations a clean run performs and, over the kill points,
the kills, mixed states, lost trees, failed recoveries, stray temp files and tracebacks
(see tests/patchctl/faultinject.py for the judge). Exits 1 when any problem was counted.
The CI subset (tests/patchctl/test_fault_injection.py) runs every k-th point.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.patchctl.faultinject import SCENARIOS, run_scenario  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--every", type=int, default=1, help="kill at every K-th operation (default 1: all)")
    args = parser.parse_args()
    tallies = []
    with tempfile.TemporaryDirectory(prefix="patchctl-faults-") as tmp:
        for name in args.scenario or list(SCENARIOS):
            start = time.monotonic()
            tally = run_scenario(name, Path(tmp) / name, every=args.every)
            print(f"{tally.summary()} seconds={time.monotonic() - start:.1f}", flush=True)
            for example in tally.examples:
                print("  " + example)
            tallies.append(tally)
    total = sum(t.points for t in tallies)
    problems = sum(t.mixed + t.lost_trees + t.failed_recoveries + t.stray_temp_files + t.tracebacks for t in tallies)
    print(f"total: points={total} problems={problems}")
    return 0 if all(t.ok for t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
