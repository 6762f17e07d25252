"""The GPU tier: every kernel compiled and run on a CUDA device, against its torch reference and
float64 attention, over every cache format x GQA grouping x block size x short and long contexts.

Marked `gpu`. Run on a CUDA machine with `ENGINE_TEST_DEVICE=cuda python -m pytest -m gpu`
(ENGINE_TEST_DEVICE=cuda keeps conftest from choosing the interpreter); without CUDA the tier is
skipped. `ENGINE_TEST_DEVICE=cpu` runs the same tests in the interpreter (TRITON_INTERPRET=1) on
smaller shapes, to check the tests themselves where no GPU is available.

Tolerances (float32 activations; the cache's own quantization error is not counted: the
float64 attention reads the same dequantized cache values):
- store_kv: bytes identical to the torch reference (`engine.kv.formats.quantize`) for random
  inputs. A fused multiply-add may move a code by one on an exact tie (see `kv_codec`); random
  normal inputs do not hit exact ties.
- decode and prefill ("ieee" dots) vs their torch references and vs float64 attention: 1e-5
  absolute and relative (the interpreter gives ~3e-7; on a GPU exp is ex2.approx and the compiler
  contracts multiply-adds, a few float32 ulps more).
- prefill with "tf32x3" dots (tensor cores) vs float64 attention: 1e-4.
- batch invariance: a sequence's output is bit-identical alone and inside a batch of other
  sequences with other lengths and other blocks.
"""

from __future__ import annotations

import os

import pytest
import torch

from engine.kernels.kv_codec import row_width
from engine.kernels.paged_decode import gather_rows, paged_decode_attention, paged_decode_attention_reference
from engine.kernels.paged_prefill import paged_prefill_attention, paged_prefill_attention_reference
from engine.kernels.store_kv import store_kv, store_kv_reference
from engine.kv.formats import QTYPES, get_format

DEVICE = os.environ.get("ENGINE_TEST_DEVICE", "cuda")
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _skip_reason() -> str | None:
    if DEVICE == "cpu":
        return None if INTERPRETED else "ENGINE_TEST_DEVICE=cpu runs the kernels in the interpreter: TRITON_INTERPRET=1"
    if DEVICE != "cuda":
        return f"ENGINE_TEST_DEVICE must be cuda or cpu, not {DEVICE!r}"
    if not torch.cuda.is_available():
        return "CUDA is not available (ENGINE_TEST_DEVICE=cpu runs this tier in the interpreter)"
    if INTERPRETED:
        return "TRITON_INTERPRET=1 would interpret the kernels: set ENGINE_TEST_DEVICE=cuda before pytest starts"
    return None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))]

ON_GPU = DEVICE == "cuda"
HEAD_DIM = 128 if ON_GPU else 64
KV_HEADS = 8 if ON_GPU else 2
# short contexts fit one decode segment; long ones cross several (DECODE_SEGMENT = 256)
CONTEXTS = {"short": [1, 17, 200], "long": [700, 4099, 1500]} if ON_GPU else {"short": [1, 17, 40], "long": [300, 530]}
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
FORMAT_PAIRS = [(qtype, qtype) for qtype in QTYPES] + [("f16", "q8_0"), ("q4_1", "bf16")]


class PagedCase:
    """Sequences of random K/V scattered over shuffled blocks of one cache (block 0 unused)."""

    def __init__(self, lens: list[int], k_type: str, v_type: str, block_size: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.lens, self.k_type, self.v_type, self.block_size = lens, k_type, v_type, block_size
        needs = [-(-length // block_size) for length in lens]
        num_blocks = sum(needs) + 3
        self.k_cache = self._empty(k_type, num_blocks)
        self.v_cache = self._empty(v_type, num_blocks)
        free = (torch.randperm(num_blocks - 1, generator=gen) + 1).tolist()
        self.tables = [[free.pop() for _ in range(need)] for need in needs]
        self.block_tables = torch.zeros(len(lens), max(needs), dtype=torch.int32)
        for row, table in enumerate(self.tables):
            self.block_tables[row, : len(table)] = torch.tensor(table, dtype=torch.int32)
            k = torch.randn(lens[row], KV_HEADS, HEAD_DIM, generator=gen)
            v = torch.randn(lens[row], KV_HEADS, HEAD_DIM, generator=gen)
            store_kv_reference(k, v, self.k_cache, self.v_cache, self.slots(row), k_type, v_type)
        self.k_cache, self.v_cache = self.k_cache.to(DEVICE), self.v_cache.to(DEVICE)
        self.block_tables = self.block_tables.to(DEVICE)
        self.seq_lens = torch.tensor(lens, dtype=torch.int32, device=DEVICE)

    def _empty(self, qtype: str, num_blocks: int) -> torch.Tensor:
        fmt = get_format(qtype)
        return torch.zeros(num_blocks, self.block_size, KV_HEADS, row_width(qtype, HEAD_DIM), dtype=fmt.storage_dtype)

    def slots(self, seq: int) -> torch.Tensor:
        pos = torch.arange(self.lens[seq])
        return torch.tensor(self.tables[seq])[pos // self.block_size] * self.block_size + pos % self.block_size

    def float64_attention(self, seq: int, q: torch.Tensor) -> torch.Tensor:
        """Causal softmax attention in float64 of q [q_len, heads, dim], the sequence's last q_len tokens."""
        length = self.lens[seq]
        slots = self.slots(seq).to(DEVICE)
        group = q.shape[1] // KV_HEADS
        k = gather_rows(self.k_cache, self.k_type, slots, HEAD_DIM).repeat_interleave(group, dim=1).double()
        v = gather_rows(self.v_cache, self.v_type, slots, HEAD_DIM).repeat_interleave(group, dim=1).double()
        scores = torch.einsum("qhd,khd->hqk", q.double(), k) * HEAD_DIM**-0.5
        q_pos = torch.arange(length - q.shape[0], length, device=DEVICE)
        causal = torch.arange(length, device=DEVICE)[None, None, :] > q_pos[None, :, None]
        return torch.einsum("hqk,khd->qhd", torch.softmax(scores.masked_fill(causal, float("-inf")), -1), v).float()


def queries(tokens: int, heads: int, seed: int) -> torch.Tensor:
    return torch.randn(tokens, heads, HEAD_DIM, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


def decode(case: PagedCase, q: torch.Tensor, reference: bool = False) -> torch.Tensor:
    run = paged_decode_attention_reference if reference else paged_decode_attention
    return run(
        q, case.k_cache, case.v_cache, case.block_tables, case.seq_lens, HEAD_DIM**-0.5, case.k_type, case.v_type
    )


def prefill(
    case: PagedCase, q: torch.Tensor, q_lens: list[int], reference: bool = False, **options: str
) -> torch.Tensor:
    starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    run = paged_prefill_attention_reference if reference else paged_prefill_attention
    return run(
        q,
        case.k_cache,
        case.v_cache,
        case.block_tables,
        starts,
        case.seq_lens,
        HEAD_DIM**-0.5,
        case.k_type,
        case.v_type,
        **options,
    )


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("qtype", QTYPES)
def test_store_kv_writes_the_reference_bytes(qtype: str, block_size: int) -> None:
    gen = torch.Generator().manual_seed(11)
    tokens, num_blocks = 3 * block_size + 5, 8
    key = (torch.randn(tokens, KV_HEADS, HEAD_DIM, generator=gen) * 3).to(DEVICE)
    value = torch.randn(tokens, KV_HEADS, HEAD_DIM, generator=gen).to(DEVICE)
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:tokens]
    slots[1] = -1  # padding writes nothing
    slots = slots.to(DEVICE)
    shape = (num_blocks, block_size, KV_HEADS, row_width(qtype, HEAD_DIM))
    dtype = get_format(qtype).storage_dtype
    ours = [torch.zeros(shape, dtype=dtype, device=DEVICE) for _ in range(2)]
    ref = [torch.zeros(shape, dtype=dtype, device=DEVICE) for _ in range(2)]
    store_kv(key, value, *ours, slots, qtype, qtype)
    store_kv_reference(key, value, *ref, slots, qtype, qtype)
    for got, want in zip(ours, ref):
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), qtype


@pytest.mark.parametrize("context", sorted(CONTEXTS))
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("k_type,v_type", FORMAT_PAIRS)
def test_decode_matches_reference_and_float64(
    k_type: str, v_type: str, group: int, block_size: int, context: str
) -> None:
    lens = CONTEXTS[context]
    case = PagedCase(lens, k_type, v_type, block_size, seed=len(lens) + group)
    q = queries(len(lens), KV_HEADS * group, seed=group)
    ours, ref = decode(case, q), decode(case, q, reference=True)
    exact = torch.cat([case.float64_attention(seq, q[seq : seq + 1]) for seq in range(len(lens))])
    torch.testing.assert_close(ours, ref, **TOLERANCE)
    torch.testing.assert_close(ours, exact, **TOLERANCE)


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("qtype", ["f32", "f16", "q8_0", "q4_0", "q5_1"])
def test_decode_is_batch_invariant_bitwise(qtype: str, group: int) -> None:
    lens = [CONTEXTS["long"][0], *CONTEXTS["short"], CONTEXTS["long"][-1]]
    together = PagedCase(lens, qtype, qtype, 16, seed=5)
    q = queries(len(lens), KV_HEADS * group, seed=9)
    batch_out = decode(together, q)
    tables, seq_lens = together.block_tables, together.seq_lens
    for seq in (0, 1, len(lens) - 1):  # alone, each gets a smaller grid (fewer segments) than the batch
        together.block_tables, together.seq_lens = tables[seq : seq + 1], seq_lens[seq : seq + 1]
        assert torch.equal(decode(together, q[seq : seq + 1])[0], batch_out[seq]), seq


@pytest.mark.parametrize("context", sorted(CONTEXTS))
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("k_type,v_type", FORMAT_PAIRS)
def test_prefill_matches_reference_and_float64(
    k_type: str, v_type: str, group: int, block_size: int, context: str
) -> None:
    lens = CONTEXTS[context][-2:]
    q_lens = [min(length, 37) for length in lens]  # the rest is a cached prefix
    case = PagedCase(lens, k_type, v_type, block_size, seed=group)
    q = queries(sum(q_lens), KV_HEADS * group, seed=3)
    ours, ref = prefill(case, q, q_lens), prefill(case, q, q_lens, reference=True)
    bounds = [0, *torch.tensor(q_lens).cumsum(0).tolist()]
    exact = torch.cat([case.float64_attention(seq, q[bounds[seq] : bounds[seq + 1]]) for seq in range(len(lens))])
    torch.testing.assert_close(ours, ref, **TOLERANCE)
    torch.testing.assert_close(ours, exact, **TOLERANCE)


@pytest.mark.parametrize("qtype", ["f32", "q8_0"])
def test_prefill_on_tensor_cores_with_tf32x3_is_near_float64(qtype: str) -> None:
    lens, q_lens = CONTEXTS["long"][:2], [37, 20]
    case = PagedCase(lens, qtype, qtype, 16, seed=8)
    q = queries(sum(q_lens), KV_HEADS * 4, seed=4)
    exact = torch.cat([case.float64_attention(0, q[:37]), case.float64_attention(1, q[37:])])
    torch.testing.assert_close(prefill(case, q, q_lens, precision="tf32x3"), exact, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("qtype", ["f32", "bf16", "q4_1"])
def test_prefill_is_batch_invariant_bitwise(qtype: str) -> None:
    lens = [CONTEXTS["short"][-1], CONTEXTS["long"][0]]
    q_lens = [lens[0], 29]
    case = PagedCase(lens, qtype, qtype, 16, seed=2)
    q = queries(sum(q_lens), KV_HEADS * 4, seed=6)
    batch_out = prefill(case, q, q_lens)
    case.block_tables, case.seq_lens = case.block_tables[1:], case.seq_lens[1:]
    assert torch.equal(prefill(case, q[q_lens[0] :], q_lens[1:]), batch_out[q_lens[0] :])
