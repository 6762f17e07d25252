"""Benchmark: the block manager's cost per operation on a fixed, deterministic trace.

    python bench/blocks_bench.py [--requests 512] [--runs 5]

Same as `python -m engine bench blocks`; the trace is described in engine/tools/bench_blocks.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.tools.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["blocks", *sys.argv[1:]]))
