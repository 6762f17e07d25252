"""`python -m engine bench [NAME] [--requests N] [--runs R]`: the engine's benchmarks.

Each benchmark is one entry of BENCHMARKS (name -> runner printing nothing, formatter);
with no NAME all but `spec` run. `decode` compares the paged engine's CPU decode tokens/s
with the contiguous-KV reference as a ratio; `gpu` (`engine.tools.bench_gpu`: the Triton
kernels against SDPA, decode GB/s against the card's peak, prefill TFLOP/s) needs CUDA:
named alone without it, it exits 3 with one line; in the default run it prints that it was
skipped. `spec` (speculative decoding per proposer and k against non-speculative decoding
in the same run; minutes on CPU) runs only when named. Exit codes: 0 success, 1 a
speculative run's tokens differed from the baseline's, 2 bad arguments, 3 no CUDA for `gpu`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from engine.core.limits import MAX_BLOCK_SIZE, MAX_CONTEXT
from engine.tools.bench_blocks import format_block_bench, run_block_bench
from engine.tools.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NO_DEVICE,
    EXIT_OK,
    ArgumentParser,
    int_in,
    parse_args,
    positive_int,
    progress_display,
    torch_device,
)


class BenchmarkMismatch(Exception):
    """A benchmark's outputs differ where they must be equal."""


def _blocks(args: argparse.Namespace) -> list[str]:
    return format_block_bench(run_block_bench(args.requests, args.runs), args.requests, args.runs)


def _decode(args: argparse.Namespace) -> list[str]:
    from engine.tools.bench_decode import format_cpu_decode, run_cpu_decode

    # the display shows for long runs only: progress_display counts decode tokens
    with progress_display("CPU decode", args.runs * args.batch * args.steps) as progress:
        done = [0]

        def one_run() -> None:
            done[0] += args.batch * args.steps
            if progress is not None:
                progress(done[0], args.runs * args.batch * args.steps)

        result = run_cpu_decode(args.batch, args.context, args.steps, args.runs, args.kv_type, one_run)
    return format_cpu_decode(result, args.runs)


def _gpu(args: argparse.Namespace) -> list[str]:
    from engine.tools.bench_gpu import AttentionShape, format_gpu_bench, run_gpu_bench

    shape = AttentionShape(block_size=args.block_size)
    kv_types = args.gpu_kv_type or ["f16", "q8_0", "q4_0"]
    batches = args.gpu_batch or [1, 8, 32, 64]
    contexts = args.gpu_context or [2048, 4096, 32768]
    if min([args.gpu_iters, args.block_size, *batches, *contexts]) < 1:
        raise ValueError("gpu batch sizes, contexts, iterations and block size must be >= 1")
    return format_gpu_bench(run_gpu_bench(batches, contexts, kv_types, iters=args.gpu_iters, shape=shape), shape)


def _spec(args: argparse.Namespace) -> list[str]:
    import torch

    from engine.tools.bench_spec import BENCH_PROMPTS, SPEC_METHODS, format_spec_bench, run_spec_bench

    try:
        ks = sorted({int(k) for k in args.spec_ks.split(",")})
    except ValueError:
        raise ValueError(f"--spec-ks: expected comma-separated integers, got {args.spec_ks!r}") from None
    if not all(k >= 1 for k in ks):
        raise ValueError(f"--spec-ks: every k must be >= 1, got {args.spec_ks!r}")
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    # the tiny model's matrices are too small to split: extra threads only spin, worst on a loaded machine
    torch.set_num_threads(args.threads)
    # the display counts generated tokens: it shows for long runs only
    total = args.spec_runs * (1 + len(SPEC_METHODS) * len(ks)) * len(BENCH_PROMPTS) * args.spec_tokens
    with progress_display("speculative decoding", total) as progress:

        def measured(done: int, wanted: int) -> None:
            if progress is not None:
                progress(done * total // wanted, total)

        result = run_spec_bench(ks, args.spec_tokens, args.spec_runs, args.device, SPEC_METHODS, measured)
    different = [f"{r.method} k={r.k}" for r in result.rows if not r.same_tokens]
    if different:
        print("\n".join(format_spec_bench(result)))
        raise BenchmarkMismatch(f"speculative tokens differ from the baseline's: {', '.join(different)}")
    return format_spec_bench(result)


def _serve(args: argparse.Namespace) -> list[str]:
    from engine.tools.bench_serve import ServeWorkload, format_serve_bench, run_serve_bench

    workload = ServeWorkload(args.serve_requests, args.serve_prompt, args.serve_output, args.serve_seqs)
    return format_serve_bench(run_serve_bench(workload, args.serve_shape, args.device, args.serve_kv_type))


BENCHMARKS: dict[str, tuple[str, Callable[[argparse.Namespace], list[str]]]] = {
    "blocks": ("block manager: ops/s of allocate, decode, free, prefix hit, hashing", _blocks),
    "decode": ("CPU decode tok/s: paged engine vs contiguous-KV reference, as a ratio", _decode),
    "gpu": ("Triton decode GB/s (batch x context x KV type) and prefill TFLOP/s vs SDPA (CUDA only)", _gpu),
    "spec": ("speculative decoding: acceptance, tokens/forward, speed-up per proposer and k", _spec),
    "serve": ("serving: paged engine, continuous batching vs plain torch + SDPA, static batches", _serve),
}
DEFAULT_BENCHMARKS = ("blocks", "decode", "gpu")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m engine bench", description="Run the engine's benchmarks.")
    parser.add_argument("name", nargs="?", choices=sorted(BENCHMARKS), help="one benchmark (default: all)")
    parser.add_argument(
        "--requests", type=positive_int, default=512, help="requests in the block-manager trace (%(default)s)"
    )
    parser.add_argument(
        "--runs", type=positive_int, default=5, help="runs per benchmark; the median is reported (%(default)s)"
    )
    parser.add_argument("--batch", type=positive_int, default=8, help="decode: sequences per batch (%(default)s)")
    parser.add_argument(
        "--context", type=int_in(1, MAX_CONTEXT), default=64, help="decode: prompt tokens per sequence (%(default)s)"
    )
    parser.add_argument(
        "--steps", type=positive_int, default=64, help="decode: decode steps timed per run (%(default)s)"
    )
    parser.add_argument("--kv-type", default="f32", help="decode: paged KV cache type (%(default)s)")
    parser.add_argument(
        "--gpu-batch", type=positive_int, action="append", help="gpu: batch sizes, repeatable (1 8 32 64)"
    )
    parser.add_argument(
        "--gpu-context",
        type=int_in(1, MAX_CONTEXT),
        action="append",
        help="gpu: contexts, repeatable (2048 4096 32768)",
    )
    parser.add_argument("--gpu-kv-type", action="append", help="gpu: KV types, repeatable (f16 q8_0 q4_0)")
    parser.add_argument(
        "--gpu-iters", type=positive_int, default=20, help="gpu: timed calls per point, median (%(default)s)"
    )
    parser.add_argument(
        "--block-size", type=int_in(1, MAX_BLOCK_SIZE), default=16, help="gpu: KV block size (%(default)s)"
    )
    parser.add_argument("--spec-ks", default="1,2,3,4,5,6,7,8", help="spec: the k values (%(default)s)")
    parser.add_argument("--spec-tokens", type=positive_int, default=96, help="spec: tokens per prompt (%(default)s)")
    parser.add_argument("--spec-runs", type=positive_int, default=3, help="spec: runs per configuration (%(default)s)")
    parser.add_argument("--serve-requests", type=positive_int, default=32, help="serve: requests (%(default)s)")
    parser.add_argument("--serve-prompt", type=positive_int, default=64, help="serve: prompt tokens (%(default)s)")
    parser.add_argument("--serve-output", type=positive_int, default=64, help="serve: max output tokens (%(default)s)")
    parser.add_argument("--serve-seqs", type=positive_int, default=8, help="serve: sequences at once (%(default)s)")
    parser.add_argument("--serve-shape", choices=("tiny", "1b"), default="tiny", help="serve: model (%(default)s)")
    parser.add_argument("--serve-kv-type", default="f32", help="serve: paged KV cache type (%(default)s)")
    parser.add_argument(
        "--device", default="cpu", type=torch_device, help="spec, serve: torch device; cuda runs Triton (%(default)s)"
    )
    parser.add_argument("--threads", type=positive_int, default=1, help="spec: torch CPU threads (%(default)s)")
    args = parse_args(parser, argv)
    if isinstance(args, int):
        return args
    names = [args.name] if args.name else list(DEFAULT_BENCHMARKS)
    from engine.tools.bench_gpu import CudaUnavailable

    try:
        for name in names:
            try:
                lines = BENCHMARKS[name][1](args)
            except CudaUnavailable as error:
                if args.name:
                    print(f"engine bench: {error}", file=sys.stderr)
                    return EXIT_NO_DEVICE
                lines = [f"{name}: skipped, {error}"]
            if lines:
                print("\n".join(lines))
    except ValueError as error:
        print(f"engine bench: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BenchmarkMismatch as error:
        print(f"engine bench: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
