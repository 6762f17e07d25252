"""KVCacheBlock: the metadata of one fixed-size KV block (the tensors live in engine.kv.storage)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.hashing import BlockHash


@dataclass(slots=True, eq=False)
class KVCacheBlock:
    """One block of the pool, as in vLLM V1.

    `ref_cnt` counts the requests using the block; at zero the block sits in the free
    queue. `block_hash` is set once the block is full and cached, and cleared only when
    the block is evicted, that is when it is handed out again. The two links belong to
    `FreeKVCacheBlockQueue`; nothing else touches them. Identity comparison (eq=False)
    keeps the blocks hashable and comparisons O(1).
    """

    block_id: int
    ref_cnt: int = 0
    block_hash: BlockHash | None = None
    prev_free_block: KVCacheBlock | None = None
    next_free_block: KVCacheBlock | None = None
    is_null: bool = False

    def reset_hash(self) -> None:
        self.block_hash = None

    def __repr__(self) -> str:
        # The links are shown by id: printing the neighbours would recurse through the queue.
        prev_id = self.prev_free_block.block_id if self.prev_free_block else None
        next_id = self.next_free_block.block_id if self.next_free_block else None
        digest = self.block_hash.hex()[:12] if self.block_hash else None
        return (
            f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, block_hash={digest}, "
            f"prev_free_block={prev_id}, next_free_block={next_id})"
        )
