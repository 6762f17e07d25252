"""The paged KV block manager with prefix caching, under vLLM V1's names.

Where each idea lives (vLLM's module in brackets):

- `KVCacheBlock` (kv_cache_utils): one block's id, reference count, hash and free-queue links.
- `FreeKVCacheBlockQueue` (kv_cache_utils): the free blocks in eviction order; O(1) removal.
- `BlockPool` (block_pool): the null block, allocation with lazy eviction, the hash index,
  and the two free orders ("prepend-unhashed", vLLM's current one, and the classic "append").
- `KVCacheManager`, `KVCacheBlocks` (kv_cache_manager): prefix hits, slot allocation with
  lookahead, freeing in reverse.
- `Request` (request): tokens, progress, block hashes, cache salt.
- `NONE_HASH`, `hash_block_tokens`, `hash_request_tokens`, `get_request_block_hasher`
  (kv_cache_utils): SHA-256 block hashes over a documented byte encoding.

Everything here is pure Python: `python -m engine vectors` needs no torch.
"""

from __future__ import annotations

from engine.core.block_pool import FREE_ORDERS, BlockPool, FreeOrder
from engine.core.free_block_queue import FreeKVCacheBlockQueue
from engine.core.hashing import (
    BLOCK_HASH_ENCODING_VERSION,
    NONE_HASH,
    NONE_HASH_SEED,
    BlockExtraKeys,
    BlockHash,
    encode_block,
    get_request_block_hasher,
    hash_block_tokens,
    hash_request_tokens,
)
from engine.core.kv_cache_block import KVCacheBlock
from engine.core.kv_cache_manager import KVCacheBlocks, KVCacheManager, PrefixCacheStats
from engine.core.request import Request

__all__ = [
    "BLOCK_HASH_ENCODING_VERSION",
    "FREE_ORDERS",
    "NONE_HASH",
    "NONE_HASH_SEED",
    "BlockExtraKeys",
    "BlockHash",
    "BlockPool",
    "FreeKVCacheBlockQueue",
    "FreeOrder",
    "KVCacheBlock",
    "KVCacheBlocks",
    "KVCacheManager",
    "PrefixCacheStats",
    "Request",
    "encode_block",
    "get_request_block_hasher",
    "hash_block_tokens",
    "hash_request_tokens",
]
