"""Paged decode attention: one new query token per sequence against its whole paged KV, split-KV.

Each sequence's positions are cut into segments of DECODE_SEGMENT positions (a constant: it
never depends on the batch, the other sequences or the GPU), so a single long sequence still
gives the GPU many programs. Pass 1 runs one program per (sequence, KV head, segment) and all
the query heads that share that KV head (GQA), so each K/V row is read once per group; it walks
the segment's block-table entries in fixed tiles of TILE positions, dequantizing quantized
rows to float32 in registers, and writes the segment's partial softmax state (m, row_sum, acc).
Pass 2 runs one program per (sequence, query head) and merges that sequence's segments in
segment order. Neither pass ever reads another sequence's data or sizes.

Reduction order (the contract; the torch reference reproduces it), all in float32, per query head:

    for each segment g = 0, 1, ... with g * SEGMENT < seq_len:          # pass 1, independently
        m_g = -inf, row_sum_g = 0, acc_g[0:head_dim] = 0
        for tile_start in g*SEGMENT, g*SEGMENT + TILE, ... < min((g+1)*SEGMENT, seq_len):
            for each position p of the tile (p < seq_len):
                k_p, v_p = rows of block_table[p // block_size], offset p % block_size,
                           decoded from the cache format to float32
                s_p = (sum over d of q[d] * k_p[d]) * scale              # one dot per position
            m_new = max(m_g, max_p s_p)
            alpha = exp(m_g - m_new)
            row_sum_g = row_sum_g * alpha + sum_p exp(s_p - m_new)
            acc_g     = acc_g * alpha + sum_p exp(s_p - m_new) * v_p
            m_g       = m_new
    m = -inf, row_sum = 0, acc = 0                                       # pass 2, segments in order
    for each segment g in order:
        m_new = max(m, m_g)
        row_sum = row_sum * exp(m - m_new) + row_sum_g * exp(m_g - m_new)
        acc     = acc * exp(m - m_new) + acc_g * exp(m_g - m_new)
        m = m_new
    out = acc / row_sum

Positions past seq_len inside the last tile score -inf and add nothing. With one segment
(seq_len <= SEGMENT) pass 2 multiplies by exp(0) = 1 and adds zeros, so the result is
bit-identical to the single-pass order this module had before split-KV. The order of the
sums inside a dot product and inside a tile is the backend's own (Triton's tree reduction;
torch's in the reference), which is why TILE and SEGMENT are fixed: the same kernel on the
same data gives the same bits whatever the batch and wherever the blocks live (batch
invariance, tested bitwise). Kernel and reference agree within float32 rounding (tested at
1e-5), not bit for bit. The conformance vectors (`engine/conformance/vectors`) cover the block
manager only, so this order is not part of what the C++ port replays.

The scores and the P V sums are broadcast products over [GROUP, TILE] (GROUP is 1 to 8 query
heads), far below a tensor-core tile, and decode is bound by reading K and V: the tensor
cores would not help here; bandwidth comes from the segments' parallelism.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.kv_codec import format_code, load_rows, row_width
from engine.kv.formats import KVCacheFormat, dequantize, get_format

DECODE_TILE = 16
DECODE_SEGMENT = 256  # positions per pass-1 program: fixed, a multiple of DECODE_TILE


@triton.jit
def _paged_decode_segment_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    part_acc_ptr,
    part_m_ptr,
    part_sum_ptr,
    scale,
    stride_q_seq,
    stride_q_head,
    stride_table_seq,
    N_KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE: tl.constexpr,
    SEGMENT: tl.constexpr,
    K_ROW: tl.constexpr,
    V_ROW: tl.constexpr,
    K_FORMAT: tl.constexpr,
    V_FORMAT: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    segment = tl.program_id(2)
    n_segments = tl.num_programs(2)
    group = tl.arange(0, GROUP_PAD)
    dim = tl.arange(0, HEAD_DIM)
    q_heads = kv_head * GROUP + group
    q = tl.load(
        q_ptr + seq * stride_q_seq + q_heads[:, None] * stride_q_head + dim[None, :],
        mask=(group < GROUP)[:, None],
        other=0.0,
    ).to(tl.float32)  # [GROUP_PAD, HEAD_DIM]

    seq_len = tl.load(seq_lens_ptr + seq)
    segment_start = segment * SEGMENT
    segment_end = tl.minimum(segment_start + SEGMENT, seq_len)
    m = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    row_sum = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for tile_start in range(segment_start, segment_end, TILE):
        pos = tile_start + tl.arange(0, TILE)
        valid = pos < segment_end
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
    part = (seq * (N_KV_HEADS * GROUP) + q_heads) * n_segments + segment  # [GROUP_PAD]
    live = group < GROUP
    tl.store(part_m_ptr + part, m, mask=live)
    tl.store(part_sum_ptr + part, row_sum, mask=live)
    tl.store(part_acc_ptr + part[:, None].to(tl.int64) * HEAD_DIM + dim[None, :], acc, mask=live[:, None])


@triton.jit
def _paged_decode_merge_kernel(
    part_acc_ptr,
    part_m_ptr,
    part_sum_ptr,
    seq_lens_ptr,
    out_ptr,
    n_segments,
    stride_out_seq,
    stride_out_head,
    N_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    SEGMENT: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dim = tl.arange(0, HEAD_DIM)
    one = tl.arange(0, 1)
    seq_len = tl.load(seq_lens_ptr + seq)
    base = (seq * N_HEADS + head) * n_segments
    m = tl.full([1], float("-inf"), tl.float32)
    row_sum = tl.zeros([1], tl.float32)
    acc = tl.zeros([HEAD_DIM], tl.float32)
    for segment in range(0, tl.cdiv(seq_len, SEGMENT)):  # this sequence's own segments, in order
        m_g = tl.load(part_m_ptr + base + segment + one)
        sum_g = tl.load(part_sum_ptr + base + segment + one)
        acc_g = tl.load(part_acc_ptr + (base + segment).to(tl.int64) * HEAD_DIM + dim)
        m_new = tl.maximum(m, m_g)
        alpha = tl.exp(m - m_new)
        beta = tl.exp(m_g - m_new)
        row_sum = row_sum * alpha + sum_g * beta
        acc = acc * alpha + acc_g * beta
        m = m_new
    out = acc / row_sum
    tl.store(out_ptr + seq * stride_out_seq + head * stride_out_head + dim, out.to(out_ptr.dtype.element_ty))


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
    segment: int = DECODE_SEGMENT,
    max_seq_len: int | None = None,
) -> torch.Tensor:
    """Triton: attention of `q` `[num_seqs, n_heads, head_dim]` over each sequence's first
    `seq_lens[i]` cached tokens, found through `block_tables` (int32 `[num_seqs, max_blocks]`).

    `max_seq_len` (at least the longest sequence; default: read from `seq_lens`) only sizes the
    grid, so a caller that knows it avoids a device sync; it never changes the result."""
    num_seqs, n_heads, n_kv_heads, head_dim = _check(q, k_cache, v_cache, block_tables, seq_lens, k_type, v_type)
    _check_segment(tile, segment)
    q = q.contiguous()
    out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max())
    n_segments = max(1, triton.cdiv(max_seq_len, segment))
    group = n_heads // n_kv_heads
    part_acc = torch.empty(num_seqs, n_heads, n_segments, head_dim, dtype=torch.float32, device=q.device)
    part_m = torch.empty(num_seqs, n_heads, n_segments, dtype=torch.float32, device=q.device)
    part_sum = torch.empty_like(part_m)
    _paged_decode_segment_kernel[(num_seqs, n_kv_heads, n_segments)](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        part_acc,
        part_m,
        part_sum,
        scale,
        q.stride(0),
        q.stride(1),
        block_tables.stride(0),
        N_KV_HEADS=n_kv_heads,
        GROUP=group,
        GROUP_PAD=triton.next_power_of_2(group),
        HEAD_DIM=head_dim,
        BLOCK_SIZE=k_cache.shape[1],
        TILE=tile,
        SEGMENT=segment,
        K_ROW=k_cache.shape[3],
        V_ROW=v_cache.shape[3],
        K_FORMAT=format_code(k_type),
        V_FORMAT=format_code(v_type),
    )
    _paged_decode_merge_kernel[(num_seqs, n_heads)](
        part_acc,
        part_m,
        part_sum,
        seq_lens,
        out,
        n_segments,
        out.stride(0),
        out.stride(1),
        N_HEADS=n_heads,
        HEAD_DIM=head_dim,
        SEGMENT=segment,
    )
    return out


def _check_segment(tile: int, segment: int) -> None:
    if tile <= 0 or segment <= 0 or segment % tile:
        raise ValueError(f"the segment ({segment}) must be a positive multiple of the tile ({tile})")


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
    segment: int = DECODE_SEGMENT,
    max_seq_len: int | None = None,
) -> torch.Tensor:
    """Plain torch, the same segments, tiles and merge in the same order, all sequences at once."""
    num_seqs, n_heads, n_kv_heads, head_dim = _check(q, k_cache, v_cache, block_tables, seq_lens, k_type, v_type)
    _check_segment(tile, segment)
    group = n_heads // n_kv_heads
    block_size = k_cache.shape[1]
    qg = q.to(torch.float32).reshape(num_seqs, n_kv_heads, group, head_dim)
    tables = block_tables.to(torch.int64)
    lens = seq_lens.to(torch.int64)
    state = (num_seqs, n_kv_heads, group)
    m = torch.full(state, float("-inf"), device=q.device)
    row_sum = torch.zeros(state, device=q.device)
    acc = torch.zeros((*state, head_dim), device=q.device)
    longest = int(lens.max()) if num_seqs else 0
    for segment_start in range(0, longest, segment):
        segment_end = torch.clamp(lens, max=segment_start + segment)  # [seqs]
        m_g = torch.full(state, float("-inf"), device=q.device)
        sum_g = torch.zeros(state, device=q.device)
        acc_g = torch.zeros((*state, head_dim), device=q.device)
        for tile_start in range(segment_start, min(segment_start + segment, longest), tile):
            pos = torch.arange(tile_start, tile_start + tile, device=q.device)
            valid = pos[None, :] < segment_end[:, None]  # [seqs, TILE]
            block_index = torch.clamp(pos // block_size, max=tables.shape[1] - 1)
            block_id = torch.where(valid, tables[:, block_index], 0)
            slots = block_id * block_size + pos % block_size
            k = gather_rows(k_cache, k_type, slots, head_dim).permute(0, 2, 1, 3)  # [seqs, kv, TILE, dim]
            v = gather_rows(v_cache, v_type, slots, head_dim).permute(0, 2, 1, 3)
            s = (qg[:, :, :, None, :] * k[:, :, None, :, :]).sum(-1) * scale  # [seqs, kv, group, TILE]
            s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
            m_new = torch.maximum(m_g, s.amax(-1))
            # a sequence without positions here has m_g == m_new == -inf: keep its state unchanged
            alpha = torch.where(torch.isinf(m_new), torch.ones_like(m_g), torch.exp(m_g - m_new))
            p = torch.exp(s - m_new[..., None]).nan_to_num(0.0)
            sum_g = sum_g * alpha + p.sum(-1)
            acc_g = acc_g * alpha[..., None] + (p[..., None] * v[:, :, None, :, :]).sum(-2)
            m_g = m_new
        # merge: only the sequences this segment belongs to (the kernel's merge never reads the others)
        used = (lens > segment_start)[:, None, None]
        m_new = torch.where(used, torch.maximum(m, m_g), m)
        alpha = torch.where(used, torch.exp(m - m_new), torch.ones_like(m))
        beta = torch.where(used, torch.exp(m_g - m_new), torch.zeros_like(m))
        row_sum = row_sum * alpha + sum_g * beta
        acc = acc * alpha[..., None] + acc_g * beta[..., None]
        m = m_new
    return (acc / row_sum[..., None]).reshape(num_seqs, n_heads, head_dim).to(q.dtype)
