"""Random operation sequences against the block manager, checking its invariants after every step:
ref counts never negative and equal to the number of holders; no block both free and owned;
free queue, block hashes and the cached-block map consistent; the null block never handed out;
a refused allocation changes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.conformance.trace import snapshot
from engine.core import KVCacheManager, Request

# A few shared prefixes make prefix hits, duplicates and evictions common.
PREFIXES = [[1] * 8, [2] * 5 + [3] * 6, list(range(12))]


class BlockManagerMachine(RuleBasedStateMachine):
    manager: KVCacheManager

    def __init__(self) -> None:
        super().__init__()
        self.requests: dict[str, Request] = {}
        self.counter = 0

    @initialize(
        num_blocks=st.integers(2, 14),
        block_size=st.sampled_from([1, 2, 4]),
        enable_caching=st.booleans(),
        free_order=st.sampled_from(["prepend-unhashed", "append"]),
    )
    def setup(self, num_blocks: int, block_size: int, enable_caching: bool, free_order: str) -> None:
        self.manager = KVCacheManager(num_blocks, block_size, enable_caching, free_order)  # type: ignore[arg-type]

    @rule(
        prefix=st.sampled_from(PREFIXES),
        prefix_len=st.integers(0, 12),
        tail=st.lists(st.integers(0, 3), max_size=6),
        salt=st.sampled_from([None, "s"]),
    )
    def add_and_prefill(self, prefix: list[int], prefix_len: int, tail: list[int], salt: str | None) -> None:
        tokens = prefix[:prefix_len] + tail
        if not tokens:
            return
        self.counter += 1
        request = self.manager.make_request(f"r{self.counter}", tokens, cache_salt=salt)
        hit, hit_tokens = self.manager.get_computed_blocks(request)
        assert hit_tokens < request.num_tokens
        assert hit_tokens == len(hit.blocks[0]) * self.manager.block_size
        before = snapshot(self.manager)
        new = self.manager.allocate_slots(request, request.num_tokens - hit_tokens, hit_tokens, hit)
        if new is None:
            assert snapshot(self.manager) == before
            return
        request.num_computed_tokens = request.num_tokens
        self.requests[request.request_id] = request
        assert len(self.manager.req_to_blocks[request.request_id]) == -(-request.num_tokens // self.manager.block_size)

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data(), token=st.integers(0, 3), lookahead=st.integers(0, 3))
    def decode(self, data: st.DataObject, token: int, lookahead: int) -> None:
        request = self.requests[data.draw(st.sampled_from(sorted(self.requests)))]
        request.append_output_token_ids(token)
        before = snapshot(self.manager)
        new = self.manager.allocate_slots(request, 1, num_lookahead_tokens=lookahead)
        if new is None:
            assert snapshot(self.manager) == before
            self._preempt(request)
            return
        request.num_computed_tokens += 1

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        request = self.requests.pop(data.draw(st.sampled_from(sorted(self.requests))))
        self.manager.free(request)

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data())
    def preempt_and_resume(self, data: st.DataObject) -> None:
        request = self.requests[data.draw(st.sampled_from(sorted(self.requests)))]
        self._preempt(request)
        hit, hit_tokens = self.manager.get_computed_blocks(request)
        if self.manager.allocate_slots(request, request.num_tokens - hit_tokens, hit_tokens, hit) is not None:
            request.num_computed_tokens = request.num_tokens
            self.requests[request.request_id] = request

    @rule()
    def reset_prefix_cache(self) -> None:
        assert self.manager.reset_prefix_cache() == (not self.requests)
        if not self.requests:
            assert self.manager.block_pool.cached_block_hash_to_block == {}

    def _preempt(self, request: Request) -> None:
        self.manager.free(request)
        request.num_computed_tokens = 0
        self.requests.pop(request.request_id, None)

    @invariant()
    def ref_counts_match_holders_and_are_never_negative(self) -> None:
        pool = self.manager.block_pool
        holders = [0] * pool.num_gpu_blocks
        for blocks in self.manager.req_to_blocks.values():
            assert len({block.block_id for block in blocks}) == len(blocks)
            for block in blocks:
                holders[block.block_id] += 1
        assert [block.ref_cnt for block in pool.blocks] == holders
        assert all(block.ref_cnt >= 0 for block in pool.blocks)

    @invariant()
    def no_block_both_free_and_owned(self) -> None:
        pool = self.manager.block_pool
        free = pool.free_block_queue.get_all_free_blocks()
        free_ids = [block.block_id for block in free]
        assert len(set(free_ids)) == len(free_ids) == pool.get_num_free_blocks()
        owned = {block.block_id for blocks in self.manager.req_to_blocks.values() for block in blocks}
        assert not owned & set(free_ids)
        assert owned | set(free_ids) == set(range(1, pool.num_gpu_blocks))
        assert all(block.ref_cnt == 0 for block in free)

    @invariant()
    def null_block_never_handed_out(self) -> None:
        pool = self.manager.block_pool
        assert pool.null_block.block_id == 0 and pool.null_block.ref_cnt == 0
        assert pool.null_block not in pool.free_block_queue.get_all_free_blocks()
        assert all(block.block_id != 0 for blocks in self.manager.req_to_blocks.values() for block in blocks)

    @invariant()
    def cached_map_and_block_hashes_agree(self) -> None:
        pool = self.manager.block_pool
        indexed = set()
        for digest, blocks in pool.cached_block_hash_to_block.items():
            assert blocks, "empty hash entries must be dropped"
            for block_id, block in blocks.items():
                assert block.block_id == block_id and block.block_hash == digest
                indexed.add(block_id)
        assert indexed == {block.block_id for block in pool.blocks if block.block_hash is not None}
        if not self.manager.enable_caching:
            assert not indexed


BlockManagerMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestBlockManagerStateMachine = BlockManagerMachine.TestCase
