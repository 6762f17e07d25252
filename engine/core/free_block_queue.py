"""FreeKVCacheBlockQueue: the free blocks in eviction order, as an intrusive doubly linked list."""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.kv_cache_block import KVCacheBlock


class FreeKVCacheBlockQueue:
    """Free blocks, front first to be handed out (and so evicted), as in vLLM V1.

    A deque cannot drop a block from the middle in O(1), and a prefix-cache hit must do
    exactly that. The list is threaded through the blocks' own `prev_free_block` /
    `next_free_block` fields between two sentinel blocks, so no operation allocates.

    The queue starts in block-id order. Freed blocks come back at the back (`append`,
    `append_n`) or, for blocks that carry no hash and so can never be hit again, at the
    front (`prepend_n`); see `BlockPool` for which order applies when.
    """

    def __init__(self, blocks: Sequence[KVCacheBlock]) -> None:
        self.num_free_blocks = len(blocks)
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        previous = self.fake_free_list_head
        for block in blocks:
            previous.next_free_block = block
            block.prev_free_block = previous
            previous = block
        previous.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = previous

    def popleft(self) -> KVCacheBlock:
        """Remove and return the front block."""
        first = self.fake_free_list_head.next_free_block
        if first is self.fake_free_list_tail or first is None:
            raise ValueError("no free blocks available")
        self.remove(first)
        return first

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first `n` blocks, front first."""
        if n > self.num_free_blocks:
            raise ValueError(f"cannot pop {n} blocks: only {self.num_free_blocks} free")
        taken: list[KVCacheBlock] = []
        block = self.fake_free_list_head.next_free_block
        for _ in range(n):
            assert block is not None
            taken.append(block)
            following = block.next_free_block
            block.prev_free_block = block.next_free_block = None
            block = following
        assert block is not None
        self.fake_free_list_head.next_free_block = block
        block.prev_free_block = self.fake_free_list_head
        self.num_free_blocks -= n
        return taken

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink a block from anywhere in the queue, in O(1)."""
        before, after = block.prev_free_block, block.next_free_block
        if before is None or after is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        before.next_free_block = after
        after.prev_free_block = before
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Put a block at the back: evicted last."""
        self._link_after(self.fake_free_list_tail.prev_free_block, [block])

    def append_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put blocks at the back, keeping their order."""
        if blocks:
            self._link_after(self.fake_free_list_tail.prev_free_block, blocks)

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put blocks at the front, keeping their order: `blocks[0]` is handed out next."""
        if blocks:
            self._link_after(self.fake_free_list_head, blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Every free block, front first (for tests and the conformance vectors)."""
        result: list[KVCacheBlock] = []
        block = self.fake_free_list_head.next_free_block
        while block is not None and block is not self.fake_free_list_tail:
            result.append(block)
            block = block.next_free_block
        return result

    def _link_after(self, anchor: KVCacheBlock | None, blocks: Sequence[KVCacheBlock]) -> None:
        assert anchor is not None
        after = anchor.next_free_block
        assert after is not None
        previous = anchor
        for block in blocks:
            if block.prev_free_block is not None or block.next_free_block is not None:
                raise ValueError(f"block {block.block_id} is already in the free queue")
            previous.next_free_block = block
            block.prev_free_block = previous
            previous = block
        previous.next_free_block = after
        after.prev_free_block = previous
        self.num_free_blocks += len(blocks)
