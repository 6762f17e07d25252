"""`python -m engine vectors`: write or check the block manager's conformance vectors.

    python -m engine vectors --out DIR      write every vector (JSON + text twin) into DIR
    python -m engine vectors --check DIR    exit 1 if DIR's vectors differ from fresh ones

Exit codes: 0 success, 1 drift found by --check, 2 bad usage or unreadable/unwritable DIR.
The format is documented in engine/conformance/vectors/FORMAT.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.conformance.files import CHECKED_IN_DIR, build_vector_files, compare_vector_dir, write_vector_files
from engine.tools.common import ArgumentParser, parse_args

EXIT_OK = 0
EXIT_DRIFT = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m engine vectors",
        description="Write or check the block manager's conformance vectors (the C++ port's bit-exact target).",
        epilog=f"The checked-in copy lives in {CHECKED_IN_DIR}."
        " Exit codes: 0 ok, 1 drift (--check), 2 usage or I/O error.",
    )
    parser.add_argument("--out", type=Path, help="directory to write the vectors into (created if missing)")
    parser.add_argument("--check", type=Path, help="directory whose vectors must equal freshly generated ones")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_args(_parser(), argv)
    if isinstance(args, int):
        return args
    if args.out is None and args.check is None:
        print("engine vectors: give --out DIR, --check DIR, or both", file=sys.stderr)
        return EXIT_USAGE
    files = build_vector_files()
    if args.out is not None:
        try:
            written = write_vector_files(args.out, files)
        except OSError as error:
            print(f"engine vectors: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
            return EXIT_USAGE
        print(f"wrote {len(written)} vector files ({len(written) // 2} vectors) to {args.out}")
    if args.check is not None:
        if not args.check.is_dir():
            print(f"engine vectors: {args.check} is not a directory", file=sys.stderr)
            return EXIT_USAGE
        drifts = compare_vector_dir(args.check, files)
        for drift in drifts:
            print(f"drift: {drift.file}: {drift.problem}")
        if drifts:
            print(f"{len(drifts)} vector files drifted in {args.check}; regenerate with --out", file=sys.stderr)
            return EXIT_DRIFT
        print(f"{len(files)} vector files in {args.check} match")
    return EXIT_OK
