"""`python -m engine bench [NAME] [--requests N] [--runs R]`: the engine's benchmarks.

Each benchmark is one entry of BENCHMARKS (name -> runner printing nothing, formatter);
with no NAME all of them run. Exit codes: 0 success, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from engine.block_bench import format_block_bench, run_block_bench


def _blocks(args: argparse.Namespace) -> list[str]:
    return format_block_bench(run_block_bench(args.requests, args.runs), args.requests, args.runs)


BENCHMARKS: dict[str, tuple[str, Callable[[argparse.Namespace], list[str]]]] = {
    "blocks": ("block manager: ops/s of allocate, decode, free, prefix hit, hashing", _blocks),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine bench", description="Run the engine's benchmarks.")
    parser.add_argument("name", nargs="?", choices=sorted(BENCHMARKS), help="one benchmark (default: all)")
    parser.add_argument("--requests", type=int, default=512, help="requests in the block-manager trace (%(default)s)")
    parser.add_argument("--runs", type=int, default=5, help="runs per benchmark; the median is reported (%(default)s)")
    args = parser.parse_args(argv)
    names = [args.name] if args.name else list(BENCHMARKS)
    try:
        for name in names:
            print("\n".join(BENCHMARKS[name][1](args)))
    except ValueError as error:
        print(f"engine bench: {error}", file=sys.stderr)
        return 2
    return 0
