"""`python -m engine capacity`: paged vs reserved concurrency, and prefix-sharing memory.

Deterministic and CPU only: it runs the real block manager, no tensors. Prints each ratio
with every parameter behind it. Exit codes: 0 success, 2 bad arguments.

The published figures (9.2x at a 512-block budget, 11.3x for 32 tenants sharing a
1024-token prefix) state no workload beyond that. The defaults are the workload that
reproduces them, and the output says so: 46 sequences of 176 tokens (11 blocks each) fit
in 511 usable blocks where 5 max-context reservations of 1536 tokens (96 blocks) do, and 32
tenants with 64 own tokens (4 blocks) hold 64 + 32 x 4 = 192 blocks shared instead of
32 x 68 = 2176. Other workloads give other ratios: pass the parameters to see them.
"""

from __future__ import annotations

import argparse
import sys

from engine.tools.capacity_model import (
    ConcurrencyParams,
    ConcurrencyResult,
    SharingParams,
    SharingResult,
    measure_concurrency,
    measure_prefix_sharing,
)

PUBLISHED_CONCURRENCY_RATIO = 9.2
PUBLISHED_SHARING_RATIO = 11.3


def _parser() -> argparse.ArgumentParser:
    c, s = ConcurrencyParams(), SharingParams()
    parser = argparse.ArgumentParser(
        prog="python -m engine capacity",
        description="Concurrent sequences (on-demand paged blocks vs max-context reservation) and "
        "KV memory of tenants sharing a system prompt (prefix caching on vs off).",
    )
    parser.add_argument(
        "--num-blocks", type=int, default=c.num_blocks, help="KV budget in blocks, null block included (%(default)s)"
    )
    parser.add_argument("--block-size", type=int, default=c.block_size, help="tokens per block (%(default)s)")
    parser.add_argument(
        "--max-context", type=int, default=c.max_context, help="tokens a reservation holds per sequence (%(default)s)"
    )
    parser.add_argument(
        "--prompt-tokens", type=int, default=c.prompt_tokens, help="prompt tokens per sequence (%(default)s)"
    )
    parser.add_argument(
        "--output-tokens", type=int, default=c.output_tokens, help="generated tokens per sequence (%(default)s)"
    )
    parser.add_argument("--tenants", type=int, default=s.tenants, help="tenants sharing the prefix (%(default)s)")
    parser.add_argument(
        "--shared-prefix", type=int, default=s.shared_prefix_tokens, help="shared system-prompt tokens (%(default)s)"
    )
    parser.add_argument(
        "--unique-tokens", type=int, default=s.unique_tokens, help="each tenant's own prompt tokens (%(default)s)"
    )
    return parser


def _report_concurrency(result: ConcurrencyResult) -> list[str]:
    p = result.params
    return [
        "Concurrent sequences at a fixed KV budget",
        f"  budget: {p.num_blocks} blocks of {p.block_size} tokens ({result.usable_blocks} usable: block 0 is the null block)",
        f"  sequence: {p.prompt_tokens} prompt + {p.output_tokens} generated = {p.sequence_tokens} tokens "
        f"({-(-p.sequence_tokens // p.block_size)} blocks on demand)",
        f"  reservation: max context {p.max_context} tokens ({-(-p.max_context // p.block_size)} blocks per sequence)",
        f"  paged (on demand): {result.paged_sequences} sequences",
        f"  reserved (max context): {result.reserved_sequences} sequences",
        f"  ratio: {result.ratio:.1f}x more concurrent sequences (published: {PUBLISHED_CONCURRENCY_RATIO}x at 512 blocks; "
        "its sequence length and max context are not published, these defaults reproduce it)",
    ]


def _report_sharing(result: SharingResult) -> list[str]:
    p = result.params
    mib = 1024 * 1024
    return [
        "KV memory for tenants sharing a system prompt",
        f"  tenants: {p.tenants}, each {p.shared_prefix_tokens} shared + {p.unique_tokens} own prompt tokens, "
        f"block size {p.block_size}",
        f"  block bytes: {p.bytes_per_block} (K+V, {p.num_layers} layers x {p.n_kv_heads} KV heads x "
        f"{p.head_dim} dims x {p.bytes_per_element} bytes x {p.block_size} tokens)",
        f"  prefix caching off: {result.blocks_without_caching} blocks ({result.bytes_without_caching / mib:.0f} MiB)",
        f"  prefix caching on:  {result.blocks_with_caching} blocks ({result.bytes_with_caching / mib:.0f} MiB)",
        f"  ratio: {result.ratio:.1f}x less KV memory (published: {PUBLISHED_SHARING_RATIO}x for 32 tenants and a "
        "1024-token prefix; the tenants' own prompt length is not published, 49 to 64 tokens reproduce it)",
    ]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        concurrency = measure_concurrency(
            ConcurrencyParams(
                args.num_blocks, args.block_size, args.max_context, args.prompt_tokens, args.output_tokens
            )
        )
        sharing = measure_prefix_sharing(
            SharingParams(
                tenants=args.tenants,
                shared_prefix_tokens=args.shared_prefix,
                unique_tokens=args.unique_tokens,
                block_size=args.block_size,
            )
        )
    except ValueError as error:
        print(f"engine capacity: {error}", file=sys.stderr)
        return 2
    print("\n".join(_report_concurrency(concurrency) + [""] + _report_sharing(sharing)))
    return 0
