"""Paged decode attention: one new query token per sequence against its whole paged KV.

One program handles one (sequence, KV head) pair and all the query heads that share that
KV head (GQA), so each K/V row is read once per group rather than once per query head.
The program walks the sequence's block table inside the kernel, one fixed tile of TILE
positions at a time; it never depends on the other sequences in the batch.

Reduction order (the contract the C++ port reproduces), all in float32, per query head:

    m = -inf, row_sum = 0, acc[0:head_dim] = 0
    for tile_start in 0, TILE, 2*TILE, ... < seq_len:           # positions in order
        for each position p of the tile (p < seq_len):
            k_p, v_p = rows of block_table[p // block_size], offset p % block_size,
                       decoded from the cache format to float32
            s_p = (sum over d of q[d] * k_p[d]) * scale          # one dot per position
        m_new = max(m, max_p s_p)
        alpha = exp(m - m_new)
        row_sum     = row_sum * alpha + sum_p exp(s_p - m_new)
        acc   = acc * alpha + sum_p exp(s_p - m_new) * v_p
        m     = m_new
    out = acc / row_sum

Positions past seq_len inside the last tile score -inf and add nothing. The order of
the sums inside a dot product and inside a tile is the backend's own (Triton's tree
reduction; torch's in the reference), which is why the tile size is fixed: the same
kernel on the same data gives the same bits whatever the batch and wherever the blocks
live.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.kv_codec import format_code, load_rows, row_width
from engine.kv.formats import KVCacheFormat, dequantize, get_format

DECODE_TILE = 16


@triton.jit
def _paged_decode_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    out_ptr,
    scale,
    stride_q_seq,
    stride_q_head,
    stride_table_seq,
    stride_out_seq,
    stride_out_head,
    N_KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE: tl.constexpr,
    K_ROW: tl.constexpr,
    V_ROW: tl.constexpr,
    K_FORMAT: tl.constexpr,
    V_FORMAT: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    group = tl.arange(0, GROUP_PAD)
    dim = tl.arange(0, HEAD_DIM)
    q_heads = kv_head * GROUP + group
    q = tl.load(
        q_ptr + seq * stride_q_seq + q_heads[:, None] * stride_q_head + dim[None, :],
        mask=(group < GROUP)[:, None],
        other=0.0,
    ).to(tl.float32)  # [GROUP_PAD, HEAD_DIM]

    seq_len = tl.load(seq_lens_ptr + seq)
    m = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    row_sum = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for tile_start in range(0, seq_len, TILE):
        pos = tile_start + tl.arange(0, TILE)
        valid = pos < seq_len
        block_id = tl.load(block_tables_ptr + seq * stride_table_seq + pos // BLOCK_SIZE, mask=valid, other=0)
        slot = block_id.to(tl.int64) * BLOCK_SIZE + pos % BLOCK_SIZE
        k = load_rows(k_cache_ptr, (slot * N_KV_HEADS + kv_head) * K_ROW, valid, HEAD_DIM, K_FORMAT)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale  # [GROUP_PAD, TILE]
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        row_sum = row_sum * alpha + tl.sum(p, axis=1)
        v = load_rows(v_cache_ptr, (slot * N_KV_HEADS + kv_head) * V_ROW, valid, HEAD_DIM, V_FORMAT)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    out = acc / row_sum[:, None]
    tl.store(
        out_ptr + seq * stride_out_seq + q_heads[:, None] * stride_out_head + dim[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=(group < GROUP)[:, None],
    )


def _check(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    k_type: KVCacheFormat | str,
    v_type: KVCacheFormat | str,
) -> tuple[int, int, int, int]:
    num_seqs, n_heads, head_dim = q.shape
    n_kv_heads = k_cache.shape[2]
    if n_heads % n_kv_heads:
        raise ValueError(f"{n_heads} query heads do not split into groups over {n_kv_heads} KV heads")
    for name, cache, qtype in (("k_cache", k_cache, k_type), ("v_cache", v_cache, v_type)):
        if cache.dim() != 4 or cache.shape[2] != n_kv_heads or cache.shape[3] != row_width(qtype, head_dim):
            raise ValueError(
                f"{name} of shape {tuple(cache.shape)} does not hold"
                f" {get_format(qtype).name} rows of {n_kv_heads} x {head_dim}"
            )
    if block_tables.shape[0] != num_seqs or seq_lens.shape != (num_seqs,):
        raise ValueError(
            f"block_tables {tuple(block_tables.shape)} and seq_lens {tuple(seq_lens.shape)} must have {num_seqs} rows"
        )
    return num_seqs, n_heads, n_kv_heads, head_dim


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_type: KVCacheFormat | str = "f32",
    v_type: KVCacheFormat | str = "f32",
    tile: int = DECODE_TILE,
) -> torch.Tensor:
    """Triton: attention of `q` `[num_seqs, n_heads, head_dim]` over each sequence's first
    `seq_lens[i]` cached tokens, found through `block_tables` (int32 `[num_seqs, max_blocks]`)."""
    num_seqs, n_heads, n_kv_heads, head_dim = _check(q, k_cache, v_cache, block_tables, seq_lens, k_type, v_type)
    q = q.contiguous()
    out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    group = n_heads // n_kv_heads
    _paged_decode_kernel[(num_seqs, n_kv_heads)](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        out,
        scale,
        q.stride(0),
        q.stride(1),
        block_tables.stride(0),
        out.stride(0),
        out.stride(1),
        N_KV_HEADS=n_kv_heads,
        GROUP=group,
        GROUP_PAD=triton.next_power_of_2(group),
        HEAD_DIM=head_dim,
        BLOCK_SIZE=k_cache.shape[1],
        TILE=tile,
        K_ROW=k_cache.shape[3],
        V_ROW=v_cache.shape[3],
        K_FORMAT=format_code(k_type),
        V_FORMAT=format_code(v_type),
    )
    return out


def gather_rows(cache: torch.Tensor, qtype: KVCacheFormat | str, slots: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Cache rows at `slots` (any shape) as float32 `[*slots.shape, n_kv_heads, head_dim]`."""
    flat = cache.view(-1, cache.shape[2], cache.shape[3])
    rows = flat[slots]
    if cache.dtype == torch.uint8:
        return dequantize(rows, qtype, (*rows.shape[:-1], head_dim))
    return rows.to(torch.float32)


def paged_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_type: KVCacheFormat | str = "f32",
    v_type: KVCacheFormat | str = "f32",
    tile: int = DECODE_TILE,
) -> torch.Tensor:
    """Plain torch, the same tiles in the same order, all sequences at once."""
    num_seqs, n_heads, n_kv_heads, head_dim = _check(q, k_cache, v_cache, block_tables, seq_lens, k_type, v_type)
    group = n_heads // n_kv_heads
    block_size = k_cache.shape[1]
    qg = q.to(torch.float32).reshape(num_seqs, n_kv_heads, group, head_dim)
    tables = block_tables.to(torch.int64)
    lens = seq_lens.to(torch.int64)
    m = torch.full((num_seqs, n_kv_heads, group), float("-inf"), device=q.device)
    row_sum = torch.zeros((num_seqs, n_kv_heads, group), device=q.device)
    acc = torch.zeros((num_seqs, n_kv_heads, group, head_dim), device=q.device)
    longest = int(lens.max()) if num_seqs else 0
    for tile_start in range(0, longest, tile):
        pos = torch.arange(tile_start, tile_start + tile, device=q.device)
        valid = pos[None, :] < lens[:, None]  # [seqs, TILE]
        block_index = torch.clamp(pos // block_size, max=tables.shape[1] - 1)
        block_id = torch.where(valid, tables[:, block_index], 0)
        slots = block_id * block_size + pos % block_size
        k = gather_rows(k_cache, k_type, slots, head_dim).permute(0, 2, 1, 3)  # [seqs, kv, TILE, dim]
        v = gather_rows(v_cache, v_type, slots, head_dim).permute(0, 2, 1, 3)
        s = (qg[:, :, :, None, :] * k[:, :, None, :, :]).sum(-1) * scale  # [seqs, kv, group, TILE]
        s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        # a sequence already finished has m == m_new == -inf: keep its state unchanged
        alpha = torch.where(torch.isinf(m_new), torch.ones_like(m), torch.exp(m - m_new))
        p = torch.exp(s - m_new[..., None]).nan_to_num(0.0)
        row_sum = row_sum * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + (p[..., None] * v[:, :, None, :, :]).sum(-2)
        m = m_new
    return (acc / row_sum[..., None]).reshape(num_seqs, n_heads, head_dim).to(q.dtype)
