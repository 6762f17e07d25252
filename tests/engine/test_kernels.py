"""Every Triton kernel against its plain-torch reference and against naive attention,
run in interpreter mode on tiny shapes."""

from __future__ import annotations

import pytest
import torch

from engine.kernels.kv_codec import row_width
from engine.kernels.paged_decode import gather_rows, paged_decode_attention, paged_decode_attention_reference
from engine.kernels.paged_prefill import paged_prefill_attention, paged_prefill_attention_reference
from engine.kernels.store_kv import store_kv, store_kv_reference
from engine.kv.formats import QTYPES, dequantize, get_format, quantize

HEADS, KV_HEADS, HEAD_DIM, BLOCK_SIZE, NUM_BLOCKS = 4, 2, 32, 4, 40
SCALE = HEAD_DIM**-0.5
FLOAT_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def empty_cache(
    qtype: str, num_blocks: int = NUM_BLOCKS, kv_heads: int = KV_HEADS, head_dim: int = HEAD_DIM
) -> torch.Tensor:
    dtype = torch.uint8 if get_format(qtype).quantized else FLOAT_DTYPES[qtype]
    return torch.zeros(num_blocks, BLOCK_SIZE, kv_heads, row_width(qtype, head_dim), dtype=dtype)


class PagedBatch:
    """Sequences of random K/V scattered over shuffled blocks (block 0 stays the null block)."""

    def __init__(self, lens: list[int], k_type: str, v_type: str, seed: int, kv_heads: int = KV_HEADS) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.lens, self.k_type, self.v_type = lens, k_type, v_type
        self.k_cache, self.v_cache = empty_cache(k_type, kv_heads=kv_heads), empty_cache(v_type, kv_heads=kv_heads)
        free = (torch.randperm(NUM_BLOCKS - 1, generator=gen) + 1).tolist()
        self.tables: list[list[int]] = []
        for length in lens:
            need = -(-length // BLOCK_SIZE)
            self.tables.append([free.pop() for _ in range(need)])
            k = torch.randn(length, kv_heads, HEAD_DIM, generator=gen)
            v = torch.randn(length, kv_heads, HEAD_DIM, generator=gen)
            store_kv_reference(
                k, v, self.k_cache, self.v_cache, self.slots(len(self.tables) - 1, 0, length), k_type, v_type
            )
        width = max(len(t) for t in self.tables)
        self.block_tables = torch.zeros(len(lens), width, dtype=torch.int32)
        for row, table in enumerate(self.tables):
            self.block_tables[row, : len(table)] = torch.tensor(table, dtype=torch.int32)
        self.seq_lens = torch.tensor(lens, dtype=torch.int32)

    def slots(self, seq: int, start: int, count: int) -> torch.Tensor:
        pos = torch.arange(start, start + count)
        return torch.tensor(self.tables[seq])[pos // BLOCK_SIZE] * BLOCK_SIZE + pos % BLOCK_SIZE

    def naive(self, seq: int, q: torch.Tensor) -> torch.Tensor:
        """Softmax attention of q [q_len, heads, dim] (the sequence's last q_len tokens), causal."""
        length = self.lens[seq]
        slots = self.slots(seq, 0, length)
        group = q.shape[1] // self.k_cache.shape[2]
        k = gather_rows(self.k_cache, self.k_type, slots, HEAD_DIM).repeat_interleave(group, dim=1).double()
        v = gather_rows(self.v_cache, self.v_type, slots, HEAD_DIM).repeat_interleave(group, dim=1).double()
        scores = torch.einsum("qhd,khd->hqk", q.double(), k) * SCALE
        q_pos = torch.arange(length - q.shape[0], length)
        scores = scores.masked_fill(torch.arange(length)[None, None, :] > q_pos[None, :, None], float("-inf"))
        return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).float()


# --- store ---------------------------------------------------------------------------


@pytest.mark.parametrize("qtype", QTYPES)
def test_store_kernel_writes_the_bytes_quant_writes(qtype: str) -> None:
    gen = torch.Generator().manual_seed(7)
    tokens = 6
    key = torch.randn(tokens, KV_HEADS, HEAD_DIM, generator=gen) * 3
    value = torch.randn(tokens, KV_HEADS, HEAD_DIM, generator=gen)
    key[0, 0, :32] = torch.arange(-16, 16) + 0.5  # exact ties
    key[0, 0, 0] = -8.0
    key[1, 1, :32] = 0.0  # an all-zero block
    value[2, 0, 5] = value[2, 0, 9] = -50.0  # equal magnitudes: the first sets the sign
    slots = torch.tensor([5, 7, 17, -1, 30, 63])
    ours_k, ours_v = empty_cache(qtype), empty_cache(qtype)
    ref_k, ref_v = empty_cache(qtype), empty_cache(qtype)
    store_kv(key, value, ours_k, ours_v, slots, qtype, qtype)
    store_kv_reference(key, value, ref_k, ref_v, slots, qtype, qtype)
    assert torch.equal(ours_k.view(torch.uint8), ref_k.view(torch.uint8))
    assert torch.equal(ours_v.view(torch.uint8), ref_v.view(torch.uint8))
    flat = ours_k.view(-1, KV_HEADS, ours_k.shape[3])
    if get_format(qtype).quantized:
        assert torch.equal(flat[30], quantize(key[4], qtype))
    assert (
        torch.count_nonzero(
            ours_k.view(torch.uint8).view(NUM_BLOCKS * BLOCK_SIZE, -1)[
                [s for s in range(NUM_BLOCKS * BLOCK_SIZE) if s not in (5, 7, 17, 30, 63)]
            ]
        )
        == 0
    ), "a padding slot or an unlisted slot was written"


def test_store_kernel_mixes_formats_for_k_and_v() -> None:
    key = torch.randn(3, KV_HEADS, HEAD_DIM)
    value = torch.randn(3, KV_HEADS, HEAD_DIM)
    slots = torch.tensor([9, 10, 11])
    k_cache, v_cache = empty_cache("f16"), empty_cache("q4_1")
    store_kv(key, value, k_cache, v_cache, slots, "f16", "q4_1")
    flat_v = v_cache.view(-1, KV_HEADS, v_cache.shape[3])
    assert torch.equal(k_cache.view(-1, KV_HEADS, HEAD_DIM)[9:12], key.half())
    assert torch.allclose(dequantize(flat_v[9:12], "q4_1", (3, KV_HEADS, HEAD_DIM)), value, atol=0.5)


def test_store_rejects_a_cache_of_the_wrong_row_width() -> None:
    with pytest.raises(ValueError, match="cannot hold rows"):
        store_kv(
            torch.zeros(1, KV_HEADS, HEAD_DIM),
            torch.zeros(1, KV_HEADS, HEAD_DIM),
            empty_cache("f32"),
            empty_cache("f32"),
            torch.tensor([1]),
            "q8_0",
            "f32",
        )


# --- decode --------------------------------------------------------------------------

FORMAT_PAIRS = [
    ("f32", "f32"),
    ("f16", "f16"),
    ("bf16", "bf16"),
    ("q8_0", "q8_0"),
    ("f16", "q4_0"),
    ("q4_1", "q5_0"),
    ("q5_1", "q8_0"),
]


@pytest.mark.parametrize(("k_type", "v_type"), FORMAT_PAIRS)
def test_decode_kernel_matches_reference_and_naive_attention(k_type: str, v_type: str) -> None:
    batch = PagedBatch([1, 7, 16, 21], k_type, v_type, seed=3)
    q = torch.randn(4, HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(4))
    ours = paged_decode_attention(
        q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE, k_type, v_type
    )
    ref = paged_decode_attention_reference(
        q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE, k_type, v_type
    )
    naive = torch.stack([batch.naive(i, q[i : i + 1])[0] for i in range(4)])
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, naive, rtol=1e-5, atol=1e-5)


def test_decode_kernel_groups_query_heads_by_kv_head() -> None:
    batch = PagedBatch([9, 12], "f32", "f32", seed=5, kv_heads=2)
    q = torch.randn(2, 6, HEAD_DIM)  # groups of 3: padded to 4 inside the kernel
    ours = paged_decode_attention(q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE)
    naive = torch.stack([batch.naive(i, q[i : i + 1])[0] for i in range(2)])
    torch.testing.assert_close(ours, naive, rtol=1e-5, atol=1e-5)


def test_decode_kernel_is_bit_identical_across_batches_and_block_placement() -> None:
    batch = PagedBatch([5, 23, 11], "q8_0", "q8_0", seed=6)
    q = torch.randn(3, HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(8))
    together = paged_decode_attention(
        q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE, "q8_0", "q8_0"
    )
    alone = paged_decode_attention(
        q[1:2], batch.k_cache, batch.v_cache, batch.block_tables[1:2], batch.seq_lens[1:2], SCALE, "q8_0", "q8_0"
    )
    assert torch.equal(together[1], alone[0])
    # move sequence 1's blocks elsewhere: same bytes, other block ids
    moved_k, moved_v = batch.k_cache.clone(), batch.v_cache.clone()
    used = {b for t in batch.tables for b in t}
    new_ids = [b for b in range(NUM_BLOCKS - 1, 0, -1) if b not in used][: len(batch.tables[1])]
    for old, new in zip(batch.tables[1], new_ids):
        moved_k[new], moved_v[new] = batch.k_cache[old], batch.v_cache[old]
        moved_k[old] = moved_v[old] = 0
    table = torch.tensor([new_ids], dtype=torch.int32)
    relocated = paged_decode_attention(q[1:2], moved_k, moved_v, table, batch.seq_lens[1:2], SCALE, "q8_0", "q8_0")
    assert torch.equal(relocated[0], together[1])


def test_decode_reads_only_the_sequence_length() -> None:
    batch = PagedBatch([6], "f32", "f32", seed=9)
    q = torch.randn(1, HEADS, HEAD_DIM)
    before = paged_decode_attention(q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE)
    batch.k_cache[batch.tables[0][1], 2:] = 1e4  # positions 6, 7: in the last block, past seq_len
    after = paged_decode_attention(q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE)
    assert torch.equal(before, after)


# --- prefill -------------------------------------------------------------------------


@pytest.mark.parametrize(("k_type", "v_type"), [("f32", "f32"), ("f16", "q8_0"), ("q4_0", "q5_1")])
def test_prefill_kernel_matches_reference_with_cached_prefixes(k_type: str, v_type: str) -> None:
    lens = [5, 19, 3, 33]
    new_tokens = [5, 4, 1, 18]  # sequence 0 has no prefix; the others continue a cached one
    batch = PagedBatch(lens, k_type, v_type, seed=11)
    q = torch.randn(sum(new_tokens), HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(12))
    query_start = torch.tensor([0, *torch.tensor(new_tokens).cumsum(0).tolist()], dtype=torch.int32)
    args = (q, batch.k_cache, batch.v_cache, batch.block_tables, query_start, batch.seq_lens, SCALE, k_type, v_type)
    ours = paged_prefill_attention(*args)
    ref = paged_prefill_attention_reference(*args)
    naive = torch.cat([batch.naive(i, q[query_start[i] : query_start[i + 1]]) for i in range(len(lens))])
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, naive, rtol=1e-5, atol=1e-5)


def test_prefill_last_row_equals_decode_of_that_token() -> None:
    batch = PagedBatch([14], "f32", "f32", seed=13)
    q = torch.randn(3, HEADS, HEAD_DIM)
    query_start = torch.tensor([0, 3], dtype=torch.int32)
    prefill = paged_prefill_attention(
        q, batch.k_cache, batch.v_cache, batch.block_tables, query_start, batch.seq_lens, SCALE
    )
    decode = paged_decode_attention(q[2:], batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, SCALE)
    torch.testing.assert_close(prefill[2:], decode, rtol=1e-6, atol=1e-6)
    # and the rows before it ignore the future: changing the last key leaves them alone
    slot = batch.slots(0, 13, 1)
    batch.k_cache.view(-1, KV_HEADS, HEAD_DIM)[slot] += 5.0
    again = paged_prefill_attention(
        q, batch.k_cache, batch.v_cache, batch.block_tables, query_start, batch.seq_lens, SCALE
    )
    assert torch.equal(again[:2], prefill[:2])
    assert not torch.equal(again[2], prefill[2])
