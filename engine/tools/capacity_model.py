"""How much the paged block manager buys, measured by running it (no tensors, CPU only).

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

from dataclasses import dataclass

from engine.core.kv_cache_manager import KVCacheManager


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
        return self.paged_sequences / self.reserved_sequences if self.reserved_sequences else float("inf")


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
    paged = _admit(params, reserve_max_context=False)
    reserved = _admit(params, reserve_max_context=True)
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
