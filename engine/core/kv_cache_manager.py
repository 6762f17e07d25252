"""KVCacheManager: per-request block tables on top of the BlockPool, with prefix caching (vLLM V1).

The engine has one KV cache group (full attention, one block size), so vLLM's coordinator
and single-type managers fold into this class; `KVCacheBlocks` keeps vLLM's per-group tuple
shape so that code written against vLLM reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.core.block_pool import BlockPool, FreeOrder
from engine.core.hashing import get_request_block_hasher
from engine.core.kv_cache_block import KVCacheBlock
from engine.core.request import Request


@dataclass(slots=True)
class KVCacheBlocks:
    """Blocks handed to the scheduler: `blocks[group][i]`, here always exactly one group."""

    blocks: tuple[Sequence[KVCacheBlock], ...]

    def __add__(self, other: KVCacheBlocks) -> KVCacheBlocks:
        return KVCacheBlocks(tuple([*mine, *theirs] for mine, theirs in zip(self.blocks, other.blocks)))

    def get_block_ids(self) -> tuple[list[int], ...]:
        return tuple([block.block_id for block in group] for group in self.blocks)


@dataclass(slots=True)
class PrefixCacheStats:
    """Prefix-cache lookups since the manager started or since the last reset."""

    requests: int = 0
    queries: int = 0
    hits: int = 0
    reset: bool = False


@dataclass
class KVCacheManager:
    """Allocates, caches and frees the KV blocks of requests.

    `max_model_len`, when set, caps the slots a request can ask for (lookahead included).
    """

    num_blocks: int
    block_size: int
    enable_caching: bool = True
    free_order: FreeOrder = "prepend-unhashed"
    max_model_len: int | None = None
    block_pool: BlockPool = field(init=False)
    req_to_blocks: dict[str, list[KVCacheBlock]] = field(init=False, default_factory=dict)
    num_cached_block: dict[str, int] = field(init=False, default_factory=dict)
    prefix_cache_stats: PrefixCacheStats = field(init=False, default_factory=PrefixCacheStats)

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError(f"block_size must be positive, got {self.block_size}")
        self.block_pool = BlockPool(self.num_blocks, self.enable_caching, self.free_order)
        self._block_hasher = get_request_block_hasher(self.block_size)
        self._empty = KVCacheBlocks(((),))

    def make_request(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        cache_salt: str | None = None,
        adapter_name: str | None = None,
    ) -> Request:
        """A request whose block hashes follow this manager's block size."""
        return Request(
            request_id,
            list(prompt_token_ids),
            cache_salt=cache_salt,
            adapter_name=adapter_name,
            block_hasher=self._block_hasher,
        )

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def get_computed_blocks(self, request: Request) -> tuple[KVCacheBlocks, int]:
        """The longest cached prefix of the request, in full blocks, and its token count.

        A hit never covers the whole request: its last token is recomputed to get its
        logits, so the lookup stops at `num_tokens - 1` tokens (which, blocks being whole,
        may cost a whole block of recompute). Nothing is touched: the caller passes the
        blocks to `allocate_slots`, which takes the references.
        """
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return self._empty, 0
        max_hit_blocks = (request.num_tokens - 1) // self.block_size
        if len(request.block_hashes) < max_hit_blocks:
            raise ValueError(
                f"request {request.request_id!r} has {len(request.block_hashes)} block hashes for "
                f"{request.num_tokens} tokens: create it with KVCacheManager.make_request"
            )
        hits: list[KVCacheBlock] = []
        for block_hash in request.block_hashes[:max_hit_blocks]:
            block = self.block_pool.get_cached_block(block_hash)
            if block is None:
                break
            hits.append(block)
        num_computed_tokens = len(hits) * self.block_size
        stats = self.prefix_cache_stats
        stats.requests += 1
        stats.queries += request.num_tokens
        stats.hits += num_computed_tokens
        return KVCacheBlocks((hits,)), num_computed_tokens

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: KVCacheBlocks | None = None,
        num_lookahead_tokens: int = 0,
        delay_cache_blocks: bool = False,
    ) -> KVCacheBlocks | None:
        """Make room for `num_new_tokens` more tokens (plus lookahead) and return the new blocks.

        Layout of the request's tokens:
        | computed (request.num_computed_tokens) | new computed (prefix hit) | new | lookahead |

        The prefix-hit blocks come from `get_computed_blocks`; a hit block that sits in the
        free queue counts against the free blocks, since taking it removes it from there.
        Returns None, having changed nothing, if the free blocks do not suffice. Otherwise
        it takes references on the hit blocks, appends fresh blocks, and caches every block
        that the computed and new tokens fill (never beyond `request.num_tokens`, so
        unverified lookahead tokens are not cached).
        """
        if num_new_tokens <= 0:
            raise ValueError(f"num_new_tokens must be positive, got {num_new_tokens}")
        if num_lookahead_tokens < 0:
            raise ValueError(f"num_lookahead_tokens must be >= 0, got {num_lookahead_tokens}")
        computed = list(new_computed_blocks.blocks[0]) if new_computed_blocks is not None else []
        if num_new_computed_tokens != len(computed) * self.block_size:
            raise ValueError(
                f"num_new_computed_tokens={num_new_computed_tokens} does not match "
                f"{len(computed)} computed blocks of {self.block_size} tokens"
            )
        held = self.req_to_blocks.get(request.request_id, [])
        if computed and held:
            raise ValueError(
                f"request {request.request_id!r} already holds blocks; prefix hits apply only to its first allocation"
            )
        if computed and not self.enable_caching:
            raise ValueError("prefix hits were passed but prefix caching is disabled")

        num_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        num_tokens_need_slot = num_computed_tokens + num_new_tokens + num_lookahead_tokens
        if self.max_model_len is not None:
            num_tokens_need_slot = min(num_tokens_need_slot, self.max_model_len)
        num_required_blocks = -(-num_tokens_need_slot // self.block_size)
        num_new_blocks = max(0, num_required_blocks - len(held) - len(computed))
        num_evictable_computed = sum(1 for block in computed if block.ref_cnt == 0 and not block.is_null)
        if num_new_blocks + num_evictable_computed > self.block_pool.get_num_free_blocks():
            return None

        if computed:
            self.block_pool.touch(computed)
        req_blocks = self.req_to_blocks.setdefault(request.request_id, [])
        if computed:
            req_blocks.extend(computed)
            self.num_cached_block[request.request_id] = len(computed)
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        req_blocks.extend(new_blocks)

        if self.enable_caching and not delay_cache_blocks:
            self.cache_blocks(request, min(num_computed_tokens + num_new_tokens, request.num_tokens))
        return KVCacheBlocks((new_blocks,))

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Index the request's blocks that `num_computed_tokens` tokens fill completely."""
        num_cached = self.num_cached_block.get(request.request_id, 0)
        num_full = num_computed_tokens // self.block_size
        if num_cached >= num_full:
            return
        self.block_pool.cache_full_blocks(
            request, self.req_to_blocks[request.request_id], num_cached, num_full, self.block_size
        )
        self.num_cached_block[request.request_id] = num_full

    def free_lookahead_slots(self, request: Request, num_tokens: int) -> int:
        """Give back the tail blocks beyond those the first `num_tokens` tokens need; the number freed.

        After speculative verification the slots of rejected draft tokens (and unused
        lookahead) hold garbage: the request keeps only the blocks of its computed tokens.
        Such blocks were never hashed (caching stops at `request.num_tokens`); a hashed one
        here would mean the prefix cache indexed unverified tokens, so it raises.
        """
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        blocks = self.req_to_blocks.get(request.request_id, [])
        keep = -(-num_tokens // self.block_size)
        tail = blocks[keep:]
        if not tail:
            return 0
        hashed = [block.block_id for block in tail if block.block_hash is not None]
        if hashed:
            raise AssertionError(f"request {request.request_id!r}: lookahead blocks {hashed} carry a block hash")
        del blocks[keep:]
        self.block_pool.free_blocks(reversed(tail))
        return len(tail)

    def free(self, request: Request) -> None:
        """Release the request's blocks, tail first, so a chain's end is evicted before its start."""
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.num_cached_block.pop(request.request_id, None)
        self.block_pool.free_blocks(reversed(blocks))

    def reset_prefix_cache(self) -> bool:
        """Forget all cached hashes; False (and nothing changes) while any request holds blocks."""
        if not self.block_pool.reset_prefix_cache():
            return False
        self.prefix_cache_stats = PrefixCacheStats(reset=True)
        return True

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """The request's block table, one list per group."""
        return ([block.block_id for block in self.req_to_blocks.get(request_id, [])],)

    def get_num_free_blocks(self) -> int:
        return self.block_pool.get_num_free_blocks()
