"""Hostile-input fuzz run: N hostile patches and N hostile matrix.yaml files through the real CLI,
and N hostile GGUF files through the engine's loader.

    python bench/hostile_fuzz.py --patches 1000 --configs 1000 --ggufs 1000 [--seed 1]

Prints, per kind, the cases run and the problems found: tracebacks, escapes (a write outside
the sandbox's own areas, or a symlink out of an applied tree), unexpected exit codes, package
code executed, and an applied tree changed by a failed apply. Exits 1 when any is non-zero.
The generators and the judges are those of the CI subsets (tests/patchctl/hostile_gen.py,
tests/engine/hostile_gguf.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.engine.hostile_gguf import GGUFTally, run_gguf_cases  # noqa: E402
from tests.patchctl.hostile_gen import Tally, make_sandbox, run_config_cases, run_patch_cases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=int, default=1000, help="hostile patches to run (default 1000)")
    parser.add_argument("--configs", type=int, default=1000, help="hostile configs to run (default 1000)")
    parser.add_argument("--ggufs", type=int, default=1000, help="hostile GGUF files to load (default 1000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="patchctl-hostile-") as tmp:
        os.environ["PATCHCTL_CACHE"] = str(Path(tmp) / "sandbox" / "cache")
        os.environ.pop("PATCHCTL_UPSTREAM_URL", None)
        box = make_sandbox(Path(tmp) / "sandbox")
        results = []
        for label, runner, count in (
            ("patches", run_patch_cases, args.patches),
            ("configs", run_config_cases, args.configs),
        ):
            start = time.monotonic()
            tally = runner(box, count, args.seed, Tally())
            print(f"{tally.summary(label)} seconds={time.monotonic() - start:.1f}", flush=True)
            for example in tally.examples:
                print("  " + example)
            results.append(tally)
        start = time.monotonic()
        ggufs = run_gguf_cases(Path(tmp) / "ggufs", args.ggufs, args.seed, GGUFTally())
        print(f"{ggufs.summary()} seconds={time.monotonic() - start:.1f}", flush=True)
        for example in ggufs.examples:
            print("  " + example)
    return 0 if all(t.ok for t in results) and ggufs.ok else 1


if __name__ == "__main__":
    sys.exit(main())
