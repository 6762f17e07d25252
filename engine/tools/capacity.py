"""`python -m engine capacity`: paged vs reserved concurrency, and prefix-sharing memory.

Deterministic and CPU only: it runs the real block manager, no tensors. Prints each ratio
with every parameter behind it. Exit codes: 0 success, 2 bad arguments (a workload past the
host's free memory included).

The published figures (9.2x at a 512-block budget, 11.3x for 32 tenants sharing a
1024-token prefix) state no workload beyond that. The defaults are the workload that
reproduces them, and the output says so: 46 sequences of 176 tokens (11 blocks each) fit
in 511 usable blocks where 5 max-context reservations of 1536 tokens (96 blocks) do, and 32
tenants with 64 own tokens (4 blocks) hold 64 + 32 x 4 = 192 blocks shared instead of
32 x 68 = 2176. Other workloads give other ratios: pass the parameters to see them.

Two measurements, both deterministic:

- Concurrency at a fixed KV budget: sequences admitted with on-demand blocks (each takes
  the blocks its tokens fill) against sequences that each reserve a whole max-context
  region up front, the way a contiguous per-sequence KV cache does. Both sides run on the
  same `KVCacheManager`; the reservation is an allocation with lookahead up to the max
  context.
- Memory for tenants sharing a system prompt: KV blocks in use once every tenant's prompt
  is allocated, with prefix caching on (the shared blocks are hit and held once) and off.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from engine.core.kv_cache_manager import KVCacheManager
from engine.core.limits import (
    MAX_BLOCK_SIZE,
    MAX_CONTEXT,
    MAX_NUM_BLOCKS,
    REQUEST_BOOKKEEPING_BYTES,
    TOKEN_BOOKKEEPING_BYTES,
    require_memory,
)
from engine.tools.common import ArgumentParser, int_in, parse_args, positive_int

PUBLISHED_CONCURRENCY_RATIO = 9.2
PUBLISHED_SHARING_RATIO = 11.3


@dataclass(frozen=True)
class ConcurrencyParams:
    num_blocks: int = 512
    block_size: int = 16
    max_context: int = 1536
    prompt_tokens: int = 128
    output_tokens: int = 48

    @property
    def sequence_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class ConcurrencyResult:
    params: ConcurrencyParams
    usable_blocks: int
    paged_sequences: int
    reserved_sequences: int

    @property
    def ratio(self) -> float:
        return self.paged_sequences / self.reserved_sequences


@dataclass(frozen=True)
class SharingParams:
    tenants: int = 32
    shared_prefix_tokens: int = 1024
    unique_tokens: int = 64
    block_size: int = 16
    num_layers: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    bytes_per_element: int = 2

    @property
    def bytes_per_block(self) -> int:
        return 2 * self.num_layers * self.block_size * self.n_kv_heads * self.head_dim * self.bytes_per_element


@dataclass(frozen=True)
class SharingResult:
    params: SharingParams
    blocks_with_caching: int
    blocks_without_caching: int

    @property
    def ratio(self) -> float:
        return self.blocks_without_caching / self.blocks_with_caching

    @property
    def bytes_with_caching(self) -> int:
        return self.blocks_with_caching * self.params.bytes_per_block

    @property
    def bytes_without_caching(self) -> int:
        return self.blocks_without_caching * self.params.bytes_per_block


def measure_concurrency(params: ConcurrencyParams) -> ConcurrencyResult:
    """Admit sequences until the pool refuses one, with on-demand blocks and with reservations."""
    if params.sequence_tokens > params.max_context:
        raise ValueError(f"a sequence of {params.sequence_tokens} tokens exceeds the max context {params.max_context}")
    if params.prompt_tokens < 1:
        raise ValueError("prompt_tokens must be positive")
    # every admitted sequence takes at least its blocks on demand; one more is refused
    most_admitted = params.num_blocks // -(-params.sequence_tokens // params.block_size) + 1
    held = most_admitted * (REQUEST_BOOKKEEPING_BYTES + params.prompt_tokens * TOKEN_BOOKKEEPING_BYTES)
    require_memory(held, "cpu", f"the requests of {most_admitted} sequences")
    paged = _admit(params, reserve_max_context=False)
    reserved = _admit(params, reserve_max_context=True)
    if reserved == 0:
        need = -(-params.max_context // params.block_size)
        raise ValueError(
            f"{params.num_blocks} blocks cannot hold one max-context reservation ({need} blocks plus the null "
            "block), so there is no ratio: raise --num-blocks or lower --max-context"
        )
    return ConcurrencyResult(params, params.num_blocks - 1, paged, reserved)


def _admit(params: ConcurrencyParams, reserve_max_context: bool) -> int:
    manager = KVCacheManager(params.num_blocks, params.block_size, enable_caching=False)
    admitted = 0
    while True:
        first_token = admitted * params.sequence_tokens
        request = manager.make_request(f"seq{admitted}", range(first_token, first_token + params.prompt_tokens))
        if reserve_max_context:
            blocks = manager.allocate_slots(
                request, params.prompt_tokens, num_lookahead_tokens=params.max_context - params.prompt_tokens
            )
        else:
            blocks = manager.allocate_slots(request, params.sequence_tokens)
        if blocks is None:
            return admitted
        admitted += 1


def measure_prefix_sharing(params: SharingParams) -> SharingResult:
    """KV blocks held by all tenants at once, with prefix caching on and off."""
    if params.tenants < 1 or params.unique_tokens < 1:
        raise ValueError("tenants and unique_tokens must be positive")
    prompt_tokens = params.shared_prefix_tokens + params.unique_tokens
    held = params.tenants * (REQUEST_BOOKKEEPING_BYTES + prompt_tokens * TOKEN_BOOKKEEPING_BYTES)
    require_memory(held, "cpu", f"the requests of {params.tenants} tenants")
    return SharingResult(params, _blocks_in_use(params, caching=True), _blocks_in_use(params, caching=False))


def _blocks_in_use(params: SharingParams, caching: bool) -> int:
    prompt_tokens = params.shared_prefix_tokens + params.unique_tokens
    blocks_per_tenant = -(-prompt_tokens // params.block_size)
    manager = KVCacheManager(params.tenants * blocks_per_tenant + 1, params.block_size, enable_caching=caching)
    shared = list(range(params.shared_prefix_tokens))
    for tenant in range(params.tenants):
        unique_start = 1_000_000 + tenant * params.unique_tokens
        request = manager.make_request(
            f"tenant{tenant}", shared + list(range(unique_start, unique_start + params.unique_tokens))
        )
        hit_blocks, hit_tokens = manager.get_computed_blocks(request)
        if manager.allocate_slots(request, prompt_tokens - hit_tokens, hit_tokens, hit_blocks) is None:
            raise AssertionError("the pool is sized for every tenant without sharing; allocation cannot fail")
    return manager.block_pool.num_gpu_blocks - 1 - manager.get_num_free_blocks()


def _parser() -> argparse.ArgumentParser:
    c, s = ConcurrencyParams(), SharingParams()
    parser = ArgumentParser(
        prog="python -m engine capacity",
        description="Concurrent sequences (on-demand paged blocks vs max-context reservation) and "
        "KV memory of tenants sharing a system prompt (prefix caching on vs off).",
    )
    parser.add_argument(
        "--num-blocks",
        type=int_in(1, MAX_NUM_BLOCKS),
        default=c.num_blocks,
        help="KV budget in blocks, null block included (%(default)s)",
    )
    parser.add_argument(
        "--block-size", type=int_in(1, MAX_BLOCK_SIZE), default=c.block_size, help="tokens per block (%(default)s)"
    )
    parser.add_argument(
        "--max-context",
        type=int_in(1, MAX_CONTEXT),
        default=c.max_context,
        help="tokens a reservation holds per sequence (%(default)s)",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int_in(1, MAX_CONTEXT),
        default=c.prompt_tokens,
        help="prompt tokens per sequence (%(default)s)",
    )
    parser.add_argument(
        "--output-tokens",
        type=int_in(0, MAX_CONTEXT),
        default=c.output_tokens,
        help="generated tokens per sequence (%(default)s)",
    )
    parser.add_argument(
        "--tenants", type=positive_int, default=s.tenants, help="tenants sharing the prefix (%(default)s)"
    )
    parser.add_argument(
        "--shared-prefix",
        type=int_in(0, MAX_CONTEXT),
        default=s.shared_prefix_tokens,
        help="shared system-prompt tokens (%(default)s)",
    )
    parser.add_argument(
        "--unique-tokens",
        type=int_in(1, MAX_CONTEXT),
        default=s.unique_tokens,
        help="each tenant's own prompt tokens (%(default)s)",
    )
    return parser


def _report_concurrency(result: ConcurrencyResult) -> list[str]:
    p = result.params
    return [
        "Concurrent sequences at a fixed KV budget",
        f"  budget: {p.num_blocks} blocks of {p.block_size} tokens"
        f" ({result.usable_blocks} usable: block 0 is the null block)",
        f"  sequence: {p.prompt_tokens} prompt + {p.output_tokens} generated = {p.sequence_tokens} tokens "
        f"({-(-p.sequence_tokens // p.block_size)} blocks on demand)",
        f"  reservation: max context {p.max_context} tokens ({-(-p.max_context // p.block_size)} blocks per sequence)",
        f"  paged (on demand): {result.paged_sequences} sequences",
        f"  reserved (max context): {result.reserved_sequences} sequences",
        f"  ratio: {result.ratio:.1f}x more concurrent sequences"
        f" (published: {PUBLISHED_CONCURRENCY_RATIO}x at 512 blocks; "
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
    args = parse_args(_parser(), argv)
    if isinstance(args, int):
        return args
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
