"""vLLM's prefix-caching scenarios (tests/v1/core/test_prefix_caching.py), restated for the
engine's block manager, with their expected block ids in both free orders; plus the free
queue, the pool and the hash encoding on their own."""

from __future__ import annotations

import hashlib
import struct

import pytest

from engine.core import (
    NONE_HASH,
    NONE_HASH_SEED,
    BlockExtraKeys,
    BlockPool,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    KVCacheManager,
    Request,
    encode_block,
    get_request_block_hasher,
    hash_block_tokens,
    hash_request_tokens,
)

BOTH_ORDERS = pytest.mark.parametrize("free_order", ["prepend-unhashed", "append"])
COMMON = [i for i in range(3) for _ in range(16)]


def free_ids(manager: KVCacheManager) -> list[int]:
    return [block.block_id for block in manager.block_pool.free_block_queue.get_all_free_blocks()]


def prefill(manager: KVCacheManager, request: Request) -> tuple[list[int], list[int] | None]:
    """Look up the prefix, allocate the rest of the prompt: (hit ids, new ids or None)."""
    hit, hit_tokens = manager.get_computed_blocks(request)
    new = manager.allocate_slots(request, request.num_tokens - hit_tokens, hit_tokens, hit)
    return hit.get_block_ids()[0], None if new is None else new.get_block_ids()[0]


@BOTH_ORDERS
def test_prefill_partial_hits_then_eviction_order(free_order: str) -> None:
    manager = KVCacheManager(11, 16, free_order=free_order)
    r0 = manager.make_request("0", COMMON + [3] * 7)
    assert prefill(manager, r0) == ([], [1, 2, 3, 4])
    parent = None
    for block_id in (1, 2, 3):
        parent = hash_block_tokens(parent, COMMON[(block_id - 1) * 16 : block_id * 16])
        assert manager.block_pool.blocks[block_id].block_hash == parent
        assert manager.block_pool.blocks[block_id].ref_cnt == 1
    assert manager.block_pool.blocks[4].block_hash is None

    r1 = manager.make_request("1", COMMON + [3] * 5)
    assert prefill(manager, r1) == ([1, 2, 3], [5])
    assert [manager.block_pool.blocks[i].ref_cnt for i in (1, 2, 3)] == [2, 2, 2]
    assert manager.get_num_free_blocks() == 5

    manager.free(r0)
    manager.free(r1)
    after_free = {
        # unhashed tails of r1 then r0 at the front, untouched blocks, cached chain tail first
        "prepend-unhashed": [5, 4, 6, 7, 8, 9, 10, 3, 2, 1],
        "append": [6, 7, 8, 9, 10, 4, 5, 3, 2, 1],
    }[free_order]
    assert free_ids(manager) == after_free

    r2 = manager.make_request("2", COMMON + [3] * 6)
    assert prefill(manager, r2) == ([1, 2, 3], [{"prepend-unhashed": 5, "append": 6}[free_order]])
    assert manager.get_num_free_blocks() == 6
    assert all(block.ref_cnt == 0 for block in manager.block_pool.free_block_queue.get_all_free_blocks())
    manager.free(r2)

    r3 = manager.make_request("3", [99] * 160)
    evicted_in_order = {
        "prepend-unhashed": [5, 4, 6, 7, 8, 9, 10, 3, 2, 1],
        "append": [7, 8, 9, 10, 4, 5, 6, 3, 2, 1],
    }[free_order]
    assert prefill(manager, r3) == ([], evicted_in_order)
    assert manager.get_num_free_blocks() == 0
    assert manager.block_pool.cached_block_hash_to_block.keys() == set(r3.block_hashes)
    assert len(r3.block_hashes) == 10


@BOTH_ORDERS
def test_decode_fills_the_partial_block_then_grows(free_order: str) -> None:
    manager = KVCacheManager(11, 16, free_order=free_order)
    r0 = manager.make_request("0", COMMON + [3] * 7)
    assert prefill(manager, r0) == ([], [1, 2, 3, 4])

    r0.num_computed_tokens = 55
    r0.append_output_token_ids([8] * 4)
    grown = manager.allocate_slots(r0, 4)
    assert grown is not None and grown.get_block_ids() == ([],)
    assert manager.req_to_blocks["0"][-1].block_hash is None

    r0.num_computed_tokens = 59
    r0.append_output_token_ids([7] * 19)
    grown = manager.allocate_slots(r0, 19)
    assert grown is not None and grown.get_block_ids() == ([5],)
    assert manager.req_to_blocks["0"][-2].block_hash == r0.block_hashes[3]
    assert manager.req_to_blocks["0"][-1].block_hash is None


def test_lookahead_slots_are_allocated_but_not_cached() -> None:
    manager = KVCacheManager(11, 4)
    request = manager.make_request("0", list(range(6)))
    assert prefill(manager, request) == ([], [1, 2])
    request.num_computed_tokens = 6
    request.append_output_token_ids(6)
    grown = manager.allocate_slots(request, 1, num_lookahead_tokens=6)
    # 6 computed + 1 new + 6 lookahead = 13 slots: 4 blocks; only 7 real tokens, 1 full block.
    assert grown is not None and grown.get_block_ids() == ([3, 4],)
    assert [block.block_hash is not None for block in manager.req_to_blocks["0"]] == [True, False, False, False]


@BOTH_ORDERS
def test_eviction_order_and_hits_from_the_middle_of_the_queue(free_order: str) -> None:
    manager = KVCacheManager(11, 16, free_order=free_order)
    r0 = manager.make_request("0", list(range(87)))
    assert prefill(manager, r0) == ([], [1, 2, 3, 4, 5, 6])
    r1 = manager.make_request("1", list(range(87, 87 + 48)))
    assert prefill(manager, r1) == ([], [7, 8, 9])
    assert manager.get_num_free_blocks() == 1

    manager.free(r0)
    assert (
        free_ids(manager) == {"prepend-unhashed": [6, 10, 5, 4, 3, 2, 1], "append": [10, 6, 5, 4, 3, 2, 1]}[free_order]
    )
    manager.free(r1)
    assert (
        free_ids(manager)
        == {
            "prepend-unhashed": [6, 10, 5, 4, 3, 2, 1, 9, 8, 7],
            "append": [10, 6, 5, 4, 3, 2, 1, 9, 8, 7],
        }[free_order]
    )

    r2 = manager.make_request("2", list(range(35)))
    assert prefill(manager, r2) == ([1, 2], [{"prepend-unhashed": 6, "append": 10}[free_order]])
    assert manager.get_num_free_blocks() == 7


@BOTH_ORDERS
def test_a_hit_block_is_not_evicted_to_make_room_for_its_own_request(free_order: str) -> None:
    manager = KVCacheManager(3, 16, free_order=free_order)
    r0 = manager.make_request("0", list(range(16)))
    r1 = manager.make_request("1", list(range(16, 32)))
    assert prefill(manager, r0) == ([], [1])
    assert prefill(manager, r1) == ([], [2])
    manager.free(r0)
    manager.free(r1)
    r2 = manager.make_request("2", list(range(32)))
    assert prefill(manager, r2) == ([1], [2])


@BOTH_ORDERS
def test_a_reused_cached_block_loses_its_hash(free_order: str) -> None:
    manager = KVCacheManager(2, 16, free_order=free_order)
    r0 = manager.make_request("0", list(range(16)))
    assert prefill(manager, r0) == ([], [1])
    assert manager.block_pool.blocks[1].block_hash is not None
    manager.free(r0)
    r1 = manager.make_request("1", list(range(15)))
    assert prefill(manager, r1) == ([], [1])
    assert manager.block_pool.blocks[1].block_hash is None
    assert manager.block_pool.cached_block_hash_to_block == {}


@BOTH_ORDERS
def test_not_enough_free_blocks_while_holding_hits_changes_nothing(free_order: str) -> None:
    manager = KVCacheManager(11, 16, free_order=free_order)
    r0 = manager.make_request("0", COMMON)
    assert prefill(manager, r0) == ([], [1, 2, 3])
    r1 = manager.make_request("1", COMMON * 2)
    assert prefill(manager, r1) == ([1, 2, 3], [4, 5, 6])
    part1 = list(manager.req_to_blocks["1"])
    manager.free(r1)
    assert [block.ref_cnt for block in part1] == [1, 1, 1, 0, 0, 0]

    r2 = manager.make_request("2", [7] * 32)
    assert prefill(manager, r2)[1] is not None
    assert manager.get_num_free_blocks() == 5

    r3 = manager.make_request("3", COMMON * 3)
    hit, hit_tokens = manager.get_computed_blocks(r3)
    assert hit.blocks[0] == part1 and hit_tokens == 96
    queue_before = free_ids(manager)
    # 3 new blocks + 3 hit blocks that sit in the free queue = 6 > 5 free.
    assert manager.allocate_slots(r3, 48, hit_tokens, hit) is None
    assert [block.ref_cnt for block in part1] == [1, 1, 1, 0, 0, 0]
    assert free_ids(manager) == queue_before
    assert "3" not in manager.req_to_blocks


@BOTH_ORDERS
def test_reset_prefix_cache_waits_for_every_block(free_order: str) -> None:
    manager = KVCacheManager(11, 16, free_order=free_order)
    r0 = manager.make_request("0", COMMON + [3] * 7)
    assert manager.allocate_slots(r0, 55).get_block_ids() == ([1, 2, 3, 4],)
    r1 = manager.make_request("1", COMMON + [4] * 7)
    assert prefill(manager, r1) == ([1, 2, 3], [5])

    assert manager.reset_prefix_cache() is False
    assert manager.block_pool.cached_block_hash_to_block

    manager.free(r0)
    manager.free(r1)
    assert manager.reset_prefix_cache() is True
    assert manager.block_pool.cached_block_hash_to_block == {}
    assert all(block.block_hash is None for block in manager.block_pool.blocks)
    r2 = manager.make_request("2", COMMON + [3] * 7)
    assert prefill(manager, r2)[0] == []


@BOTH_ORDERS
def test_cache_salt_enters_only_the_first_block(free_order: str) -> None:
    manager = KVCacheManager(11, 16, free_order=free_order)
    tokens = COMMON + [3] * 11
    r0 = manager.make_request("0", tokens, cache_salt="salt1")
    h = r0.block_hashes
    assert len(h) == 3
    assert h[0] == hash_block_tokens(None, tokens[:16], BlockExtraKeys(cache_salt="salt1"))
    assert h[1] == hash_block_tokens(h[0], tokens[16:32])
    assert h[2] == hash_block_tokens(h[1], tokens[32:48])
    assert prefill(manager, r0) == ([], [1, 2, 3, 4])

    r0.num_computed_tokens = 59
    r0.append_output_token_ids([8] * 5)
    assert manager.allocate_slots(r0, 5).get_block_ids() == ([],)
    assert h[3] == hash_block_tokens(h[2], tokens[48:] + [8] * 5)

    other = COMMON + [4] * 11
    assert manager.get_computed_blocks(manager.make_request("1", other, cache_salt="salt1"))[1] == 48
    assert manager.get_computed_blocks(manager.make_request("2", other, cache_salt="salt2"))[1] == 0
    assert manager.get_computed_blocks(manager.make_request("3", other))[1] == 0
    assert manager.make_request("4", other, cache_salt="").cache_salt is None


def test_adapter_name_enters_every_block() -> None:
    manager = KVCacheManager(9, 4)
    a0 = manager.make_request("a0", list(range(10)), adapter_name="lora-a")
    keys = BlockExtraKeys(adapter_name="lora-a")
    assert a0.block_hashes[1] == hash_block_tokens(hash_block_tokens(None, range(4), keys), range(4, 8), keys)
    assert prefill(manager, a0) == ([], [1, 2, 3])
    assert prefill(manager, manager.make_request("a1", list(range(10)), adapter_name="lora-a")) == ([1, 2], [4])
    assert manager.get_computed_blocks(manager.make_request("b0", list(range(10)), adapter_name="lora-b"))[1] == 0
    assert manager.get_computed_blocks(manager.make_request("n0", list(range(10))))[1] == 0


def test_a_hit_on_the_whole_prompt_recomputes_its_last_block() -> None:
    manager = KVCacheManager(6, 4)
    assert prefill(manager, manager.make_request("0", list(range(8)))) == ([], [1, 2])
    assert prefill(manager, manager.make_request("1", list(range(8)))) == ([1], [3])
    assert prefill(manager, manager.make_request("2", list(range(9)))) == ([1, 2], [4])


def test_prefix_caching_disabled() -> None:
    manager = KVCacheManager(5, 4, enable_caching=False)
    r1 = manager.make_request("1", list(range(10)))
    assert prefill(manager, r1) == ([], [1, 2, 3])
    assert all(block.block_hash is None for block in manager.block_pool.blocks)
    manager.free(r1)
    assert prefill(manager, manager.make_request("2", list(range(16)))) == ([], [3, 2, 1, 4])
    assert prefill(manager, manager.make_request("3", list(range(4)))) == ([], None)


def test_duplicate_hashes_hit_the_block_cached_first() -> None:
    manager = KVCacheManager(7, 4)
    r0 = manager.make_request("0", list(range(9)))
    r1 = manager.make_request("1", list(range(9)))
    assert manager.allocate_slots(r0, 9).get_block_ids() == ([1, 2, 3],)
    assert manager.allocate_slots(r1, 9).get_block_ids() == ([4, 5, 6],)
    assert {digest: list(ids) for digest, ids in manager.block_pool.cached_block_hash_to_block.items()} == {
        r0.block_hashes[0]: [1, 4],
        r0.block_hashes[1]: [2, 5],
    }
    manager.free(r0)
    manager.free(r1)
    assert prefill(manager, manager.make_request("2", list(range(9)))) == ([1, 2], [6])


def test_preempted_request_hits_its_own_prompt_and_output() -> None:
    manager = KVCacheManager(9, 4)
    request = manager.make_request("0", list(range(10)))
    assert prefill(manager, request) == ([], [1, 2, 3])
    request.num_computed_tokens = 10
    request.append_output_token_ids([100, 101, 102])
    assert manager.allocate_slots(request, 3).get_block_ids() == ([4],)
    manager.free(request)
    request.num_computed_tokens = 0
    # 13 tokens: the hit stops at 12, three full blocks, the third holding output tokens.
    assert prefill(manager, request) == ([1, 2, 3], [4])


def test_allocate_slots_rejects_inconsistent_arguments() -> None:
    manager = KVCacheManager(6, 4)
    request = manager.make_request("0", list(range(8)))
    with pytest.raises(ValueError, match="num_new_tokens must be positive"):
        manager.allocate_slots(request, 0)
    hit, _ = manager.get_computed_blocks(request)
    with pytest.raises(ValueError, match="does not match"):
        manager.allocate_slots(request, 8, 4, hit)
    unhashed = Request("x", list(range(8)))
    with pytest.raises(ValueError, match="make_request"):
        manager.get_computed_blocks(unhashed)


def test_max_model_len_caps_the_slots() -> None:
    manager = KVCacheManager(20, 4, max_model_len=10)
    request = manager.make_request("0", list(range(6)))
    assert manager.allocate_slots(request, 6, num_lookahead_tokens=30).get_block_ids() == ([1, 2, 3],)


# --- the free queue -------------------------------------------------------------------------


def make_queue(count: int) -> tuple[list[KVCacheBlock], FreeKVCacheBlockQueue]:
    blocks = [KVCacheBlock(i) for i in range(count)]
    return blocks, FreeKVCacheBlockQueue(blocks)


def queue_ids(queue: FreeKVCacheBlockQueue) -> list[int]:
    return [block.block_id for block in queue.get_all_free_blocks()]


def test_free_queue_operations_keep_order_and_count() -> None:
    blocks, queue = make_queue(6)
    assert queue.popleft() is blocks[0]
    assert [block.block_id for block in queue.popleft_n(2)] == [1, 2]
    queue.remove(blocks[4])
    assert queue_ids(queue) == [3, 5] and queue.num_free_blocks == 2
    queue.append(blocks[0])
    queue.prepend_n([blocks[1], blocks[2]])
    queue.append_n([blocks[4]])
    assert queue_ids(queue) == [1, 2, 3, 5, 0, 4]
    assert queue.num_free_blocks == 6
    assert [block.block_id for block in queue.popleft_n(6)] == [1, 2, 3, 5, 0, 4]
    assert queue.num_free_blocks == 0 and queue_ids(queue) == []
    with pytest.raises(ValueError):
        queue.popleft()


def test_free_queue_refuses_double_insertion_and_removing_a_stranger() -> None:
    blocks, queue = make_queue(3)
    with pytest.raises(ValueError, match="already in the free queue"):
        queue.append(blocks[1])
    taken = queue.popleft()
    with pytest.raises(ValueError, match="not in the free queue"):
        queue.remove(taken)
    with pytest.raises(ValueError):
        queue.popleft_n(5)


# --- the pool -------------------------------------------------------------------------------


@BOTH_ORDERS
def test_pool_never_hands_out_the_null_block(free_order: str) -> None:
    pool = BlockPool(5, free_order=free_order)
    assert pool.null_block.block_id == 0 and pool.null_block.is_null
    taken = pool.get_new_blocks(4)
    assert [block.block_id for block in taken] == [1, 2, 3, 4]
    assert pool.get_usage() == 1.0
    with pytest.raises(ValueError):
        pool.get_new_blocks(1)
    pool.free_blocks([pool.null_block, *taken])
    assert pool.get_num_free_blocks() == 4 and pool.get_usage() == 0.0
    assert pool.null_block.ref_cnt == 0
    assert pool.null_block not in pool.free_block_queue.get_all_free_blocks()


def test_pool_free_orders_differ_only_for_unhashed_blocks() -> None:
    orders = {}
    for free_order in ("prepend-unhashed", "append"):
        pool = BlockPool(6, free_order=free_order)
        blocks = pool.get_new_blocks(3)
        blocks[1].block_hash = b"\x01" * 32
        pool.cached_block_hash_to_block[blocks[1].block_hash] = {blocks[1].block_id: blocks[1]}
        pool.free_blocks(reversed(blocks))
        orders[free_order] = [block.block_id for block in pool.free_block_queue.get_all_free_blocks()]
    assert orders == {"prepend-unhashed": [3, 1, 4, 5, 2], "append": [4, 5, 3, 2, 1]}


def test_pool_rejects_bad_arguments_and_double_free() -> None:
    with pytest.raises(ValueError, match="free_order"):
        BlockPool(4, free_order="lifo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_blocks"):
        BlockPool(0)
    pool = BlockPool(4)
    block = pool.get_new_blocks(1)[0]
    pool.free_blocks([block])
    with pytest.raises(ValueError, match="freed more often"):
        pool.free_blocks([block])


# --- hashing --------------------------------------------------------------------------------


def test_none_hash_is_sha256_of_the_documented_seed() -> None:
    assert NONE_HASH == hashlib.sha256(NONE_HASH_SEED.encode("ascii")).digest()
    assert NONE_HASH.hex() == "3e4c4103a309c2b5653aadd67704d0c2769eb02a01231f8c5eaf2bdacb114401"


def test_block_encoding_matches_the_documented_layout() -> None:
    keys = BlockExtraKeys(adapter_name="lora-a", cache_salt="salt")
    encoded = encode_block(None, [0, 1, 2, -1], keys)
    expected = (
        NONE_HASH
        + struct.pack("<I4i", 4, 0, 1, 2, -1)
        + struct.pack("<I", 2)
        + struct.pack("<BI", 1, 6)
        + b"lora-a"
        + struct.pack("<BI", 2, 4)
        + b"salt"
    )
    assert encoded == expected
    assert (
        hash_block_tokens(None, [0, 1, 2, 3]).hex()
        == "6e3e5bf90d247ae5ae24ee853740e4f2c037dff91af20403d61deeac0bb0db49"
    )


def test_hashing_rejects_ids_outside_int32_and_bad_parents() -> None:
    with pytest.raises(ValueError, match="does not fit in int32"):
        hash_block_tokens(None, [0, 2**31])
    with pytest.raises(ValueError, match="32 bytes"):
        hash_block_tokens(b"short", [0])


def test_incremental_hashing_equals_hashing_from_scratch() -> None:
    hasher = get_request_block_hasher(4)
    request = Request("0", list(range(7)), cache_salt="s", adapter_name="a", block_hasher=hasher)
    for token in range(7, 30):
        request.append_output_token_ids(token)
    assert len(request.block_hashes) == 7
    assert request.block_hashes == hash_request_tokens(4, request)
