"""The block manager's cost per operation on a fixed, deterministic trace (pure Python).

Operations timed, each over the same trace of `num_requests` prompts of PROMPT_TOKENS tokens
(block size 16, a pool large enough that nothing is refused):

- hash:     creating the requests (SHA-256 block hashes of every full block);
- allocate: `get_computed_blocks` (a miss) + `allocate_slots` of the whole prompt;
- decode:   `allocate_slots` of one token, DECODE_STEPS steps per request;
- free:     `free` of every request (its blocks stay cached);
- hit:      the same prompts again: `get_computed_blocks` (a hit on all but the last block)
            + `allocate_slots` with the hits.

vLLM's own Python block manager is the target to compare with; it cannot be imported
without its GPU dependency tree, so only per-operation costs are reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.core.kv_cache_manager import KVCacheManager
from engine.core.request import Request

BLOCK_SIZE = 16
PROMPT_TOKENS = 8 * BLOCK_SIZE + 3
DECODE_STEPS = BLOCK_SIZE


@dataclass(frozen=True)
class OpTiming:
    name: str
    operations: int
    blocks: int
    seconds: float

    @property
    def us_per_op(self) -> float:
        return self.seconds / self.operations * 1e6

    @property
    def ops_per_s(self) -> float:
        return self.operations / self.seconds

    @property
    def us_per_block(self) -> float:
        return self.seconds / self.blocks * 1e6


def run_block_bench(num_requests: int = 512, runs: int = 5) -> list[OpTiming]:
    """Median timing of each operation over `runs` runs of the trace."""
    if num_requests < 1 or runs < 1:
        raise ValueError("num_requests and runs must be positive")
    samples = [_one_run(num_requests) for _ in range(runs)]
    prompt_blocks = -(-PROMPT_TOKENS // BLOCK_SIZE)
    final_blocks = -(-(PROMPT_TOKENS + DECODE_STEPS) // BLOCK_SIZE)
    shape = {
        "hash": (num_requests, num_requests * (PROMPT_TOKENS // BLOCK_SIZE)),
        "allocate": (num_requests, num_requests * prompt_blocks),
        "decode": (num_requests * DECODE_STEPS, num_requests * (final_blocks - prompt_blocks)),
        "free": (num_requests, num_requests * final_blocks),
        "hit": (num_requests, num_requests * prompt_blocks),
    }
    return [
        OpTiming(name, operations, blocks, statistics.median(sample[name] for sample in samples))
        for name, (operations, blocks) in shape.items()
    ]


def _one_run(num_requests: int) -> dict[str, float]:
    blocks_per_request = -(-(PROMPT_TOKENS + DECODE_STEPS) // BLOCK_SIZE)
    manager = KVCacheManager(2 * num_requests * blocks_per_request + 1, BLOCK_SIZE)
    prompts = [[(r * 7919 + t) % 32000 for t in range(PROMPT_TOKENS)] for r in range(num_requests)]
    seconds: dict[str, float] = {}

    def timed(name: str, action: Callable[[], object]) -> None:
        start = time.perf_counter()
        action()
        seconds[name] = time.perf_counter() - start

    def allocate_all(requests: list[Request]) -> None:
        for request in requests:
            hit, hit_tokens = manager.get_computed_blocks(request)
            if manager.allocate_slots(request, request.num_tokens - hit_tokens, hit_tokens, hit) is None:
                raise RuntimeError("the pool is sized for the whole trace; allocation cannot fail")
            request.num_computed_tokens = request.num_tokens

    def decode_all(requests: list[Request]) -> None:
        for step in range(DECODE_STEPS):
            for request in requests:
                request.append_output_token_ids(step)
                manager.allocate_slots(request, 1)
                request.num_computed_tokens += 1

    def free_all(requests: list[Request]) -> None:
        for request in requests:
            manager.free(request)

    first: list[Request] = []
    timed("hash", lambda: first.extend(manager.make_request(f"a{r}", p) for r, p in enumerate(prompts)))
    timed("allocate", lambda: allocate_all(first))
    timed("decode", lambda: decode_all(first))
    timed("free", lambda: free_all(first))
    second = [manager.make_request(f"b{r}", p) for r, p in enumerate(prompts)]
    timed("hit", lambda: allocate_all(second))
    free_all(second)
    return seconds


def format_block_bench(timings: list[OpTiming], num_requests: int, runs: int) -> list[str]:
    lines = [
        f"block manager: {num_requests} requests x {PROMPT_TOKENS} prompt tokens, block size {BLOCK_SIZE}, "
        f"{DECODE_STEPS} decode steps; median of {runs} runs",
        f"  {'operation':<10} {'ops':>7} {'ops/s':>11} {'us/op':>9} {'us/block':>9}",
    ]
    for t in timings:
        lines.append(
            f"  {t.name:<10} {t.operations:>7} {t.ops_per_s:>11,.0f} {t.us_per_op:>9.2f} {t.us_per_block:>9.2f}"
        )
    lines.append(
        "  vLLM side by side: not run (its block manager imports vLLM's GPU dependency tree); per-op cost only"
    )
    return lines
