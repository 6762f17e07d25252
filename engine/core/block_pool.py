"""BlockPool: allocation, freeing and the prefix-cache index of the KV blocks (vLLM V1)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, get_args

from engine.core.free_block_queue import FreeKVCacheBlockQueue
from engine.core.hashing import BlockHash
from engine.core.kv_cache_block import KVCacheBlock
from engine.core.limits import BLOCK_BOOKKEEPING_BYTES, MAX_NUM_BLOCKS, require_memory
from engine.core.request import Request

FreeOrder = Literal["prepend-unhashed", "append"]
FREE_ORDERS: tuple[str, ...] = get_args(FreeOrder)


class BlockPool:
    """All KV blocks, the free queue and the map from block hash to cached blocks.

    Block 0 is the null block: taken out of the free queue at start, never handed out,
    never freed; it stands for "no block" in block tables.

    Prefix caching (`enable_caching`) keeps freed full blocks indexed by hash, so a later
    request with the same prefix can take them back (`touch`). Eviction is lazy: a cached
    block stays in the index while it sits in the free queue, and loses its hash only when
    `get_new_blocks` hands it out again.

    `free_order` decides where freed blocks re-enter the free queue:

    - ``"prepend-unhashed"`` (vLLM's order since 2026): in each `free_blocks` call, blocks
      without a hash go to the front, in the order given, since no lookup can ever hit
      them; hashed blocks go to the back, in the order given, so cached prefixes survive
      longest.
    - ``"append"`` (the classic order): every freed block goes to the back, in the order
      given.

    Either way a request's blocks are freed tail first (see `KVCacheManager.free`), so the
    end of a chain is evicted before its start. The index keeps duplicates: two blocks may
    carry the same hash (block ids stay append-only per request), and a lookup returns the
    one cached first.
    """

    def __init__(
        self, num_blocks: int, enable_caching: bool = True, free_order: FreeOrder = "prepend-unhashed"
    ) -> None:
        if not isinstance(num_blocks, int) or num_blocks < 1:
            raise ValueError(f"num_blocks must be a positive integer, got {num_blocks!r}")
        if num_blocks > MAX_NUM_BLOCKS:
            raise ValueError(f"num_blocks must be at most {MAX_NUM_BLOCKS} (int32 block ids), got {num_blocks}")
        # one Python object per block: a pool past the host's memory is refused, not swapped into
        require_memory(num_blocks * BLOCK_BOOKKEEPING_BYTES, "cpu", f"the block table of {num_blocks} blocks")
        if free_order not in FREE_ORDERS:
            raise ValueError(f"free_order must be one of {', '.join(FREE_ORDERS)}; got {free_order!r}")
        self.num_gpu_blocks = num_blocks
        self.enable_caching = enable_caching
        self.free_order: FreeOrder = free_order
        self.blocks: list[KVCacheBlock] = [KVCacheBlock(block_id) for block_id in range(num_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # hash -> {block_id: block}; dicts keep insertion order, so "first cached" is defined.
        self.cached_block_hash_to_block: dict[BlockHash, dict[int, KVCacheBlock]] = {}
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True

    def get_cached_block(self, block_hash: BlockHash) -> KVCacheBlock | None:
        """The first cached block with this hash, or None."""
        cached = self.cached_block_hash_to_block.get(block_hash)
        if not cached:
            return None
        return next(iter(cached.values()))

    def cache_full_blocks(
        self,
        request: Request,
        blocks: Sequence[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
    ) -> None:
        """Index `blocks[num_cached_blocks:num_full_blocks]` under the request's block hashes.

        Blocks that already carry a hash came from a prefix hit and are left as they are.
        """
        if num_cached_blocks >= num_full_blocks:
            return
        if len(request.block_hashes) < num_full_blocks:
            raise ValueError(
                f"request {request.request_id!r} has {len(request.block_hashes)} block hashes, "
                f"{num_full_blocks} needed: give it a block_hasher for block size {block_size}"
            )
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            if block.is_null:
                continue
            block_hash = request.block_hashes[index]
            if block.block_hash is not None:
                if block.block_hash != block_hash:
                    raise AssertionError(f"block {block.block_id} holds another hash than position {index}")
                continue
            block.block_hash = block_hash
            self.cached_block_hash_to_block.setdefault(block_hash, {})[block.block_id] = block

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Take `num_blocks` blocks from the front of the free queue, evicting cached ones.

        Raises ValueError if fewer are free; the caller checks `get_num_free_blocks` first.
        """
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"cannot get {num_blocks} free blocks from the pool ({self.get_num_free_blocks()} free)")
        blocks = self.free_block_queue.popleft_n(num_blocks)
        for block in blocks:
            if self.enable_caching:
                self._maybe_evict_cached_block(block)
            assert block.ref_cnt == 0
            block.ref_cnt = 1
        return blocks

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop the block from the index and clear its hash; False if it was not cached."""
        block_hash = block.block_hash
        if block_hash is None:
            return False
        cached = self.cached_block_hash_to_block.get(block_hash)
        if cached is None or cached.pop(block.block_id, None) is None:
            return False
        if not cached:
            del self.cached_block_hash_to_block[block_hash]
        block.reset_hash()
        return True

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Take a reference on blocks hit in the prefix cache, pulling free ones out of the queue."""
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop a reference on each block; blocks that reach zero re-enter the free queue.

        `ordered_blocks` is in eviction priority: the first is evicted first.
        """
        blocks = list(ordered_blocks)
        for block in blocks:
            if block.is_null:
                continue
            if block.ref_cnt <= 0:
                raise ValueError(f"block {block.block_id} freed more often than it was taken")
            block.ref_cnt -= 1
        freed = [block for block in blocks if block.ref_cnt == 0 and not block.is_null]
        if self.free_order == "append":
            self.free_block_queue.append_n(freed)
            return
        self.free_block_queue.prepend_n([block for block in freed if block.block_hash is None])
        self.free_block_queue.append_n([block for block in freed if block.block_hash is not None])

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash; refused (False) while any block other than null is in use."""
        num_used_blocks = self.num_gpu_blocks - self.get_num_free_blocks()
        if num_used_blocks != 1:
            return False
        self.cached_block_hash_to_block = {}
        for block in self.blocks:
            block.reset_hash()
        return True

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of the usable blocks (all but the null block) in use."""
        usable = self.num_gpu_blocks - 1
        if usable == 0:
            return 0.0
        return 1.0 - self.get_num_free_blocks() / usable
